import { request as httpRequest, type Agent, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';

/** A complete HTTP response, body as text. */
export interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** Raw header list as received (`[name, value, …]`), for duplicates and exact names. */
  readonly rawHeaders: string[];
  readonly body: string;
}

export interface SendOptions {
  method?: string;
  /** Request target, e.g. `/a?b=1` (default `/`). */
  path?: string;
  /** Headers as given; `host` overrides the URL's (fetch forbids that, hence node:http). */
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
  /** Default: a fresh connection per request, so tests do not share keep-alive state. */
  agent?: Agent | false;
  timeoutMs?: number;
}

/**
 * One HTTP/1.1 request with full control over headers (Host included), resolving with
 * the whole response. Rejects on connection errors and on `timeoutMs` (default 10 s).
 */
export function send(baseUrl: string, options: SendOptions = {}): Promise<Reply> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method: options.method ?? 'GET',
        path: options.path ?? '/',
        headers: options.headers ?? {},
        agent: options.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, rawHeaders: res.rawHeaders, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.setTimeout(options.timeoutMs ?? 10_000, () => req.destroy(new Error(`request timed out after ${options.timeoutMs ?? 10_000} ms`)));
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Polls `probe` until it returns a truthy value (or throws the last error after `timeoutMs`). */
export async function eventually<T>(probe: () => Promise<T | undefined | false>, timeoutMs = 10_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Writes `text` as-is on a fresh TCP connection and resolves with everything the server
 * sent until it closed the connection (or `timeoutMs` passed): for malformed requests
 * no HTTP client would send.
 */
export function rawRequest(port: number, text: string | Buffer, timeoutMs = 3_000): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (data += chunk));
    socket.on('error', () => resolve(data));
    socket.on('close', () => resolve(data));
    socket.setTimeout(timeoutMs, () => {
      socket.destroy();
      resolve(data);
    });
    socket.write(text);
  });
}
