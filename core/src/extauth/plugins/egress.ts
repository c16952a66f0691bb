import { fetch as undiciFetch, type Dispatcher } from 'undici';
import type { HostAnswer } from '@gatehouse/plugin-sdk/runtime';

/**
 * Where a plugin step may `fetch` (SPEC 5.3 "Egress"), built from `pluginAuth.egress`: URL
 * origins as written, and Upstreams under their virtual origin `http://<name>.<namespace>.upstream`,
 * which the host sends to the Upstream's hosts (the plugin never needs their addresses).
 */
export interface EgressRule {
  /** The origin a plugin writes, e.g. `https://idp.example.com` or `http://keys.default.upstream`. */
  origin: string;
  /** For an Upstream: where requests really go (round robin over its hosts). */
  upstream?: { hosts: { addr: string; port: number }[]; useTls: boolean };
}

/** The limits of a step's egress (SPEC 5.3); every one is configurable. */
export interface EgressLimits {
  /** Longest one fetch may take, headers and body (the call's wall deadline). */
  timeoutMs: number;
  /** Largest response body a plugin may receive; more fails the fetch. Default 1 MiB. */
  maxResponseBytes: number;
  /** Largest request body a plugin may send. Default 1 MiB. */
  maxRequestBytes: number;
  /** Redirects followed at most (each only to an allowed origin). */
  maxRedirects: number;
}

export const DEFAULT_EGRESS_LIMITS: EgressLimits = { timeoutMs: 1000, maxResponseBytes: 1024 * 1024, maxRequestBytes: 1024 * 1024, maxRedirects: 5 };

/** Headers the host sets itself: a plugin's values are dropped. */
const HOST_HEADERS = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive', 'upgrade', 'te', 'trailer', 'proxy-connection', 'expect']);
const METHODS = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}$/;

/** The virtual origin of an Upstream for plugin fetches. */
export function upstreamOrigin(name: string, namespace: string): string {
  return `http://${name}.${namespace}.upstream`.toLowerCase();
}

function typeError(message: string): HostAnswer {
  return { error: { name: 'TypeError', message } };
}

/** A request as the sandbox's fetch hands it over: untrusted until checked here. */
interface RequestParts {
  url: string;
  method: string;
  headers: [string, string][];
  body: Uint8Array | null;
  redirect: 'follow' | 'manual' | 'error';
}

