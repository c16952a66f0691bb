import { AuthorizedResponse, DeniedResponse, type AuthorizationRequest, type AuthorizationResponse, type AuthService, type Context, type ExtAuthPlugin } from '@gatehouse/plugin-sdk';

/** The step's `config`. */
export interface JwtConfig {
  /** Required `iss`; empty accepts any. */
  Issuer: string;
  /** Required `aud` (one of the token's); empty accepts any. */
  Audience: string;
  /** Inline JWKS (`{"keys": [...]}`). */
  Jwks: { keys: JsonWebKey[] };
  /**
   * A JWKS fetched through egress (its origin must be in the step's `egress`): at Start, again
   * when it is older than `JwksCacheSeconds`, and when a token names a `kid` it does not hold
   * (the issuer rotated its keys), never more often than once per `JwksMinRefreshSeconds`.
   */
  JwksUrl: string;
  /** How long a fetched JWKS is used before the next request fetches it again (it stays in use if that fails). */
  JwksCacheSeconds: number;
  /** At most one JWKS fetch per this many seconds, whatever asks for it: tokens with made-up `kid`s cannot make the plugin hammer the issuer. */
  JwksMinRefreshSeconds: number;
  /** Accepted `alg` values. */
  Algorithms: string[];
  /** For HS256/384/512: the name of the `secretRefs` entry holding the shared secret. */
  HmacSecret: string;
  /** Leeway for `exp` and `nbf`, in seconds. */
  ClockSkewSeconds: number;
  /**
   * Claims copied to upstream headers, claim → header (`{email: x-user-email, "realm.role": x-role}`;
   * a dotted name reads a nested claim). Arrays are joined with `,`, objects sent as JSON. A
   * configured header the token has no claim for is removed from the request, so a client cannot
   * send it. `sub` always goes to `x-user-id`.
   */
  ClaimsToHeaders: Record<string, string>;
}

/** A JSON Web Key as found in a JWKS. */
type JsonWebKey = { kty?: string; kid?: string; alg?: string; [member: string]: unknown };
/** The sandbox's opaque key handle (crypto.subtle). */
type CryptoKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;

type Verify = { name: string; hash?: string; saltLength?: number };
type Import = { name: string; hash?: string; namedCurve?: string };

