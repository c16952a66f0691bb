/**
 * Gloo's Upstream `failover` (issue 31 item 4; Envoy priorities) through a real `gatehouse run`:
 * the Upstream's own host serves while it passes its health check; once it fails, the first
 * failover priority's endpoints take the requests, and the next priority's once those fail too;
 * traffic comes back as hosts recover. Fields not applied (`policy.overprovisioningFactor`) warn.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

const healthy: Record<string, boolean> = { primary: true, east: true, west: true, last: true };
const servers: Record<string, TestServer> = {};
let dir: ConfigDir;
let gw: GatehouseProcess;

beforeAll(async () => {
  for (const name of Object.keys(healthy)) {
    servers[name] = await startServer((req, res) => {
      if (req.url === '/healthz') return res.writeHead(healthy[name] ? 200 : 503).end();
      res.writeHead(200, { 'x-upstream': name }).end(name);
    });
  }
  const endpoint = (name: string) => ({ address: '127.0.0.1', port: servers[name]!.port });
  dir = await makeConfigDir({
    'config.yaml': [
      {
        apiVersion: 'gloo.solo.io/v1',
        kind: 'Upstream',
        metadata: { name: 'app', namespace: 'gloo-system' },
        spec: {
          static: { hosts: [{ addr: '127.0.0.1', port: servers.primary!.port }] },
          healthChecks: [{ timeout: '1s', interval: '100ms', healthyThreshold: 1, unhealthyThreshold: 1, httpHealthCheck: { path: '/healthz' } }],
          failover: {
            prioritizedLocalities: [
              { localityEndpoints: [{ locality: { region: 'us-east-1', zone: 'us-east-1a' }, lbEndpoints: [endpoint('east')] }, { locality: { region: 'us-west-2' }, lbEndpoints: [endpoint('west')] }] },
              { localityEndpoints: [{ locality: { region: 'eu-west-1' }, lbEndpoints: [endpoint('last')] }] },
            ],
            policy: { overprovisioningFactor: 140 },
          },
        },
      },
      { apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name: 'vs', namespace: 'gloo-system' }, spec: { virtualHost: { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'app', namespace: 'gloo-system' } } } }] } } },
    ],
  });
  gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  await Promise.all(Object.values(servers).map((s) => s.close()));
  await dir?.cleanup();
});

const served = async (n: number) => {
  const names = new Set<string>();
  for (let i = 0; i < n; i++) {
    const r = await send(gw.url, { path: '/x' });
    expect(r.status).toBe(200);
    names.add(r.headers['x-upstream'] as string);
  }
  return names;
};
const only = (...names: string[]) => async () => {
  const seen = await served(8);
  return seen.size === names.length && names.every((n) => seen.has(n));
};

describe('failover through gatehouse run', () => {
  it('loads with a warning naming what is not applied (overprovisioningFactor)', async () => {
    const resources = (JSON.parse((await send(gw.adminUrl, { path: '/config' })).body) as { resources: { name: string; state: string; reasons: { path: string; code: string }[] }[] }).resources;
    const app = resources.find((r) => r.name === 'app')!;
    expect(app.state).toBe('Warning');
    expect(app.reasons).toEqual([expect.objectContaining({ code: 'GH_CONFIG_IGNORED', path: 'spec.failover.policy.overprovisioningFactor' })]);
  });

  it('the own host serves while healthy; then the first priority (both localities); then the next; and back as they recover', async () => {
    await eventually(only('primary'));
    healthy.primary = false;
    await eventually(only('east', 'west'), 15_000);
    healthy.east = false;
    await eventually(only('west'), 15_000);
    healthy.west = false;
    await eventually(only('last'), 15_000);
    healthy.east = true;
    await eventually(only('east'), 15_000);
    healthy.primary = true;
    await eventually(only('primary'), 15_000);
  });
});
