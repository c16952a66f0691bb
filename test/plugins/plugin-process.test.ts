/**
 * Issue 24 finding 3: the process that hosts plugin isolates is one whose death costs nothing.
 * A real `gatehouse run` with its plugin process (the default): the plugin process is killed the
 * ways the attacks killed the gateway (SIGSEGV, memory past its bound, a stalled loop), and the
 * gateway must stay the same process, deny the checks in flight and meanwhile (fail closed, 403),
 * keep serving routes without plugins, and recover by itself. Every trigger always reaches its
 * path: the check in flight is parked on a server the test holds, the memory is kept by the
 * plugin, the loop never ends.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

const HOSTILE = fileURLToPath(new URL('../../core/src/extauth/plugins/fixtures/hostile.ts', import.meta.url));
const HOST_API = fileURLToPath(new URL('../../core/src/extauth/plugins/fixtures/host-api.ts', import.meta.url));
const encodeCode = (code: string): string => Buffer.from(code, 'utf8').toString('base64');

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; ms: number }> {
  const started = performance.now();
  const response = await fetch(url, { headers });
  await response.arrayBuffer();
  return { status: response.status, headers: response.headers, ms: performance.now() - started };
}

let config: ConfigDir;
let pluginDir: string;
let upstream: TestServer;
/** The plugins' egress: `/hold` is answered only when the test says so; `/jwks` too while `holdJwks` is set. */
let keys: TestServer & { held: ServerResponse[]; waitForHold(): Promise<void>; holdJwks: boolean };
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  upstream = await startServer((req, res) => {
    for (const name of ['x-result', 'x-started']) if (req.headers[name] !== undefined) res.setHeader(name, req.headers[name]!);
    req.resume().on('end', () => res.end('upstream ok'));
  });
  const held: ServerResponse[] = [];
  let holdWaiter: (() => void) | undefined;
  keys = Object.assign(
    await startServer((req, res) => {
      req.resume();
      if (req.url === '/hold' || (req.url === '/jwks' && keys.holdJwks)) {
        held.push(res);
        if (req.url === '/hold') holdWaiter?.();
        return;
      }
      res.end('keys');
    }),
    {
      held,
      waitForHold: () => new Promise<void>((resolve) => (holdWaiter = resolve)),
      holdJwks: false,
    },
  );
  pluginDir = await mkdtemp(join(tmpdir(), 'gatehouse-process-plugins-'));
  await buildPlugin({ entry: HOSTILE, name: 'Hostile', outDir: pluginDir });
  await buildPlugin({ entry: HOST_API, name: 'HostApi', outDir: pluginDir });
  const evaluate = (name: string) => manifests.authConfig(name, [{ pluginAuth: { name: 'Hostile', exportedSymbolName: 'Evaluate', egress: [{ upstreamRef: { name: 'keys' } }] } }]);
  const route = (prefix: string, auth: string) => ({ matchers: [{ prefix }], options: { extauth: { configRef: { name: auth } } }, routeAction: { single: { upstream: { name: 'up' } } } });
  config = await makeConfigDir({
    'process.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.upstream('keys', [{ addr: '127.0.0.1', port: keys.port }]),
      evaluate('eval'),
      evaluate('hoard'),
      evaluate('stall'),
      // Start fetches http://keys.default.upstream/jwks: it fails while the test holds /jwks.
      manifests.authConfig('started', [{ pluginAuth: { name: 'HostApi', exportedSymbolName: 'StartFetch', config: { Url: 'http://keys.default.upstream' }, egress: [{ upstreamRef: { name: 'keys' } }] } }]),
      manifests.virtualService('process', {
        domains: ['*'],
        routes: [route('/eval/', 'eval'), route('/hoard/', 'hoard'), route('/stall/', 'stall'), route('/started/', 'started'), { matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'up' } } } }],
      }),
    ],
  });
  // Limits raised so that the sandbox's own limits (CPU, wall, isolate memory) never answer first:
  // what stops each attack here is the plugin process's death and restart.
  gatehouse = await startGatehouse('run', [
    '--config-dir', config.path,
    '--plugin-dir', pluginDir,
    '--plugin-cpu-timeout', '60s',
    '--plugin-wall-timeout', '60s',
    '--plugin-memory-limit-mb', '1024',
    '--plugin-process-max-rss-mb', '400',
    '--plugin-process-stall', '1s',
    '--extauth-timeout', '90s',
  ]);
  await gatehouse.waitForLog((l) => l.msg === 'received new auth configuration');
}, 120_000);

afterAll(async () => {
  for (const res of keys?.held ?? []) res.end();
  await gatehouse?.stop();
  await Promise.all([upstream?.close(), keys?.close()]);
  await config?.cleanup();
  if (pluginDir) await rm(pluginDir, { recursive: true, force: true });
});

const started = () => gatehouse.logs.filter((l) => l.msg === 'plugin process started');
const exits = () => gatehouse.logs.filter((l) => l.code === 'GH_PLUGIN_PROCESS_EXITED');

function evaluate(route: string, code: string) {
  return get(`${gatehouse.url}/${route}/x`, { 'x-code': encodeCode(code) });
}

