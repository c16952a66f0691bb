/**
 * Gloo's `ldap` and `ldapInternal` steps: Basic credentials checked by binding to an LDAP server as
 * the user (DN from `userDnTemplate`), then the user entry's group attribute checked against
 * `allowedGroups`, read as the user or as a service account (`groupLookupSettings`). The flow of
 * Gloo's LDAP guide ("LDAP auth flow"): no credentials or a failed user bind → 401, not in an
 * allowed group → 403, a failed service-account bind → 500. Anything else (server down, slow,
 * protocol errors) denies with 403: fail closed, within the step's deadline.
 */
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Client, ClientOptions } from 'ldapts';
import type { LdapInternalSpec, LdapSpec } from '../../config/schema/auth-config.ts';
import { deepFreeze } from '../../config/resource.ts';
import { parseBasicCredentials } from '../basic/credentials.ts';
import { allow, deny, forbidden, type Denied } from '../decision.ts';
import type { AuthDecision, AuthStep, CheckRequest } from '../step.ts';
import { normalizeDn, userDn } from './dn.ts';

/** Gloo's defaults. */
export const LDAP_DEFAULTS = { membershipAttributeName: 'memberOf', searchFilter: '(uid=*)', maxSize: 5, initialSize: 2 } as const;
/** Deadline of one check: connect, binds and search (default 1 s). */
export const DEFAULT_LDAP_TIMEOUT_MS = 1000;
/** Checks that may wait for a connection when all `maxSize` are busy; more are denied at once. */
const MAX_WAITING = 1024;
/** Usernames never sent to the server: spaces at either end, control characters. */
const UNUSABLE_USERNAME = /^\s|\s$|[\u0000-\u001f\u007f]/;
/** Longest Basic credentials header decoded. */
const MAX_CREDENTIALS_HEADER = 1024;

/** A problem with the step's configuration, relative to the step. */
export interface LdapProblem {
  readonly path: (string | number)[];
  readonly message: string;
  readonly severity: 'error' | 'warning';
}

/** The step compiled once per AuthConfig version. */
export interface CompiledLdap {
  readonly url: string;
  readonly userDnTemplate: string;
  readonly membershipAttributeName: string;
  /** Normalised group DNs (see {@link normalizeDn}). */
  readonly allowedGroups: ReadonlySet<string>;
  readonly searchFilter: string;
  readonly disableGroupChecking: boolean;
  readonly maxSize: number;
  /** The service account, when group membership is read with it. */
  readonly serviceAccount?: { readonly dn: string; readonly password: string };
}

/** `host:port` (Gloo's form) or an `ldap://` / `ldaps://` URL, as the URL ldapts connects to. */
export function ldapUrl(address: string): string | undefined {
  const withScheme = /^ldaps?:\/\//i.test(address) ? address : `ldap://${address}`;
  const url = URL.parse(withScheme);
  if (!url || !url.hostname || url.username || url.password || (url.pathname !== '' && url.pathname !== '/') || url.search || url.hash) return undefined;
  // ldap: is not a special scheme: URL keeps the host's case.
  return `${url.protocol}//${url.host.toLowerCase()}`;
}

type AnyLdapSpec = LdapSpec | LdapInternalSpec;

/**
 * Compiles an `ldap` / `ldapInternal` spec. `credentials` are the service account's username (a
 * DN) and password: from the Secret of `ldap.groupLookupSettings.credentialsSecretRef`, or inline
 * in `ldapInternal`.
 */
