import {
  AuthorizedResponse,
  ClientAddress,
  DeniedResponse,
  UnauthorizedResponse,
  type AuthorizationRequest,
  type AuthorizationResponse,
  type AuthService,
  type Context,
  type ExtAuthPlugin,
} from '@gatehouse/plugin-sdk';
import { contains, formatIp, parseCidr, parseIp, type Cidr, type Ip } from './cidr.ts';

/** The step's `config`. */
export interface IpAllowlistConfig {
  /** Client ranges allowed, IPv4 and IPv6 (`10.0.0.0/8`, `2001:db8::/32`, or one address). At least one. */
  AllowedCidrs: string[];
  /**
   * Proxies in front of the gateway that append to `x-forwarded-for` and are trusted to: 0 (the
   * default) uses the connection's peer address and ignores the header; N uses the Nth address
   * from the right of `x-forwarded-for` (what the farthest trusted proxy saw). A header shorter
   * than N entries is denied.
   */
  TrustedProxyHops: number;
  /** Token bucket per client address; `RequestsPerSecond: 0` turns the rate limit off. */
  RateLimit: { RequestsPerSecond: number; Burst: number };
}

/** A client's bucket as kept in ctx.store: tokens left at time `at` (ms since the epoch). */
interface Bucket {
  tokens: number;
  at: number;
}

class IpAllowlistService implements AuthService {
  private readonly cidrs: readonly Cidr[];
  private readonly hops: number;
  private readonly rate: number;
  private readonly burst: number;

  constructor(cidrs: Cidr[], config: IpAllowlistConfig) {
    this.cidrs = cidrs;
    this.hops = config.TrustedProxyHops;
    this.rate = config.RateLimit.RequestsPerSecond;
    this.burst = config.RateLimit.Burst;
  }

  Start(): void {}

  /** The client's address: the peer's, or the one the trusted proxies recorded; undefined when it cannot be known. */
  private client(request: AuthorizationRequest): Ip | undefined {
    const check = request.CheckRequest;
    if (this.hops === 0) return parseIp(ClientAddress(check) ?? '');
    const forwarded = (check.attributes.request.http.headers['x-forwarded-for'] ?? '').split(',').map((entry) => entry.trim()).filter(Boolean);
    if (forwarded.length < this.hops) return undefined;
    return parseIp(forwarded[forwarded.length - this.hops]!);
  }

  async Authorize(ctx: Context, request: AuthorizationRequest): Promise<AuthorizationResponse> {
    const ip = this.client(request);
    if (!ip) {
      ctx.logger.warn('client address unknown: denied', { trustedProxyHops: this.hops });
      return UnauthorizedResponse();
    }
    const address = formatIp(ip);
    if (!this.cidrs.some((cidr) => contains(cidr, ip))) {
      ctx.logger.debug('address not allowed', { address });
      return UnauthorizedResponse();
    }
    if (this.rate > 0) {
      const wait = await this.take(ctx, address);
      if (wait > 0) return DeniedResponse(429, { 'retry-after': String(Math.ceil(wait / 1000)) });
    }
    return AuthorizedResponse({ 'x-client-ip': address });
  }

  /** Takes a token from the client's bucket: 0 when there was one, else the ms until there is. */
  private async take(ctx: Context, address: string): Promise<number> {
    const store = ctx.store;
    if (!store) throw new Error('IpAllowlist needs ctx.store for its rate limit');
    const key = `bucket:${address}`;
    const now = Date.now();
    const kept = (await store.get(key)) as Bucket | undefined;
    const elapsed = kept ? Math.max(0, now - kept.at) : Infinity;
    const tokens = Math.min(this.burst, (kept?.tokens ?? this.burst) + (elapsed * this.rate) / 1000);
    // A full bucket is the same as no entry: keep it only as long as it takes to refill.
    const ttlMs = Math.ceil((this.burst / this.rate) * 1000) + 1000;
    if (tokens < 1) {
      await store.set(key, { tokens, at: now } satisfies Bucket, { ttlMs });
      return ((1 - tokens) / this.rate) * 1000;
    }
    await store.set(key, { tokens: tokens - 1, at: now } satisfies Bucket, { ttlMs });
    return 0;
  }
}

/** The reference IP allow-list plugin; build with `gatehouse-plugin build src/index.ts --name IpAllowlist`. */
export const IpAllowlist: ExtAuthPlugin = {
  NewConfigInstance(): IpAllowlistConfig {
    return { AllowedCidrs: [], TrustedProxyHops: 0, RateLimit: { RequestsPerSecond: 0, Burst: 0 } };
  },

  GetAuthService(ctx, config) {
    const c = config as IpAllowlistConfig;
    if (c.AllowedCidrs.length === 0) throw new Error('config.AllowedCidrs is required: the client ranges to allow, e.g. ["10.0.0.0/8", "2001:db8::/32"]');
    const cidrs = c.AllowedCidrs.map((text, i) => {
      try {
        return parseCidr(String(text));
      } catch (error) {
        throw new Error(`config.AllowedCidrs[${i}]: ${(error as Error).message}`);
      }
    });
    if (!Number.isInteger(c.TrustedProxyHops) || c.TrustedProxyHops < 0 || c.TrustedProxyHops > 16) throw new Error('config.TrustedProxyHops must be a whole number from 0 to 16');
    const { RequestsPerSecond: rate, Burst: burst } = c.RateLimit;
    if (!(rate >= 0) || !Number.isFinite(rate)) throw new Error('config.RateLimit.RequestsPerSecond must be a number ≥ 0 (0: no rate limit)');
    if (rate > 0 && !(burst >= 1)) throw new Error('config.RateLimit.Burst must be at least 1 when RequestsPerSecond is set');
    ctx.logger.info('IpAllowlist configured', { ranges: cidrs.length, trustedProxyHops: c.TrustedProxyHops, requestsPerSecond: rate, burst });
    return new IpAllowlistService(cidrs, c);
  },
};
