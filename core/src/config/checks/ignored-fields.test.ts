import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from '../manifest.ts';
import { ConfigStore } from '../store.ts';

let text = '';

function load(objects: object[]) {
  const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
  text = objects.map((o) => stringify(o)).join('---\n');
  const snapshot = store.load(parseManifests('up.yaml', text).documents);
  return (kind: string, name: string) => snapshot.statuses.find((s) => s.kind === kind && s.name === name)!;
}

describe('discovery-written Upstream fields (issue 31)', () => {
  test('load with a warning naming each field not applied, instead of rejecting the Upstream', () => {
    const status = load([
      {
        apiVersion: 'gloo.solo.io/v1',
        kind: 'Upstream',
        metadata: { name: 'discovered', namespace: 'gloo-system' },
        spec: {
          discoveryMetadata: { labels: { app: 'petstore' } },
          kube: { serviceName: 'petstore', serviceNamespace: 'default', servicePort: 8080, serviceSpec: { grpcJsonTranscoder: { protoDescriptorBin: 'AAAA', services: ['a.B'] } }, subsetSpec: { selectors: [{ keys: ['version'] }] } },
          useHttp2: true,
          initialStreamWindowSize: 65535,
          outlier_detection: { consecutive_5xx: 3, enforcing_consecutive_5xx: 50 },
          circuitBreakers: { maxConnections: 10, trackRemaining: true },
        },
      },
    ])('Upstream', 'discovered');
    expect(status.state).toBe('Warning');
    expect(status.reasons.map((r) => [r.path, r.code, r.severity])).toEqual([
      ['spec.circuitBreakers.trackRemaining', 'GH_CONFIG_IGNORED', 'warning'],
      ['spec.initialStreamWindowSize', 'GH_CONFIG_IGNORED', 'warning'],
      ['spec.kube.serviceSpec', 'GH_CONFIG_IGNORED', 'warning'],
      ['spec.kube.subsetSpec', 'GH_CONFIG_IGNORED', 'warning'],
      ['spec.outlierDetection.enforcingConsecutive5xx', 'GH_CONFIG_IGNORED', 'warning'],
    ]);
    expect(status.reasons[2]!.message).toBe('serviceSpec is not applied: function discovery specs (REST, gRPC, gRPC-JSON transcoding) are not used: routes reach the Upstream as plain HTTP');
    // Written by its proto name, found on its line.
    expect(status.reasons[4]!.line).toBe(text.split('\n').findIndex((l) => l.includes('enforcing_consecutive_5xx:')) + 1);
  });

  test('static hosts: serviceSpec, autoSniRewrite, a host\'s healthCheckConfig and metadata', () => {
    const status = load([
      {
        apiVersion: 'gloo.solo.io/v1',
        kind: 'Upstream',
        metadata: { name: 's', namespace: 'gloo-system' },
        spec: { static: { hosts: [{ addr: 'a.example', port: 80, healthCheckConfig: { path: '/health' }, metadata: { m: {} } }], serviceSpec: { rest: {} }, autoSniRewrite: false } },
      },
    ])('Upstream', 's');
    expect(status.reasons.map((r) => r.path)).toEqual(['spec.static.autoSniRewrite', 'spec.static.hosts[0].healthCheckConfig', 'spec.static.hosts[0].metadata', 'spec.static.serviceSpec']);
  });

  test('an Upstream that sets none of them is Accepted', () => {
    const status = load([{ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'plain', namespace: 'gloo-system' }, spec: { static: { hosts: [{ addr: 'a.example', port: 80 }] } } }])('Upstream', 'plain');
    expect(status).toMatchObject({ state: 'Accepted', reasons: [] });
  });
});
