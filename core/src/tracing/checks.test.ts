import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from '../config/manifest.ts';
import { ConfigStore } from '../config/store.ts';
import { resourceChecks } from '../resource-checks.ts';

const gateway = (name: string, tracing: object) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'Gateway', metadata: { name, namespace: 'gloo-system' }, spec: { bindPort: 0, httpGateway: { options: { httpConnectionManagerSettings: { tracing } } } } });
const upstream = (name: string, spec: object) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name, namespace: 'gloo-system' }, spec });

async function load(objects: object[]) {
  const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev', checks: await resourceChecks(['Gateway', 'Upstream']) });
  const parsed = parseManifests('gw.yaml', objects.map((o) => stringify(o)).join('---\n'));
  return store.load(parsed.documents, parsed.diagnostics);
}

const reasons = (snapshot: Awaited<ReturnType<typeof load>>, name: string) => snapshot.statuses.find((s) => s.name === name)!.reasons.map((r) => `${r.severity} ${r.code} ${r.path}: ${r.message}`);

describe("a Gateway's connection-manager tracing", () => {
  test("Gloo's settings load; providers other than OpenTelemetry and Envoy-only fields are warnings naming them", async () => {
    const snapshot = await load([
      upstream('otel', { static: { hosts: [{ addr: 'collector', port: 4317 }] }, useHttp2: true }),
      gateway('full', {
        requestHeadersForTags: ['x-team'],
        verbose: true,
        tracePercentages: { clientSamplePercentage: 100, randomSamplePercentage: 5, overallSamplePercentage: 50 },
        environmentVariablesForTags: [{ tag: 'pod', name: 'POD_NAME', defaultValue: 'unknown' }],
        literalsForTags: [{ tag: 'env', value: 'prod' }],
        openTelemetryConfig: { collectorUpstreamRef: { name: 'otel', namespace: 'gloo-system' }, serviceName: 'edge' },
      }),
      gateway('zipkin', { zipkinConfig: { collectorUpstreamRef: { name: 'otel' }, collectorEndpoint: '/api/v2/spans' }, openTelemetryConfig: { collectorUpstreamRef: { name: 'otel' }, clusterName: 'static_otel' } }),
    ]);
    expect(snapshot.statuses.find((s) => s.name === 'full')).toMatchObject({ state: 'Accepted', reasons: [] });
    const zipkin = reasons(snapshot, 'zipkin');
    expect(zipkin).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^warning GH_CONFIG_IGNORED spec\.httpGateway\.options\.httpConnectionManagerSettings\.tracing\.zipkinConfig: zipkinConfig is not applied: only the OpenTelemetry provider/),
        expect.stringMatching(/^warning GH_CONFIG_IGNORED .*openTelemetryConfig\.clusterName: clusterName is not applied/),
      ]),
    );
  });

  test('a missing collector Upstream, or none, is a warning (the listener serves); a bad percentage rejects', async () => {
    const snapshot = await load([gateway('missing', { openTelemetryConfig: { collectorUpstreamRef: { name: 'nope' } } }), gateway('none', { verbose: true }), gateway('bad', { tracePercentages: { randomSamplePercentage: 101 } })]);
    expect(snapshot.statuses.find((s) => s.name === 'missing')?.state).toBe('Warning');
    expect(reasons(snapshot, 'missing')).toEqual([expect.stringMatching(/^warning GH_CONFIG_MISSING_REF .*collectorUpstreamRef: references Upstream gloo-system\/nope, which does not exist/)]);
    expect(reasons(snapshot, 'none')).toEqual([expect.stringMatching(/^warning GH_CONFIG_IGNORED .*tracing: no openTelemetryConfig\.collectorUpstreamRef: spans go to OTEL_EXPORTER_OTLP_ENDPOINT/)]);
    expect(snapshot.statuses.find((s) => s.name === 'bad')?.state).toBe('Rejected');
    expect(snapshot.statuses.find((s) => s.name === 'bad')?.reasons.map((r) => r.path)).toContain('spec.httpGateway.options.httpConnectionManagerSettings.tracing.tracePercentages.randomSamplePercentage');
  });
});
