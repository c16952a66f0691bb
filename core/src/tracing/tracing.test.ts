import { readdirSync, readFileSync, statSync } from 'node:fs';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, test } from 'vitest';
import type { AnyResource } from '../config/resource.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import type { Logger } from '../log/logger.ts';
import type { RequestContext } from '../proxy/context.ts';
import { collectorFromEnv, flushTracing, listenerTracingOf, loadRuntime, type Collector, remoteChildSpan, RequestTracer, spanOf } from './tracing.ts';

const snapshot = (resources: object[]): ConfigSnapshot => ({
  generation: 1,
  resources: new Map(resources.map((r) => [`${(r as AnyResource).kind}/${(r as AnyResource).namespace}/${(r as AnyResource).name}`, r as AnyResource])),
  statuses: [],
  diagnostics: [],
});

const gateway = (tracing: object) => ({ kind: 'Gateway', namespace: 'gloo-system', name: 'gw', spec: { httpGateway: { options: { httpConnectionManagerSettings: { tracing } } } } });
const collectorUpstream = { kind: 'Upstream', namespace: 'gloo-system', name: 'otel', spec: { static: { hosts: [{ addr: '10.0.0.5', port: 4317 }] } } };

describe('collector from the OpenTelemetry variables', () => {
  test('base endpoint: OTLP/HTTP protobuf at /v1/traces by default; gRPC as given', () => {
    expect(collectorFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' })).toEqual({ protocol: 'http', url: 'http://c:4318/v1/traces', serviceName: 'gatehouse' });
    expect(collectorFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_SERVICE_NAME: 'edge' })).toEqual({ protocol: 'grpc', url: 'http://c:4317', serviceName: 'edge' });
  });
  test('the traces endpoint is taken whole; none set: no collector', () => {
    expect(collectorFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/custom', OTEL_BSP_SCHEDULE_DELAY: '250' })).toEqual({ protocol: 'http', url: 'http://c:4318/custom', serviceName: 'gatehouse', flushMs: 250 });
    expect(collectorFromEnv({})).toBeUndefined();
  });
});

describe("a listener's tracing from its Gateway", () => {
  test('collectorUpstreamRef: OTLP/gRPC to its first host; percentages, tags and service name', () => {
    process.env.GH_TRACING_TEST_ZONE = 'eu-1';
    const tracing = listenerTracingOf(
      snapshot([
        collectorUpstream,
        gateway({
          requestHeadersForTags: ['X-Team'],
          literalsForTags: [{ tag: 'env', value: 'prod' }],
          environmentVariablesForTags: [{ tag: 'zone', name: 'GH_TRACING_TEST_ZONE' }, { tag: 'rack', name: 'GH_TRACING_TEST_UNSET', defaultValue: 'r0' }, { tag: 'none', name: 'GH_TRACING_TEST_UNSET' }],
          tracePercentages: { randomSamplePercentage: 1 },
          verbose: true,
          openTelemetryConfig: { collectorUpstreamRef: { name: 'otel' }, serviceName: 'edge' },
        }),
      ]),
      'gloo-system/gw',
    );
    expect(tracing).toEqual({
      collector: { protocol: 'grpc', url: 'http://10.0.0.5:4317', serviceName: 'edge' },
      percentages: { client: 100, random: 1, overall: 100 },
      verbose: true,
      headerTags: ['x-team'],
      staticTags: { env: 'prod', zone: 'eu-1', rack: 'r0' },
    });
  });
  test('a collector Upstream that does not exist, or no collector at all: nothing traced', () => {
    if (collectorFromEnv()) return; // the test environment names a collector
    expect(listenerTracingOf(snapshot([gateway({ openTelemetryConfig: { collectorUpstreamRef: { name: 'missing' } } })]), 'gloo-system/gw')).toBeUndefined();
    expect(listenerTracingOf(snapshot([gateway({ verbose: true })]), 'gloo-system/gw')).toBeUndefined();
    expect(listenerTracingOf(snapshot([]), undefined)).toBeUndefined();
  });
  test("another Gateway's settings do not apply to this listener", () => {
    const other = { ...gateway({ openTelemetryConfig: { collectorUpstreamRef: { name: 'otel' } } }), name: 'other' };
    const tracing = listenerTracingOf(snapshot([collectorUpstream, other]), 'gloo-system/gw');
    if (collectorFromEnv()) expect(tracing?.collector.url).not.toBe('http://10.0.0.5:4317');
    else expect(tracing).toBeUndefined();
  });
});

