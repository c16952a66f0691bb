// The command line as scripts use it (SPEC 9): `gatehouse validate`, `gatehouse version`,
// exit codes and flag errors, run as real processes.
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_ENV_DEFAULTS, NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));

function gatehouse(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, ...args], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 20_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? -1) : 0, stdout, stderr });
    });
  });
}

let dir: ConfigDir;

beforeAll(async () => {
  dir = await makeConfigDir({
    'good/upstream.yaml': manifests.upstream('up', [{ addr: '127.0.0.1', port: 8000 }]),
    'good/vs.yaml': manifests.virtualService('site', { domains: ['site.test'], routes: [{ routeAction: { single: { upstream: { name: 'up' } } } }] }),
    'warn/vs.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: 8000 }]),
      manifests.virtualService('ported', { domains: ['site.test:8080'], routes: [{ routeAction: { single: { upstream: { name: 'up' } } } }] }),
    ],
    // Hand-written so the line numbers are known.
    'bad/routes.yaml': [
      '# two broken VirtualServices',
      'apiVersion: gateway.gatehouse.dev/v1',
      'kind: VirtualService',
      'metadata:',
      '  name: broken',
      'spec:',
      '  virtualHost:',
      "    domains: ['a.test']",
      '    routes:',
      '    - matchers:',
      '      - prefixx: /',
      '      routeAction:',
      '        single:',
      '          upstream: {name: up}',
      '---',
      'apiVersion: gateway.gatehouse.dev/v1',
      'kind: VirtualService',
      'metadata:',
      '  name: dangling',
      '  namespace: team',
      'spec:',
      '  virtualHost:',
      "    domains: ['b.test']",
      '    routes:',
      '    - routeAction:',
      '        single:',
      '          upstream: {name: nowhere}',
      '',
    ].join('\n'),
    'bad/upstream.yaml': manifests.upstream('up', [{ addr: '127.0.0.1', port: 8000 }]),
    'syntax/broken.yaml': 'apiVersion: gatehouse.gatehouse.dev/v1\nkind: Upstream\nmetadata: {name: x\n',
  });
});

afterAll(async () => {
  await dir?.cleanup();
});

// Each test is its own process: run them side by side.
describe.concurrent('gatehouse validate', () => {
  it('exits 0 and lists every resource as Accepted with its file:line', async () => {
    // Several paths at once (directories work too: see below).
    const { code, stdout } = await gatehouse('validate', join(dir.path, 'good/upstream.yaml'), join(dir.path, 'good/vs.yaml'));
    expect(code).toBe(0);
    expect(stdout).toContain(`Accepted Upstream default/up (${join(dir.path, 'good/upstream.yaml')}:1)`);
    expect(stdout).toContain(`Accepted VirtualService default/site (${join(dir.path, 'good/vs.yaml')}:1)`);
    expect(stdout).toContain('2 resources: 2 accepted, 0 with warnings, 0 rejected');
  });

  it('exits 0 with warnings only', async () => {
    const { code, stdout } = await gatehouse('validate', join(dir.path, 'warn'));
    expect(code).toBe(0);
    expect(stdout).toMatch(/warn\/vs\.yaml:\d+: warning: VirtualService default\/ported: spec\.virtualHost\.domains\[0\]: .*port.* \[GH_CONFIG_BAD_DOMAIN\]/);
    expect(stdout).toContain('Warning  VirtualService default/ported');
  });

  it('exits 1 naming file:line, resource and field path of each error', async () => {
    const file = join(dir.path, 'bad/routes.yaml');
    const { code, stdout } = await gatehouse('validate', join(dir.path, 'bad'));
    expect(code).toBe(1);
    const lines = stdout.split('\n');
    expect(lines).toContain(`${file}:11: error: VirtualService default/broken: spec.virtualHost.routes[0].matchers[0].prefixx: unknown field "prefixx" [GH_CONFIG_UNKNOWN_FIELD]`);
    expect(lines.find((l) => l.startsWith(`${file}:27: error: VirtualService team/dangling: spec.virtualHost.routes[0].routeAction.single.upstream: `))).toMatch(/Upstream team\/nowhere.*\[GH_CONFIG_MISSING_REF\]$/);
    expect(stdout).toContain(`Rejected VirtualService default/broken (${file}:2)`);
    expect(stdout).toContain(`Rejected VirtualService team/dangling (${file}:16)`);
    expect(stdout).toContain('Accepted Upstream default/up');
    expect(stdout).toContain('3 resources: 1 accepted, 0 with warnings, 2 rejected');
  });

  it('exits 1 on a YAML syntax error, naming the file and line', async () => {
    const { code, stdout } = await gatehouse('validate', join(dir.path, 'syntax/broken.yaml'));
    expect(code).toBe(1);
    expect(stdout).toMatch(new RegExp(`^${join(dir.path, 'syntax/broken.yaml').replace(/[.]/g, '\\.')}:\\d+: error: .+ \\[GH_CONFIG_PARSE\\]$`, 'm'));
  });

  it('exits 1 for a path that does not exist', async () => {
    const { code, stdout } = await gatehouse('validate', join(dir.path, 'missing.yaml'));
    expect(code).toBe(1);
    expect(stdout).toContain('[GH_CONFIG_READ]');
  });

  it('prints usage and exits 2 without paths', async () => {
    const { code, stdout } = await gatehouse('validate');
    expect(code).toBe(2);
    expect(stdout).toContain('usage: gatehouse validate PATH...');
  });
});

