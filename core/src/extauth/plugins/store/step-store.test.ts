import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthDecision } from '../../step.ts';
import { PluginCodes } from '../codes.ts';
import { createPluginStep, type PluginStepOptions } from '../plugin-step.ts';
import type { StoreSettings } from './step-store.ts';
import { MemoryHub, RemoteMemoryRoute, serveStoreRequests, type MemoryRoute, type StoreRequest } from './store-hub.ts';
import { pluginDir, recordingLogger, request } from '../test-support.ts';

// SPEC 5.3 "Per-step store" in a real isolate: the memory hub keyed by step identity (what keeps
// counters across reloads and rebuilds), a hub in another process (answers later, batched, with a
// deadline), bounds on what a plugin may have waiting, bad arguments, an unreachable Redis.

const HOST_API = new URL('../fixtures/host-api.ts', import.meta.url);
let plugins: Awaited<ReturnType<typeof pluginDir>>;

beforeAll(async () => {
  plugins = await pluginDir([{ entry: HOST_API, name: 'HostApi' }]);
});
afterAll(async () => {
  await plugins?.remove();
});

const build = (store: StoreSettings, options: Partial<PluginStepOptions> = {}) => {
  const logger = recordingLogger();
  return { logger, step: createPluginStep({ name: 'HostApi', exportedSymbolName: 'StoreHostile', config: { Url: '' } }, { pluginDir: plugins.dir, logger, store, ...options }) };
};
const header = (decision: AuthDecision, name: string) => (decision.allowed ? decision.headersToSet.find((h) => h.key === name)?.value : undefined);

describe('the memory hub', () => {
  it('keeps a step\'s store by identity: a step built again (reload, rebuild) counts on; another identity has its own', async () => {
    const hub = new MemoryHub();
    const first = await build({ kind: 'memory', identity: 'ns/cfg/0/HostApi' }, { memoryRoute: hub }).step;
    expect(header(await first.authorize(request()), 'x-value')).toBe('1');
    expect(header(await first.authorize(request()), 'x-value')).toBe('2');
    await first.close();
    const again = await build({ kind: 'memory', identity: 'ns/cfg/0/HostApi' }, { memoryRoute: hub }).step;
    expect(header(await again.authorize(request()), 'x-value')).toBe('3');
    const other = await build({ kind: 'memory', identity: 'ns/cfg/1/HostApi' }, { memoryRoute: hub }).step;
    expect(header(await other.authorize(request()), 'x-value')).toBe('1');
    expect(hub.size).toBe(2);
    await Promise.all([again.close(), other.close()]);
  });

  it('drops a store unused for an hour whose entries have all expired, never one with live entries', () => {
    let now = 0;
    const hub = new MemoryHub(() => now);
    const limits = { maxBytes: 1024, maxKeyLength: 512, maxValueLength: 100 };
    hub.run('short', limits, { op: 'increment', key: 'a', arg: 1, ttlMs: 1000 });
    hub.run('forever', limits, { op: 'set', key: 'a', arg: '1' });
    now = 2 * 60 * 60 * 1000;
    hub.sweep();
    expect(hub.size).toBe(1);
    expect(hub.run('forever', limits, { op: 'get', key: 'a' })).toBe('1');
  });

  it('answers bad arguments with the plugin\'s TypeError/RangeError, and never lets more than 1,024 operations wait', async () => {
    const { step: built } = build({ kind: 'memory', identity: 'bad-args' }, { memoryRoute: new MemoryHub() });
    const step = await built;
    expect(header(await step.authorize(request({ 'x-op': 'bad-args' })), 'x-errors')).toBe('TypeError,TypeError,TypeError,RangeError,RangeError,TypeError');
    await step.close();
    // A hub in another process that answers once 1,024 operations wait: the rest are refused at once.
    const hub = new MemoryHub();
    let held: StoreRequest[] = [];
    let maxWaiting = 0;
    const remote: RemoteMemoryRoute = new RemoteMemoryRoute((requests) => {
      held.push(...requests);
      maxWaiting = Math.max(maxWaiting, held.length);
      if (held.length < 1024) return;
      const batch = held;
      held = [];
      serveStoreRequests(batch, hub, (replies) => remote.answered(replies));
    });
    // Inline, the flood runs in one synchronous crossing (no answer can come back meanwhile);
    // 1,100 host calls take more CPU than the default 50 ms limit on a loaded machine.
    const flooding = await build({ kind: 'memory', identity: 'flood' }, { memoryRoute: remote, wallTimeoutMs: 5000, cpuTimeoutMs: 1000 }).step;
    const decision = await flooding.authorize(request({ 'x-op': 'flood' }));
    // Every operation was answered or refused (RangeError), none lost; the hub counted exactly the
    // answered ones; and no more than 1,024 ever waited at once (checked where they wait).
    const ok = Number(header(decision, 'x-ok'));
    expect(ok + Number(header(decision, 'x-refused'))).toBe(1100);
    expect(header(decision, 'x-other')).toBe('');
    expect(ok).toBeGreaterThanOrEqual(1024);
    expect(maxWaiting).toBeLessThanOrEqual(1024);
    expect(hub.run('flood', { maxBytes: 1024, maxKeyLength: 512, maxValueLength: 100 }, { op: 'get', key: 'flood' })).toBe(String(ok));
    held = [];
    const hubOnly = await build({ kind: 'memory', identity: 'flood-after' }, { memoryRoute: hub }).step;
    expect(header(await hubOnly.authorize(request()), 'x-value')).toBe('1');
    await hubOnly.close();
    await flooding.close();
  });

  it('a hub that never answers: the call is denied by its deadline, the isolate keeps serving', async () => {
    const silent: MemoryRoute = new RemoteMemoryRoute(() => {});
    const { step: built, logger } = build({ kind: 'memory', identity: 'silent' }, { memoryRoute: silent, wallTimeoutMs: 300 });
    const step = await built;
    const started = performance.now();
    expect(await step.authorize(request())).toMatchObject({ allowed: false, status: 403 });
    expect(performance.now() - started).toBeLessThan(5000);
    expect(logger.lines.some((line) => line.fields.code === PluginCodes.STORE_UNAVAILABLE || line.fields.code === PluginCodes.TIMEOUT)).toBe(true);
    expect(header(await step.authorize(request({ 'x-op': 'catch' })), 'x-caught')).toBe('StoreUnavailableError');
    expect(logger.lines.some((line) => line.message === 'plugin isolate rebuilt')).toBe(false);
    await step.close();
  });
});

