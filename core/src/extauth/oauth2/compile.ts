/**
 * Compiles Gloo's `oauth2` step once per AuthConfig version: both field spellings read, defaults
 * applied (Gloo's), secrets looked up. The fields Gatehouse accepts but does not honour are marked
 * `Ignored` in the schema (config/schema/oauth2.ts), which the store warns about; a value not
 * honoured (`methodType: PostMethod`) is warned about here.
 */
import { createHash, hkdfSync } from 'node:crypto';
import type { JWTVerifyGetKey } from 'jose';
import { durationMs } from '../../config/schema/common.ts';
import { protoName } from '../../config/schema/oauth2.ts';
import type { CookieAttributes } from './cookies.ts';
import type { DiscoveryOverrides } from './discovery.ts';
import type { JwksRefreshPolicy } from './jwks.ts';
import { localKeys } from './jwks.ts';

type Obj = Record<string, unknown>;

/** A problem with the step's configuration, relative to `oauth2`. */
export interface OAuth2Problem {
  readonly path: (string | number)[];
  readonly message: string;
  readonly severity: 'error' | 'warning';
}

/** A field read under either spelling, with the spelling used (for problem paths). */
function field(o: unknown, name: string): { value: unknown; key: string } {
  if (typeof o !== 'object' || o === null) return { value: undefined, key: name };
  const snake = protoName(name);
  if ((o as Obj)[name] !== undefined) return { value: (o as Obj)[name], key: name };
  return { value: (o as Obj)[snake], key: snake };
}
const get = <T = unknown>(o: unknown, name: string): T | undefined => field(o, name).value as T | undefined;

/** One `claimsToHeaders` entry. */
export interface ClaimHeader {
  readonly claim: string;
  readonly header: string;
  readonly append: boolean;
}

/** A reference to a Secret's key. */
export interface SecretRef {
  name: string;
  namespace?: string | undefined;
}

/** Reads a served Secret's data (undefined when not served or not readable from this namespace). */
export type SecretLookup = (ref: { name: string; namespace: string }) => Readonly<Record<string, string>> | undefined;

/** Redis session settings. */
export interface CompiledRedisSession {
  readonly url: string;
  readonly tls: boolean;
  readonly poolSize: number;
  readonly keyPrefix: string;
}

/** `oidcAuthorizationCode`, compiled. */
export interface CompiledOidc {
  readonly clientId: string;
  readonly clientSecret: string | undefined;
  readonly issuerUrl: string;
  readonly appOrigin: string;
  readonly appUrl: string;
  readonly redirectUri: string;
  readonly callbackPath: string;
  readonly logoutPath: string | undefined;
  readonly afterLogoutUrl: string;
  readonly scopes: readonly string[];
  readonly authParams: Readonly<Record<string, string>>;
  readonly tokenParams: Readonly<Record<string, string>>;
  readonly overrides: DiscoveryOverrides;
  readonly pollMs: number;
  readonly jwksPolicy: JwksRefreshPolicy;
  readonly cookie: CookieAttributes;
  /** Cookie name of the session (cookie sessions: `<keyPrefix>_` + it). */
  readonly sessionCookie: string;
  /** Cookie name prefix of login states. */
  readonly stateCookiePrefix: string;
  readonly allowRefreshing: boolean;
  readonly preExpiryBufferMs: number;
  readonly targetDomain: string | undefined;
  readonly failOnFetchFailure: boolean;
  readonly redis: CompiledRedisSession | undefined;
  /** The 32-byte key sealing cookies; `derived`: from the client secret (no cipherConfig). */
  readonly key: Buffer;
  readonly keySource: 'secret' | 'derived' | 'random';
  readonly idTokenHeader: string | undefined;
  readonly accessTokenHeader: string | undefined;
  readonly bearer: boolean;
  readonly idClaims: readonly ClaimHeader[];
  readonly accessClaims: readonly ClaimHeader[];
}

/** `accessTokenValidation`, compiled. */
export interface CompiledAccessTokenValidation {
  readonly mode: 'introspection' | 'jwt';
  readonly introspection?: { url: string; clientId: string | undefined; clientSecret: string | undefined; userIdAttribute: string | undefined };
  readonly jwt?: { remote?: { url: string; refreshMs: number }; local?: JWTVerifyGetKey; issuer: string | undefined; audiences: readonly string[] };
  readonly userinfoUrl: string | undefined;
  readonly cacheMs: number;
  readonly requiredScopes: readonly string[];
  readonly claims: readonly ClaimHeader[];
}