export function compileLdap(spec: AnyLdapSpec, credentials: { username: string; password: string } | undefined): { compiled?: CompiledLdap; problems: LdapProblem[] } {
  const problems: LdapProblem[] = [];
  const url = ldapUrl(spec.address);
  if (!url) problems.push({ path: ['address'], message: 'must be host:port or an ldap:// or ldaps:// URL without credentials or path', severity: 'error' });
  const template = spec.userDnTemplate ?? '';
  if (template.split('%s').length !== 2) problems.push({ path: ['userDnTemplate'], message: 'must contain "%s" exactly once (e.g. uid=%s,ou=people,dc=solo,dc=io)', severity: 'error' });
  const disableGroupChecking = spec.disableGroupChecking ?? false;
  const lookup = spec.groupLookupSettings;
  const withServiceAccount = lookup?.checkGroupsWithServiceAccount ?? false;
  if (withServiceAccount && !credentials) problems.push({ path: ['groupLookupSettings'], message: 'checkGroupsWithServiceAccount needs the service account\'s credentials (a Secret with "username" and "password")', severity: 'error' });
  if (!disableGroupChecking && (spec.allowedGroups ?? []).length === 0) {
    problems.push({ path: ['allowedGroups'], message: 'is empty, so every request with valid credentials is denied (403); list the allowed group DNs, or set disableGroupChecking', severity: 'warning' });
  }
  const pool = spec.pool ?? {};
  if (pool.initialSize !== undefined && pool.initialSize !== 0) {
    problems.push({ path: ['pool', 'initialSize'], message: 'accepted but not honoured: connections are opened on first use, up to pool.maxSize', severity: 'warning' });
  }
  if (lookup && !withServiceAccount && credentials) {
    problems.push({ path: ['groupLookupSettings', 'checkGroupsWithServiceAccount'], message: 'is false: the service account is not used, groups are read with the user\'s own bind', severity: 'warning' });
  }
  if (problems.some((p) => p.severity === 'error')) return { problems };
  return {
    compiled: {
      url: url!,
      userDnTemplate: template,
      membershipAttributeName: spec.membershipAttributeName || LDAP_DEFAULTS.membershipAttributeName,
      allowedGroups: new Set((spec.allowedGroups ?? []).map(normalizeDn)),
      searchFilter: spec.searchFilter || LDAP_DEFAULTS.searchFilter,
      disableGroupChecking,
      maxSize: pool.maxSize ?? LDAP_DEFAULTS.maxSize,
      ...(withServiceAccount && credentials ? { serviceAccount: { dn: credentials.username, password: credentials.password } } : {}),
    },
    problems,
  };
}

/** Options of {@link LdapStep}. */
export interface LdapStepOptions {
  name: string;
  type?: 'ldap' | 'ldapInternal';
  /** Deadline of one check (default {@link DEFAULT_LDAP_TIMEOUT_MS}). */
  timeoutMs?: number;
  /** `--resolve HOST=ADDR`: the address to dial for a host (TLS still verifies the host's name). */
  resolveHost?: (host: string) => string | undefined;
}

/** The ldapts options of every connection of a step. */
function clientOptions(url: string, timeoutMs: number, resolveHost: ((host: string) => string | undefined) | undefined): ClientOptions {
  const options: ClientOptions = { url, timeout: timeoutMs, connectTimeout: timeoutMs, strictDN: false };
  if (!resolveHost) return options;
  const dial = (host: string) => resolveHost(host.toLowerCase()) ?? host;
  options.createConnection = ((port: number, host: string) => netConnect(port, dial(host))) as ClientOptions['createConnection'];
  options.createSecureConnection = ((port: number, host: string, tlsOptions?: object) => tlsConnect(port, dial(host), { ...tlsOptions, servername: host })) as ClientOptions['createSecureConnection'];
  return options;
}

/**
 * A bounded set of LDAP connections: at most `maxSize` open at once (Gloo opens more on the fly;
 * a bound keeps a slow server from taking every socket), idle ones reused, at most
 * {@link MAX_WAITING} checks queued for one.
 */
/** ldapts, loaded by the first LDAP step built (~5 MB resident a gateway without LDAP never holds). */
let ldapts: typeof import('ldapts') | undefined;

/** Loads ldapts once; every connection is made after it. */
async function loadLdapClient(): Promise<typeof import('ldapts')> {
  return (ldapts ??= await import('ldapts'));
}

