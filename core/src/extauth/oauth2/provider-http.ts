/**
 * The HTTP client of the OAuth2 steps for everything they ask a provider (discovery, JWKS, token,
 * revocation, introspection, userinfo): a per-step undici Agent with `--resolve` support, a
 * deadline on every call and a bound on every answer, so a provider that hangs or streams
 * garbage costs a bounded socket and a clear error, never a stalled or crashed process.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIPv6 } from 'node:net';
import { Agent, request } from 'undici';
import { GatehouseError } from '../../errors.ts';
import { OAuth2Codes } from './codes.ts';

/** Deadline of one provider call (default). */
export const DEFAULT_PROVIDER_TIMEOUT_MS = 3_000;
/** Largest answer read from a provider. */
export const MAX_PROVIDER_ANSWER_BYTES = 512 * 1024;

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** Options of {@link ProviderHttp}. */
export interface ProviderHttpOptions {
  timeoutMs?: number;
  resolveHost?: ((host: string) => string | undefined) | undefined;
}

/** What a provider answered. */
export interface ProviderAnswer {
  status: number;
  body: string;
  contentType: string;
}

/** A bounded HTTP client for one step's provider calls. */
export class ProviderHttp {
  readonly timeoutMs: number;
  private readonly agent: Agent;

  constructor(options: ProviderHttpOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_PROVIDER_TIMEOUT_MS;
    const resolveHost = options.resolveHost;
    const lookup = resolveHost
      ? (hostname: string, opts: { all?: boolean }, callback: LookupCallback): void => {
          const address = resolveHost(hostname.toLowerCase());
          if (address === undefined) return void dnsLookup(hostname, opts as never, callback as never);
          const family = isIPv6(address) ? 6 : 4;
          if (opts.all) callback(null, [{ address, family }]);
          else callback(null, address, family);
        }
      : undefined;
    // Bounded: a hanging provider holds at most this many sockets of this step.
    this.agent = new Agent({ connections: 32, headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs, connect: { timeout: this.timeoutMs, ...(lookup ? { lookup } : {}) } });
  }

  /** GET or POST `url`; rejects with GH_OAUTH2_PROVIDER on a network failure, a timeout or an oversized answer. */
  async call(url: string, init: { method?: 'GET' | 'POST'; headers?: Record<string, string>; form?: Record<string, string> } = {}): Promise<ProviderAnswer> {
    const what = `${init.method ?? 'GET'} ${redactUrl(url)}`;
    try {
      const response = await request(url, {
        method: init.method ?? 'GET',
        headers: { accept: 'application/json', ...(init.form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}), ...init.headers },
        ...(init.form ? { body: new URLSearchParams(init.form).toString() } : {}),
        dispatcher: this.agent,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      const declared = Number(response.headers['content-length']);
      if (declared > MAX_PROVIDER_ANSWER_BYTES) {
        response.body.destroy();
        throw new Error(`answer of ${declared} bytes is larger than ${MAX_PROVIDER_ANSWER_BYTES}`);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of response.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_PROVIDER_ANSWER_BYTES) {
          response.body.destroy();
          throw new Error(`answer larger than ${MAX_PROVIDER_ANSWER_BYTES} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
      const type = response.headers['content-type'];
      return { status: response.statusCode, body: Buffer.concat(chunks).toString('utf8'), contentType: (Array.isArray(type) ? type[0] : type) ?? '' };
    } catch (error) {
      if (error instanceof GatehouseError) throw error;
      const reason = (error as Error).name === 'TimeoutError' || (error as Error).name === 'AbortError' ? `no answer within ${this.timeoutMs} ms` : (error as Error).message;
      throw new GatehouseError(OAuth2Codes.PROVIDER, `${what} failed: ${reason}`, { cause: error });
    }
  }

  /** {@link call}, expecting a JSON object with status 2xx (or `okStatuses`). */
  async json(url: string, init: Parameters<ProviderHttp['call']>[1] = {}, okStatuses: readonly number[] = []): Promise<{ status: number; value: Record<string, unknown> }> {
    const answer = await this.call(url, init);
    const what = `${init.method ?? 'GET'} ${redactUrl(url)}`;
    let value: unknown;
    try {
      value = JSON.parse(answer.body);
    } catch {
      throw new GatehouseError(OAuth2Codes.PROVIDER, `${what} answered ${answer.status} with a body that is not JSON (${JSON.stringify(answer.body.slice(0, 80))})`);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new GatehouseError(OAuth2Codes.PROVIDER, `${what} answered ${answer.status} with JSON that is not an object`);
    if ((answer.status < 200 || answer.status > 299) && !okStatuses.includes(answer.status)) {
      const error = typeof (value as { error?: unknown }).error === 'string' ? ` (${String((value as { error: string }).error).slice(0, 80)})` : '';
      throw new GatehouseError(OAuth2Codes.PROVIDER, `${what} answered ${answer.status}${error}`);
    }
    return { status: answer.status, value: value as Record<string, unknown> };
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => {});
  }
}

/** A URL as logged: no query (it may hold codes or tokens), no credentials. */
export function redactUrl(url: string): string {
  const parsed = URL.parse(url);
  return parsed ? `${parsed.origin}${parsed.pathname}` : '(bad URL)';
}