const DEFAULT_MAX_AGE = 2_592_000;
const DEFAULT_POLL_MS = 30 * 60_000;
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function absoluteHttpUrl(value: unknown): URL | undefined {
  if (typeof value !== 'string') return undefined;
  const url = URL.parse(value);
  return url && (url.protocol === 'http:' || url.protocol === 'https:') && !url.username && !url.password ? url : undefined;
}

function claimsToHeaders(list: unknown, path: (string | number)[], problems: OAuth2Problem[]): ClaimHeader[] {
  const out: ClaimHeader[] = [];
  (Array.isArray(list) ? list : []).forEach((entry: Obj, i) => {
    if (!HEADER_NAME.test(String(entry.header ?? ''))) problems.push({ path: [...path, i, 'header'], message: 'must be an HTTP header name', severity: 'error' });
    else out.push({ claim: String(entry.claim), header: String(entry.header).toLowerCase(), append: entry.append === true });
  });
  return out;
}

function secretValue(ref: SecretRef | undefined, key: string, namespace: string, secrets: SecretLookup, path: (string | number)[], problems: OAuth2Problem[]): string | undefined {
  if (!ref) return undefined;
  const ns = ref.namespace ?? namespace;
  const data = secrets({ name: ref.name, namespace: ns });
  // A missing Secret is reported by the reference check.
  if (!data) return undefined;
  let value = data[key];
  // Gloo's guides print the client Secret as the YAML of its older format (`clientSecret: <value>`).
  const legacy = key === 'client-secret' && value !== undefined ? /^\s*client_?[sS]ecret:[ \t]*(\S[^\n]*?)\s*$/.exec(value) : null;
  if (legacy) value = legacy[1];
  if (value === undefined) problems.push({ path, message: `Secret ${ns}/${ref.name} has no key "${key}" (it has: ${Object.keys(data).sort().join(', ') || 'none'})`, severity: 'error' });
  return value;
}

/** Gloo's `sameSite` enum by name or number. */
function sameSite(value: unknown): CookieAttributes['sameSite'] {
  switch (value) {
    case 'StrictMode':
    case 2:
      return 'Strict';
    case 'NoneMode':
    case 3:
      return 'None';
    case 'LaxMode':
    case 1:
      return 'Lax';
    default:
      return undefined;
  }
}

