import { hash, timingSafeEqual } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { BasicAuthSpec } from '../../config/schema/auth-config.ts';
import type { PathSegment } from '../../config/diagnostic.ts';
import { deepFreeze } from '../../config/resource.ts';
import { allow, deny, type Allowed, type Denied } from '../decision.ts';
import type { AuthDecision, AuthStep, CheckRequest } from '../step.ts';
import { apr1Hash } from './apr1.ts';
import { parseBasicCredentials } from './credentials.ts';

/** A configuration problem found while compiling a `basicAuth` step; `path` is relative to the step. */
export interface StepProblem {
  readonly path: PathSegment[];
  readonly message: string;
}

type Encryption = 'apr' | 'sha1';

interface CompiledUser {
  readonly salt: string;
  /** APR: the 22-character hash as bytes; SHA1: the 20 digest bytes. */
  readonly expected: Buffer;
}

/** A `basicAuth` step compiled once per AuthConfig version. */
export interface CompiledBasicAuth {
  readonly realm: string;
  readonly encryption: Encryption;
  /** Extended form: also reads `Proxy-Authorization`. */
  readonly extended: boolean;
  readonly users: ReadonlyMap<string, CompiledUser>;
}

const APR_HASH = /^[./0-9A-Za-z]{22}$/;
const SHA1_HEX = /^[0-9a-fA-F]{40}$/;

/** Compiles a `basicAuth` spec, or lists what is wrong with it (SPEC 5.1). */
export function compileBasicAuth(spec: BasicAuthSpec): { compiled: CompiledBasicAuth; problems: [] } | { compiled?: undefined; problems: StepProblem[] } {
  const extended = spec.encryption !== undefined;
  const encryption: Encryption = spec.encryption?.sha1 ? 'sha1' : 'apr';
  const listPath = extended ? ['userList', 'users'] : ['apr', 'users'];
  const users = (extended ? spec.userList?.users : spec.apr?.users) ?? {};
  const problems: StepProblem[] = [];
  const compiled = new Map<string, CompiledUser>();
  for (const [username, { salt, hashedPassword }] of Object.entries(users)) {
    const at = [...listPath, username];
    if (username.includes(':')) problems.push({ path: at, message: `username "${username}" contains ":", which Basic credentials cannot carry` });
    if (encryption === 'apr') {
      if (!APR_HASH.test(hashedPassword)) {
        problems.push({ path: [...at, 'hashedPassword'], message: 'must be the 22-character hash part of "$apr1$<salt>$<hash>" (as written by htpasswd -m)' });
        continue;
      }
      if (salt.length === 0 || salt.length > 8 || salt.includes('$')) {
        problems.push({ path: [...at, 'salt'], message: 'must be the 1 to 8 character salt part of "$apr1$<salt>$<hash>"' });
        continue;
      }
      compiled.set(username, { salt, expected: Buffer.from(hashedPassword, 'latin1') });
    } else {
      if (!SHA1_HEX.test(hashedPassword)) {
        problems.push({ path: [...at, 'hashedPassword'], message: 'must be 40 hex digits: hex(sha1(password + salt))' });
        continue;
      }
      compiled.set(username, { salt, expected: Buffer.from(hashedPassword, 'hex') });
    }
  }
  if (problems.length > 0) return { problems };
  return { compiled: { realm: spec.realm ?? '', encryption, extended, users: compiled }, problems: [] };
}

/** Options of {@link createBasicAuthStep}. */
export interface BasicAuthStepOptions {
  /** For logs and metrics. */
  name: string;
  /** Most verified credentials kept (default 1024). */
  cacheSize?: number;
  /**
   * Failed checks for one username from one source address per window before that pair is
   * answered 401 unchecked (default 20); a source gets {@link SOURCE_FAILURE_FACTOR} times as
   * many across all usernames (password spraying).
   */
  maxFailures?: number;
  /** The failure window (default 60 s). */
  failureWindowMs?: number;
}

/**
 * Longest `Authorization` value checked (base64 of about 760 bytes of `user:password`); longer
 * ones are a 401 without decoding or hashing.
 */
export const MAX_CREDENTIALS_HEADER = 1024;
const DEFAULT_MAX_FAILURES = 20;
/** A source's failures across usernames may reach this multiple of `maxFailures`. */
export const SOURCE_FAILURE_FACTOR = 5;
const DEFAULT_FAILURE_WINDOW_MS = 60_000;

/**
 * Failed Basic Auth checks per key (username and source, or source) in fixed windows (bounded:
 * at most 10,000 keys remembered). Per process and per AuthConfig version, like the credential cache.
 */
export class FailureLimiter {
  private readonly bySource = new LRUCache<string, { count: number; since: number }>({ max: 10_000 });
  private readonly max: number;
  private readonly windowMs: number;

  constructor(max: number, windowMs: number) {
    this.max = max;
    this.windowMs = windowMs;
  }

  lockedOut(source: string, now = Date.now()): boolean {
    const entry = this.bySource.get(source);
    return entry !== undefined && now - entry.since < this.windowMs && entry.count >= this.max;
  }