describe('a store that answers later, at once (Redis on a fast link)', () => {
  // Each operation is answered by a promise already settled: the answer is ready while the
  // isolate's thread is still in the host callback that started the operation, or just after.
  const quickRoute = (): MemoryRoute => {
    const hub = new MemoryHub();
    return { run: (identity, limits, call) => Promise.resolve(hub.run(identity, limits, call)) };
  };

  it('hands an answer in only between the isolate\'s turns: never in the middle of code that runs on its thread', { timeout: 60_000 }, async () => {
    const logger = recordingLogger();
    const step = await createPluginStep({ name: 'HostApi', exportedSymbolName: 'StoreTurns', config: { Url: '' } }, { pluginDir: plugins.dir, logger, store: { kind: 'memory', identity: 'turns' }, memoryRoute: quickRoute(), inline: false, wallTimeoutMs: 5000, cpuTimeoutMs: 1000 });
    for (let i = 0; i < 20; i++) {
      const decision = await step.authorize(request());
      expect(decision, JSON.stringify(logger.lines.filter((l) => l.level === 'error').slice(0, 3))).toMatchObject({ allowed: true });
      expect(header(decision, 'x-interleaved')).toBe('0');
      expect(header(decision, 'x-gone')).toBe('true');
    }
    await step.close();
  });

  it('answers the store operations of Start (before, an answer that came later was dropped and Start hung to its timeout)', async () => {
    // Ten starts: an answer handed in synchronously while Start waited in the store's host callback
    // overtook the operation's registration in some of them (then Start hung too).
    for (let i = 0; i < 10; i++) {
      const logger = recordingLogger();
      const step = await createPluginStep({ name: 'HostApi', exportedSymbolName: 'StoreInStart', config: { Url: '' } }, { pluginDir: plugins.dir, logger, store: { kind: 'memory', identity: `start-${i}` }, memoryRoute: quickRoute(), startTimeoutMs: 5_000 });
      expect(header(await step.authorize(request()), 'x-started')).toBe('{"at":"start"}');
      await step.close();
    }
  });

  it('loses no answer in a chain of operations after an await (a login callback)', { timeout: 60_000 }, async () => {
    const logger = recordingLogger();
    const step = await createPluginStep({ name: 'HostApi', exportedSymbolName: 'StoreChain', config: { Url: '' } }, { pluginDir: plugins.dir, logger, store: { kind: 'memory', identity: 'chain' }, memoryRoute: quickRoute(), wallTimeoutMs: 2000 });
    for (let i = 0; i < 100; i++) {
      const decision = await step.authorize(request({ 'x-key': `k${i}` }));
      expect(decision, JSON.stringify(logger.lines.filter((l) => l.level === 'error').slice(0, 3))).toMatchObject({ allowed: true });
      expect([header(decision, 'x-gone'), header(decision, 'x-value')]).toEqual(['true', '1']);
    }
    await step.close();
  });
});

describe('an unreachable Redis (nothing listens on its port)', () => {
  const redis = (failOpen: boolean): StoreSettings => ({ kind: 'redis', identity: 'r', redis: { url: 'redis://127.0.0.1:1' }, keyPrefix: 'test:', timeoutMs: 100, failOpen });

  it('fails closed by default and open with failOpen, at once, logging GH_PLUGIN_STORE_UNAVAILABLE; a plugin may catch StoreUnavailableError', async () => {
    const closed = build(redis(false));
    const open = build(redis(true));
    const [deny, allow] = await Promise.all([closed.step, open.step]);
    expect(await deny.authorize(request())).toEqual({ allowed: false, status: 403, headers: [], body: '' });
    expect(await allow.authorize(request())).toEqual({ allowed: true, headersToSet: [], headersToRemove: [] });
    for (const { logger } of [closed, open]) expect(logger.lines.some((line) => line.fields.code === PluginCodes.STORE_UNAVAILABLE)).toBe(true);
    expect(header(await deny.authorize(request({ 'x-op': 'catch' })), 'x-caught')).toBe('StoreUnavailableError');
    await Promise.all([deny.close(), allow.close()]);
  });
});