/** The `oauth2` path of an OIDC spec (problems are relative to `oauth2`). */
export function compileOidc(spec: Obj, namespace: string, secrets: SecretLookup): { compiled?: CompiledOidc; problems: OAuth2Problem[] } {
  const problems: OAuth2Problem[] = [];
  const kind = field({ oidcAuthorizationCode: undefined, ...spec }, 'oidcAuthorizationCode').key;
  const at = (...path: (string | number)[]) => [kind, ...path];
  const oidc = get<Obj>(spec, 'oidcAuthorizationCode')!;
  const clientId = get<string>(oidc, 'clientId') ?? '';
  if (!clientId) problems.push({ path: at('clientId'), message: 'is required (the client id registered with the provider)', severity: 'error' });
  const issuerUrl = get<string>(oidc, 'issuerUrl') ?? '';
  if (!absoluteHttpUrl(issuerUrl)) problems.push({ path: at('issuerUrl'), message: 'must be an absolute http(s) URL (the provider is discovered at <issuerUrl>/.well-known/openid-configuration)', severity: 'error' });
  const app = absoluteHttpUrl(get(oidc, 'appUrl'));
  if (!app) problems.push({ path: at('appUrl'), message: 'must be the absolute http(s) URL of the application', severity: 'error' });
  // Required in Gloo (its CRD has no default): the provider must know this exact redirect URI.
  const callbackPath = get<string>(oidc, 'callbackPath') ?? '';
  if (!callbackPath.startsWith('/') || callbackPath.startsWith('//')) problems.push({ path: at('callbackPath'), message: 'is required: a path starting with one "/" (the redirect URI is appUrl + callbackPath)', severity: 'error' });
  const logoutPath = get<string>(oidc, 'logoutPath') || undefined;
  if (logoutPath && (!logoutPath.startsWith('/') || logoutPath === callbackPath)) problems.push({ path: at('logoutPath'), message: 'must be a path starting with "/", other than callbackPath', severity: 'error' });
  const afterLogout = get<string>(oidc, 'afterLogoutUrl');
  if (afterLogout && !absoluteHttpUrl(afterLogout)) problems.push({ path: at('afterLogoutUrl'), message: 'must be an absolute http(s) URL', severity: 'error' });

  // Client authentication: clientSecretRef (deprecated spelling) or clientAuthentication.clientSecret.
  const clientAuth = get<Obj>(oidc, 'clientAuthentication');
  const viaAuth = get<Obj>(clientAuth, 'clientSecret');
  if (get(clientAuth, 'privateKeyJwt') !== undefined) problems.push({ path: at('clientAuthentication', 'privateKeyJwt'), message: 'private_key_jwt client authentication is not supported; use clientSecret', severity: 'error' });
  const secretRef = (get<SecretRef>(viaAuth, 'clientSecretRef') ?? get<SecretRef>(oidc, 'clientSecretRef'));
  const disableSecret = (get<boolean>(viaAuth, 'disableClientSecret') ?? get<boolean>(oidc, 'disableClientSecret')) === true;
  const clientSecret = disableSecret ? undefined : secretValue(secretRef, 'client-secret', namespace, secrets, at('clientSecretRef'), problems);
  if (!secretRef && !disableSecret && get(clientAuth, 'privateKeyJwt') === undefined) problems.push({ path: at('clientSecretRef'), message: 'is required unless disableClientSecret is true (a Secret with the key "client-secret")', severity: 'error' });

  const session = get<Obj>(oidc, 'session') ?? {};
  const cookieOptions = get<Obj>(session, 'cookieOptions') ?? {};
  const cookieSession = get<Obj>(session, 'cookie');
  const redisSession = get<Obj>(session, 'redis');
  const maxAgeRaw = get(cookieOptions, 'maxAge');
  const pathRaw = get<string>(cookieOptions, 'path');
  const cookie: CookieAttributes = {
    maxAge: maxAgeRaw === undefined ? DEFAULT_MAX_AGE : Number(maxAgeRaw),
    secure: get(cookieOptions, 'notSecure') !== true,
    httpOnly: get(cookieOptions, 'httpOnly') !== false,
    path: pathRaw === undefined ? '/' : pathRaw === '' ? undefined : pathRaw,
    domain: get<string>(cookieOptions, 'domain') || undefined,
    sameSite: sameSite(get(cookieOptions, 'sameSite')),
  };
  if (cookie.sameSite === 'None' && !cookie.secure) problems.push({ path: at('session', 'cookieOptions', 'sameSite'), message: 'NoneMode needs a secure cookie (notSecure must be unset)', severity: 'error' });
  let redis: CompiledRedisSession | undefined;
  if (redisSession) {
    const options = get<Obj>(redisSession, 'options') ?? {};
    const host = get<string>(options, 'host') ?? '';
    if (!host || host.startsWith('unix://')) problems.push({ path: at('session', 'redis', 'options', 'host'), message: 'must be host:port (unix sockets are not supported)', severity: 'error' });
    const socket = get(options, 'socketType');
    redis = {
      url: `redis://${host}/${Number(get(options, 'db') ?? 0)}`,
      tls: socket === 'TLS' || socket === 1,
      poolSize: Math.min(Math.max(Number(get(options, 'poolSize') ?? 1), 1), 16),
      keyPrefix: get<string>(redisSession, 'keyPrefix') ?? 'gatehouse-oidc:',
    };
  }
  const keyPrefix = get<string>(cookieSession, 'keyPrefix');
  const sessionCookie = redisSession ? get<string>(redisSession, 'cookieName') || '__session' : keyPrefix ? `${keyPrefix}___session` : '__session';

  const cipherRef = get<SecretRef>(get(session, 'cipherConfig'), 'keyRef');
  let key: Buffer;
  let keySource: CompiledOidc['keySource'];
  const cipherKey = secretValue(cipherRef, 'key', namespace, secrets, at('session', 'cipherConfig', 'keyRef'), problems);
  if (cipherKey !== undefined) {
    key = Buffer.from(cipherKey);
    keySource = 'secret';
    if (key.length !== 32) problems.push({ path: at('session', 'cipherConfig', 'keyRef'), message: `the Secret's "key" must be exactly 32 bytes (it has ${key.length})`, severity: 'error' });
  } else if (clientSecret) {
    // Every process with the same AuthConfig and client secret derives the same key: sessions span replicas.
    key = Buffer.from(hkdfSync('sha256', clientSecret, 'gatehouse-oidc-session', `${namespace}|${issuerUrl}|${clientId}`, 32));
    keySource = 'derived';
  } else {
    key = createHash('sha256').update(crypto.getRandomValues(new Uint8Array(32))).digest();
    keySource = 'random';
    if (!cipherRef) problems.push({ path: at('session'), message: 'no client secret and no cipherConfig.keyRef: sessions are sealed with a key of this process only (lost on restart, not shared by replicas); set session.cipherConfig.keyRef', severity: 'warning' });
  }

  const headers = get<Obj>(oidc, 'headers') ?? {};
  for (const name of ['idTokenHeader', 'accessTokenHeader']) {
    const value = get<string>(headers, name);
    if (value && !HEADER_NAME.test(value)) problems.push({ path: at('headers', name), message: 'must be an HTTP header name', severity: 'error' });
  }
  const override = get<Obj>(oidc, 'discoveryOverride') ?? {};
  for (const name of ['authEndpoint', 'tokenEndpoint', 'jwksUri', 'revocationEndpoint', 'endSessionEndpoint']) {
    const value = get(override, name);
    if (value && !absoluteHttpUrl(value)) problems.push({ path: at('discoveryOverride', name), message: 'must be an absolute http(s) URL', severity: 'error' });
  }
  const policy = get<Obj>(oidc, 'jwksCacheRefreshPolicy');
  const maxReq = get(policy, 'maxIdpReqPerPollingInterval');
  const jwksPolicy: JwksRefreshPolicy = policy && get(policy, 'always') !== undefined ? { kind: 'always' } : maxReq !== undefined ? { kind: 'max', perInterval: Number(maxReq) } : { kind: 'never' };
  // The fields not honoured at all are marked Ignored in the schema (warned by the store); this one only for a value.
  const method = get<Obj>(oidc, 'endSessionProperties')?.methodType;
  if (method === 'PostMethod' || method === 1) problems.push({ path: at('endSessionProperties', 'methodType'), message: 'accepted but not honoured: the end_session_endpoint is reached by a GET redirect', severity: 'warning' });

  const preExpiry = get<string>(redisSession, 'preExpiryBuffer');
  const targetDomain = (get<string>(redisSession, 'targetDomain') ?? get<string>(cookieSession, 'targetDomain')) || undefined;
  if (problems.some((p) => p.severity === 'error')) return { problems };
  const appOrigin = app!.origin;
  const appBase = app!.href.replace(/\/+$/, '');
  return {
    problems,
    compiled: {
      clientId,
      clientSecret,
      issuerUrl,
      appOrigin,
      appUrl: app!.href,
      redirectUri: `${appBase}${callbackPath}`,
      callbackPath: new URL(`${appBase}${callbackPath}`).pathname,
      logoutPath: logoutPath ? new URL(`${appBase}${logoutPath}`).pathname : undefined,
      afterLogoutUrl: afterLogout || app!.href,
      scopes: ['openid', ...(get<string[]>(oidc, 'scopes') ?? []).filter((s) => s !== 'openid')],
      authParams: get<Record<string, string>>(oidc, 'authEndpointQueryParams') ?? {},
      tokenParams: get<Record<string, string>>(oidc, 'tokenEndpointQueryParams') ?? {},
      overrides: {
        authEndpoint: get<string>(override, 'authEndpoint') || undefined,
        tokenEndpoint: get<string>(override, 'tokenEndpoint') || undefined,
        jwksUri: get<string>(override, 'jwksUri') || undefined,
        revocationEndpoint: get<string>(override, 'revocationEndpoint') || undefined,
        endSessionEndpoint: get<string>(override, 'endSessionEndpoint') || undefined,
        authMethods: get<string[]>(override, 'authMethods'),
      },
      pollMs: get<string>(oidc, 'discoveryPollInterval') ? Math.max(durationMs(get<string>(oidc, 'discoveryPollInterval')!), 1_000) : DEFAULT_POLL_MS,
      jwksPolicy,
      cookie,
      sessionCookie,
      stateCookiePrefix: `${keyPrefix ? `${keyPrefix}_` : ''}__oidc_state_`,
      // Gloo's defaults: cookie sessions do not refresh unless asked, Redis sessions do.
      allowRefreshing: redisSession ? get(redisSession, 'allowRefreshing') !== false : get(cookieSession, 'allowRefreshing') === true,
      preExpiryBufferMs: preExpiry !== undefined ? durationMs(preExpiry) : redisSession ? 2_000 : 0,
      targetDomain,
      failOnFetchFailure: get(session, 'failOnFetchFailure') === true,
      redis,
      key,
      keySource,
      idTokenHeader: get<string>(headers, 'idTokenHeader')?.toLowerCase() || undefined,
      accessTokenHeader: get<string>(headers, 'accessTokenHeader')?.toLowerCase() || undefined,
      bearer: get(headers, 'useBearerSchemaForAuthorization') === true,
      idClaims: claimsToHeaders(get(get(oidc, 'identityToken'), 'claimsToHeaders'), at('identityToken', 'claimsToHeaders'), problems),
      accessClaims: claimsToHeaders(get(get(oidc, 'accessToken'), 'claimsToHeaders'), at('accessToken', 'claimsToHeaders'), problems),
    },
  };
}

