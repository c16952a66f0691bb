/**
 * OpenID Provider metadata (OpenID Connect Discovery 1.0 §4) from `<issuerUrl>/.well-known/openid-configuration`,
 * with Gloo's `discoveryOverride` applied over it; cached, refreshed every `discoveryPollInterval`
 * (Gloo's default 30 min) in the background, one fetch at a time. A failed fetch keeps the last
 * good metadata; with none yet, the caller fails closed.
 */
import { GatehouseError } from '../../errors.ts';
import { OAuth2Codes } from './codes.ts';
import type { ProviderHttp } from './provider-http.ts';

/** The provider metadata the steps use. */
export interface ProviderMetadata {
  readonly issuer: string;
  readonly authorizationEndpoint: string;
  readonly tokenEndpoint: string;
  readonly jwksUri: string;
  readonly endSessionEndpoint?: string | undefined;
  readonly revocationEndpoint?: string | undefined;
  readonly tokenAuthMethods: readonly string[];
}

/** Gloo's DiscoveryOverride fields Gatehouse uses. */
export interface DiscoveryOverrides {
  authEndpoint?: string | undefined;
  tokenEndpoint?: string | undefined;
  jwksUri?: string | undefined;
  revocationEndpoint?: string | undefined;
  endSessionEndpoint?: string | undefined;
  authMethods?: readonly string[] | undefined;
}

/** A failed fetch is not repeated for this long (every request would otherwise ask a dead provider). */
const RETRY_AFTER_FAILURE_MS = 1_000;

function httpUrl(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const url = URL.parse(value);
  return url && (url.protocol === 'http:' || url.protocol === 'https:') && !url.username && !url.password ? value : undefined;
}

/** The issuer without trailing slashes (Dex's guide writes `issuerUrl` with one, Dex's `issuer` has none). */
export function normalizeIssuer(issuer: string): string {
  return issuer.replace(/\/+$/, '');
}

/** Provider metadata, discovered and cached. */
export class Discovery {
  private current: ProviderMetadata | undefined;
  private fetchedAt = 0;
  private failedAt = 0;
  private failure: GatehouseError | undefined;
  private loading: Promise<ProviderMetadata> | undefined;
  private readonly http: ProviderHttp;
  private readonly issuerUrl: string;
  private readonly overrides: DiscoveryOverrides;
  private readonly pollMs: number;

  constructor(http: ProviderHttp, issuerUrl: string, overrides: DiscoveryOverrides, pollMs: number) {
    this.http = http;
    this.issuerUrl = issuerUrl;
    this.overrides = overrides;
    this.pollMs = pollMs;
  }

  /** The metadata: cached (refreshed in the background when older than the poll interval), or fetched now. */
  get(): Promise<ProviderMetadata> {
    const now = Date.now();
    if (this.current) {
      if (now - this.fetchedAt > this.pollMs && now - this.failedAt > RETRY_AFTER_FAILURE_MS) void this.load().catch(() => {});
      return Promise.resolve(this.current);
    }
    if (this.failure && now - this.failedAt < RETRY_AFTER_FAILURE_MS) return Promise.reject(this.failure);
    return this.load();
  }

  /** Fetches now (coalesced with a fetch in flight). */
  load(): Promise<ProviderMetadata> {
    this.loading ??= this.fetch().then(
      (metadata) => {
        this.current = metadata;
        this.fetchedAt = Date.now();
        this.failure = undefined;
        this.loading = undefined;
        return metadata;
      },
      (error: unknown) => {
        this.failedAt = Date.now();
        this.failure = error instanceof GatehouseError ? error : new GatehouseError(OAuth2Codes.PROVIDER, (error as Error).message);
        this.loading = undefined;
        throw this.failure;
      },
    );
    return this.loading;
  }

  private async fetch(): Promise<ProviderMetadata> {
    const url = `${normalizeIssuer(this.issuerUrl)}/.well-known/openid-configuration`;
    const { value } = await this.http.json(url);
    const o = this.overrides;
    const issuer = typeof value.issuer === 'string' ? value.issuer : '';
    // OpenID Connect Discovery §4.3: the issuer must be the one asked (trailing slashes aside).
    if (normalizeIssuer(issuer) !== normalizeIssuer(this.issuerUrl)) throw new GatehouseError(OAuth2Codes.PROVIDER, `discovery at ${url} names issuer ${JSON.stringify(issuer.slice(0, 200))}, not ${JSON.stringify(this.issuerUrl)}`);
    const pick = (override: string | undefined, field: string, required: boolean): string | undefined => {
      const chosen = override || httpUrl(value[field]);
      if (required && !chosen) throw new GatehouseError(OAuth2Codes.PROVIDER, `discovery at ${url} has no usable ${field}`);
      return chosen;
    };
    const methods = Array.isArray(value.token_endpoint_auth_methods_supported) ? value.token_endpoint_auth_methods_supported.filter((m): m is string => typeof m === 'string') : ['client_secret_basic'];
    return {
      issuer,
      authorizationEndpoint: pick(o.authEndpoint, 'authorization_endpoint', true)!,
      tokenEndpoint: pick(o.tokenEndpoint, 'token_endpoint', true)!,
      jwksUri: pick(o.jwksUri, 'jwks_uri', true)!,
      endSessionEndpoint: pick(o.endSessionEndpoint, 'end_session_endpoint', false),
      revocationEndpoint: pick(o.revocationEndpoint, 'revocation_endpoint', false),
      tokenAuthMethods: o.authMethods?.length ? o.authMethods : methods,
    };
  }
}
