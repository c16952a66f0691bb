/**
 * JSON Web Key Sets for token verification with `jose`: a remote set fetched through the step's
 * bounded client, cached, refreshed on an interval, and re-fetched on an unknown `kid` only as
 * the refresh policy allows (Gloo's `jwksCacheRefreshPolicy`: never by default, always, or at most
 * N times per interval; at most one fetch a second), so tokens with made-up key ids cannot make us hammer the provider.
 */
import type { JSONWebKeySet, JWTVerifyGetKey } from 'jose';
import { jose } from '../../jwt/jose.ts';
import { GatehouseError } from '../../errors.ts';
import { OAuth2Codes } from './codes.ts';
import type { ProviderHttp } from './provider-http.ts';

/** On-demand refetches of the set when a token names an unknown key. */
export type JwksRefreshPolicy = { kind: 'never' } | { kind: 'always' } | { kind: 'max'; perInterval: number };

/** The keys of a JWKS document usable for signatures: with a `kid`, `use` absent or `sig` (Gloo's rule). */
export function signingKeys(document: unknown): JSONWebKeySet {
  const keys = (document as { keys?: unknown })?.keys;
  if (!Array.isArray(keys)) throw new Error('a JWKS must be an object with a "keys" array');
  const usable = keys.filter((k): k is JSONWebKeySet['keys'][number] => typeof k === 'object' && k !== null && typeof (k as { kid?: unknown }).kid === 'string' && ((k as { use?: unknown }).use === undefined || (k as { use?: unknown }).use === 'sig'));
  return { keys: usable };
}

/** A local (inline) JWKS as a jose key resolver; throws when the document is not a JWKS. */
export function localKeys(inline: string): JWTVerifyGetKey {
  return localSet(signingKeys(JSON.parse(inline)));
}

/** jose's resolver for `set`, made on the first token: jose (~15 MB resident) loads only when a token is verified. */
function localSet(set: JSONWebKeySet): JWTVerifyGetKey {
  let resolver: JWTVerifyGetKey | undefined;
  return async (header, token) => (resolver ??= (await jose()).createLocalJWKSet(set))(header, token);
}

/** A remote JWKS, cached. */
export class RemoteJwks {
  private keys: JWTVerifyGetKey | undefined;
  private fetchedAt = 0;
  private loading: Promise<JWTVerifyGetKey> | undefined;
  private intervalStart = 0;
  private onDemandInInterval = 0;
  private readonly http: ProviderHttp;
  private readonly url: () => Promise<string>;
  private readonly refreshMs: number;
  private readonly policy: JwksRefreshPolicy;

  /** `url`: where the set is (a discovered `jwks_uri` may change, so it is asked each fetch). */
  constructor(http: ProviderHttp, url: () => Promise<string>, refreshMs: number, policy: JwksRefreshPolicy) {
    this.http = http;
    this.url = url;
    this.refreshMs = refreshMs;
    this.policy = policy;
  }

  /** The jose key resolver (for `jwtVerify`). */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    const now = Date.now();
    let keys = this.keys;
    if (!keys) keys = await this.load();
    else if (now - this.fetchedAt > this.refreshMs) void this.load().catch(() => {});
    try {
      return await keys(header, token);
    } catch (error) {
      if (!(error instanceof (await jose()).errors.JWKSNoMatchingKey) || !this.mayFetchOnDemand(now)) throw error;
      return (await this.fetchOnDemand())(header, token);
    }
  };

  /**
   * A fetch for an unknown key: at most one a second. Checks that come sooner wait for the next
   * one (all of them share it), so a key rotated in just after a fetch is still found, and tokens
   * with made-up key ids cost the provider one request a second at most.
   */
  private fetchOnDemand(): Promise<JWTVerifyGetKey> {
    const wait = 1_000 - (Date.now() - this.fetchedAt);
    if (wait <= 0) return this.load();
    this.onDemand ??= new Promise<void>((resolve) => setTimeout(resolve, wait).unref()).then(() => {
      this.onDemand = undefined;
      return this.load();
    });
    return this.onDemand;
  }

  private onDemand: Promise<JWTVerifyGetKey> | undefined;

  private mayFetchOnDemand(now: number): boolean {
    if (this.policy.kind === 'never') return false;
    if (this.policy.kind === 'always') return true;
    if (now - this.intervalStart > this.refreshMs) {
      this.intervalStart = now;
      this.onDemandInInterval = 0;
    }
    return this.onDemandInInterval++ < this.policy.perInterval;
  }

  /** Fetches the set (one fetch at a time); the old keys stay in use when it fails. */
  load(): Promise<JWTVerifyGetKey> {
    this.loading ??= (async () => {
      try {
        const url = await this.url();
        const { value } = await this.http.json(url);
        let set: JSONWebKeySet;
        try {
          set = signingKeys(value);
        } catch (error) {
          throw new GatehouseError(OAuth2Codes.PROVIDER, `the JWKS at ${url} is unusable: ${(error as Error).message}`);
        }
        this.keys = localSet(set);
        this.fetchedAt = Date.now();
        return this.keys;
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }
}