/** JWS `alg` → WebCrypto parameters for importing the key and for verifying. */
const ALGORITHMS: Record<string, { importAs: Import; verifyAs: Verify }> = {
  RS256: { importAs: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, verifyAs: { name: 'RSASSA-PKCS1-v1_5' } },
  RS384: { importAs: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-384' }, verifyAs: { name: 'RSASSA-PKCS1-v1_5' } },
  RS512: { importAs: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-512' }, verifyAs: { name: 'RSASSA-PKCS1-v1_5' } },
  PS256: { importAs: { name: 'RSA-PSS', hash: 'SHA-256' }, verifyAs: { name: 'RSA-PSS', saltLength: 32 } },
  PS384: { importAs: { name: 'RSA-PSS', hash: 'SHA-384' }, verifyAs: { name: 'RSA-PSS', saltLength: 48 } },
  PS512: { importAs: { name: 'RSA-PSS', hash: 'SHA-512' }, verifyAs: { name: 'RSA-PSS', saltLength: 64 } },
  ES256: { importAs: { name: 'ECDSA', namedCurve: 'P-256' }, verifyAs: { name: 'ECDSA', hash: 'SHA-256' } },
  ES384: { importAs: { name: 'ECDSA', namedCurve: 'P-384' }, verifyAs: { name: 'ECDSA', hash: 'SHA-384' } },
  ES512: { importAs: { name: 'ECDSA', namedCurve: 'P-521' }, verifyAs: { name: 'ECDSA', hash: 'SHA-512' } },
  EdDSA: { importAs: { name: 'Ed25519' }, verifyAs: { name: 'Ed25519' } },
  HS256: { importAs: { name: 'HMAC', hash: 'SHA-256' }, verifyAs: { name: 'HMAC' } },
  HS384: { importAs: { name: 'HMAC', hash: 'SHA-384' }, verifyAs: { name: 'HMAC' } },
  HS512: { importAs: { name: 'HMAC', hash: 'SHA-512' }, verifyAs: { name: 'HMAC' } },
};

const decoder = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

/** base64url alphabet value by character code; -1 for anything else. */
const BASE64URL = (() => {
  const table = new Int8Array(128).fill(-1);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  for (let i = 0; i < alphabet.length; i++) table[alphabet.charCodeAt(i)] = i;
  return table;
})();

/** base64url (no padding) → bytes; throws on anything else. Decoded here, four characters at a time (no atob, no regex): it runs three times a request. */
function fromBase64Url(text: string): Uint8Array {
  const n = text.length;
  if (n % 4 === 1) throw new Error('not base64url');
  const out = new Uint8Array((n * 3) >> 2);
  let at = 0;
  for (let i = 0; i < n; i += 4) {
    let v = 0;
    for (let k = 0; k < 4; k++) {
      // Past the end (no padding in base64url): zero bits, cut off below.
      const code = i + k < n ? text.charCodeAt(i + k) : 65;
      const value = code < 128 ? BASE64URL[code]! : -1;
      if (value < 0) throw new Error('not base64url');
      v = (v << 6) | value;
    }
    out[at++] = v >> 16;
    if (at < out.length) out[at++] = (v >> 8) & 0xff;
    if (at < out.length) out[at++] = v & 0xff;
  }
  return out;
}

function denied(description: string): AuthorizationResponse {
  // RFC 6750: 401 with the reason in WWW-Authenticate; the body stays empty.
  return DeniedResponse(401, { 'www-authenticate': `Bearer error="invalid_token", error_description="${description}"` });
}

/** The host's refusal of a fetch to an origin the step did not declare: a config error no retry can mend. */
function isEgressRefusal(error: unknown): boolean {
  return error instanceof TypeError && /is not allowed/.test(error.message);
}

/** A claim by name; `a.b` reads `{a: {b}}` when there is no claim named `a.b` itself. */
function claimValue(claims: Record<string, unknown>, name: string): unknown {
  if (name in claims) return claims[name];
  let value: unknown = claims;
  for (const part of name.split('.')) value = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>)[part] : undefined;
  return value;
}

/** A claim as a header value: strings as they are, arrays joined, objects as JSON; control and non-ASCII characters percent-encoded (header values are bytes). */
function headerValue(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  const text = typeof value === 'string' ? value : Array.isArray(value) && value.every((v) => typeof v !== 'object' || v === null) ? value.join(',') : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return text.replace(/[^\x20-\x7e]/gu, (c) => (c.length === 1 && c >= '\ud800' && c <= '\udfff' ? '%EF%BF%BD' : encodeURIComponent(c)));
}

class JwtService implements AuthService {
  /** Keys from the inline JWKS and the HMAC secret, by `kid|alg` (and `|alg` for keys without a kid). */
  private readonly local = new Map<string, CryptoKey>();
  /** Keys from the last JWKS fetched, same keys; replaced whole, so keys the issuer retired go. */
  private remote = new Map<string, CryptoKey>();
  /** When the JWKS was last fetched successfully, and last tried (ms, Date.now(): a fake clock in tests moves both). */
  private fetchedAt = -Infinity;
  private triedAt = -Infinity;
  /** The fetch in flight: concurrent requests wait for the same one. */
  private refreshing: Promise<void> | undefined;
  private readonly config: JwtConfig;

  constructor(config: JwtConfig) {
    this.config = config;
  }

  async Start(ctx: Context): Promise<void> {
    for (const jwk of this.config.Jwks.keys) await this.importJwk(jwk, this.local);
    if (this.config.HmacSecret) {
      const secret = ctx.secrets[this.config.HmacSecret];
      if (secret === undefined) throw new Error(`secretRefs has no ${this.config.HmacSecret} (config.HmacSecret)`);
      for (const alg of this.config.Algorithms.filter((a) => a.startsWith('HS'))) {
        this.local.set(`|${alg}`, await crypto.subtle.importKey('raw', encoder.encode(secret), ALGORITHMS[alg]!.importAs, false, ['verify']));
      }
    }
    if (this.config.JwksUrl) {
      try {
        await this.fetchJwks(ctx);
      } catch (error) {
        // An undeclared origin never works: fail the step, naming it. An issuer that is down
        // (or starting with us) may come back: start without its keys and fetch on demand.
        if (isEgressRefusal(error)) throw error;
        ctx.logger.warn('JWKS not loaded at start: tokens are denied until a fetch succeeds', { url: this.config.JwksUrl, error: String(error) });
      }
    }
    ctx.logger.info('JWT keys loaded', { keys: this.local.size + this.remote.size });
  }

  /** Imports a JWK for every accepted alg it can serve (its own `alg` only, when it names one). */
  private async importJwk(jwk: JsonWebKey, into: Map<string, CryptoKey>): Promise<void> {
    if (typeof jwk !== 'object' || jwk === null || (jwk.use !== undefined && jwk.use !== 'sig')) return;
    const algs = jwk.alg ? [jwk.alg] : this.config.Algorithms;
    for (const alg of algs) {
      const params = ALGORITHMS[alg];
      if (!params || !this.config.Algorithms.includes(alg) || alg.startsWith('HS')) continue;
      try {
        const { key_ops: _ops, use: _use, ...clean } = jwk;
        into.set(`${jwk.kid ?? ''}|${alg}`, await crypto.subtle.importKey('jwk', { ...clean, alg } as never, params.importAs, false, ['verify']));
      } catch {
        // The key does not fit this alg (an RSA key offered to ES256): not one of its keys.
      }
    }
  }

  /** Fetches the JWKS and swaps its keys in; throws when it cannot (the old keys stay). */
  private async fetchJwks(ctx: Context): Promise<void> {
    this.triedAt = Date.now();
    const response = await fetch(this.config.JwksUrl, { headers: { accept: 'application/json' } });
    if (!response.ok) {
      await response.arrayBuffer();
      throw new Error(`JWKS ${this.config.JwksUrl} answered ${response.status}`);
    }
    const body = (await response.json()) as { keys?: unknown };
    if (!Array.isArray(body.keys)) throw new Error(`JWKS ${this.config.JwksUrl} has no "keys" array`);
    const keys = new Map<string, CryptoKey>();
    for (const jwk of body.keys as JsonWebKey[]) await this.importJwk(jwk, keys);
    this.remote = keys;
    this.fetchedAt = Date.now();
    ctx.logger.info('JWKS fetched', { url: this.config.JwksUrl, keys: keys.size, kids: [...new Set((body.keys as JsonWebKey[]).map((k) => k?.kid).filter((k) => typeof k === 'string'))] });
  }

  /** Fetches the JWKS again unless one was tried within `JwksMinRefreshSeconds`; never throws (the old keys stay). */
  private refresh(ctx: Context, why: string): Promise<void> {
    if (this.refreshing) return this.refreshing;
    if (Date.now() - this.triedAt < this.config.JwksMinRefreshSeconds * 1000) return Promise.resolve();
    ctx.logger.debug('fetching the JWKS', { why });
    this.refreshing = this.fetchJwks(ctx)
      .catch((error: unknown) => ctx.logger.warn('JWKS fetch failed: keeping the keys held', { url: this.config.JwksUrl, error: String(error) }))
      .finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private key(kid: string | undefined, alg: string): CryptoKey | undefined {
    const exact = `${kid ?? ''}|${alg}`;
    const keyless = kid === undefined ? undefined : `|${alg}`;
    return this.remote.get(exact) ?? this.local.get(exact) ?? (keyless === undefined ? undefined : (this.remote.get(keyless) ?? this.local.get(keyless)));
  }

  async Authorize(ctx: Context, request: AuthorizationRequest): Promise<AuthorizationResponse> {
    const header = request.CheckRequest.attributes.request.http.headers.authorization ?? '';
    // No Bearer credentials: a plain challenge (RFC 6750 3.1). Credentials that are not a JWS: invalid_token.
    const credentials = /^Bearer +(\S+) *$/i.exec(header)?.[1];
    if (!credentials) return DeniedResponse(401, { 'www-authenticate': 'Bearer' });
    const match = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]*)$/.exec(credentials);
    if (!match) return denied('malformed token');
    const [, head, body, signature] = match as unknown as [string, string, string, string];
    let jose: { alg?: string; kid?: string };
    let claims: { iss?: unknown; aud?: unknown; exp?: unknown; nbf?: unknown; sub?: unknown; [claim: string]: unknown };
    try {
      jose = JSON.parse(decoder.decode(fromBase64Url(head)));
      claims = JSON.parse(decoder.decode(fromBase64Url(body)));
    } catch {
      return denied('malformed token');
    }
    if (typeof jose !== 'object' || jose === null || typeof claims !== 'object' || claims === null || Array.isArray(claims)) return denied('malformed token');
    const alg = jose.alg ?? '';
    const params = ALGORITHMS[alg];
    if (!params || !this.config.Algorithms.includes(alg)) return denied('algorithm not accepted');
    const kid = typeof jose.kid === 'string' ? jose.kid : undefined;
    if (this.config.JwksUrl && Date.now() - this.fetchedAt >= this.config.JwksCacheSeconds * 1000) await this.refresh(ctx, 'cache expired');
    let key = this.key(kid, alg);
    // An unknown kid: the issuer may have rotated its keys since the last fetch.
    if (!key && this.config.JwksUrl && !alg.startsWith('HS')) {
      await this.refresh(ctx, 'unknown kid');
      key = this.key(kid, alg);
    }
    if (!key) return denied('unknown key');
    let valid = false;
    try {
      valid = await crypto.subtle.verify(params.verifyAs, key, fromBase64Url(signature), encoder.encode(`${head}.${body}`));
    } catch {
      valid = false;
    }
    if (!valid) return denied('bad signature');
    const now = Date.now() / 1000;
    const skew = this.config.ClockSkewSeconds;
    if (claims.exp !== undefined && (typeof claims.exp !== 'number' || now > claims.exp + skew)) return denied('token expired');
    if (claims.nbf !== undefined && (typeof claims.nbf !== 'number' || now < claims.nbf - skew)) return denied('token not yet valid');
    if (this.config.Issuer && claims.iss !== this.config.Issuer) return denied('wrong issuer');
    if (this.config.Audience && !(Array.isArray(claims.aud) ? claims.aud : [claims.aud]).includes(this.config.Audience)) return denied('wrong audience');
    const set: Record<string, string> = {};
    const remove: string[] = [];
    for (const [claim, header] of Object.entries(this.config.ClaimsToHeaders)) {
      const value = headerValue(claimValue(claims, claim));
      if (value === undefined) remove.push(header);
      else set[header] = value;
    }
    const allowed = AuthorizedResponse(set);
    allowed.CheckResponse.ok_response!.headers_to_remove = remove;
    return typeof claims.sub === 'string' ? { ...allowed, UserInfo: { UserID: claims.sub } } : allowed;
  }
}

