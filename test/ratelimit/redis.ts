/**
 * A real `redis-server` (Debian's, see install-redis.sh) on 127.0.0.1 with a free port, no
 * persistence and an optional password, for the rate-limit tests (and, later, the plugin store's).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, it } from 'vitest';
import { freePort } from '../support/ports.ts';

/** The redis-server binary: GATEHOUSE_REDIS_SERVER, or redis-server on PATH / in /usr/bin. */
export function findRedis(): string | undefined {
  const configured = process.env.GATEHOUSE_REDIS_SERVER;
  if (configured) return existsSync(configured) ? configured : undefined;
  const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  const found = which.stdout.trim();
  if (found) return found;
  return existsSync('/usr/bin/redis-server') ? '/usr/bin/redis-server' : undefined;
}

/**
 * A suite that needs redis-server: without it the suite fails under `CI=true` and is skipped,
 * with a loud SKIPPED line, elsewhere (the pattern of test/kube/describe-with-kube.ts).
 */
export function describeWithRedis(title: string, testFile: string, body: (binary: string) => void): void {
  const binary = findRedis();
  if (!binary) {
    const message = 'redis-server not found: run test/ratelimit/install-redis.sh (or set GATEHOUSE_REDIS_SERVER)';
    if (process.env.CI === 'true') {
      describe(title, () => {
        it('needs redis-server on CI', () => {
          throw new Error(message);
        });
      });
      return;
    }
    console.warn(`\n*** SKIPPED ${testFile}: ${message} ***\n`);
  }
  describe.skipIf(!binary)(title, () => body(binary!));
}

/** A running redis-server. */
export interface RedisServer {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` (no credentials: they come from a Secret or the options). */
  readonly url: string;
  readonly password: string | undefined;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

/** Starts redis-server on a free port; resolves once it accepts connections. */
export async function startRedis(binary: string, options: { password?: string; port?: number; /** serve TLS only, with this certificate and key (PEM files) */ tls?: { cert: string; key: string } } = {}): Promise<RedisServer> {
  const port = options.port ?? (await freePort());
  const args = ['--port', options.tls ? '0' : String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning', '--dir', '/tmp'];
  if (options.tls) args.push('--tls-port', String(port), '--tls-cert-file', options.tls.cert, '--tls-key-file', options.tls.key, '--tls-auth-clients', 'no');
  if (options.password) args.push('--requirepass', options.password);
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (output += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (output += c));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  // Ready when a PING gets an answer (NOAUTH counts: the server is up).
  const until = Date.now() + 15_000;
  for (;;) {
    const answer = await ping(port, Boolean(options.tls)).catch(() => '');
    if (answer.startsWith('+PONG') || answer.startsWith('-NOAUTH')) break;
    if (child.exitCode !== null || Date.now() > until) {
      child.kill('SIGKILL');
      throw new Error(`redis-server did not start on ${port}: ${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    url: `${options.tls ? 'rediss' : 'redis'}://127.0.0.1:${port}`,
    password: options.password,
    child,
    async stop() {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

async function ping(port: number, tls: boolean): Promise<string> {
  const { connect } = tls ? await import('node:tls') : await import('node:net');
  return new Promise((resolve, reject) => {
    const socket = tls ? (connect as typeof import('node:tls').connect)({ port, host: '127.0.0.1', rejectUnauthorized: false }) : (connect as typeof import('node:net').connect)(port, '127.0.0.1');
    let data = '';
    socket.setTimeout(1000, () => socket.destroy(new Error('timeout')));
    socket.on(tls ? 'secureConnect' : 'connect', () => socket.write('PING\r\n'));
    socket.on('data', (c) => {
      data += c.toString();
      if (data.includes('\r\n')) {
        socket.end();
        resolve(data);
      }
    });
    socket.on('error', reject);
  });
}