/** A wrong password (ldapts' InvalidCredentialsError), once ldapts is loaded (no connection exists before). */
function isInvalidCredentials(error: unknown): boolean {
  return ldapts !== undefined && error instanceof ldapts.InvalidCredentialsError;
}

class ConnectionPool {
  private readonly idle: Client[] = [];
  private open = 0;
  private readonly waiting: ((client: Client | undefined) => void)[] = [];
  private closed = false;

  private readonly options: ClientOptions;
  private readonly maxSize: number;

  constructor(options: ClientOptions, maxSize: number) {
    this.options = options;
    this.maxSize = maxSize;
  }

  /** A connection, or undefined when the pool is closed or too many checks wait. */
  acquire(): Promise<Client | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    const client = this.idle.pop();
    if (client) return Promise.resolve(client);
    if (this.open < this.maxSize) {
      this.open++;
      return loadLdapClient().then(
        ({ Client }) => new Client(this.options),
        () => {
          this.open--;
          return undefined;
        },
      );
    }
    if (this.waiting.length >= MAX_WAITING) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Gives a healthy connection back (bound as whoever bound last: every check binds first). */
  release(client: Client): void {
    const next = this.waiting.shift();
    if (next) return next(client);
    if (this.closed) return void this.destroy(client);
    this.idle.push(client);
  }

  /** Drops a connection after an error or a timeout; a waiting check gets a new one. */
  discard(client: Client): void {
    void this.destroy(client);
    const next = this.waiting.shift();
    // ldapts is loaded: `client` came from it.
    if (next && !this.closed) next(new ldapts!.Client(this.options));
    else this.open--;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const waiter of this.waiting.splice(0)) waiter(undefined);
    await Promise.all(this.idle.splice(0).map((c) => this.destroy(c)));
  }

  /** Connections open now (tests). */
  get size(): number {
    return this.open;
  }

  private async destroy(client: Client): Promise<void> {
    try {
      await client.unbind();
    } catch {
      // Already gone: nothing to release.
    }
  }
}

/** Runs `work` with a connection from `pool` within `timeoutMs`; a late connection is discarded. */
async function withConnection<T>(pool: ConnectionPool, timeoutMs: number, work: (client: Client) => Promise<T>): Promise<T | 'timeout' | 'busy'> {
  let timer: NodeJS.Timeout | undefined;
  // Set when the deadline passes, before anyone learns of it: from then on the connection is
  // discarded here, and the late outcome of `work` must not give it back (or discard it) again.
  let expired = false;
  const deadline = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => {
      expired = true;
      resolve('timeout');
    }, timeoutMs);
  });
  try {
    const acquiring = pool.acquire();
    const client = await Promise.race([acquiring, deadline]);
    if (client === 'timeout') {
      // Queued for a connection past the deadline: hand it back the moment it comes.
      void acquiring.then((late) => late && pool.release(late));
      return 'timeout';
    }
    if (client === undefined) return 'busy';
    const run = work(client).then(
      (value) => {
        if (!expired) pool.release(client);
        return value;
      },
      (error: unknown) => {
        // A rejected bind leaves the connection usable; anything else may not have.
        if (!expired) {
          if (isInvalidCredentials(error)) pool.release(client);
          else pool.discard(client);
        }
        throw error;
      },
    );
    const outcome = await Promise.race([run, deadline]);
    if (outcome === 'timeout') {
      // The server is slow: this connection may answer later; never reuse it.
      run.catch(() => {});
      pool.discard(client);
    }
    return outcome;
  } finally {
    clearTimeout(timer);
  }
}

/** An `ldap` / `ldapInternal` step. */
export class LdapStep implements AuthStep {
  readonly type: string;
  readonly name: string;
  private readonly config: CompiledLdap;
  private readonly pool: ConnectionPool;
  private readonly timeoutMs: number;
  // As Gloo's LDAP guide prints it: 401 with content-length 0 and no www-authenticate.
  private readonly unauthorized: Denied = deepFreeze(deny(401, [{ key: 'content-length', value: '0' }]));

