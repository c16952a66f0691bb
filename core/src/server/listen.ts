import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';

const CONNECT_BODY = 'CONNECT is not supported\n';
const CONNECT_REFUSED = `HTTP/1.1 405 Method Not Allowed\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${CONNECT_BODY.length}\r\nx-gatehouse-error: GH_BAD_REQUEST\r\nconnection: close\r\n\r\n${CONNECT_BODY}`;

/** Starts an HTTP/1.1 server; resolves with the server and its bound port (port 0 picks one). */
export async function listen(handler: RequestListener, port: number, host: string): Promise<{ server: Server; port: number }> {
  const server = createServer(
    {
      keepAliveTimeout: 65_000,
      headersTimeout: 60_000,
      // Uploads stream through to the upstream; their duration is bounded by route timeouts, not here.
      requestTimeout: 0,
    },
    handler,
  );
  // Without a listener Node drops CONNECT silently; tunnels are not supported, so say so.
  server.on('connect', (_req, socket: Duplex) => {
    socket.on('error', () => {});
    socket.end(CONNECT_REFUSED);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port };
}

/**
 * Graceful stop (SPEC 8): stop accepting, let in-flight requests finish, close idle
 * keep-alive connections at once, and cut whatever is still open after `graceMs`.
 */
export async function closeGracefully(server: Server, graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  // Connections that finish a response while closing are not reused (Node sends `connection: close`).
  const idleSweep = setInterval(() => server.closeIdleConnections(), 100);
  const deadline = setTimeout(() => server.closeAllConnections(), graceMs);
  try {
    await closed;
  } finally {
    clearInterval(idleSweep);
    clearTimeout(deadline);
  }
}
