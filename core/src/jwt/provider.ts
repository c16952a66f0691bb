import { LRUCache } from 'lru-cache';
import { durationMs } from '../config/schema/common.ts';
import type { Logger } from '../log/logger.ts';
import { field, fieldName } from './fields.ts';
import { parseKeySet, type KeySet } from './key-set.ts';
import { DEFAULT_CACHE_MS, RemoteJwks } from './remote-jwks.ts';

/** Gloo's default `clockSkewSeconds`. */
export const DEFAULT_CLOCK_SKEW_S = 60;

/** A header a provider reads its token from (`prefix` matched case-insensitively, as Envoy does for `Bearer `). */
export interface TokenHeader {
  readonly name: string;
  readonly prefix: string;
}

/** One `claimsToHeaders` entry. */
export interface ClaimHeader {
  readonly claim: string;
  readonly header: string;
  readonly append: boolean;
}

/** A provider compiled at load: everything the request path needs, looked up, never parsed. */
export interface CompiledProvider {
  readonly name: string;
  readonly issuer: string | undefined;
  /** Normalised (scheme and trailing slash dropped, as jwt_verify_lib compares them); empty: `aud` is not checked. */
  readonly audiences: ReadonlySet<string>;
  readonly headers: readonly TokenHeader[];
  readonly queryParams: readonly string[];
  readonly keepToken: boolean;
  readonly claimsToHeaders: readonly ClaimHeader[];
  readonly clockSkewS: number;
  /** Exactly one of `local` and `remote`. */
  readonly local: KeySet | undefined;
  readonly remote: RemoteJwks | undefined;
  /** Tokens this provider verified, with the key set that verified them (Envoy's jwt_cache_config, always on). */
  readonly verified: LRUCache<string, VerifiedToken>;
}

/** A verified token's claims (frozen), valid while its key set is the provider's current one. */
export interface VerifiedToken {
  readonly keys: KeySet;
  readonly payload: Readonly<Record<string, unknown>>;
}

/** Characters of tokens kept per provider (2 MiB: about a thousand typical tokens). */
const VERIFIED_CACHE_CHARS = 2 * 1024 * 1024;

/** Where to connect for an `upstreamRef` (the Upstream's first static host), or undefined to dial the URL's own host. */
export type UpstreamOrigin = (ref: { name: string; namespace?: string | undefined }) => string | undefined;

/** A problem at a path under the provider. */
export interface ProviderProblem {
  readonly path: (string | number)[];
  readonly message: string;
  readonly severity: 'error' | 'warning';
}

/** Envoy's default token location when a provider names none: `Authorization: Bearer <token>`, then `?access_token=`. */
const DEFAULT_HEADERS: readonly TokenHeader[] = [{ name: 'authorization', prefix: 'Bearer ' }];
const DEFAULT_PARAMS: readonly string[] = ['access_token'];

/** jwt_verify_lib compares audiences without scheme and trailing slash. */
export function normalizeAudience(aud: string): string {
  let out = aud;
  if (out.startsWith('http://')) out = out.slice(7);
  else if (out.startsWith('https://')) out = out.slice(8);
  return out.endsWith('/') ? out.slice(0, -1) : out;
}

/** Load-time problems of one provider spec (bad JWKS JSON, bad PEM, bad URL, both or neither JWKS source). */
export function providerProblems(spec: Record<string, unknown>): ProviderProblem[] {
  const out: ProviderProblem[] = [];
  const jwks = spec.jwks as { remote?: Record<string, unknown>; local?: { key?: string } } | undefined;
  if (!jwks || (jwks.remote === undefined) === (jwks.local === undefined)) {
    out.push({ path: ['jwks'], message: 'needs exactly one of "remote" and "local"', severity: 'error' });
  } else if (jwks.local) {
    const parsed = parseKeySet(jwks.local.key ?? '');
    if ('error' in parsed) out.push({ path: ['jwks', 'local', 'key'], message: parsed.error, severity: 'error' });
    else for (const skipped of parsed.skipped) out.push({ path: ['jwks', 'local', 'key'], message: `key skipped: ${skipped}`, severity: 'warning' });
  } else if (jwks.remote) {
    const url = typeof jwks.remote.url === 'string' ? URL.parse(jwks.remote.url) : null;
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password) {
      out.push({ path: ['jwks', 'remote', 'url'], message: 'must be an absolute http(s) URL without credentials (the JWKS location; with upstreamRef, its path and Host)', severity: 'error' });
    }
  }
  // attachFailedStatusToMetadata is marked Ignored in the schema: the store warns when it is set.
  (field<{ header: string }[]>(spec, 'claimsToHeaders') ?? []).forEach((c, i) => {
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(c.header)) out.push({ path: [fieldName(spec, 'claimsToHeaders'), i, 'header'], message: 'is not a valid HTTP header name', severity: 'error' });
  });
  const source = field<Record<string, unknown>>(spec, 'tokenSource');
  ((source?.headers as { header: string }[] | undefined) ?? []).forEach((h, i) => {
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(h.header)) out.push({ path: [fieldName(spec, 'tokenSource'), 'headers', i, 'header'], message: 'is not a valid HTTP header name', severity: 'error' });
  });
  return out;
}

