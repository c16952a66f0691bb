import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../support/ports.ts';

/** A real Distribution registry (Debian `docker-registry`) on 127.0.0.1, for one test file. */
export interface TestRegistry {
  /** `127.0.0.1:PORT`, the registry part of image references. */
  readonly host: string;
  /** Where its blobs live, so tests can corrupt stored content on purpose. */
  readonly storage: string;
  close(): Promise<void>;
}

export { freePort };

export type RegistryAuth =
  | { kind: 'htpasswd'; users: Record<string, string> }
  | { kind: 'token'; realm: string; service: string; issuer: string; certFile: string };


/** Starts `docker-registry serve` with a generated config; resolves once `/v2/` answers. */
export async function startRegistry(auth?: RegistryAuth): Promise<TestRegistry> {
  const dir = await mkdtemp(join(tmpdir(), 'gh-registry-'));
  const storage = join(dir, 'data');
  const port = await freePort();
  const lines = [
    'version: 0.1',
    'log:',
    '  level: error',
    '  accesslog:',
    '    disabled: true',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${storage}`,
    '  delete:',
    '    enabled: true',
    'http:',
    `  addr: 127.0.0.1:${port}`,
    '  secret: gatehouse-test-secret',
  ];
  if (auth?.kind === 'htpasswd') {
    const file = join(dir, 'htpasswd');
    const entries = Object.entries(auth.users).map(([user, password]) => execFileSync('htpasswd', ['-nbB', user, password], { encoding: 'utf8' }).trim());
    await writeFile(file, `${entries.join('\n')}\n`);
    lines.push('auth:', '  htpasswd:', '    realm: gatehouse-test', `    path: ${file}`);
  } else if (auth?.kind === 'token') {
    lines.push('auth:', '  token:', `    realm: ${auth.realm}`, `    service: ${auth.service}`, `    issuer: ${auth.issuer}`, `    rootcertbundle: ${auth.certFile}`);
  }
  const config = join(dir, 'config.yml');
  await writeFile(config, `${lines.join('\n')}\n`);
  const child = spawn('/usr/bin/docker-registry', ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const host = `127.0.0.1:${port}`;
  try {
    await waitUntilServing(host, child, () => stderr);
  } catch (error) {
    child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    host,
    storage,
    async close() {
      await stop(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function waitUntilServing(host: string, child: ChildProcess, stderr: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited with ${child.exitCode}: ${stderr()}`);
    try {
      const res = await fetch(`http://${host}/v2/`);
      await res.arrayBuffer();
      if (res.status === 200 || res.status === 401) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`docker-registry did not start on ${host}: ${stderr()}`);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}
