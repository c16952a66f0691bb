import { createServer } from 'node:net';

/**
 * A free TCP port on 127.0.0.1, for servers that cannot report the port they bound
 * (nginx, docker-registry): bind port 0, read it, release it.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