  constructor(config: CompiledLdap, options: LdapStepOptions) {
    this.config = config;
    this.name = options.name;
    this.type = options.type ?? 'ldap';
    this.timeoutMs = options.timeoutMs ?? DEFAULT_LDAP_TIMEOUT_MS;
    this.pool = new ConnectionPool(clientOptions(config.url, this.timeoutMs, options.resolveHost), config.maxSize);
  }

  /** Connections open now (tests and metrics). */
  get openConnections(): number {
    return this.pool.size;
  }

  async authorize(request: CheckRequest): Promise<AuthDecision> {
    const header = request.attributes.request.http.headers.authorization;
    if (header === undefined || header.length > MAX_CREDENTIALS_HEADER) return this.unauthorized;
    const credentials = parseBasicCredentials(header);
    // An empty password would be an unauthenticated bind (RFC 4513 5.1.2), which servers accept
    // as anonymous: never a successful login.
    if (!credentials || credentials.username === '' || credentials.password === '') return this.unauthorized;
    // Directory matching ignores leading and trailing spaces (RFC 4518): " rick" would bind as rick
    // and be sent upstream as another x-user-id. Control characters are no one's name either.
    if (UNUSABLE_USERNAME.test(credentials.username)) return this.unauthorized;
    const dn = userDn(this.config.userDnTemplate, credentials.username);
    let outcome: 'unauthenticated' | 'forbidden' | 'allowed' | 'timeout' | 'busy' | 'service-account';
    try {
      outcome = await withConnection(this.pool, this.timeoutMs, (client) => this.check(client, dn, credentials.password));
    } catch (error) {
      if (isInvalidCredentials(error)) return this.unauthorized;
      // Server down, connection reset, protocol error: fail closed (SPEC 7); the chain logs it.
      throw error;
    }
    switch (outcome) {
      case 'allowed':
        return allow([{ key: 'x-user-id', value: credentials.username, append: false }]);
      case 'unauthenticated':
        return this.unauthorized;
      case 'service-account':
        return deny(500, [{ key: 'content-length', value: '0' }]);
      case 'timeout':
        throw new Error(`LDAP server ${this.config.url} did not answer within ${this.timeoutMs}ms`);
      case 'busy':
        throw new Error(`LDAP connection pool of ${this.config.url} is exhausted (${this.config.maxSize} connections, ${MAX_WAITING} checks waiting)`);
      default:
        return forbidden();
    }
  }

  /** Binds as the user, then reads the group attribute (as the user or the service account). */
  private async check(client: Client, dn: string, password: string): Promise<'unauthenticated' | 'forbidden' | 'allowed' | 'service-account'> {
    try {
      await client.bind(dn, password);
    } catch (error) {
      if (isInvalidCredentials(error)) return 'unauthenticated';
      throw error;
    }
    if (this.config.disableGroupChecking) return 'allowed';
    if (this.config.serviceAccount) {
      try {
        await client.bind(this.config.serviceAccount.dn, this.config.serviceAccount.password);
      } catch (error) {
        if (isInvalidCredentials(error)) return 'service-account';
        throw error;
      }
    }
    const attribute = this.config.membershipAttributeName;
    const { searchEntries } = await client.search(dn, { scope: 'base', filter: this.config.searchFilter, attributes: [attribute], sizeLimit: 1 });
    const entry = searchEntries[0];
    if (!entry) return 'forbidden';
    // Attribute names are case-insensitive (Gloo: "case-insensitive name").
    const key = Object.keys(entry).find((k) => k.toLowerCase() === attribute.toLowerCase());
    const raw = key === undefined ? [] : entry[key];
    const groups = (Array.isArray(raw) ? raw : [raw]).map((g) => normalizeDn(Buffer.isBuffer(g) ? g.toString('utf8') : String(g)));
    return groups.some((g) => this.config.allowedGroups.has(g)) ? 'allowed' : 'forbidden';
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}
