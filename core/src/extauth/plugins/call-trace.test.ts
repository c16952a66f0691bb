import { generateKeyPairSync, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPluginStep, type PluginStep } from './plugin-step.ts';
import { pluginDir, recordingLogger, request } from './test-support.ts';

// A plugin's fetch carries the trace context of the call it was started under (docs/tracing.md,
// "Plugin fetch"; plugin-sdk/src/runtime/call-trace.ts): in a real isolate, against a real HTTP
// server that records the `traceparent` each fetch arrived with, inline and on the isolate's thread.

const TRACE = new URL('./fixtures/trace.ts', import.meta.url);
let plugins: Awaited<ReturnType<typeof pluginDir>>;
let server: Server;
let base: string;
/** `traceparent` received per `?id=` (null: none). */
const received = new Map<string, string | null>();
const steps: PluginStep[] = [];

beforeAll(async () => {
  plugins = await pluginDir([{ entry: TRACE, name: 'Trace' }]);
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    received.set(url.searchParams.get('id') ?? '', (req.headers.traceparent as string | undefined) ?? null);
    res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await Promise.all(steps.map((s) => s.close()));
  server?.closeAllConnections();
  server?.close();
  await plugins?.remove();
});

// The wall deadline is not what these tests are about: generous, for a loaded machine.
async function step(symbol: string, inline: boolean, config: Record<string, unknown> = {}): Promise<PluginStep> {
  const built = await createPluginStep({ name: 'Trace', exportedSymbolName: symbol, config: { Url: base, ...config }, egress: [{ url: base }] }, { pluginDir: plugins.dir, logger: recordingLogger(), inline, wallTimeoutMs: 10_000 });
  steps.push(built);
  return built;
}

let seq = 0;
/** A fresh trace context (as the auth step's span would give). */
function trace(): { traceparent: string } {
  const n = (++seq).toString(16).padStart(4, '0');
  return { traceparent: `00-${n}${'a'.repeat(28)}-${n}${'b'.repeat(12)}-01` };
}

describe.each([
  ['inline', true],
  ['on the isolate thread', false],
])('plugin fetch trace context (%s)', (mode, inline) => {
  const id = (name: string) => `${mode}-${name}`;

  it('a fetch in the synchronous part carries its call trace context; an untraced call sends none', async () => {
    const s = await step('SyncFetch', inline);
    const t = trace();
    expect((await s.authorize(request({ 'x-id': id('sync') }), { state: {}, trace: t })).allowed).toBe(true);
    expect(received.get(id('sync'))).toBe(t.traceparent);
    expect((await s.authorize(request({ 'x-id': id('untraced') }), { state: {} })).allowed).toBe(true);
    expect(received.get(id('untraced'))).toBeNull();
  });

  it('concurrent calls each carry their own trace context (fetch before the first await)', async () => {
    const s = await step('SyncFetch', inline);
    const traces = Array.from({ length: 6 }, () => trace());
    const decisions = await Promise.all(traces.map((t, i) => s.authorize(request({ 'x-id': id(`concurrent-${i}`), 'x-ms': '30' }), { state: {}, trace: t })));
    expect(decisions.every((d) => d.allowed)).toBe(true);
    traces.forEach((t, i) => expect(received.get(id(`concurrent-${i}`))).toBe(t.traceparent));
  });

  it('a call alone in the isolate keeps its context across a timer, a fetch answer, the store and crypto', async () => {
    const timer = await step('AfterTimer', inline);
    const t = trace();
    expect((await timer.authorize(request({ 'x-id': id('timer') }), { state: {}, trace: t })).allowed).toBe(true);
    expect(received.get(id('timer'))).toBe(t.traceparent);
    expect(received.get(`${id('timer')}-2`)).toBe(t.traceparent);
    const store = await step('AfterStore', inline);
    const u = trace();
    expect((await store.authorize(request({ 'x-id': id('store') }), { state: {}, trace: u })).allowed).toBe(true);
    expect(received.get(id('store'))).toBe(u.traceparent);
  });

  it('a call alone keeps its context across an ES256 verify (a verify job off the event loop, inline)', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const data = Buffer.from('signed');
    const sig = sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
    const s = await step('AfterVerify', inline, { Jwk: publicKey.export({ format: 'jwk' }), Sig: sig.toString('base64'), Data: data.toString('base64') });
    const t = trace();
    const decision = await s.authorize(request({ 'x-id': id('verify') }), { state: {}, trace: t });
    expect(decision.allowed && decision.headersToSet.find((h) => h.key === 'x-valid')?.value).toBe('true');
    expect(received.get(id('verify'))).toBe(t.traceparent);
  });

  it('a continuation that may be another call (two calls in flight awaiting one promise) sends no trace context', async () => {
    const s = await step('Shared', inline);
    const [a, b] = [trace(), trace()];
    const decisions = await Promise.all([
      s.authorize(request({ 'x-id': id('shared-a'), 'x-ms': '30' }), { state: {}, trace: a }),
      s.authorize(request({ 'x-id': id('shared-b'), 'x-ms': '30' }), { state: {}, trace: b }),
    ]);
    expect(decisions.every((d) => d.allowed)).toBe(true);
    expect(received.get(id('shared-a'))).toBeNull();
    expect(received.get(id('shared-b'))).toBeNull();
    // Alone again, the same plugin propagates.
    const c = trace();
    expect((await s.authorize(request({ 'x-id': id('shared-c'), 'x-ms': '1' }), { state: {}, trace: c })).allowed).toBe(true);
    expect(received.get(id('shared-c'))).toBe(c.traceparent);
  });

  it('a plugin that replaces builtins and pollutes Object.prototype still gets its own context, and nothing breaks', async () => {
    const s = await step('Vandal', inline);
    const t = trace();
    expect((await s.authorize(request({ 'x-id': id('vandal') }), { state: {}, trace: t })).allowed).toBe(true);
    expect(received.get(id('vandal'))).toBe(t.traceparent);
  });

  it("a plugin's own traceparent is sent as it set it", async () => {
    const s = await step('OwnTraceparent', inline);
    expect((await s.authorize(request({ 'x-id': id('own') }), { state: {}, trace: trace() })).allowed).toBe(true);
    expect(received.get(id('own'))).toBe('00-11111111111111111111111111111111-2222222222222222-01');
  });
});
