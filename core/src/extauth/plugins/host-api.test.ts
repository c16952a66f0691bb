import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AuthDecision } from '../step.ts';
import { PluginCodes } from './codes.ts';
import { createPluginStep, type PluginStepOptions } from './plugin-step.ts';
import { pluginDir, recordingLogger, request, watchLoopGaps } from './test-support.ts';

// SPEC 5.3: timers, fetch to declared egress, the per-call wall deadline, in a real isolate
// against real HTTP servers on 127.0.0.1.

const HOST_API = new URL('./fixtures/host-api.ts', import.meta.url);
let plugins: Awaited<ReturnType<typeof pluginDir>>;
let server: Server;
let base: string;
const seen: IncomingMessage[] = [];

beforeAll(async () => {
  plugins = await pluginDir([{ entry: HOST_API, name: 'HostApi' }]);
  server = createServer((req, res) => {
    seen.push(req);
    const path = req.url ?? '/';
    if (path === '/hello') return res.end(`hello ${req.headers['x-from'] ?? ''}`.trim());
    if (path === '/jwks') return res.end('{"keys":[]}');
    if (path === '/slow') return void setTimeout(() => res.end('slow'), 200);
    if (path === '/hang') return; // never answers
    if (path === '/big') return res.end(Buffer.alloc(2 * 1024 * 1024, 0x61));
    if (path === '/big-chunked') {
      res.writeHead(200, { 'transfer-encoding': 'chunked' });
      for (let i = 0; i < 40; i++) res.write(Buffer.alloc(64 * 1024, 0x62));
      return res.end();
    }
    if (path === '/redirect-here') return res.writeHead(302, { location: '/hello' }).end();
    if (path === '/redirect-away') return res.writeHead(302, { location: `http://127.0.0.2:${(server.address() as AddressInfo).port}/hello` }).end();
    res.writeHead(404).end('no such path');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server?.closeAllConnections();
  server?.close();
  await plugins?.remove();
});

function step(symbol: string, extra: { egress?: { url?: string; upstreamRef?: { name: string; namespace?: string } }[]; config?: Record<string, unknown> } & Partial<PluginStepOptions> = {}) {
  const logger = recordingLogger();
  const { egress, config, ...options } = extra;
  const built = createPluginStep(
    { name: 'HostApi', exportedSymbolName: symbol, config: { Url: base, ...config }, ...(egress ? { egress } : {}) },
    { pluginDir: plugins.dir, logger, ...options },
  );
  return { logger, step: built };
}

function headers(decision: AuthDecision): Record<string, string> {
  if (!decision.allowed) return Object.fromEntries(decision.headers.map((h) => [h.key, h.value]));
  return Object.fromEntries(decision.headersToSet.map((h) => [h.key, h.value]));
}

for (const inline of [true, false]) {
  describe(`timers and the wall deadline (${inline ? 'inline first' : 'isolate thread'})`, () => {
    it('setTimeout inside a call waits and then the call answers', async () => {
      const s = await step('Sleeper', { inline }).step;
      const decision = await s.authorize(request({ 'x-ms': '30' }));
      expect(decision.allowed).toBe(true);
      expect(Number(headers(decision)['x-slept'])).toBeGreaterThanOrEqual(25);
      await s.close();
    });

    it('setInterval ticks and clears itself; clearTimeout stops a timer', async () => {
      const s = await step('Ticker', { inline }).step;
      const decision = await s.authorize(request());
      expect(headers(decision)).toMatchObject({ 'x-ticks': '3', 'x-cancelled-ran': 'false' });
      await s.close();
    });

    it('a timer longer than the wall deadline denies the call at the deadline, with the timeout code', async () => {
      const { step: built, logger } = step('Sleeper', { inline, wallTimeoutMs: 200 });
      const s = await built;
      const started = performance.now();
      expect(await s.authorize(request({ 'x-ms': '5000' }))).toMatchObject({ allowed: false, status: 403 });
      const took = performance.now() - started;
      expect(took).toBeGreaterThanOrEqual(190);
      expect(took).toBeLessThan(1000);
      expect(logger.lines.find((l) => l.fields.code === PluginCodes.TIMEOUT)?.fields.cause).toMatch(/200 ms wall deadline/);
      // The step still serves calls that finish in time, on the same isolate: waiting is no fault.
      expect((await s.authorize(request({ 'x-ms': '1' }))).allowed).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(logger.lines.filter((l) => /isolate (rebuilt|dropped)/.test(l.message))).toEqual([]);
      await s.close();
    });

    it('a timer left behind by a call that already answered never fires', async () => {
      const { step: built, logger } = step('Leftover', { inline });
      const s = await built;
      for (let i = 0; i < 5; i++) expect((await s.authorize(request())).allowed).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 60));
      expect(logger.lines.filter((l) => l.message === 'leftover timer fired')).toEqual([]);
      await s.close();
    });

    it('a timer flood: the excess throws a catchable RangeError; nothing crashes', async () => {
      // 2,048 host calls (set and clear) in one call: a CPU limit loaded CI machines cannot miss.
      const s = await step('TimerFlood', { inline, cpuTimeoutMs: 2000, wallTimeoutMs: 5000 }).step;
      const decision = await s.authorize(request());
      expect(headers(decision)['x-timers']).toBe('1024');
      expect(headers(decision)['x-error']).toMatch(/^RangeError: too many timers/);
      await s.close();
    });

    it('a loop after an await: stopped by the CPU limit long before the wall deadline, the isolate is dropped and rebuilt, the step recovers', async () => {
      // The code after `await sleep(1)` runs in the crossing that hands the timer's answer in,
      // bounded like a call (twice the 50 ms CPU limit here); before, only the wall deadline and
      // a ping after it stopped it (the plugin-host fuzz measured ~1 s of CPU for such a program).
      const { step: built, logger } = step('LoopAfterAwait', { inline, wallTimeoutMs: 20_000 });
      const s = await built;
      const started = performance.now();
      expect(await s.authorize(request({ 'x-misbehave': '1' }))).toMatchObject({ allowed: false, status: 403 });
      expect(performance.now() - started).toBeLessThan(10_000);
      expect(logger.lines.some((l) => l.fields.code === PluginCodes.TIMEOUT && l.message.startsWith('plugin isolate dropped: the code after a fetch, a timer or a crypto.subtle operation failed'))).toBe(true);
      // The next calls get a fresh isolate.
      let allowed = false;
      for (let i = 0; i < 40 && !allowed; i++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        allowed = (await s.authorize(request())).allowed;
      }
      expect(allowed).toBe(true);
      expect(logger.lines.some((l) => l.message === 'plugin isolate rebuilt')).toBe(true);
      await s.close();
    });

    it('a loop started after the answer went out never blocks the event loop; the isolate is replaced', async () => {
      const { step: built } = step('SpinAfterAnswer', { inline, callTimeoutMs: 400 });
      const s = await built;
      // The event loop's worst gap while the isolate spins: inline calls must not wait for it.
      const gaps = watchLoopGaps();
      let worst: number;
      try {
        expect((await s.authorize(request({ 'x-misbehave': '1' }))).allowed).toBe(true);
        let allowed = 0;
        for (let i = 0; i < 40 && allowed < 3; i++) {
          if ((await s.authorize(request())).allowed) allowed++;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        expect(allowed).toBe(3);
      } finally {
        worst = gaps.stop();
      }
      expect(worst).toBeLessThan(300);
      await s.close();
    });
  });
}

describe('secrets and ctx.store', () => {
  it('ctx.secrets carries the resolved values; a plugin that logs one gets [secret] in the log', async () => {
    const logger = recordingLogger();
    const s = await createPluginStep(
      { name: 'HostApi', exportedSymbolName: 'SecretReader', secretRefs: { ApiKey: { name: 'keys', key: 'api-key' } } },
      { pluginDir: plugins.dir, logger, namespace: 'team', resolveSecret: (ref) => (ref.name === 'keys' && ref.namespace === 'team' && ref.key === 'api-key' ? 's3cr3t-value' : undefined) },
    );
    expect(headers(await s.authorize(request()))).toMatchObject({ 'x-secret-length': '12', 'x-secret-names': 'ApiKey' });
    // Log callbacks are asynchronous.
    const line = await vi.waitFor(() => logger.lines.find((l) => l.fields.source === 'plugin') ?? expect.fail('no plugin log line yet'), { timeout: 5_000, interval: 10 });
    expect(line?.message).toBe('the key is [secret]');
    expect(JSON.stringify(logger.lines)).not.toContain('s3cr3t-value');
    await s.close();
  });

  it('a secretRef that does not resolve fails the build naming it', async () => {
    await expect(
      createPluginStep({ name: 'HostApi', exportedSymbolName: 'SecretReader', secretRefs: { ApiKey: { name: 'gone', key: 'k' } } }, { pluginDir: plugins.dir, logger: recordingLogger(), resolveSecret: () => undefined }),
    ).rejects.toThrow(/secretRefs\.ApiKey: Secret default\/gone key "k" is not served/);
  });

  it('ctx.store keeps values across calls and across an isolate rebuild; TTLs expire; values are bounded', async () => {
    const { step: built, logger } = step('StoreCounter');
    const s = await built;
    expect(headers(await s.authorize(request()))['x-count']).toBe('1');
    // 1 s: the call reads the mark back after two more store operations (a 40 ms TTL ran out in
    // between on a loaded machine).
    expect(headers(await s.authorize(request({ 'x-ttl': '1000' })))).toMatchObject({ 'x-count': '2', 'x-mark': '{"at":2}' });
    expect(headers(await s.authorize(request()))['x-big-error']).toMatch(/^RangeError: ctx\.store\.set: values are at most 65536 characters/);
    // A loop: the isolate is dropped and rebuilt; the store is the step's and survives.
    expect((await s.authorize(request({ 'x-misbehave': '1' }))).allowed).toBe(false);
    let count = '';
    for (let i = 0; i < 40 && !count; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      const decision = await s.authorize(request());
      if (decision.allowed) count = headers(decision)['x-count']!;
    }
    expect(logger.lines.some((l) => l.message === 'plugin isolate rebuilt')).toBe(true);
    expect(Number(count)).toBeGreaterThanOrEqual(4);
    // The mark set with a 1 s TTL expires.
    await expect.poll(async () => headers(await s.authorize(request()))['x-mark'], { timeout: 10_000, interval: 100 }).toBe('null');
    await s.close();
  });
});

describe('fetch to declared egress (SPEC 5.3)', () => {
  const upstreamRef = { name: 'keys', namespace: 'auth' };
  const resolveUpstream = (ref: { name: string; namespace: string }) =>
    ref.name === 'keys' && ref.namespace === 'auth' ? { static: { hosts: [{ addr: '127.0.0.1', port: Number(new URL(base).port) }] } } : undefined;

  it('reaches a server declared by URL and one declared as an Upstream; headers and body arrive', async () => {
    const { step: built } = step('Fetcher', { egress: [{ url: base }, { upstreamRef }], resolveUpstream });
    const s = await built;
    expect(headers(await s.authorize(request({ 'x-path': '/hello' })))).toMatchObject({ 'x-status': '200', 'x-body': 'hello plugin' });
    const viaUpstream = await s.authorize(request({ 'x-base': 'http://keys.auth.upstream', 'x-path': '/hello' }));
    expect(headers(viaUpstream)).toMatchObject({ 'x-status': '200', 'x-body': 'hello plugin' });
    await s.close();
  });

  it('an undeclared origin throws a catchable TypeError naming the allowed origins; nothing is sent', async () => {
    const { step: built } = step('Fetcher', { egress: [{ url: base }] });
    const s = await built;
    const before = seen.length;
    const other = `http://127.0.0.2:${new URL(base).port}`;
    const decision = await s.authorize(request({ 'x-base': other, 'x-path': '/hello' }));
    expect(decision).toMatchObject({ allowed: false, status: 502 });
    expect(headers(decision)['x-error']).toBe(`TypeError: fetch to ${other} is not allowed: this step may fetch only ${base}`);
    expect(seen.length).toBe(before);
    // No egress at all: the same kind of error.
    const none = await (await step('Fetcher').step).authorize(request({ 'x-path': '/hello' }));
    expect(headers(none)['x-error']).toMatch(/^TypeError: fetch is not allowed: this step declares no egress/);
    await s.close();
  });

  it('redirects are followed only to allowed origins', async () => {
    const s = await step('Fetcher', { egress: [{ url: base }] }).step;
    expect(headers(await s.authorize(request({ 'x-path': '/redirect-here' })))).toMatchObject({ 'x-status': '200', 'x-body': 'hello plugin', 'x-redirected': 'true' });
    expect(headers(await s.authorize(request({ 'x-path': '/redirect-away' })))['x-error']).toMatch(/^TypeError: fetch: redirected to http:\/\/127\.0\.0\.2:\d+, which is not allowed/);
    await s.close();
  });

  it('a response body over the limit fails the fetch (declared length and chunked)', async () => {
    const s = await step('Fetcher', { egress: [{ url: base }] }).step;
    expect(headers(await s.authorize(request({ 'x-path': '/big' })))['x-error']).toMatch(/^TypeError: fetch: response body larger than 1048576 bytes/);
    expect(headers(await s.authorize(request({ 'x-path': '/big-chunked' })))['x-error']).toMatch(/^TypeError: fetch: response body larger than 1048576 bytes/);
    await s.close();
  });

  it('a server that never answers: the fetch fails at the deadline, the call is denied in time', async () => {
    const { step: built, logger } = step('Fetcher', { egress: [{ url: base }], wallTimeoutMs: 300 });
    const s = await built;
    const started = performance.now();
    const decision = await s.authorize(request({ 'x-path': '/hang' }));
    expect(performance.now() - started).toBeLessThan(1000);
    // Either the fetch's own timeout answered first (502 from the plugin) or the call's deadline (403).
    expect(decision.allowed).toBe(false);
    expect(decision.allowed === false && (decision.status === 403 ? logger.lines.some((l) => l.fields.code === PluginCodes.TIMEOUT) : headers(decision)['x-error']?.startsWith('TypeError: fetch: no response within 300 ms'))).toBe(true);
    await s.close();
  });

  it('at most 16 fetches in flight per isolate: the excess is refused with a TypeError', async () => {
    const s = await step('FetchFlood', { egress: [{ url: base }] }).step;
    const decision = await s.authorize(request({ 'x-count': '40' }));
    expect(headers(decision)).toMatchObject({ 'x-ok': '16', 'x-refused': '24' });
    await s.close();
  });

  it('a loop after a fetch answered: stopped by the CPU limit long before the wall deadline, the step recovers', async () => {
    const { step: built, logger } = step('Fetcher', { egress: [{ url: base }], wallTimeoutMs: 20_000 });
    const s = await built;
    const started = performance.now();
    expect(await s.authorize(request({ 'x-path': '/hello', 'x-loop': '1' }))).toMatchObject({ allowed: false, status: 403 });
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(logger.lines.some((l) => l.fields.code === PluginCodes.TIMEOUT && l.message.startsWith('plugin isolate dropped: the code after a fetch, a timer or a crypto.subtle operation failed'))).toBe(true);
    let decision: AuthDecision | undefined;
    for (let i = 0; i < 40 && !decision?.allowed; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      decision = await s.authorize(request({ 'x-path': '/hello' }));
    }
    expect(decision && headers(decision)).toMatchObject({ 'x-status': '200', 'x-body': 'hello plugin' });
    await s.close();
  });

  it('Start may fetch (a JWKS)', async () => {
    const s = await step('StartFetch', { egress: [{ url: base }] }).step;
    expect(headers(await s.authorize(request()))['x-started']).toBe('{"keys":[]}');
    await s.close();
  });
});

describe('Web globals in a real isolate', () => {
  it('URL, URLSearchParams, structuredClone, Response and Headers work; their constructors lead to no host', async () => {
    const s = await step('WebGlobals').step;
    expect(headers(await s.authorize(request()))).toMatchObject({
      'x-url': 'https://a.test/p?y=1&z=%C3%BC&n=x+y',
      'x-z': 'ü',
      'x-clone': '2',
      'x-response': 'hi b',
      'x-crypto-key': 'function',
      'x-escape': 'undefinedundefined',
    });
    await s.close();
  });
});

describe('hostile plugins against the host API', () => {
  it('no host API object leads to the host; a secret cannot leave for an undeclared origin', async () => {
    const logger = recordingLogger();
    const s = await createPluginStep(
      { name: 'HostApi', exportedSymbolName: 'HostReach', secretRefs: { Token: { name: 't', key: 'k' } } },
      { pluginDir: plugins.dir, logger, resolveSecret: () => 'top-secret-token' },
    );
    const result = headers(await s.authorize(request()));
    const reach = JSON.parse(result['x-reach']!) as Record<string, string>;
    expect(Object.keys(reach).length).toBe(12);
    for (const [name, outcome] of Object.entries(reach)) expect(outcome, name).toBe('undefined/undefined/undefined');
    expect(result['x-exfiltration']).toBe('TypeError');
    await s.close();
  });
});