/** The reference JWT plugin; build with `gatehouse-plugin build src/index.ts --name Jwt`. */
export const Jwt: ExtAuthPlugin = {
  NewConfigInstance(): JwtConfig {
    return {
      Issuer: '',
      Audience: '',
      Jwks: { keys: [] },
      JwksUrl: '',
      JwksCacheSeconds: 300,
      JwksMinRefreshSeconds: 30,
      Algorithms: ['RS256', 'ES256', 'EdDSA'],
      HmacSecret: '',
      ClockSkewSeconds: 60,
      // {} decodes as a map: any claim names.
      ClaimsToHeaders: {},
    };
  },

  GetAuthService(_ctx, config) {
    const c = config as JwtConfig;
    const unknown = c.Algorithms.filter((alg) => !ALGORITHMS[alg]);
    if (unknown.length) throw new Error(`config.Algorithms: unknown ${unknown.join(', ')} (known: ${Object.keys(ALGORITHMS).join(', ')})`);
    if (c.Algorithms.some((alg) => alg.startsWith('HS')) && !c.HmacSecret) throw new Error('config.HmacSecret is required for HS* algorithms (a secretRefs name)');
    for (const field of ['JwksCacheSeconds', 'JwksMinRefreshSeconds', 'ClockSkewSeconds'] as const) {
      if (!(c[field] >= 0) || !Number.isFinite(c[field])) throw new Error(`config.${field} must be a number of seconds ≥ 0`);
    }
    for (const [claim, header] of Object.entries(c.ClaimsToHeaders)) {
      if (typeof header !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(header)) throw new Error(`config.ClaimsToHeaders.${claim}: expected a header name, got ${JSON.stringify(header)}`);
    }
    if (!c.JwksUrl && c.Jwks.keys.length === 0 && !c.HmacSecret) throw new Error('config: no keys: set JwksUrl, Jwks or (for HS*) HmacSecret');
    return new JwtService(c);
  },
};
