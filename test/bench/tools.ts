import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { NODE_ENV_DEFAULTS, NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
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

/** A Gatehouse command started by {@link startGatehouseLogged}. */
export interface StartedGatehouse extends Started {
  /** Its `listening` log line. */
  readonly listening: { port: number; httpsPort?: number };
  readonly logFile: string;
}

/**
 * Starts `gatehouse <command>` (`cli`: a checkout's core/bin/gatehouse.js) with Gatehouse's Node
 * flags, a new config dir under `workDir` holding `files` (name → YAML text or manifests), and its
 * logs in a file there, as in production rather than through a pipe the bench must drain; waits
 * for its `listening` line. `run` also gets an extauth port and a plugin dir.
 */
export async function startGatehouseLogged(
  workDir: string,
  options: { cli: string; command: string; files: Record<string, string | object[]>; args?: string[]; nodeFlags?: string[]; env?: Record<string, string>; timeoutMs?: number },
): Promise<StartedGatehouse> {
  const dir = await mkdtemp(join(workDir, 'config-'));
  for (const [name, content] of Object.entries(options.files)) await writeFile(join(dir, name), typeof content === 'string' ? content : content.map((d) => stringify(d)).join('---\n'));
  const logFile = join(dir, 'gatehouse.log');
  const fd = openSync(logFile, 'w');
  const extra = options.command === 'run' ? ['--extauth-port', '0', '--plugin-dir', join(dir, 'plugins')] : [];
  const child = spawn(process.execPath, [...NODE_FLAGS, ...(options.nodeFlags ?? []), options.cli, options.command, '--config-dir', dir, '--port', '0', '--https-port', '0', '--admin-port', '0', '--host', '127.0.0.1', ...extra, ...(options.args ?? [])], {
    stdio: ['ignore', fd, fd],
    env: { ...process.env, ...NODE_ENV_DEFAULTS, ...options.env },
  });
  closeSync(fd);
  const until = performance.now() + (options.timeoutMs ?? 30_000);
  while (performance.now() < until) {
    const text = await readFile(logFile, 'utf8');
    const line = text.split('\n').find((l) => l.includes('"msg":"listening"'));
    if (line) {
      const listening = JSON.parse(line) as { port: number; httpsPort?: number };
      return { child, port: listening.port, listening, logFile, stop: () => stopChild(child) };
    }
    if (child.exitCode !== null) throw new Error(`gatehouse exited: ${text}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await stopChild(child);
  throw new Error(`gatehouse did not start: ${await readFile(logFile, 'utf8')}`);
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