/** The gateway is the process it was, serves routes without plugins, and its plugin steps answer again. */
async function recovered(exitsBefore: number, pidBefore: unknown): Promise<void> {
  await expect.poll(() => exits().length, { timeout: 15_000 }).toBeGreaterThan(exitsBefore);
  expect(gatehouse.child.exitCode).toBeNull();
  expect(gatehouse.child.signalCode).toBeNull();
  expect((await get(`${gatehouse.url}/open`)).status).toBe(200);
  await expect.poll(async () => (await evaluate('eval', 'return 1 + 1')).headers.get('x-result'), { timeout: 30_000, interval: 200 }).toBe('2');
  expect(started().at(-1)!.pid).not.toBe(pidBefore);
  expect((await get(`${gatehouse.adminUrl}/healthz`)).status).toBe(200);
}

describe('the plugin process (finding 3)', () => {
  it('plugin steps run in a child process, not in the gateway', async () => {
    expect((await evaluate('eval', 'return 40 + 2')).headers.get('x-result')).toBe('42');
    const pid = started().at(-1)?.pid;
    expect(typeof pid).toBe('number');
    expect(pid).not.toBe(gatehouse.child.pid);
  });

  it('a SIGSEGV of the plugin process (what finding 1 did to the gateway) denies the check in flight, and the plugin process comes back', async () => {
    const pid = started().at(-1)!.pid as number;
    const exitsBefore = exits().length;
    // The check is in the plugin process for sure: its fetch is parked on the test's server.
    const holding = keys.waitForHold();
    const inFlight = evaluate('eval', `await fetch('http://keys.default.upstream/hold'); return 'answered';`);
    await holding;
    process.kill(pid, 'SIGSEGV');
    const denied = await inFlight;
    expect(denied.status).toBe(403);
    await recovered(exitsBefore, pid);
    expect(exits().at(-1)!.cause).toMatch(/SIGSEGV/);
  });

  it('a plugin process over its memory bound is killed by its watchdog and restarted', async () => {
    const pid = started().at(-1)!.pid as number;
    const exitsBefore = exits().length;
    // 48 × 8 MiB kept alive, under the isolate's 1 GB limit and over the process's 400 MB bound.
    // A timer between allocations: the event loop keeps turning (the call goes on on the
    // isolate's thread), so the memory bound, not the stall bound, is what ends it.
    const r = await evaluate('hoard', `globalThis.hoard = []; for (let i = 0; i < 48; i++) { hoard.push(new Uint8Array(8 * 1024 * 1024).fill(i)); await new Promise((resolve) => setTimeout(resolve, 1)); } return hoard.length;`);
    expect(r.status).toBe(403);
    await recovered(exitsBefore, pid);
    expect(gatehouse.stderr()).toContain('"code":"GH_WATCHDOG_MEMORY"');
  });

  it('a plugin process whose event loop stalls is killed by its watchdog and restarted', async () => {
    const pid = started().at(-1)!.pid as number;
    const exitsBefore = exits().length;
    // The first call of a step runs inline, on the plugin process's event loop: it never returns.
    const r = await evaluate('stall', 'for (;;);');
    expect(r.status).toBe(403);
    await recovered(exitsBefore, pid);
    expect(gatehouse.stderr()).toContain('"msg":"plugin process event loop stalled for');
  });

  it('a step whose Start fails in the restarted plugin process is tried again until it builds', async () => {
    // Built (again, after the kills before) in the current plugin process.
    await expect.poll(async () => (await get(`${gatehouse.url}/started/x`)).headers.get('x-started'), { timeout: 30_000, interval: 200 }).toBe('keys');
    const pid = started().at(-1)!.pid as number;
    const exitsBefore = exits().length;
    keys.holdJwks = true;
    try {
      process.kill(pid, 'SIGKILL');
      // Start waits on /jwks in the new process past the 1 s start timeout: the rebuild fails, and says when it tries again.
      await gatehouse.waitForLog((l) => typeof l.retryInMs === 'number' && l.code === 'GH_PLUGIN_START_TIMEOUT', 30_000);
      expect((await get(`${gatehouse.url}/started/x`)).status).toBe(403);
    } finally {
      keys.holdJwks = false;
    }
    await expect.poll(async () => (await get(`${gatehouse.url}/started/x`)).headers.get('x-started'), { timeout: 45_000, interval: 200 }).toBe('keys');
    expect(exits().length).toBe(exitsBefore + 1);
  }, 90_000);

  it('a plugin process that stops answering (SIGSTOP) is killed by the gateway\'s pings and restarted, and other routes keep answering', async () => {
    const pid = started().at(-1)!.pid as number;
    // Stop it (a stalled process): its watchdog thread is stopped too, so the gateway's pings decide.
    process.kill(pid, 'SIGSTOP');
    try {
      const exitsBefore = exits().length;
      const open = await get(`${gatehouse.url}/open`);
      expect(open.status).toBe(200);
      // Killed for not answering pings within twice the stall period (2 s) plus one ping period.
      await expect.poll(() => exits().length, { timeout: 15_000 }).toBeGreaterThan(exitsBefore);
      await recovered(exitsBefore, pid);
    } finally {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone: the gateway killed it
      }
    }
  });

  // Last: it ends the gateway.
  it('the plugin process ends with its gateway, however the gateway ends (SIGKILL: no exit handler runs)', async () => {
    const pid = started().at(-1)!.pid as number;
    expect(isAlive(pid)).toBe(true);
    await gatehouse.stop('SIGKILL');
    await expect.poll(() => isAlive(pid), { timeout: 15_000, interval: 100 }).toBe(false);
  });
});

/** Whether a process with this pid exists (signal 0 checks without sending anything). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
