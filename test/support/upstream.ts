import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TestServer {
  readonly server: Server;
  readonly port: number;
  readonly url: string;
  close(): Promise<void>;
}

/** A real HTTP server on 127.0.0.1, port 0. */
export async function startServer(handler: RequestListener): Promise<TestServer> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What an echo upstream saw. */
export interface Echo {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  bodyBytes: number;
  body: string;
  upstream: string;
}

/** An upstream answering every request with a JSON {@link Echo} of it; `name` tells upstreams apart. */
export function startEcho(name = 'echo'): Promise<TestServer> {
  return startServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on('data', (c: Buffer) => {
      bytes += c.length;
      if (bytes <= 64 * 1024) chunks.push(c);
    });
    req.on('end', () => {
      const echo: Echo = { method: req.method!, url: req.url!, headers: req.headers, bodyBytes: bytes, body: Buffer.concat(chunks).toString('utf8'), upstream: name };
      res.setHeader('content-type', 'application/json');
      res.setHeader('x-upstream', name);
      res.end(JSON.stringify(echo));
    });
  });
}

/** A port that refuses connections (bound, then closed). */
export async function refusedPort(): Promise<number> {
  const s = await startServer(() => {});
  await s.close();
  return s.port;
}

/** What a body recorder saw: the request line, headers, and the body by size and SHA-256. */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  bytes: number;
  sha256: string;
}

/**
 * An upstream that answers every request with `reply` once the body has arrived, and records it
 * (the body by size and SHA-256, so 100 KB bodies compare byte for byte without being kept).
 */
export async function startBodyRecorder(reply = 'ok'): Promise<TestServer & { seen: RecordedRequest[] }> {
  const seen: RecordedRequest[] = [];
  const server = await startServer((req, res) => {
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
    });
    req.on('end', () => {
      seen.push({ method: req.method!, path: req.url!, headers: req.headers, bytes, sha256: hash.digest('hex') });
      res.end(reply);
    });
  });
  return Object.assign(server, { seen });
}