/** Remote JWKS shared across routes and reloads, by dial origin, URL and cache duration. */
const remotes = new LRUCache<string, RemoteJwks>({ max: 512, dispose: (remote) => remote.stop() });

/** The shared {@link RemoteJwks} for these settings (created on first use). */
export function sharedRemoteJwks(url: string, dialOrigin: string | undefined, cacheMs: number, logger: Logger | undefined): RemoteJwks {
  const key = `${dialOrigin ?? ''} ${url} ${cacheMs}`;
  let remote = remotes.get(key);
  if (!remote) {
    remote = new RemoteJwks({ url, dialOrigin, cacheMs, logger });
    remotes.set(key, remote);
  }
  return remote;
}

/** Compiles a provider spec that passed {@link providerProblems}. */
export function compileProvider(name: string, spec: Record<string, unknown>, options: { upstreamOrigin?: UpstreamOrigin | undefined; logger?: Logger | undefined } = {}): CompiledProvider {
  const jwks = spec.jwks as { remote?: Record<string, unknown>; local?: { key: string } };
  let local: KeySet | undefined;
  let remote: RemoteJwks | undefined;
  if (jwks.local) {
    const parsed = parseKeySet(jwks.local.key);
    if ('error' in parsed) throw new Error(`jwks.local.key: ${parsed.error}`);
    local = parsed.keys;
  } else {
    const r = jwks.remote!;
    const ref = field<{ name: string; namespace?: string }>(r, 'upstreamRef');
    const cache = field<string>(r, 'cacheDuration');
    remote = sharedRemoteJwks(String(r.url), ref ? options.upstreamOrigin?.(ref) : undefined, cache ? durationMs(cache) : DEFAULT_CACHE_MS, options.logger);
    if (field(r, 'asyncFetch') !== undefined) remote.startBackground();
  }
  const source = field<Record<string, unknown>>(spec, 'tokenSource');
  const headers = ((source?.headers as { header: string; prefix?: string }[] | undefined) ?? []).map((h) => ({ name: h.header.toLowerCase(), prefix: h.prefix ?? '' }));
  const queryParams = field<string[]>(source, 'queryParams') ?? [];
  const useDefault = headers.length === 0 && queryParams.length === 0;
  return {
    name,
    issuer: typeof spec.issuer === 'string' && spec.issuer !== '' ? spec.issuer : undefined,
    audiences: new Set(((spec.audiences as string[] | undefined) ?? []).map(normalizeAudience)),
    headers: useDefault ? DEFAULT_HEADERS : headers,
    queryParams: useDefault ? DEFAULT_PARAMS : queryParams,
    keepToken: field<boolean>(spec, 'keepToken') === true,
    claimsToHeaders: (field<{ claim: string; header: string; append?: boolean }[]>(spec, 'claimsToHeaders') ?? []).map((c) => ({ claim: c.claim, header: c.header.toLowerCase(), append: c.append === true })),
    clockSkewS: field<number>(spec, 'clockSkewSeconds') ?? DEFAULT_CLOCK_SKEW_S,
    local,
    remote,
    verified: new LRUCache<string, VerifiedToken>({ maxSize: VERIFIED_CACHE_CHARS, sizeCalculation: (_value, token) => token.length }),
  };
}
