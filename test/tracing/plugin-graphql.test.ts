/**
 * Tracing of the calls a plugin and the GraphQL remote executor make (docs/tracing.md), through
 * a real `gatehouse run` to a real OpenTelemetry Collector: a plugin's `fetch` carries its auth
 * step span's context (the chain request → ext_authz → auth step → the fetched server), two
 * concurrent checks each carry their own; the remote executor's call is a span of its own
 * (spanName, the operation's type and name, the upstream, the status) and its `traceparent`
 * names that span.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, startServer, type TestServer } from '../support/upstream.ts';
import { describeWithCollector, startCollector, type Collector, type ReceivedSpan } from './collector.ts';

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const FIXTURE = new URL('../../core/src/extauth/plugins/fixtures/trace.ts', import.meta.url);

describeWithCollector('tracing plugin fetches and the GraphQL remote executor', 'test/tracing/plugin-graphql.test.ts', () => {
  let collector: Collector;
  let echo: TestServer;
  /** What the plugin fetches: records the `traceparent` of each `?id=`. */
  let seenServer: TestServer;
  const seen = new Map<string, string | undefined>();
  /** The remote GraphQL server: records each call's headers; operation `Broken` answers 500. */
  let graphql: TestServer;
  const graphqlCalls: IncomingMessage['headers'][] = [];
  let pluginDir: string;
  let dir: ConfigDir;
  let gatehouse: GatehouseProcess;
  /** The same config with plugins on the event loop (`--plugin-thread false`): inline calls, in batches. */
  let inline: GatehouseProcess;

  beforeAll(async () => {
    collector = await startCollector();
    echo = await startEcho('echo');
    seenServer = await startServer((req, res) => {
      seen.set(new URL(req.url ?? '/', 'http://x').searchParams.get('id') ?? '', req.headers.traceparent as string | undefined);
      res.end('ok');
    });
    graphql = await startServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        graphqlCalls.push(req.headers);
        if (String(req.headers.accept).startsWith('text/event-stream')) {
          // A subscription over SSE: two events carrying the call's traceparent, then complete.
          const tick = `event: next\ndata: ${JSON.stringify({ data: { tick: String(req.headers.traceparent) } })}\n\n`;
          return void res.writeHead(200, { 'content-type': 'text/event-stream' }).end(`${tick}${tick}event: complete\ndata:\n\n`);
        }
        const broken = body.includes('Broken');
        res.writeHead(broken ? 500 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(broken ? { errors: [{ message: 'down' }] } : { data: { hello: String(req.headers.traceparent) } }));
      });
    });
    pluginDir = await mkdtemp(join(tmpdir(), 'gatehouse-trace-plugins-'));
    await buildPlugin({ entry: FIXTURE.pathname, name: 'Trace', outDir: pluginDir });
    const seenUrl = `http://127.0.0.1:${seenServer.port}`;
    const plugin = (symbol: string) => [{ pluginAuth: { name: 'Trace', exportedSymbolName: symbol, config: { Url: seenUrl }, egress: [{ url: seenUrl }] } }];
    const route = (prefix: string, options: object = {}) => ({ matchers: [{ prefix }], options, routeAction: { single: { upstream: { name: 'echo' } } } });
    dir = await makeConfigDir({
      'upstream.yaml': [manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]), manifests.upstream('remote-gql', [{ addr: '127.0.0.1', port: graphql.port }])],
      'auth.yaml': [manifests.authConfig('sync-fetch', plugin('SyncFetch')), manifests.authConfig('after-timer', plugin('AfterTimer'))],
      'api.yaml': manifests.graphqlApi('remote', { schemaDefinition: 'type Query { hello: String }\ntype Subscription { tick: String }', executor: { remote: { upstreamRef: { name: 'remote-gql' }, spanName: 'remote-call' } } }),
      'vs.yaml': manifests.virtualService('shop', {
        domains: ['*'],
        routes: [
          route('/plugin-sync', { extauth: { configRef: { name: 'sync-fetch' } } }),
          route('/plugin-timer', { extauth: { configRef: { name: 'after-timer' } } }),
          { matchers: [{ prefix: '/graphql' }], graphqlApiRef: { name: 'remote' } },
          route('/'),
        ],
      }),
    });
    // The plugin call and auth check deadlines are not under test: generous, for a loaded machine.
    const generous = ['--plugin-wall-timeout', '10s', '--extauth-timeout', '10s'];
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector.httpPort}`, OTEL_SERVICE_NAME: 'edge', OTEL_BSP_SCHEDULE_DELAY: '100' };
    [gatehouse, inline] = await Promise.all([
      startGatehouse('run', ['--config-dir', dir.path, '--plugin-dir', pluginDir, ...generous], { env, timeoutMs: 60_000 }),
      startGatehouse('run', ['--config-dir', dir.path, '--plugin-dir', pluginDir, ...generous, '--plugin-thread', 'false'], { env, timeoutMs: 60_000 }),
    ]);
    // The SDK loads on the first traced request: until the upstream sees a new span id, nothing is traced.
    for (const gateway of [gatehouse, inline]) {
      for (let i = 0; ; i++) {
        const caller = hex(8);
        const reply = await send(gateway.url, { path: '/', headers: { traceparent: `00-${hex(16)}-${caller}-01` } });
        const upstream = TRACEPARENT.exec(String((JSON.parse(reply.body) as { headers: Record<string, string> }).headers.traceparent));
        if (upstream && upstream[2] !== caller) break;
        if (i > 100) throw new Error('the gateway never traced a request');
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }, 120_000);

  afterAll(async () => {
    await Promise.all([gatehouse?.stop(), inline?.stop()]);
    await Promise.all([echo?.close(), seenServer?.close(), graphql?.close()]);
    await dir?.cleanup();
    if (pluginDir) await rm(pluginDir, { recursive: true, force: true });
    await collector?.stop();
  });

  const byId = (spans: ReceivedSpan[], id: string) => spans.find((s) => s.spanId === id);

  /** Checks the chain request → ext_authz → auth step → the fetched server for `traceId`, and answers the step span. */
  async function pluginChain(traceId: string, fetchedParent: string): Promise<ReceivedSpan> {
    const spans = await collector.waitFor((all) => {
      const step = byId(all, fetchedParent);
      const check = step && byId(all, step.parentSpanId);
      return check !== undefined && byId(all, check.parentSpanId) !== undefined;
    });
    const step = byId(spans, fetchedParent)!;
    const check = byId(spans, step.parentSpanId)!;
    const request = byId(spans, check.parentSpanId)!;
    expect(step).toMatchObject({ traceId, kind: 1 });
    expect(step.name).toMatch(/^auth step /);
    expect(step.attributes).toMatchObject({ 'auth.allowed': true });
    expect(check).toMatchObject({ traceId, name: 'ext_authz', kind: 3 });
    expect(request).toMatchObject({ traceId, kind: 2 });
    return step;
  }

  it("a plugin's fetch carries the request's trace: its parent is the auth step span, under ext_authz, under the request", async () => {
    const traceId = hex(16);
    const reply = await send(gatehouse.url, { path: '/plugin-sync', headers: { traceparent: `00-${traceId}-${hex(8)}-01`, 'x-id': 'one' } });
    expect(reply.status).toBe(200);
    const [, fetchedTrace, fetchedParent, flags] = TRACEPARENT.exec(String(seen.get('one')))!;
    expect(fetchedTrace).toBe(traceId);
    expect(flags).toBe('01');
    await pluginChain(traceId, fetchedParent!);
  });

  it('a fetch after a timer (a continuation of the call, alone in its isolate) carries it too', async () => {
    const traceId = hex(16);
    expect((await send(gatehouse.url, { path: '/plugin-timer', headers: { traceparent: `00-${traceId}-${hex(8)}-01`, 'x-id': 'timer' } })).status).toBe(200);
    const first = TRACEPARENT.exec(String(seen.get('timer')))!;
    const second = TRACEPARENT.exec(String(seen.get('timer-2')))!;
    expect(first[1]).toBe(traceId);
    expect(second[2]).toBe(first[2]);
    await pluginChain(traceId, first[2]!);
  });

  it.each([
    ['in the plugin process (the default)', 'process', () => gatehouse],
    ['inline on the event loop (--plugin-thread false)', 'inline', () => inline],
  ])('concurrent checks on one plugin each propagate their own trace, %s', async (_where, label, gateway) => {
    const traces = Array.from({ length: 8 }, () => hex(16));
    const key = (i: number) => `${label}-${i}`;
    const replies = await Promise.all(traces.map((traceId, i) => send(gateway().url, { path: '/plugin-sync', headers: { traceparent: `00-${traceId}-${hex(8)}-01`, 'x-id': key(i), 'x-ms': '50' } })));
    expect(replies.map((r) => r.status)).toEqual(traces.map(() => 200));
    const parents = traces.map((traceId, i) => {
      const [, fetchedTrace, parent] = TRACEPARENT.exec(String(seen.get(key(i))))!;
      expect(fetchedTrace).toBe(traceId);
      return parent!;
    });
    expect(new Set(parents).size).toBe(traces.length);
    for (const [i, traceId] of traces.entries()) await pluginChain(traceId, parents[i]!);
  });

  it('a check that is not sampled gives the fetch no trace context', async () => {
    expect((await send(gatehouse.url, { path: '/plugin-sync', headers: { traceparent: `00-${hex(16)}-${hex(8)}-00`, 'x-id': 'unsampled' } })).status).toBe(200);
    expect(seen.has('unsampled')).toBe(true);
    expect(seen.get('unsampled')).toBeUndefined();
  });

  it('the GraphQL remote executor makes a span per execution, the parent of its call, with the operation and the status', async () => {
    const traceId = hex(16);
    const reply = await send(gatehouse.url, { method: 'POST', path: '/graphql', headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${hex(8)}-01` }, body: JSON.stringify({ query: 'query Greeting { hello }', operationName: 'Greeting' }) });
    expect(reply.status).toBe(200);
    const [, upstreamTrace, remoteSpan] = TRACEPARENT.exec((JSON.parse(reply.body) as { data: { hello: string } }).data.hello)!;
    expect(upstreamTrace).toBe(traceId);
    const spans = await collector.waitFor((all) => byId(all, remoteSpan!) !== undefined && all.some((s) => s.traceId === traceId && s.kind === 2));
    const remote = byId(spans, remoteSpan!)!;
    const request = spans.find((s) => s.traceId === traceId && s.kind === 2)!;
    expect(remote).toMatchObject({ name: 'remote-call', kind: 3, parentSpanId: request.spanId });
    expect(remote.attributes).toMatchObject({ 'graphql.operation.type': 'query', 'graphql.operation.name': 'Greeting', 'http.method': 'POST', 'url.path': '/graphql', 'http.status_code': 200 });
    expect(String(remote.attributes['upstream_cluster'])).toContain('remote-gql');
    expect(remote.status.code ?? 0).not.toBe(2);

    // An upstream failure: the span's status is ERROR, with the upstream's status.
    const failedTrace = hex(16);
    const broken = await send(gatehouse.url, { method: 'POST', path: '/graphql', headers: { 'content-type': 'application/json', traceparent: `00-${failedTrace}-${hex(8)}-01` }, body: JSON.stringify({ query: 'query Broken { hello }' }) });
    expect(broken.status).toBe(500);
    const after = await collector.waitFor((all) => all.some((s) => s.traceId === failedTrace && s.name === 'remote-call'));
    const failed = after.find((s) => s.traceId === failedTrace && s.name === 'remote-call')!;
    expect(failed.attributes).toMatchObject({ 'graphql.operation.name': 'Broken', 'http.status_code': 500 });
    expect(failed.status.code).toBe(2);
    expect(TRACEPARENT.exec(String(graphqlCalls.at(-1)!.traceparent))![2]).toBe(failed.spanId);
  });

  it('a subscription over SSE is one remote span for the whole stream, the parent of its call', async () => {
    const traceId = hex(16);
    const response = await fetch(`${gatehouse.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream', traceparent: `00-${traceId}-${hex(8)}-01` }, body: JSON.stringify({ query: 'subscription Ticks { tick }' }) });
    expect(response.status).toBe(200);
    const text = await response.text();
    const ticks = [...text.matchAll(/"tick":"([^"]+)"/g)].map((m) => m[1]!);
    expect(ticks).toHaveLength(2);
    const [, upstreamTrace, streamSpan] = TRACEPARENT.exec(ticks[0]!)!;
    expect(upstreamTrace).toBe(traceId);
    const spans = await collector.waitFor((all) => byId(all, streamSpan!) !== undefined);
    expect(spans.filter((s) => s.traceId === traceId && s.name === 'remote-call')).toHaveLength(1);
    expect(byId(spans, streamSpan!)!.attributes).toMatchObject({ 'graphql.operation.type': 'subscription', 'graphql.operation.name': 'Ticks', 'http.status_code': 200 });
  });

  it('without sampling, the remote executor makes no span and its call still carries the trace', async () => {
    const traceId = hex(16);
    const reply = await send(gatehouse.url, { method: 'POST', path: '/graphql', headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${hex(8)}-00` }, body: JSON.stringify({ query: '{ hello }' }) });
    expect(reply.status).toBe(200);
    const [, upstreamTrace, , flags] = TRACEPARENT.exec((JSON.parse(reply.body) as { data: { hello: string } }).data.hello)!;
    expect(upstreamTrace).toBe(traceId);
    expect(flags).toBe('00');
  });
});