function requestPartsOf(value: unknown, maxBody: number): RequestParts | string {
  if (typeof value !== 'object' || value === null) return 'fetch: expected a request';
  const { url, method, headers, body, redirect } = value as Record<string, unknown>;
  if (typeof url !== 'string' || url.length > 16_384) return 'fetch: the URL must be a string of at most 16384 characters';
  if (typeof method !== 'string' || !METHODS.test(method)) return `fetch: invalid method`;
  if (!Array.isArray(headers) || headers.length > 256) return 'fetch: at most 256 request headers';
  const pairs: [string, string][] = [];
  let size = 0;
  for (const pair of headers) {
    if (!Array.isArray(pair) || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') return 'fetch: headers must be name/value string pairs';
    size += pair[0].length + pair[1].length;
    pairs.push([pair[0], pair[1]]);
  }
  if (size > 65_536) return 'fetch: request headers larger than 64 KiB';
  if (body !== null && body !== undefined && !(body instanceof Uint8Array)) return 'fetch: the body must be bytes';
  if (body && body.byteLength > maxBody) return `fetch: request body larger than ${maxBody} bytes`;
  const mode = redirect === 'manual' || redirect === 'error' ? redirect : 'follow';
  return { url, method, headers: pairs, body: body ?? null, redirect: mode };
}

/** A step's egress: checks each fetch against the rules and sends it with the limits. */
export class Egress {
  readonly origins: readonly string[];
  private readonly rules: ReadonlyMap<string, EgressRule>;
  private readonly limits: EgressLimits;
  private readonly dispatcher: Dispatcher | undefined;
  private turn = 0;

  constructor(rules: readonly EgressRule[], limits: Partial<EgressLimits> = {}, dispatcher?: Dispatcher) {
    this.rules = new Map(rules.map((rule) => [rule.origin, rule]));
    this.origins = [...this.rules.keys()].sort();
    this.limits = { ...DEFAULT_EGRESS_LIMITS, ...limits };
    this.dispatcher = dispatcher;
  }

  /** The TypeError a refused origin gets: it names what is allowed, so the fix is obvious. */
  private refused(origin: string): HostAnswer {
    const allowed = this.origins.length ? `this step may fetch only ${this.origins.join(', ')}` : 'this step declares no egress (pluginAuth.egress)';
    return typeError(`fetch to ${origin} is not allowed: ${allowed}`);
  }

  /** Where a URL really goes, or undefined when its origin is not allowed. */
  private target(url: URL): URL | undefined {
    const rule = this.rules.get(url.origin.toLowerCase());
    if (!rule) return undefined;
    if (!rule.upstream) return url;
    const hosts = rule.upstream.hosts;
    const host = hosts[this.turn++ % hosts.length]!;
    // The path and query are set on the Upstream's URL, never resolved against it: resolving
    // `//127.0.0.1:22015/x` (or `/.//HOST/`, `/\\HOST/`, which normalise to it) is a
    // scheme-relative reference that replaces the authority (issue 24 finding 4). A setter keeps
    // the authority whatever the path holds; the check after it says so once more.
    const real = new URL(`${rule.upstream.useTls ? 'https' : 'http'}://${host.addr.includes(':') ? `[${host.addr}]` : host.addr}:${host.port}/`);
    const authority = real.host;
    real.pathname = url.pathname;
    real.search = url.search;
    return real.host === authority ? real : undefined;
  }

  /** Runs one fetch for the sandbox; never throws (failures are answers the runtime rethrows). */
  async fetch(value: unknown, cancel: AbortSignal): Promise<HostAnswer> {
    const parts = requestPartsOf(value, this.limits.maxRequestBytes);
    if (typeof parts === 'string') return typeError(parts);
    let url = URL.parse(parts.url);
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) return typeError(`fetch: ${JSON.stringify(parts.url.slice(0, 200))} is not an absolute http(s) URL`);
    const signal = AbortSignal.any([cancel, AbortSignal.timeout(this.limits.timeoutMs)]);
    const headers = parts.headers.filter(([name]) => !HOST_HEADERS.has(name.toLowerCase()));
    let method = parts.method;
    let body = parts.body;
    for (let redirects = 0; ; redirects++) {
      const target = this.target(url);
      if (!target) return this.refused(url.origin);
      let response: Awaited<ReturnType<typeof undiciFetch>>;
      try {
        response = await undiciFetch(target, {
          method,
          headers,
          ...(body ? { body } : {}),
          redirect: 'manual',
          signal,
          ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}),
        });
      } catch (error) {
        return typeError(signal.aborted ? (cancel.aborted ? 'fetch: cancelled (the call ended)' : `fetch: no response within ${this.limits.timeoutMs} ms`) : `fetch failed: ${describe(error)}`);
      }
      const location = response.headers.get('location');
      if (response.status >= 300 && response.status < 400 && location !== null && parts.redirect !== 'manual') {
        await response.body?.cancel().catch(() => undefined);
        if (parts.redirect === 'error') return typeError(`fetch: redirected to ${location} with redirect: "error"`);
        if (redirects >= this.limits.maxRedirects) return typeError(`fetch: more than ${this.limits.maxRedirects} redirects`);
        const next = URL.parse(location, url.href);
        if (!next || (next.protocol !== 'http:' && next.protocol !== 'https:')) return typeError(`fetch: redirected to an invalid URL`);
        if (!this.rules.has(next.origin.toLowerCase())) return typeError(`fetch: redirected to ${next.origin}, which is not allowed (${this.origins.join(', ') || 'no egress'})`);
        // Fetch's rules: 303 (and 301/302 for POST) turn into a GET without a body.
        if (response.status === 303 || ((response.status === 301 || response.status === 302) && method.toUpperCase() === 'POST')) {
          if (method.toUpperCase() !== 'HEAD') method = 'GET';
          body = null;
        }
        url = next;
        continue;
      }
      const read = await readLimited(response, this.limits.maxResponseBytes, signal);
      if (typeof read === 'string') return typeError(read);
      return {
        value: {
          status: response.status,
          statusText: response.statusText,
          headers: [...response.headers],
          body: read,
          url: url.href,
          redirected: redirects > 0,
        },
      };
    }
  }
}

/** The whole body, or a message when it is larger than `max` or fails. */
async function readLimited(response: Response | Awaited<ReturnType<typeof undiciFetch>>, max: number, signal: AbortSignal): Promise<Uint8Array | string> {
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > max) {
    await response.body?.cancel().catch(() => undefined);
    return `fetch: response body larger than ${max} bytes (content-length ${declared})`;
  }
  if (!response.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size > max) {
        await response.body.cancel().catch(() => undefined);
        return `fetch: response body larger than ${max} bytes`;
      }
      chunks.push(chunk);
    }
  } catch (error) {
    return signal.aborted ? 'fetch: the response body did not arrive in time' : `fetch: reading the response failed: ${describe(error)}`;
  }
  // A plain Uint8Array: what crosses into the isolate must be a Web type, not a Buffer.
  const whole = Buffer.concat(chunks, size);
  return new Uint8Array(whole.buffer, whole.byteOffset, whole.byteLength);
}

function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message ?? String(error);
}
