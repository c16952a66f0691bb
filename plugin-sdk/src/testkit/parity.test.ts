import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createFakeClock } from './clock.ts';
import { expectAllowed, expectDenied, expectFailure } from './expect.ts';
import type { PluginHarness } from './harness.ts';
import { runInProcess } from './in-process.ts';
import { startPlugin, TEST_MODES } from './start-plugin.ts';
import { createTestStore } from './store.ts';
import { Probe } from './fixtures/probe-plugin.ts';

// Test-kit parity (SPEC 5.3, issue 11): in-process mode gives the plugin exactly the sandbox's
// globals and host API. Each probe would have passed the old in-process mode (the plugin object
// run in Node's realm) and must now behave as in the sandbox.

const entry = new URL('./fixtures/probe-plugin.ts', import.meta.url);
const seen = (decision: unknown): unknown => {
  expectAllowed(decision as never);
  return JSON.parse((decision as { headersToSet: { key: string; value: string }[] }).headersToSet.find((h) => h.key === 'x-seen')!.value);
};
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((_req, res) => res.end('hello from a real server'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server.close());

describe('the old in-process mode (a plugin object in Node\'s realm) passed for the wrong reasons', () => {
  it('Buffer worked there, and does not exist in the sandbox', async () => {
    const old = await runInProcess(Probe);
    expect(seen(await old.authorize({ headers: { 'x-probe': 'buffer' } }))).toBe('aGk=');
  });
});

describe('both modes see the same sandbox', () => {
  const started: PluginHarness[] = [];
  const start = async (mode: (typeof TEST_MODES)[number], options: Partial<Parameters<typeof startPlugin>[1]> = {}) => {
    const plugin = await startPlugin(mode, { entry, name: 'Probe', ...options });
    started.push(plugin);
    return plugin;
  };
  afterEach(async () => {
    await Promise.all(started.splice(0).map((plugin) => plugin.close()));
  });

  it('exactly the same global names, without Node\'s', async () => {
    const [inProcess, sandbox] = await Promise.all(TEST_MODES.map((mode) => start(mode)));
    const a = seen(await inProcess!.authorize({ headers: { 'x-probe': 'globals' } })) as string[];
    const b = seen(await sandbox!.authorize({ headers: { 'x-probe': 'globals' } })) as string[];
    expect(a).toEqual(b);
    for (const name of ['Buffer', 'process', 'require', 'setImmediate', 'global', '__dirname', 'queueMicrotask', 'SharedArrayBuffer']) expect(a).not.toContain(name);
    for (const name of ['fetch', 'crypto', 'URL', 'TextEncoder', 'setTimeout', 'structuredClone', 'performance', 'console', 'WebAssembly', 'AbortController', 'AbortSignal', 'DOMException']) expect(a).toContain(name);
  });

  it.each(TEST_MODES)('%s: Buffer and process are missing (the plugin fails, and expectDenied says so)', async (mode) => {
    const plugin = await start(mode);
    for (const probe of ['buffer', 'process-env']) {
      const decision = await plugin.authorize({ headers: { 'x-probe': probe } });
      expectFailure(decision, 'GH_PLUGIN_THREW');
      expect(() => expectDenied(decision)).toThrow(/the host denied because the plugin failed: GH_PLUGIN_THREW/);
      expect(() => expectDenied(decision, 403)).toThrow(/plugin failed/);
    }
    expect(plugin.failures.map((f) => f.message)).toEqual([expect.stringContaining("reading 'from'"), expect.stringContaining("reading 'env'")]);
  });

  it.each(TEST_MODES)('%s: what the host API returns belongs to the plugin\'s realm, with no way out', async (mode) => {
    const plugin = await start(mode);
    expect(seen(await plugin.authorize({ headers: { 'x-probe': 'realms' } }))).toEqual({
      digest: true,
      random: true,
      promise: true,
      refusedType: true,
      refused: 'fetch is not allowed: this step declares no egress (pluginAuth.egress)',
      url: true,
      escape: 'undefined',
    });
  });

  it.each(TEST_MODES)('%s: structuredClone, Request, Response.redirect, TextDecoder labels and URL follow the standards', async (mode) => {
    const plugin = await start(mode);
    expect(seen(await plugin.authorize({ headers: { 'x-probe': 'web-apis' } }))).toEqual({
      proxy: 'DataCloneError',
      spoof: { kept: 1 },
      request: 'http://a.test/y',
      relative: 'TypeError',
      patch: 'patch',
      redirect: 'http://a.test/',
      label: 'utf-8',
      fragment: 'http://a.test/#frag?',
    });
  });

  it('fetch goes through the same egress rules: a real server when declared, the same TypeError otherwise', async () => {
    const answers = [];
    for (const mode of TEST_MODES) {
      const plugin = await start(mode, { config: { Url: base }, egress: [base] });
      expect(seen(await plugin.authorize({ headers: { 'x-probe': 'fetch' } }))).toEqual({ status: 200, body: 'hello from a real server' });
      answers.push(seen(await plugin.authorize({ headers: { 'x-probe': 'fetch-other' } })));
    }
    expect(answers[0]).toBe(`TypeError: fetch to http://127.0.0.1:1 is not allowed: this step may fetch only ${base}`);
    expect(answers[1]).toBe(answers[0]);
  });

  it.each(TEST_MODES)('%s: secrets by name, redacted from what the plugin logs', async (mode) => {
    const plugin = await start(mode, { secrets: { Token: 's3cr3t-value' } });
    expect(seen(await plugin.authorize({ headers: { 'x-probe': 'secret' } }))).toBe(12);
    expect(plugin.logs).toEqual([{ level: 'info', message: 'the token is [secret]' }]);
  });

  it.each(TEST_MODES)('%s: the store keeps JSON copies and refuses values over its bound with the host\'s RangeError', async (mode) => {
    const plugin = await start(mode);
    await plugin.authorize({ headers: { 'x-probe': 'store-set', 'x-value': 'a', 'x-ttl': '60000' } });
    expect(seen(await plugin.authorize({ headers: { 'x-probe': 'store-get' } }))).toEqual({ v: 'a' });
    expect(seen(await plugin.authorize({ headers: { 'x-probe': 'store-big' } }))).toBe('RangeError: ctx.store.set: values are at most 65536 characters of JSON');
  });

  it.each(TEST_MODES)('%s: increment and setIfAbsent answer as the host\'s, and a fake clock expires their TTLs (sandbox mode too)', async (mode) => {
    const clock = createFakeClock();
    const plugin = await start(mode, { clock });
    const count = (by = '1') => plugin.authorize({ headers: { 'x-probe': 'store-count', 'x-by': by, 'x-ttl': '5000' } });
    expect(seen(await count())).toEqual({ n: 1, first: true });
    expect(seen(await count('5'))).toEqual({ n: 6, first: false });
    await clock.advance(4999);
    expect(seen(await count('-2'))).toEqual({ n: 4, first: false });
    await clock.advance(1);
    expect(seen(await count())).toEqual({ n: 1, first: true });
  });

  it.each(TEST_MODES)('%s: plugin.logs is complete when authorize() resolves', async (mode) => {
    const plugin = await start(mode);
    for (let i = 1; i <= 20; i++) {
      await plugin.authorize({ headers: { 'x-probe': 'log' } });
      expect(plugin.logs).toHaveLength(3 * i);
    }
    expect(plugin.logs[2]).toEqual({ level: 'info', message: 'line 2', fields: { i: 2 } });
  });

  it.each(TEST_MODES)('%s: expectDenied passes the plugin\'s own denial, and checks its status', async (mode) => {
    const plugin = await start(mode);
    const decision = await plugin.authorize({ headers: { 'x-probe': 'deny' } });
    expectDenied(decision, 401);
    expect(() => expectDenied(decision, 403)).toThrow('expected the plugin to deny with 403, got 401');
    expect(() => expectAllowed(decision)).toThrow('expected the plugin to allow, but it denied with 401');
    expect(() => expectFailure(decision)).toThrow('expected a plugin failure');
    const thrown = await plugin.authorize({ headers: { 'x-probe': 'throw' } });
    expect(thrown).toEqual({ allowed: false, status: 403, headers: [], body: '' });
    expect(() => expectAllowed(thrown)).toThrow('expected the plugin to allow, but it failed: GH_PLUGIN_THREW: Authorize threw: TypeError: probe asked to throw');
  });

  it.each(TEST_MODES)('%s: a fake clock drives Date and performance.now', async (mode) => {
    const clock = createFakeClock(Date.UTC(2030, 0, 1));
    const plugin = await start(mode, { clock });
    expect(seen(await plugin.authorize({ headers: { 'x-probe': 'clock' } }))).toEqual({ now: Date.UTC(2030, 0, 1), date: Date.UTC(2030, 0, 1), perf: 0 });
    await clock.advance(90_000);
    expect(seen(await plugin.authorize({ headers: { 'x-probe': 'clock' } }))).toEqual({ now: Date.UTC(2030, 0, 1) + 90_000, date: Date.UTC(2030, 0, 1) + 90_000, perf: 90_000 });
  });

  it('in-process: a fake clock fires timers and expires store entries only when advanced', async () => {
    const clock = createFakeClock();
    const plugin = await start('in-process', { clock });
    const pending = plugin.authorize({ headers: { 'x-probe': 'sleep', 'x-ms': '300' } });
    let done = false;
    void pending.then(() => (done = true));
    await clock.advance(299);
    expect(done).toBe(false);
    await clock.advance(1);
    expect(seen(await pending)).toEqual({ slept: 300 });

    await plugin.authorize({ headers: { 'x-probe': 'store-set', 'x-value': 'b', 'x-ttl': '5000' } });
    await clock.advance(4999);
    expect(seen(await plugin.authorize({ headers: { 'x-probe': 'store-get' } }))).toEqual({ v: 'b' });
    await clock.advance(1);
    expect(seen(await plugin.authorize({ headers: { 'x-probe': 'store-get' } }))).toBeNull();
  });
});

describe('the in-process store answers as the host\'s StepStore', () => {
  it('same answers and errors for the same operations', async () => {
    const hostStore = '@gatehouse/core/extauth/plugins/store/step-store.ts';
    const hostHub = '@gatehouse/core/extauth/plugins/store/store-hub.ts';
    const { StepStore, memoryStoreBackend } = (await import(hostStore)) as { StepStore: new (backend: unknown) => { dispatch: (...args: unknown[]) => unknown }; memoryStoreBackend: (identity: string, limits: object, route: unknown) => unknown };
    const { MemoryHub } = (await import(hostHub)) as { MemoryHub: new () => unknown };
    const host = new StepStore(memoryStoreBackend('parity', {}, new MemoryHub())).dispatch;
    const testStore = createTestStore(createFakeClock());
    const test = (...args: unknown[]) => (testStore as (...a: unknown[]) => { v: unknown })(...args).v;
    const ops: unknown[][] = [
      ['set', 'a', '1'],
      ['get', 'a'],
      ['get', 'missing'],
      ['delete', 'a'],
      ['delete', 'a'],
      ['set', 'b', '2', 1000],
      ['get', 'b'],
      ['set', 'x'.repeat(513), '1'],
      ['set', 'c', 7],
      ['set', 'c', 'x'.repeat(65_537)],
      ['set', 'c', '1', 0],
      ['set', 'c', '1', Number.NaN],
      [7, 'a'],
      ['get', 42],
      ['increment', 'n', 2, 1000],
      ['increment', 'n', -5],
      ['increment', 'n', 1.5],
      ['increment', 'n', Number.MAX_SAFE_INTEGER],
      ['increment', 'b', 1],
      ['setIfAbsent', 'once', '1', 1000],
      ['setIfAbsent', 'once', '2'],
      ['get', 'once'],
      ['setIfAbsent', 'once', 'x'.repeat(65_537)],
      ['bogus', 'a'],
    ];
    const run = (dispatch: (...args: unknown[]) => unknown) =>
      ops.map((args) => {
        try {
          return { value: dispatch(...args) };
        } catch (error) {
          return { error: `${(error as Error).name}: ${(error as Error).message}` };
        }
      });
    expect(run(test)).toEqual(run(host));
  });
});
