import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

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
