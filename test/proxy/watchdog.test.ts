/**
 * The watchdog (issue 17, process-level guards) against a real `gatehouse run`: a main thread
 * that stops answering is killed so its supervisor can restart it, instead of holding its
 * ports while serving nothing. The stall comes through a real path: a plugin call looping
 * under an operator-raised CPU limit of 60 s, inline on the event loop (--plugin-thread false),
 * and on the plugin thread (--plugin-process false), whose loop is watched the same way. The
 * plugin process (the default) is watched by its own watchdog and restarted without the
 * gateway: test/plugins/plugin-process.test.ts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';

const HOSTILE = fileURLToPath(new URL('../../core/src/extauth/plugins/fixtures/hostile.ts', import.meta.url));

let upstream: TestServer;
let config: ConfigDir;
let pluginDir: string;
let gw: GatehouseProcess;

async function start(thread: boolean): Promise<GatehouseProcess> {
  return startGatehouse('run', ['--config-dir', config.path, '--plugin-dir', pluginDir, '--plugin-cpu-timeout', '60s', '--extauth-timeout', '60s', '--watchdog', '1s', '--plugin-thread', String(thread), '--plugin-process', 'false']);
}

beforeAll(async () => {
  upstream = await startEcho('up');
  pluginDir = await mkdtemp(join(tmpdir(), 'gatehouse-watchdog-plugins-'));
  await buildPlugin({ entry: HOSTILE, name: 'Hostile', outDir: pluginDir });
  config = await makeConfigDir({
    'config.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.authConfig('loop', [{ pluginAuth: { name: 'Hostile', exportedSymbolName: 'InfiniteLoop' } }]),
      manifests.virtualService('vs', { domains: ['*'], options: { extauth: { configRef: { name: 'loop' } } }, routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'up' } } } }] }),
    ],
  });
});

afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await config?.cleanup();
  await rm(pluginDir, { recursive: true, force: true });
});

describe('watchdog', () => {
  for (const [thread, loop] of [[false, 'event loop'], [true, 'plugin thread event loop']] as const) {
    it(`kills a process whose ${loop} has been stalled for the watchdog period, and says why`, async () => {
      gw = await start(thread);
      expect((await send(gw.url, { path: '/' })).status).toBe(200);
      const exited = new Promise<NodeJS.Signals | null>((resolve) => gw.child.once('exit', (_code, signal) => resolve(signal)));
      const started = performance.now();
      // The plugin loops for up to 60 s: nothing else can run on that loop.
      void send(gw.url, { path: '/', headers: { 'x-misbehave': '1' }, timeoutMs: 30_000 }).catch(() => undefined);
      expect(await exited).toBe('SIGKILL');
      expect(performance.now() - started).toBeLessThan(20_000);
      expect(gw.stderr()).toContain('GH_WATCHDOG');
      expect(gw.stderr()).toContain(`"msg":"${loop} stalled for`);
    });
  }
});
