import { readFile } from 'node:fs/promises';
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

/**
 * A free TCP port on 127.0.0.1 below the kernel's ephemeral range, for a server started long
 * after the port is chosen (a container): no `bind(0)` or outgoing connection of another test can
 * be handed it in between, as it can a {@link freePort} (test/images/pod.test.ts lost its gateway
 * port that way once: EADDRINUSE seconds later). Random in 20000 up to the range's start, checked
 * by binding it.
 */
export async function freePortBelowEphemeral(): Promise<number> {
  const [low] = (await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').catch(() => '32768 60999')).trim().split(/\s+/).map(Number);
  const top = Math.max(20_001, Math.min(low ?? 32_768, 65_536));
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * (top - 20_000));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port between 20000 and ${top} after 200 tries`);
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
