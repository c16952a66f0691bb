import { AuthorizedResponse, DeniedResponse, type AuthorizationRequest, type AuthorizationResponse, type AuthService, type Context, type ExtAuthPlugin } from '@gatehouse/plugin-sdk';

/** The step's `config`. */
export interface JwtConfig {
  /** Required `iss`; empty accepts any. */
  Issuer: string;
  /** Required `aud` (one of the token's); empty accepts any. */
  Audience: string;
  /** Inline JWKS (`{"keys": [...]}`). */
  Jwks: { keys: JsonWebKey[] };
  /** A JWKS fetched once at Start; its origin must be in the step's `egress`. */
  JwksUrl: string;
  /** Accepted `alg` values. */
  Algorithms: string[];
  /** For HS256/384/512: the name of the `secretRefs` entry holding the shared secret. */
  HmacSecret: string;
  /** Leeway for `exp` and `nbf`, in seconds. */
  ClockSkewSeconds: number;
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

/** base64url (no padding) → bytes; throws on anything else. */
function fromBase64Url(text: string): Uint8Array {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new Error('not base64url');
  const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4));
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

function denied(description: string): AuthorizationResponse {
  // RFC 6750: 401 with the reason in WWW-Authenticate; the body stays empty.
  return DeniedResponse(401, { 'www-authenticate': `Bearer error="invalid_token", error_description="${description}"` });
}

class JwtService implements AuthService {
  /** Imported keys by `kid|alg` (and `|alg` for keys without a kid). */
  private readonly keys = new Map<string, CryptoKey>();
  private readonly config: JwtConfig;

  constructor(config: JwtConfig) {
    this.config = config;
  }

  async Start(ctx: Context): Promise<void> {
    const jwks = [...this.config.Jwks.keys];
    if (this.config.JwksUrl) {
      const response = await fetch(this.config.JwksUrl, { headers: { accept: 'application/json' } });
      if (!response.ok) throw new Error(`JWKS ${this.config.JwksUrl} answered ${response.status}`);
      jwks.push(...(((await response.json()) as { keys?: JsonWebKey[] }).keys ?? []));
    }
    for (const jwk of jwks) await this.importJwk(jwk);
    if (this.config.HmacSecret) {
      const secret = ctx.secrets[this.config.HmacSecret];
      if (secret === undefined) throw new Error(`secretRefs has no ${this.config.HmacSecret} (config.HmacSecret)`);
      for (const alg of this.config.Algorithms.filter((a) => a.startsWith('HS'))) {
        this.keys.set(`|${alg}`, await crypto.subtle.importKey('raw', encoder.encode(secret), ALGORITHMS[alg]!.importAs, false, ['verify']));
      }
    }
    ctx.logger.info('JWT keys loaded', { keys: this.keys.size });
  }

  /** Imports a JWK for every accepted alg it can serve (its own `alg` only, when it names one). */
  private async importJwk(jwk: JsonWebKey): Promise<void> {
    const algs = jwk.alg ? [jwk.alg] : this.config.Algorithms;
    for (const alg of algs) {
      const params = ALGORITHMS[alg];
      if (!params || !this.config.Algorithms.includes(alg) || alg.startsWith('HS')) continue;
      try {
        const { key_ops: _ops, use: _use, ...clean } = jwk;
        this.keys.set(`${jwk.kid ?? ''}|${alg}`, await crypto.subtle.importKey('jwk', { ...clean, alg } as never, params.importAs, false, ['verify']));
      } catch {
        // The key does not fit this alg (an RSA key offered to ES256): not one of its keys.
      }
    }
  }

  async Authorize(_ctx: Context, request: AuthorizationRequest): Promise<AuthorizationResponse> {
    const header = request.CheckRequest.attributes.request.http.headers.authorization ?? '';
    const match = /^Bearer +([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]*)$/i.exec(header);
    if (!match) return DeniedResponse(401, { 'www-authenticate': 'Bearer' });
    const [, head, body, signature] = match as unknown as [string, string, string, string];
    let jose: { alg?: string; kid?: string };
    let claims: { iss?: string; aud?: string | string[]; exp?: number; nbf?: number; sub?: string };
    try {
      jose = JSON.parse(decoder.decode(fromBase64Url(head)));
      claims = JSON.parse(decoder.decode(fromBase64Url(body)));
    } catch {
      return denied('malformed token');
    }
    const alg = jose.alg ?? '';
    const params = ALGORITHMS[alg];
    if (!params || !this.config.Algorithms.includes(alg)) return denied('algorithm not accepted');
    const key = this.keys.get(`${jose.kid ?? ''}|${alg}`) ?? (jose.kid === undefined ? undefined : this.keys.get(`|${alg}`));
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
    if (typeof claims.exp === 'number' && now > claims.exp + skew) return denied('token expired');
    if (typeof claims.nbf === 'number' && now < claims.nbf - skew) return denied('token not yet valid');
    if (this.config.Issuer && claims.iss !== this.config.Issuer) return denied('wrong issuer');
    if (this.config.Audience && !(Array.isArray(claims.aud) ? claims.aud : [claims.aud]).includes(this.config.Audience)) return denied('wrong audience');
    const allowed = AuthorizedResponse();
    return typeof claims.sub === 'string' ? { ...allowed, UserInfo: { UserID: claims.sub } } : allowed;
  }
}

/** The reference JWT plugin; build with `gatehouse-plugin build src/index.ts --name Jwt`. */
export const Jwt: ExtAuthPlugin = {
  NewConfigInstance(): JwtConfig {
    return { Issuer: '', Audience: '', Jwks: { keys: [] }, JwksUrl: '', Algorithms: ['RS256', 'ES256', 'EdDSA'], HmacSecret: '', ClockSkewSeconds: 60 };
  },

  GetAuthService(_ctx, config) {
    const c = config as JwtConfig;
    const unknown = c.Algorithms.filter((alg) => !ALGORITHMS[alg]);
    if (unknown.length) throw new Error(`config.Algorithms: unknown ${unknown.join(', ')} (known: ${Object.keys(ALGORITHMS).join(', ')})`);
    if (c.Algorithms.some((alg) => alg.startsWith('HS')) && !c.HmacSecret) throw new Error('config.HmacSecret is required for HS* algorithms (a secretRefs name)');
    return new JwtService(c);
  },
};
