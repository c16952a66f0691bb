import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from '../config/manifest.ts';
import { ConfigStore, type ConfigSnapshot } from '../config/store.ts';
import { GATEWAY_VERSION } from '../version.ts';
import { createAdminApp } from './admin-app.ts';
import { metrics, registry } from './metrics.ts';

function snapshot(): ConfigSnapshot {
  const good = { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'up' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 80 }] } } };
  const bad = { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'bad' }, spec: { static: { hosts: [] } } };
  const parsed = parseManifests('up.yaml', [good, bad].map((m) => stringify(m)).join('---\n'));
  const broken = parseManifests('broken.yaml', 'kind: [\n');
  return new ConfigStore({ apiGroupDomain: 'gatehouse.dev' }).load(parsed.documents, broken.diagnostics);
}

function app(current: ConfigSnapshot | undefined, routes: unknown[] = []) {
  return createAdminApp({
    snapshot: () => current,
    routes: () => routes,
    metrics: async () => ({ contentType: registry.contentType, body: await registry.metrics() }),
  });
}

describe('admin API (SPEC 8)', () => {
  test('/healthz answers 200 whether or not configuration is loaded', async () => {
    expect((await app(undefined).request('/healthz')).status).toBe(200);
    expect((await app(snapshot()).request('/healthz')).status).toBe(200);
  });

  test('/readyz is 503 until the first configuration is loaded, then 200', async () => {
    expect((await app(undefined).request('/readyz')).status).toBe(503);
    expect((await app(snapshot()).request('/readyz')).status).toBe(200);
  });

  test('/config lists every resource with its status, file-level errors and the effective routes', async () => {
    expect((await app(undefined).request('/config')).status).toBe(503);
    const routes = [{ virtualService: 'default/site', routes: [] }];
    const response = await app(snapshot(), routes).request('/config');
    expect(response.status).toBe(200);
    const body = (await response.json()) as { version: string; generation: number; resources: { name: string; state: string; serving: string; reasons: { path?: string }[] }[]; errors: { file: string; code: string }[]; routes: unknown[] };
    expect(body.version).toBe(GATEWAY_VERSION);
    expect(body.generation).toBe(1);
    expect(body.resources.find((r) => r.name === 'up')).toMatchObject({ state: 'Accepted', serving: 'current' });
    const bad = body.resources.find((r) => r.name === 'bad')!;
    expect(bad).toMatchObject({ state: 'Rejected', serving: 'none' });
    expect(bad.reasons[0]!.path).toBe('spec.static.hosts');
    expect(body.errors).toEqual([expect.objectContaining({ file: 'broken.yaml', code: 'GH_CONFIG_PARSE' })]);
    expect(body.routes).toEqual(routes);
  });

  test('/metrics is Prometheus text with the Gatehouse series', async () => {
    metrics.requests.labels('default/admin-test', 'r', '200').inc();
    const response = await app(snapshot()).request('/metrics');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    expect(text).toContain('gatehouse_requests_total{virtual_host="default/admin-test",route="r",status="200"} 1');
    for (const name of ['gatehouse_upstream_latency_seconds', 'gatehouse_auth_decisions_total', 'gatehouse_graphql_operations_total', 'gatehouse_config_reloads_total', 'gatehouse_config_rejected_resources']) {
      expect(text).toContain(`# TYPE ${name} `);
    }
  });

  test('unknown paths get a 404 that lists the endpoints', async () => {
    const response = await app(undefined).request('/admin');
    expect(response.status).toBe(404);
    expect(await response.text()).toContain('/healthz');
  });
});
