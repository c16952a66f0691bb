import {
  AuthorizedResponse,
  ClientAddress,
  DeniedResponse,
  type AuthorizationRequest,
  type AuthorizationResponse,
  type AuthService,
  type Context,
  type ExtAuthPlugin,
} from '@gatehouse/plugin-sdk';

/** What a request is counted by: exactly one of these. */
export interface RateLimitKey {
  /** A request header's value (an API key, a tenant id). */
  Header: string;
  /** The client's address: the CheckRequest's source address; with `TrustedProxyHops` N, the Nth entry from the right of `x-forwarded-for`. */
  ClientIp: { TrustedProxyHops?: number } | null;
  /**
   * A claim of the request's JWT: from `State.claims` when an earlier step left them there, else
   * from the payload of the `Authorization: Bearer` token, which this plugin does NOT verify: put
   * it after a step that does (the JWT plugin), so an unverified token never reaches it.
   */
  JwtClaim: string;
}

/** The step's `config`. */
export interface RateLimitConfig {
  /** Requests allowed per window and key (at least 1). */
  RequestsPerUnit: number;
  /** The fixed window: `second`, `minute`, `hour` or `day` (aligned to the epoch, as Envoy's ratelimit service). */
  Unit: string;
  Key: RateLimitKey;
  /** A request without the key (no header, no claim): `deny` (403, the default) or `allow` (not counted). */
  MissingKey: string;
  /** Send `X-RateLimit-Limit/Remaining/Reset` on allowed responses too (default true; denials always carry them). */
  HeadersOnAllowed: boolean;
}

const UNITS: Record<string, number> = { second: 1000, minute: 60_000, hour: 3_600_000, day: 86_400_000 };

/** Key values longer than this are counted by their SHA-256 (store keys stay bounded). */
const MAX_PLAIN_KEY = 128;

class RateLimitService implements AuthService {
  private readonly limit: number;
  private readonly windowMs: number;
  private readonly key: RateLimitKey;
  private readonly allowMissing: boolean;
  private readonly headersOnAllowed: boolean;

  constructor(config: RateLimitConfig) {
    this.limit = config.RequestsPerUnit;
    this.windowMs = UNITS[config.Unit]!;
    this.key = config.Key;
    this.allowMissing = config.MissingKey === 'allow';
    this.headersOnAllowed = config.HeadersOnAllowed;
  }

  Start(ctx: Context): void {
    if (!ctx.store) throw new Error('RateLimit needs ctx.store');
  }

  async Authorize(ctx: Context, request: AuthorizationRequest): Promise<AuthorizationResponse> {
    const value = this.keyOf(request);
    if (value === undefined) return this.allowMissing ? AuthorizedResponse() : DeniedResponse(403);
    const now = Date.now();
    const window = Math.floor(now / this.windowMs);
    const id = value.length > MAX_PLAIN_KEY ? `sha256:${await sha256(value)}` : value;
    // One atomic increment per request, shared by every process that shares the store (Redis:
    // every replica): the count is exact, and the counter expires with its window.
    const count = await ctx.store!.increment(`rl:${window}:${id}`, 1, { ttlMs: this.windowMs + 1000 });
    const resetSeconds = Math.max(1, Math.ceil(((window + 1) * this.windowMs - now) / 1000));
    const headers = {
      'x-ratelimit-limit': String(this.limit),
      'x-ratelimit-remaining': String(Math.max(0, this.limit - count)),
      'x-ratelimit-reset': String(resetSeconds),
    };
    if (count > this.limit) return DeniedResponse(429, { ...headers, 'retry-after': String(resetSeconds) });
    return this.headersOnAllowed ? AuthorizedResponse(undefined, headers) : AuthorizedResponse();
  }

  /** The value this request is counted by, or undefined when it has none. */
  private keyOf(request: AuthorizationRequest): string | undefined {
    const check = request.CheckRequest;
    const headers = check.attributes.request.http.headers;
    if (this.key.Header) {
      const value = headers[this.key.Header.toLowerCase()];
      return value ? `h:${value}` : undefined;
    }
    if (this.key.ClientIp) {
      const hops = this.key.ClientIp.TrustedProxyHops ?? 0;
      if (hops === 0) {
        const address = ClientAddress(check);
        return address ? `ip:${address}` : undefined;
      }
      // x-forwarded-for as received is a client's claim: only the entries the trusted proxies added count.
      const forwarded = (headers['x-forwarded-for'] ?? '').split(',').map((entry) => entry.trim()).filter(Boolean);
      return forwarded.length >= hops ? `ip:${forwarded[forwarded.length - hops]}` : undefined;
    }
    const claims = request.State.claims;
    let claim: unknown = typeof claims === 'object' && claims !== null ? (claims as Record<string, unknown>)[this.key.JwtClaim] : undefined;
    if (claim === undefined) claim = bearerClaims(headers.authorization)?.[this.key.JwtClaim];
    return typeof claim === 'string' || typeof claim === 'number' ? `c:${claim}` : undefined;
  }
}

/** The payload of a `Bearer` JWT, unverified (see {@link RateLimitKey.JwtClaim}), or undefined. */
function bearerClaims(authorization: string | undefined): Record<string, unknown> | undefined {
  const match = /^Bearer\s+([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]*)$/i.exec(authorization ?? '');
  if (!match || match[2]!.length > 16_384) return undefined;
  try {
    const base64 = match[2]!.replace(/-/g, '+').replace(/_/g, '/');
    const payload = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(base64 + '='.repeat((4 - (base64.length % 4)) % 4)), (c) => c.charCodeAt(0)))) as unknown;
    return typeof payload === 'object' && payload !== null && !Array.isArray(payload) ? (payload as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

async function sha256(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The exported plugin (`pluginAuth.name: RateLimit`). */
export const RateLimit: ExtAuthPlugin = {
  NewConfigInstance: (): RateLimitConfig => ({ RequestsPerUnit: 0, Unit: 'minute', Key: { Header: '', ClientIp: null, JwtClaim: '' }, MissingKey: 'deny', HeadersOnAllowed: true }),
  GetAuthService(_ctx: Context, raw: unknown): AuthService {
    const config = raw as RateLimitConfig;
    if (!Number.isSafeInteger(config.RequestsPerUnit) || config.RequestsPerUnit < 1) throw new Error(`RequestsPerUnit must be a whole number ≥ 1, got ${JSON.stringify(config.RequestsPerUnit)}`);
    if (!(config.Unit in UNITS)) throw new Error(`Unit must be one of ${Object.keys(UNITS).join(', ')}, got ${JSON.stringify(config.Unit)}`);
    const key = config.Key;
    const chosen = [key.Header !== '', key.ClientIp !== null && key.ClientIp !== undefined, key.JwtClaim !== ''].filter(Boolean).length;
    if (chosen !== 1) throw new Error('Key must set exactly one of Header, ClientIp, JwtClaim');
    if (key.ClientIp && key.ClientIp.TrustedProxyHops !== undefined && (!Number.isSafeInteger(key.ClientIp.TrustedProxyHops) || key.ClientIp.TrustedProxyHops < 0)) throw new Error('Key.ClientIp.TrustedProxyHops must be a whole number ≥ 0');
    if (config.MissingKey !== 'deny' && config.MissingKey !== 'allow') throw new Error(`MissingKey must be deny or allow, got ${JSON.stringify(config.MissingKey)}`);
    return new RateLimitService(config);
  },
};