describe.concurrent('gatehouse command line', () => {
  it('version prints the root package version', async () => {
    const pkg = JSON.parse(await readFile(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8')) as { version: string };
    const { code, stdout } = await gatehouse('version');
    expect(code).toBe(0);
    expect(stdout).toBe(`${pkg.version}\n`);
  });

  it('a bad flag value exits 2 with a message naming the flag', async () => {
    const { code, stderr } = await gatehouse('run', '--config-dir', dir.path, '--port', 'eighty');
    expect(code).toBe(2);
    expect(stderr).toContain('--port must be a port number from 0 to 65535, got "eighty" [GH_BAD_ARGUMENT]');
  });

  it('an unknown flag or command exits 2', async () => {
    const flag = await gatehouse('gateway', '--config-dir', dir.path, '--colour', 'red');
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('[GH_BAD_ARGUMENT]');
    const command = await gatehouse('launch');
    expect(command.code).toBe(2);
    expect(command.stderr).toContain('unknown command "launch"');
  });

  it('flags can come from GATEHOUSE_* environment variables', async () => {
    const { code, stderr } = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(process.execPath, [...NODE_FLAGS, CLI, 'gateway'], { env: { ...process.env, GATEHOUSE_CONFIG_DIR: dir.path, GATEHOUSE_ADMIN_PORT: '99999' } }, (error, _stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? -1) : 0, stderr }),
      );
    });
    expect(code).toBe(2);
    expect(stderr).toContain('--admin-port must be a port number from 0 to 65535, got "99999"');
  });

  it('a plain `node gatehouse.js` gets the Node flags and environment defaults by re-executing in place (same pid)', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, GATEHOUSE_LOG_LEVEL: 'info' };
    for (const name of Object.keys(NODE_ENV_DEFAULTS)) delete env[name];
    const child = spawn(process.execPath, [CLI, 'gateway', '--config-dir', join(dir.path, 'good'), '--port', '0', '--https-port', '0', '--admin-port', '0', '--host', '127.0.0.1'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const [line] = (await once(createInterface({ input: child.stdout! }).on('line', () => {}), 'line')) as [string];
      const first = JSON.parse(line) as { pid: number };
      // The process that logs is the one we started: no wrapper process.
      expect(first.pid).toBe(child.pid);
      const cmdline = (await readFile(`/proc/${child.pid}/cmdline`, 'utf8')).split('\0');
      for (const flag of NODE_FLAGS) expect(cmdline).toContain(flag);
      const environ = (await readFile(`/proc/${child.pid}/environ`, 'utf8')).split('\0');
      for (const [name, value] of Object.entries(NODE_ENV_DEFAULTS)) expect(environ).toContain(`${name}=${value}`);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });

  it('an operator’s own environment value wins over the default', async () => {
    const name = Object.keys(NODE_ENV_DEFAULTS)[0]!;
    const child = spawn(process.execPath, [CLI, 'gateway', '--config-dir', join(dir.path, 'good'), '--port', '0', '--https-port', '0', '--admin-port', '0', '--host', '127.0.0.1'], {
      env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'info', [name]: '4' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      await once(createInterface({ input: child.stdout! }), 'line');
      const environ = (await readFile(`/proc/${child.pid}/environ`, 'utf8')).split('\0');
      expect(environ).toContain(`${name}=4`);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });
});
