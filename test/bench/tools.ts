import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { freePort } from '../support/ports.ts';

export { freePort };

/** Installs Debian packages the benchmark needs when they are missing (wrk, nginx). */
export function ensureDebianPackages(packages: Record<string, string>): void {
  const missing = Object.entries(packages).filter(([binary]) => !existsSync(binary)).map(([, pkg]) => pkg);
  if (missing.length === 0) return;
  console.error(`installing ${missing.join(', ')} with apt-get`);
  execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
}


export interface Started {
  readonly child: ChildProcess;
  readonly port: number;
  stop(): Promise<void>;
}

/** Starts a process that prints a JSON `{"msg":"listening","port":N}` line and waits for it. */
export function startListening(command: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Started> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`${command} ${args.join(' ')} did not start:\n${out}\n${err}`)), 20_000);
    child.stderr!.on('data', (c) => (err += c));
    child.stdout!.on('data', (c) => {
      out += c;
      const match = /"msg":"listening"[^\n]*/.exec(out) && /"port":(\d+)/.exec(out.slice(out.indexOf('"msg":"listening"') - 200));
      if (match) {
        clearTimeout(timer);
        child.stdout!.removeAllListeners('data');
        child.stdout!.resume();
        resolve({ child, port: Number(match[1]), stop: () => stopChild(child) });
      }
    });
    child.once('exit', (code) => reject(new Error(`${command} exited with ${code}:\n${out}\n${err}`)));
  });
}

export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
  });
}

/** An nginx instance in its own prefix dir, with the `http {}` body given. */
export async function startNginx(workDir: string, name: string, serverBlock: (port: number) => string, workers = 1): Promise<Started> {
  const prefix = join(workDir, `nginx-${name}`);
  await mkdir(join(prefix, 'logs'), { recursive: true });
  const port = await freePort();
  const conf = `worker_processes ${workers};
daemon off;
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  ${serverBlock(port)}
}
`;
  await writeFile(join(prefix, 'nginx.conf'), conf);
  const child = spawn('/usr/sbin/nginx', ['-p', prefix, '-c', join(prefix, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (c) => (err += c));
  // nginx prints nothing when it is up: poll the port.
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`nginx exited: ${err}`);
    if (await canConnect(port)) return { child, port, stop: () => stopChild(child) };
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nginx did not start: ${err}`);
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
    socket.connect(port, '127.0.0.1');
  });
}

/**
 * The manifests every proxy row uses: Upstream `fast` (the shared fast upstream) and one
 * catch-all route on `*`; with `auth`, that AuthConfig is added and guards the virtual host.
 */
export function benchManifests(upstreamPort: number, auth?: { name: string; configs: object[] }): object[] {
  return [
    { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'fast' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: upstreamPort }] } } },
    ...(auth ? [{ apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name: auth.name }, spec: { configs: auth.configs } }] : []),
    {
      apiVersion: 'gateway.gatehouse.dev/v1',
      kind: 'VirtualService',
      metadata: { name: 'bench' },
      spec: {
        virtualHost: {
          domains: ['*'],
          ...(auth ? { options: { extauth: { configRef: { name: auth.name } } } } : {}),
          routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'fast' } } } }],
        },
      },
    },
  ];
}
