/**
 * Tracing through a real `gatehouse run` to a real OpenTelemetry Collector (docs/tracing.md):
 * W3C trace context continued to the upstream with the gateway's span as the parent, the server
 * span's attributes, the ext_authz span and its auth step spans, GraphQL resolver spans,
 * sampling (route percentages, the caller's sampled flag), `propagate: false`, and a Gateway
 * resource's `httpConnectionManagerSettings.tracing` with a collector Upstream over OTLP/gRPC.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { htpasswdApr1, basic } from '../extauth/support.ts';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { describeWithCollector, startCollector, type Collector, type ReceivedSpan } from './collector.ts';

const alice = htpasswdApr1('alice', 'wonderland');
const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

describeWithCollector('tracing to an OpenTelemetry Collector', 'test/tracing/tracing.test.ts', () => {
  let collector: Collector;
  let echo: TestServer;
  let dir: ConfigDir;
  let gatehouse: GatehouseProcess;

  beforeAll(async () => {
    collector = await startCollector();
    echo = await startEcho('echo');
    const route = (prefix: string, options: object = {}) => ({ matchers: [{ prefix }], options, routeAction: { single: { upstream: { name: 'echo' } } } });
    dir = await makeConfigDir({
      'upstream.yaml': manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
      'auth.yaml': manifests.authConfig('basic', [{ basicAuth: { realm: 'shop', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } } }]),
      'api.yaml': manifests.graphqlApi('api', {
        schemaDefinition: 'type Query { hello: Seen @resolve(name: "Query|hello") }\ntype Seen { traceparent: String }',
        executor: { local: { resolutions: { 'Query|hello': { restResolver: { upstreamRef: { name: 'echo' }, request: { headers: { ':path': '/hello' } }, response: { setters: { traceparent: '{$body.headers.traceparent}' } }, spanName: 'hello-call' } } } } },
      }),
      'vs.yaml': manifests.virtualService('shop', {
        domains: ['*'],
        routes: [
          route('/secure', { extauth: { configRef: { name: 'basic' } } }),
          { matchers: [{ prefix: '/graphql' }], graphqlApiRef: { name: 'api' } },
          route('/never', { tracing: { tracePercentages: { randomSamplePercentage: 0 } } }),
          route('/client', { tracing: { tracePercentages: { randomSamplePercentage: 0, clientSamplePercentage: 100 } } }),
          route('/overall', { tracing: { tracePercentages: { overallSamplePercentage: 0 } } }),
          route('/quiet', { tracing: { propagate: false } }),
          route('/', { tracing: { routeDescriptor: 'echo-route' } }),
        ],
      }),
    });
    gatehouse = await startGatehouse('run', ['--config-dir', dir.path], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector.httpPort}`, OTEL_SERVICE_NAME: 'edge', OTEL_BSP_SCHEDULE_DELAY: '100' },
    });
  }, 90_000);

  afterAll(async () => {
    await gatehouse?.stop();
    await echo?.close();
    await dir?.cleanup();
    await collector?.stop();
  });

  /** GET through the gateway; the upstream's view of the request. */
  async function get(path: string, headers: Record<string, string> = {}): Promise<{ status: number; echo: Echo | undefined }> {
    const reply = await send(gatehouse.url, { path, headers });
    return { status: reply.status, echo: reply.status === 200 ? (JSON.parse(reply.body) as Echo) : undefined };
  }

  /**
   * A request carrying a sampled caller's context, sent until the gateway traces it (the SDK
   * loads on the first traced request): the upstream's `traceparent` then names a new span.
   */
  async function tracedGet(path: string, headers: Record<string, string> = {}): Promise<{ traceId: string; callerSpan: string; gatewaySpan: string; echo: Echo }> {
    for (let i = 0; i < 100; i++) {
      const traceId = hex(16);
      const callerSpan = hex(8);
      const { status, echo: seen } = await get(path, { ...headers, traceparent: `00-${traceId}-${callerSpan}-01` });
      expect(status).toBe(200);
      const match = TRACEPARENT.exec(String(seen!.headers.traceparent));
      expect(match?.[1]).toBe(traceId);
      if (match![2] !== callerSpan) return { traceId, callerSpan, gatewaySpan: match![2]!, echo: seen! };
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the gateway never traced a request');
  }

  const byId = (spans: ReceivedSpan[], id: string) => spans.find((s) => s.spanId === id);

  it("continues the caller's trace: the upstream's parent is the gateway's server span, exported with Envoy's attributes", async () => {
    const { traceId, callerSpan, gatewaySpan } = await tracedGet('/items?x=1', { 'user-agent': 'trace-test' });
    const spans = await collector.waitFor((all) => byId(all, gatewaySpan) !== undefined);
    const span = byId(spans, gatewaySpan)!;
    expect(span).toMatchObject({ traceId, parentSpanId: callerSpan, name: 'echo-route', kind: 2, service: 'edge' });
    expect(span.attributes).toMatchObject({ 'http.method': 'GET', 'http.status_code': 200, 'url.path': '/items', 'user_agent': 'trace-test', 'component': 'proxy' });
    expect(String(span.attributes['upstream_cluster'])).toContain('echo');
    expect(span.attributes['upstream_address']).toBe(`127.0.0.1:${echo.port}`);
    expect(span.attributes['http.url']).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/items\?x=1$/);
    expect(typeof span.attributes['route_name']).toBe('string');
    expect(typeof span.attributes['guid:x-request-id']).toBe('string');
  });

  it('starts a new sampled trace when the caller sends none', async () => {
    await tracedGet('/');
    const { echo: seen } = await get('/fresh');
    const [, traceId, spanId, flags] = TRACEPARENT.exec(String(seen!.headers.traceparent))!;
    expect(flags).toBe('01');
    const spans = await collector.waitFor((all) => byId(all, spanId!) !== undefined);
    expect(byId(spans, spanId!)).toMatchObject({ traceId, parentSpanId: '' });
  });

  it('traces external auth: an ext_authz span under the request, the auth steps under it', async () => {
    const { gatewaySpan } = await tracedGet('/secure', { authorization: basic('alice', 'wonderland') });
    const spans = await collector.waitFor((all) => {
      const check = all.find((s) => s.parentSpanId === gatewaySpan && s.name === 'ext_authz');
      return check !== undefined && all.some((s) => s.parentSpanId === check.spanId);
    });
    const check = spans.find((s) => s.parentSpanId === gatewaySpan && s.name === 'ext_authz')!;
    expect(check.kind).toBe(3);
    expect(check.attributes).toMatchObject({ 'ext_authz.allowed': true });
    const step = spans.find((s) => s.parentSpanId === check.spanId)!;
    expect(step.name).toMatch(/^auth step /);
    expect(step.attributes).toMatchObject({ 'auth.allowed': true });
    expect(String(step.attributes['auth.config_id'])).toContain('basic');

    // A denial is traced too, with its status.
    const traceId = hex(16);
    const denied = await send(gatehouse.url, { path: '/secure', headers: { authorization: basic('alice', 'wrong'), traceparent: `00-${traceId}-${hex(8)}-01` } });
    expect(denied.status).toBe(401);
    const after = await collector.waitFor((all) => all.some((s) => s.traceId === traceId && s.name === 'ext_authz') && all.some((s) => s.traceId === traceId && s.kind === 2));
    expect(after.find((s) => s.traceId === traceId && s.name === 'ext_authz')!.attributes).toMatchObject({ 'ext_authz.allowed': false, 'http.status_code': 401 });
    expect(after.find((s) => s.traceId === traceId && s.kind === 2)!.attributes).toMatchObject({ 'http.status_code': 401 });
  });

  it("traces GraphQL resolvers: each call is a span (named by spanName), the upstream's parent", async () => {
    await tracedGet('/');
    const traceId = hex(16);
    const reply = await send(gatehouse.url, { method: 'POST', path: '/graphql', headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${hex(8)}-01` }, body: JSON.stringify({ query: '{ hello { traceparent } }' }) });
    expect(reply.status).toBe(200);
    const seen = (JSON.parse(reply.body) as { data: { hello: { traceparent: string } } }).data.hello.traceparent;
    const [, upstreamTrace, resolverSpan] = TRACEPARENT.exec(seen)!;
    expect(upstreamTrace).toBe(traceId);
    const spans = await collector.waitFor((all) => byId(all, resolverSpan!) !== undefined && all.some((s) => s.traceId === traceId && s.kind === 2));
    const resolver = byId(spans, resolverSpan!)!;
    const server = spans.find((s) => s.traceId === traceId && s.kind === 2)!;
    expect(resolver).toMatchObject({ parentSpanId: server.spanId, kind: 3 });
    // Gloo's spanName names the call's span.
    expect(resolver.name).toBe('hello-call');
    expect(resolver.attributes).toMatchObject({ 'http.method': 'GET', 'url.path': '/hello' });
  });

  it("samples none at 0% yet propagates a trace context, and honours a caller's sampled flag there", async () => {
    await tracedGet('/');
    const unsampled = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const { status, echo: seen } = await get('/never');
      expect(status).toBe(200);
      const [, traceId, , flags] = TRACEPARENT.exec(String(seen!.headers.traceparent))!;
      expect(flags).toBe('00');
      unsampled.add(traceId!);
    }
    expect(unsampled.size).toBe(20);
    // The caller's decision wins over the route's percentage (parent-based).
    const { traceId: forced, gatewaySpan } = await tracedGet('/never');
    // A marker exported after them: once it is in, the unsampled ones would have been too.
    const { gatewaySpan: marker } = await tracedGet('/');
    const spans = await collector.waitFor((all) => byId(all, marker) !== undefined && byId(all, gatewaySpan) !== undefined);
    expect(spans.filter((s) => unsampled.has(s.traceId))).toEqual([]);
    expect(byId(spans, gatewaySpan)!.traceId).toBe(forced);
  });

  it("Envoy's percentages: x-client-trace-id takes the client percentage, the overall one applies on top", async () => {
    await tracedGet('/');
    const flagsOf = async (path: string, headers: Record<string, string> = {}) => TRACEPARENT.exec(String((await get(path, headers)).echo!.headers.traceparent))![3];
    for (let i = 0; i < 10; i++) {
      expect(await flagsOf('/client', { 'x-client-trace-id': `c-${i}` })).toBe('01');
      expect(await flagsOf('/client')).toBe('00');
      expect(await flagsOf('/overall', { 'x-client-trace-id': `c-${i}` })).toBe('00');
      expect(await flagsOf('/overall')).toBe('00');
    }
  });

  it('propagate: false sends the upstream no trace context, and still records the span', async () => {
    await tracedGet('/');
    const traceId = hex(16);
    const { echo: seen } = await get('/quiet', { traceparent: `00-${traceId}-${hex(8)}-01`, tracestate: 'vendor=1' });
    expect(seen!.headers.traceparent).toBeUndefined();
    expect(seen!.headers.tracestate).toBeUndefined();
    await collector.waitFor((all) => all.some((s) => s.traceId === traceId && s.kind === 2));
  });

  it('a malformed traceparent starts a new trace (it is not passed on)', async () => {
    await tracedGet('/');
    for (const bad of ['00-zz-11-01', `00-${'0'.repeat(32)}-${hex(8)}-01`, `ff-${hex(16)}-${hex(8)}-01x`, 'x'.repeat(5000)]) {
      const { status, echo: seen } = await get('/', { traceparent: bad });
      expect(status).toBe(200);
      expect(String(seen!.headers.traceparent)).toMatch(TRACEPARENT);
      expect(seen!.headers.traceparent).not.toBe(bad);
    }
  });
});

describeWithCollector('tracing configured by a Gateway resource', 'test/tracing/tracing.test.ts', () => {
  let collector: Collector;
  let echo: TestServer;
  let dir: ConfigDir;
  let gatehouse: GatehouseProcess;
  let url: string;

  beforeAll(async () => {
    collector = await startCollector();
    echo = await startEcho('echo');
    dir = await makeConfigDir({
      'upstream.yaml': [manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]), manifests.upstream('otel-collector', [{ addr: '127.0.0.1', port: collector.grpcPort }], { useHttp2: true })],
      'vs.yaml': manifests.virtualService('shop', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] }),
      'gateway.yaml': {
        apiVersion: 'gateway.solo.io/v1',
        kind: 'Gateway',
        metadata: { name: 'gateway-proxy', namespace: 'default' },
        spec: {
          bindAddress: '127.0.0.1',
          bindPort: 0,
          httpGateway: {
            options: {
              httpConnectionManagerSettings: {
                tracing: {
                  requestHeadersForTags: ['x-team'],
                  literalsForTags: [{ tag: 'env', value: 'test' }],
                  environmentVariablesForTags: [{ tag: 'zone', name: 'TRACE_TEST_ZONE', defaultValue: 'none' }],
                  verbose: true,
                  tracePercentages: { randomSamplePercentage: 100 },
                  openTelemetryConfig: { collectorUpstreamRef: { name: 'otel-collector', namespace: 'default' }, serviceName: 'gw-edge' },
                },
              },
            },
          },
        },
      },
    });
    gatehouse = await startGatehouse('run', ['--config-dir', dir.path], { env: { TRACE_TEST_ZONE: 'eu-1', OTEL_BSP_SCHEDULE_DELAY: '100' } });
    const bound = await gatehouse.waitForLog((l) => l.msg === 'Gateway listener bound');
    url = `http://127.0.0.1:${bound.port as number}`;
  }, 90_000);

  afterAll(async () => {
    await gatehouse?.stop();
    await echo?.close();
    await dir?.cleanup();
    await collector?.stop();
  });

  it("exports over OTLP/gRPC to the collector Upstream, with the Gateway's service name and tags", async () => {
    let spanId: string | undefined;
    for (let i = 0; i < 100 && spanId === undefined; i++) {
      const reply = await send(url, { path: '/gw', headers: { 'x-team': 'blue' } });
      expect(reply.status).toBe(200);
      const seen = JSON.parse(reply.body) as Echo;
      const match = TRACEPARENT.exec(String(seen.headers.traceparent ?? ''));
      if (match?.[3] === '01') spanId = match[2];
      else await new Promise((r) => setTimeout(r, 50));
    }
    expect(spanId).toBeDefined();
    const spans = await collector.waitFor((all) => byIdOf(all, spanId!) !== undefined);
    const span = byIdOf(spans, spanId!)!;
    expect(span.service).toBe('gw-edge');
    expect(span.attributes).toMatchObject({ 'x-team': 'blue', env: 'test', zone: 'eu-1', 'http.status_code': 200 });
  });
});

