import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';

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

/**
 * A port on 127.0.0.1 that refuses connections: a privileged one nothing listens on. Never an
 * ephemeral port that was bound and closed: a test running beside this one could be handed it
 * by a `listen(0)` and accept (a fresh-clone CI run failed on that).
 */
export async function refusedPort(): Promise<number> {
  for (let port = 1; port < 1024; port++) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.once('connect', () => (socket.destroy(), resolve(false)));
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
    });
    if (refused) return port;
  }
  throw new Error('no privileged port on 127.0.0.1 refuses connections');
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
