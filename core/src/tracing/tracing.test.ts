import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import type { AnyResource } from '../config/resource.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { collectorFromEnv, listenerTracingOf, remoteChildSpan } from './tracing.ts';

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

describe('the SDK stays out of a process that does not trace', () => {
  test('only ./sdk.ts imports @opentelemetry/* at run time, and only tracing.ts loads it, dynamically', () => {
    const root = fileURLToPath(new URL('../', import.meta.url));
    const offenders: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (name.endsWith('.ts') && !name.endsWith('.test.ts')) {
          const text = readFileSync(path, 'utf8');
          const file = relative(root, path);
          if (file !== join('tracing', 'sdk.ts') && /^import (?!type )[^;]*from '@opentelemetry\//m.test(text)) offenders.push(`${file} imports @opentelemetry`);
          if (/^import [^;]*from '[^']*tracing\/sdk\.ts'|from '\.\/sdk\.ts'/m.test(text)) offenders.push(`${file} imports sdk.ts statically`);
        }
      }
    };
    walk(root);
    expect(offenders).toEqual([]);
  });
});
