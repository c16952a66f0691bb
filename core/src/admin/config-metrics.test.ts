import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigLoader } from '../config/loader.ts';
import { ConfigChannels } from '../config/telemetry.ts';
import { registry } from './metrics.ts';

// config/ publishes its telemetry on diagnostics channels (config/telemetry.ts); this module's
// subscriptions turn them into the gatehouse_config_* and gatehouse_kube_* metrics.

async function value(name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  const sample = metric?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
  return sample?.value ?? 0;
}

let dir: string | undefined;
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('config telemetry → metrics', () => {
  it('a real configuration load with a rejected VirtualService counts a rejected reload and sets the per-kind gauge', async () => {
    dir = await mkdtemp(join(tmpdir(), 'gatehouse-config-metrics-'));
    await writeFile(
      join(dir, 'vs.yaml'),
      'apiVersion: gateway.solo.io/v1\nkind: VirtualService\nmetadata: { name: broken, namespace: default }\nspec:\n  virtualHost:\n    domains: ["*"]\n    routes:\n      - matchers: [{ prefix: / }]\n        routeAction: { single: { upstream: { name: missing } } }\n',
    );
    const before = await value('gatehouse_config_reloads_total', { result: 'rejected' });
    const loader = new ConfigLoader({ dir, apiGroupDomain: 'gatehouse.dev', logger: pino({ level: 'silent' }), watch: false });
    const snapshot = await loader.start();
    await loader.close();
    expect(snapshot.statuses).toMatchObject([{ kind: 'VirtualService', state: 'Rejected' }]);
    expect(await value('gatehouse_config_reloads_total', { result: 'rejected' })).toBe(before + 1);
    expect(await value('gatehouse_config_rejected_resources', { kind: 'VirtualService' })).toBe(1);
    expect(await value('gatehouse_config_rejected_resources', { kind: 'Upstream' })).toBe(0);
  });

  it('the Kubernetes source\'s events, status writes and leadership reach their metrics', async () => {
    const events = await value('gatehouse_kube_events_total', { result: 'error' });
    const writes = await value('gatehouse_kube_status_writes_total', { result: 'ok' });
    ConfigChannels.kubeEvent.publish({ result: 'error' });
    ConfigChannels.kubeStatusWrite.publish({ result: 'ok' });
    ConfigChannels.kubeStatusLeader.publish({ leading: true });
    expect(await value('gatehouse_kube_events_total', { result: 'error' })).toBe(events + 1);
    expect(await value('gatehouse_kube_status_writes_total', { result: 'ok' })).toBe(writes + 1);
    expect(await value('gatehouse_kube_status_leader')).toBe(1);
    ConfigChannels.kubeStatusLeader.publish({ leading: false });
    expect(await value('gatehouse_kube_status_leader')).toBe(0);
  });
});