/** Compiles `accessTokenValidation` (problems relative to `oauth2`). */
export function compileAccessTokenValidation(spec: Obj, namespace: string, secrets: SecretLookup): { compiled?: CompiledAccessTokenValidation; problems: OAuth2Problem[] } {
  const problems: OAuth2Problem[] = [];
  const key = field({ accessTokenValidation: undefined, ...spec }, 'accessTokenValidation').key;
  const at = (...path: (string | number)[]) => [key, ...path];
  const atv = get<Obj>(spec, 'accessTokenValidation')!;
  const legacyUrl = get<string>(atv, 'introspectionUrl');
  const introspection = get<Obj>(atv, 'introspection');
  const jwt = get<Obj>(atv, 'jwt');
  const set = [legacyUrl !== undefined, introspection !== undefined, jwt !== undefined].filter(Boolean).length;
  if (set !== 1) problems.push({ path: at(), message: 'set exactly one of introspectionUrl, introspection, jwt', severity: 'error' });
  let compiled: Partial<CompiledAccessTokenValidation> = {};
  if (legacyUrl !== undefined || introspection) {
    const url = legacyUrl ?? get<string>(introspection, 'introspectionUrl');
    const path = legacyUrl !== undefined ? at('introspectionUrl') : at('introspection', 'introspectionUrl');
    if (!absoluteHttpUrl(url)) problems.push({ path, message: 'must be an absolute http(s) URL', severity: 'error' });
    const clientId = get<string>(introspection, 'clientId') || undefined;
    const disable = get(introspection, 'disableClientSecret') === true;
    const ref = get<SecretRef>(introspection, 'clientSecretRef');
    if (clientId && !ref && !disable) problems.push({ path: at('introspection', 'clientSecretRef'), message: 'is required with clientId unless disableClientSecret is true', severity: 'error' });
    const clientSecret = disable ? undefined : secretValue(ref, 'client-secret', namespace, secrets, at('introspection', 'clientSecretRef'), problems);
    compiled = { mode: 'introspection', introspection: { url: url ?? '', clientId, clientSecret, userIdAttribute: get<string>(introspection, 'userIdAttributeName') || undefined } };
  } else if (jwt) {
    const remote = get<Obj>(jwt, 'remoteJwks');
    const local = get<Obj>(jwt, 'localJwks');
    if ((remote === undefined) === (local === undefined)) problems.push({ path: at('jwt'), message: 'set exactly one of remoteJwks, localJwks', severity: 'error' });
    let localSet: JWTVerifyGetKey | undefined;
    if (local) {
      try {
        localSet = localKeys(get<string>(local, 'inlineString') ?? '');
      } catch (error) {
        problems.push({ path: at('jwt', 'localJwks', 'inlineString'), message: `is not a JWKS: ${(error as Error).message}`, severity: 'error' });
      }
    }
    if (remote && !absoluteHttpUrl(get(remote, 'url'))) problems.push({ path: at('jwt', 'remoteJwks', 'url'), message: 'must be an absolute http(s) URL', severity: 'error' });
    const refresh = get<string>(remote, 'refreshInterval');
    compiled = {
      mode: 'jwt',
      jwt: {
        ...(remote ? { remote: { url: get<string>(remote, 'url') ?? '', refreshMs: refresh ? Math.max(durationMs(refresh), 1_000) : 5 * 60_000 } } : {}),
        ...(localSet ? { local: localSet } : {}),
        issuer: get<string>(jwt, 'issuer') || undefined,
        audiences: get<string[]>(jwt, 'audiences') ?? [],
      },
    };
  }
  const userinfo = get<string>(atv, 'userinfoUrl');
  if (userinfo && !absoluteHttpUrl(userinfo)) problems.push({ path: at('userinfoUrl'), message: 'must be an absolute http(s) URL', severity: 'error' });
  const claims = claimsToHeaders(get(atv, 'claimsToHeaders'), at('claimsToHeaders'), problems);
  if (problems.some((p) => p.severity === 'error')) return { problems };
  const cache = get<string>(atv, 'cacheTimeout');
  return {
    problems,
    compiled: {
      ...(compiled as CompiledAccessTokenValidation),
      userinfoUrl: userinfo || undefined,
      cacheMs: cache !== undefined ? durationMs(cache) : 10 * 60_000,
      requiredScopes: get<Obj>(atv, 'requiredScopes')?.scope as string[] ?? [],
      claims,
    },
  };
}
