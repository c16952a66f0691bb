import { Agent, request } from 'undici';
import type { Logger } from '../log/logger.ts';
import { JwtCodes } from './codes.ts';
import { parseKeySet, type KeySet } from './key-set.ts';

/** Gloo's default `cacheDuration`: 5 minutes. */
export const DEFAULT_CACHE_MS = 300_000;

/** How a remote JWKS is fetched and kept. */
export interface RemoteJwksOptions {
  /** The JWKS URL (its path, query and Host are sent). */
  readonly url: string;
  /** Where to connect instead of the URL's host (`upstreamRef`: the Upstream's first host), e.g. `http://127.0.0.1:8080`. */
  readonly dialOrigin?: string | undefined;
  readonly cacheMs?: number;
  /** Deadline of one fetch, connect to last byte (default 3 s): a request waiting on a fetch waits at most this long. */
  readonly timeoutMs?: number;
  /** Largest JWKS body accepted (default 1 MiB); a larger answer is a failed fetch. */
  readonly maxBytes?: number;
  /** At most one refetch for a token whose kid is unknown per this interval (default 5 s). */
  readonly unknownKidIntervalMs?: number;
  /** After a failed fetch, requests do not start another one for this long (default 1 s). */
  readonly failureBackoffMs?: number;
  readonly logger?: Logger | undefined;
}

/**
 * One remote JWKS, shared by every route and provider that names the same URL, dial origin and
 * cache duration (so a config reload keeps the warm cache). Requests wait for a fetch only
 * when nothing usable is cached; a fetch is bounded in time and size, concurrent callers share
 * it, and a failure never throws on the request path: the last good keys keep serving.
 */
export class RemoteJwks {
  readonly options: Required<Omit<RemoteJwksOptions, 'dialOrigin' | 'logger'>> & Pick<RemoteJwksOptions, 'dialOrigin' | 'logger'>;
  private keys: KeySet | undefined;
  private expiresAt = 0;
  private inFlight: Promise<KeySet | undefined> | undefined;
  private failedAt = -Infinity;
  private lastUnknownKidFetch = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  /** With TLS to an Upstream's address: SNI and certificate name are the URL's host, not the address dialled. */
  private agent: Agent | undefined;
  /** Completed fetches (for tests and metrics). */
  fetches = 0;

  constructor(options: RemoteJwksOptions) {
    this.options = {
      cacheMs: DEFAULT_CACHE_MS,
      timeoutMs: 3000,
      maxBytes: 1_048_576,
      unknownKidIntervalMs: 5000,
      failureBackoffMs: 1000,
      ...options,
    };
  }

  /** The cached keys, fresh or stale, without fetching. */
  cached(): KeySet | undefined {
    return this.keys;
  }

  /** The cached keys while fresh (no fetch). */
  fresh(): KeySet | undefined {
    return this.keys && performance.now() < this.expiresAt ? this.keys : undefined;
  }

  /** Keys to verify with: cached ones while fresh; otherwise a fetch (stale keys are used if it fails). */
  get(): KeySet | Promise<KeySet | undefined> | undefined {
    if (this.keys && performance.now() < this.expiresAt) return this.keys;
    if (performance.now() - this.failedAt < this.options.failureBackoffMs) return this.keys;
    return this.fetch();
  }

  /**
   * A token names a kid the cached keys lack (the issuer rotated its key): refetch at once,
   * at most once per `unknownKidIntervalMs`, so tokens with made-up kids cannot drive fetches.
   */
  refreshForUnknownKid(): Promise<KeySet | undefined> | undefined {
    if (this.inFlight) return this.inFlight;
    const now = performance.now();
    if (now - this.lastUnknownKidFetch < this.options.unknownKidIntervalMs) return undefined;
    this.lastUnknownKidFetch = now;
    return this.fetch();
  }

  /** `asyncFetch`: fetch now and refresh before expiry in the background, so requests never wait. */
  startBackground(): void {
    if (this.timer !== undefined) return;
    const tick = () => {
      void this.fetch().finally(() => {
        const delay = this.keys ? Math.max(1000, this.options.cacheMs * 0.9) : Math.max(1000, this.options.failureBackoffMs);
        this.timer = setTimeout(tick, delay).unref();
      });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    void this.agent?.close();
    this.agent = undefined;
  }

  private fetch(): Promise<KeySet | undefined> {
    this.inFlight ??= this.load().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async load(): Promise<KeySet | undefined> {
    try {
      const keys = await this.download();
      this.keys = keys;
      this.expiresAt = performance.now() + this.options.cacheMs;
      this.fetches++;
      return keys;
    } catch (error) {
      this.failedAt = performance.now();
      this.fetches++;
      this.options.logger?.warn({ code: JwtCodes.JWKS_UNAVAILABLE, url: this.options.url, stale: this.keys !== undefined }, `JWKS fetch failed: ${(error as Error).message}`);
      return this.keys;
    }
  }

  private async download(): Promise<KeySet> {
    const target = new URL(this.options.url);
    const origin = this.options.dialOrigin ?? target.origin;
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    if (this.options.dialOrigin?.startsWith('https:')) this.agent ??= new Agent({ connect: { servername: target.hostname } });
    const response = await request(new URL(target.pathname + target.search, origin), {
      method: 'GET',
      headers: { host: target.host, accept: 'application/json' },
      signal,
      ...(this.agent ? { dispatcher: this.agent } : {}),
    });
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      if (response.statusCode !== 200) throw new Error(`answered ${response.statusCode}`);
      const declared = Number(response.headers['content-length']);
      if (declared > this.options.maxBytes) throw new Error(`answered ${declared} bytes, more than ${this.options.maxBytes}`);
      for await (const chunk of response.body) {
        size += (chunk as Buffer).length;
        if (size > this.options.maxBytes) throw new Error(`answered more than ${this.options.maxBytes} bytes`);
        chunks.push(chunk as Buffer);
      }
    } catch (error) {
      // Destroying an unfinished body emits an abort error: handled here, never uncaught.
      response.body.on('error', () => undefined);
      response.body.destroy();
      throw error;
    }
    const parsed = parseKeySet(Buffer.concat(chunks).toString('utf8'));
    if ('error' in parsed) throw new Error(`not a usable JWKS: ${parsed.error}`);
    return parsed.keys;
  }
}