function byIdOf(spans: ReceivedSpan[], id: string): ReceivedSpan | undefined {
  return spans.find((s) => s.spanId === id);
}

describeWithCollector('tracing across a separate gatehouse extauth', 'test/tracing/tracing.test.ts', () => {
  let collector: Collector;
  let echo: TestServer;
  let dir: ConfigDir;
  let extauth: GatehouseProcess;
  let gateway: GatehouseProcess;

  beforeAll(async () => {
    collector = await startCollector();
    echo = await startEcho('echo');
    dir = await makeConfigDir({
      'upstream.yaml': manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
      'auth.yaml': manifests.authConfig('basic', [{ basicAuth: { realm: 'shop', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } } }]),
      'vs.yaml': manifests.virtualService('shop', { domains: ['*'], options: { extauth: { configRef: { name: 'basic' } } }, routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] }),
    });
    const env = (service: string) => ({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector.grpcPort}`, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_SERVICE_NAME: service, OTEL_BSP_SCHEDULE_DELAY: '100' });
    extauth = await startGatehouse('extauth', ['--config-dir', dir.path, '--host', '127.0.0.1'], { env: env('auth') });
    gateway = await startGatehouse('gateway', ['--config-dir', dir.path, '--extauth-address', `127.0.0.1:${extauth.port}`, '--extauth-timeout', '5s'], { env: env('edge') });
  }, 90_000);

  afterAll(async () => {
    await gateway?.stop();
    await extauth?.stop();
    await echo?.close();
    await dir?.cleanup();
    await collector?.stop();
  });

  it("the auth server's step spans are children of the gateway's ext_authz span (gRPC metadata)", async () => {
    // Sent until the gateway traces (its SDK loads on the first request): the upstream then sees a new parent.
    let traceId = '';
    for (let i = 0; i < 100; i++) {
      traceId = hex(16);
      const caller = hex(8);
      const reply = await send(gateway.url, { path: '/', headers: { authorization: basic('alice', 'wonderland'), traceparent: `00-${traceId}-${caller}-01` } });
      expect(reply.status).toBe(200);
      if (!String((JSON.parse(reply.body) as Echo).headers.traceparent).includes(caller)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const spans = await collector.waitFor((all) => all.some((s) => s.traceId === traceId && s.name.startsWith('auth step ')) && all.some((s) => s.traceId === traceId && s.name === 'ext_authz'));
    const step = spans.find((s) => s.traceId === traceId && s.name.startsWith('auth step '))!;
    const ext = spans.find((s) => s.traceId === traceId && s.name === 'ext_authz')!;
    expect(ext.service).toBe('edge');
    expect(step).toMatchObject({ service: 'auth', parentSpanId: ext.spanId });
    expect(step.attributes).toMatchObject({ 'auth.allowed': true });
  });
});

describeWithCollector('spans queued at shutdown', 'test/tracing/tracing.test.ts', () => {
  it('are exported when the gateway stops (SIGTERM), not lost with the batch timer', async () => {
    const collector = await startCollector();
    const echo = await startEcho('echo');
    const dir = await makeConfigDir({
      'upstream.yaml': manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
      'vs.yaml': manifests.virtualService('shop', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] }),
    });
    // A batch timer far longer than the test: only the shutdown flush can send the span.
    const gatehouse = await startGatehouse('run', ['--config-dir', dir.path], { env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collector.httpPort}`, OTEL_BSP_SCHEDULE_DELAY: '600000' } });
    try {
      let spanId: string | undefined;
      for (let i = 0; i < 100 && spanId === undefined; i++) {
        const reply = await send(gatehouse.url, { path: '/last' });
        const match = TRACEPARENT.exec(String((JSON.parse(reply.body) as Echo).headers.traceparent ?? ''));
        if (match?.[3] === '01') spanId = match[2];
        else await new Promise((r) => setTimeout(r, 50));
      }
      expect(spanId).toBeDefined();
      expect(collector.spans.some((s) => s.spanId === spanId)).toBe(false);
      expect(await gatehouse.stop('SIGTERM')).toBe(0);
      await collector.waitFor((all) => all.some((s) => s.spanId === spanId));
    } finally {
      await gatehouse.stop();
      await echo.close();
      await dir.cleanup();
      await collector.stop();
    }
  }, 60_000);
});