  record(source: string, now = Date.now()): void {
    const entry = this.bySource.get(source);
    if (!entry || now - entry.since >= this.windowMs) this.bySource.set(source, { count: 1, since: now });
    else entry.count++;
  }
}

/**
 * SPEC 5.1. Verified credentials are cached by a hash of the header value (APR1 costs
 * 1000 MD5 rounds); the cache lives and dies with this step, i.e. with the AuthConfig version.
 */
export class BasicAuthStep implements AuthStep {
  readonly type = 'basicAuth';
  readonly name: string;
  private readonly config: CompiledBasicAuth;
  private readonly cache: LRUCache<string, Allowed>;
  private readonly unauthorized: Denied;
  /** Checked for unknown users so that a wrong username costs as much as a wrong password. */
  private readonly decoy: CompiledUser;
  /** Failures per username and source: slows guessing one user's password. */
  private readonly failures: FailureLimiter;
  /** Failures per source across usernames: slows spraying one password over many users. */
  private readonly sourceFailures: FailureLimiter;

  constructor(config: CompiledBasicAuth, options: BasicAuthStepOptions) {
    this.config = config;
    this.name = options.name;
    this.cache = new LRUCache({ max: options.cacheSize ?? 1024 });
    const maxFailures = options.maxFailures ?? DEFAULT_MAX_FAILURES;
    const windowMs = options.failureWindowMs ?? DEFAULT_FAILURE_WINDOW_MS;
    this.failures = new FailureLimiter(maxFailures, windowMs);
    this.sourceFailures = new FailureLimiter(maxFailures * SOURCE_FAILURE_FACTOR, windowMs);
    const realm = config.realm.replace(/["\\]/g, '\\$&');
    this.unauthorized = deepFreeze(
      deny(401, [
        { key: 'www-authenticate', value: `Basic realm="${realm}"` },
        { key: 'content-length', value: '0' },
      ]),
    );
    this.decoy = config.encryption === 'apr' ? { salt: 'decoy', expected: Buffer.alloc(22) } : { salt: 'decoy', expected: Buffer.alloc(20) };
  }

  /** How many verified credentials are cached now. */
  get cachedCredentials(): number {
    return this.cache.size;
  }

  async authorize(request: CheckRequest): Promise<AuthDecision> {
    const headers = request.attributes.request.http.headers;
    const header = pickHeader(headers.authorization, this.config.extended ? headers['proxy-authorization'] : undefined);
    // Checked before any hashing: APR1 over an 11.5 KB password cost 42 ms of event loop per 401.
    if (header === undefined || header.length > MAX_CREDENTIALS_HEADER) return this.unauthorized;
    const key = hash('sha256', header, 'base64');
    const cached = this.cache.get(key);
    if (cached) return cached;

    const credentials = parseBasicCredentials(header);
    if (!credentials) return this.unauthorized;
    // Guessing is slowed per username and source: a source that keeps failing for a user gets
    // 401 without a check for the rest of the window (no password oracle), but cannot lock that
    // user out elsewhere, nor out of credentials verified before (the cache above answers first).
    // The source is what the caller wrote: the gateway writes the real peer; callers are
    // authenticated (caller token) so that nobody else can forge it.
    const source = sourceAddress(request);
    const userSource = `${credentials.username.length > 256 ? hash('sha256', credentials.username, 'base64') : credentials.username}\u0000${source}`;
    if (this.failures.lockedOut(userSource) || this.sourceFailures.lockedOut(source)) return this.unauthorized;
    const user = this.config.users.get(credentials.username);
    const ok = this.verify(credentials.password, user ?? this.decoy) && user !== undefined;
    if (!ok) {
      this.failures.record(userSource);
      this.sourceFailures.record(source);
      return this.unauthorized;
    }
    // Overwriting (not appending) replaces any client-sent x-user-id. Not also listed in
    // headers_to_remove: Envoy removes after setting, which would drop the new value.
    const decision = deepFreeze(allow([{ key: 'x-user-id', value: `${this.config.realm};${credentials.username}`, append: false }]));
    this.cache.set(key, decision);
    return decision;
  }

  private verify(password: string, user: CompiledUser): boolean {
    const actual =
      this.config.encryption === 'apr'
        ? Buffer.from(apr1Hash(password, user.salt), 'latin1')
        : hash('sha1', Buffer.from(password + user.salt, 'utf8'), 'buffer');
    return actual.length === user.expected.length && timingSafeEqual(actual, user.expected);
  }

  async close(): Promise<void> {
    this.cache.clear();
  }
}

/** The client address Envoy or the gateway put in the CheckRequest (`''` when absent). */
function sourceAddress(request: CheckRequest): string {
  const address = request.attributes.source?.address as { socket_address?: { address?: unknown } } | undefined;
  const value = address?.socket_address?.address;
  return typeof value === 'string' ? value : '';
}

/** The first header holding Basic credentials; else the first present one (to be rejected). */
function pickHeader(authorization: string | undefined, proxyAuthorization: string | undefined): string | undefined {
  if (proxyAuthorization === undefined) return authorization;
  if (authorization === undefined) return proxyAuthorization;
  return /^basic[ \t]/i.test(authorization) || !/^basic[ \t]/i.test(proxyAuthorization) ? authorization : proxyAuthorization;
}