describe('auth step spans', () => {
  test('only under a sampled, well-formed traceparent (nothing is loaded otherwise)', () => {
    expect(remoteChildSpan({}, 'step')).toBeUndefined();
    expect(remoteChildSpan({ traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-00` }, 'step')).toBeUndefined();
    expect(remoteChildSpan({ traceparent: 'garbage-01' }, 'step')).toBeUndefined();
  });
});

describe('the request tracer: sampling decided first, unsampled requests get a bare traceparent', () => {
  // A collector nobody listens on (the discard port): exports fail quietly, requests do not care.
  const collector: Collector = { protocol: 'http', url: 'http://127.0.0.1:9/v1/traces', serviceName: 'unit' };
  const logger = { error: () => {} } as unknown as Logger;
  const route = { name: 'r', destination: { kind: 'upstream', cluster: { name: 'c' } } };
  const UNSAMPLED = /^00-([0-9a-f]{32})-([0-9a-f]{16})-00$/;
  afterAll(() => flushTracing(100));

  async function tracer(random: number): Promise<RequestTracer> {
    expect(await loadRuntime(collector)).toBeDefined();
    return new RequestTracer({ collector, percentages: { client: 100, random, overall: 100 }, verbose: false, headerTags: [], staticTags: {} }, logger);
  }
  /** One request through the tracer: the headers the upstream would get, and whether a span records it. */
  function request(t: RequestTracer, headers: Record<string, string>, options?: object): { headers: Record<string, unknown>; recorded: boolean } {
    const req = new IncomingMessage(new Socket());
    req.method = 'GET';
    req.url = '/';
    req.headers = { host: 'h', ...headers };
    const ctx: RequestContext = { requestId: 'id', start: 0, virtualHost: 'v', route: 'r', headers: req.headers, logger, upstream: undefined, responseHeaders: undefined };
    t.start(req, new ServerResponse(req), ctx, { ...route, tracing: options });
    return { headers: req.headers, recorded: spanOf(ctx)?.recording === true };
  }

  test('not sampled, no caller context: a new trace with flag 00, fresh ids every time, the caller\'s tracestate dropped', async () => {
    const t = await tracer(0);
    const ids = new Set<string>();
    for (let i = 0; i < 500; i++) {
      const { headers, recorded } = request(t, { tracestate: 'orphan=1' });
      expect(recorded).toBe(false);
      const match = UNSAMPLED.exec(String(headers.traceparent));
      expect(match).not.toBeNull();
      expect(match![1]).not.toBe('0'.repeat(32));
      expect(match![2]).not.toBe('0'.repeat(16));
      ids.add(match![1]!).add(match![2]!);
      expect(headers.tracestate).toBeUndefined();
    }
    expect(ids.size).toBe(1000);
  });

  test("the caller's decision holds whatever the percentages: every sampled flag value, upper bits too", async () => {
    const t0 = await tracer(0);
    const t100 = await tracer(100);
    const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
    for (const flags of ['00', '02', '0a', '0c', 'a0', 'fe', '01', '03', '09', '0b', '0f', 'ff']) {
      const sampled = (Number.parseInt(flags, 16) & 1) === 1;
      for (const t of [t0, t100]) {
        const { headers, recorded } = request(t, { traceparent: `00-${trace}-00f067aa0ba902b7-${flags}`, tracestate: 'vendor=1' });
        expect({ flags, recorded }).toEqual({ flags, recorded: sampled });
        const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(String(headers.traceparent));
        expect(match?.[1]).toBe(trace);
        expect(match?.[2]).not.toBe('00f067aa0ba902b7');
        expect(match?.[3]).toBe(sampled ? '01' : '00');
        expect(headers.tracestate).toBe('vendor=1');
      }
    }
  });

  test('a later version with extra fields keeps its trace; malformed or all-zero contexts start a new one', async () => {
    const t = await tracer(0);
    const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
    expect(String(request(t, { traceparent: `01-${trace}-00f067aa0ba902b7-00-extra` }).headers.traceparent)).toContain(trace);
    expect(request(t, { traceparent: `01-${trace}-00f067aa0ba902b7-01-extra` }).recorded).toBe(true);
    for (const bad of [`00-${trace.toUpperCase()}-00f067aa0ba902b7-01`, `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, `00-${trace}-${'0'.repeat(16)}-01`, `ff-${trace}-00f067aa0ba902b7-01`, `00-${trace}-00f067aa0ba902b7-01-x`, `00-${trace}-00f067aa0ba902b7-0g`, `00_${trace}-00f067aa0ba902b7-01`, '']) {
      const { headers, recorded } = request(t, { traceparent: bad, tracestate: 'vendor=1' });
      expect({ bad, recorded }).toEqual({ bad, recorded: false });
      expect(String(headers.traceparent)).toMatch(UNSAMPLED);
      expect(String(headers.traceparent)).not.toContain(trace);
      expect(headers.tracestate).toBeUndefined();
    }
  });

  test("route percentages replace the listener's field by field; propagate: false sends no context", async () => {
    const t = await tracer(0);
    expect(request(t, {}, { tracePercentages: { randomSamplePercentage: 100 } }).recorded).toBe(true);
    expect(request(t, {}, { tracePercentages: { randomSamplePercentage: 100, overallSamplePercentage: 0 } }).recorded).toBe(false);
    expect(request(t, { 'x-client-trace-id': 'c' }, { tracePercentages: { randomSamplePercentage: 100 } }).recorded).toBe(true); // client: the listener's 100
    expect(request(t, { 'x-client-trace-id': 'c' }, { tracePercentages: { randomSamplePercentage: 100, clientSamplePercentage: 0 } }).recorded).toBe(false);
    const quiet = request(t, { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00', tracestate: 'v=1' }, { propagate: false });
    expect([quiet.headers.traceparent, quiet.headers.tracestate]).toEqual([undefined, undefined]);
  });
});

describe('the SDK stays out of a process that does not trace', () => {
  test('only ./sdk.ts (and the exporter it loads) imports @opentelemetry/* at run time, and only dynamically', () => {
    const root = fileURLToPath(new URL('../', import.meta.url));
    const offenders: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (name.endsWith('.ts') && !name.endsWith('.test.ts')) {
          const text = readFileSync(path, 'utf8');
          const file = relative(root, path);
          if (file !== join('tracing', 'sdk.ts') && file !== join('tracing', 'otlp-http-exporter.ts') && /^import (?!type )[^;]*from '@opentelemetry\//m.test(text)) offenders.push(`${file} imports @opentelemetry`);
          if (/^import [^;]*from '[^']*tracing\/sdk\.ts'|from '\.\/sdk\.ts'/m.test(text)) offenders.push(`${file} imports sdk.ts statically`);
          if (/^import (?!type )[^;]*from '[^']*otlp-http-exporter\.ts'/m.test(text)) offenders.push(`${file} imports otlp-http-exporter.ts statically`);
        }
      }
    };
    walk(root);
    expect(offenders).toEqual([]);
  });
});
