/**
 * Upstream host choice and circuit breakers (issue 15 item 4, part) through a real
 * `gatehouse run` with real upstreams: loadBalancingWeight under round robin and random,
 * least request against a slow host, and circuitBreakers under a real slow upstream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, startServer, type Echo, type TestServer } from '../support/upstream.ts';

let a: TestServer;
let b: TestServer;
let slow: TestServer;
let broken: TestServer;
let flapping: TestServer;
let flappingUp = false;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  [a, b] = await Promise.all([startEcho('a'), startEcho('b')]);
  slow = await startServer((req, res) => setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ upstream: 'slow', url: req.url })), 300));
  broken = await startServer((_req, res) => res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ upstream: 'broken' })));
  // Serves traffic always, but its health endpoint says 503 until flappingUp.
  flapping = await startServer((req, res) => {
    if (req.url === '/healthz') return res.writeHead(flappingUp ? 200 : 503).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ upstream: 'flapping' }));
  });
  const upstream = (name: string, hosts: object[], extra: object = {}) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts }, ...extra } });
  const route = (prefix: string, name: string) => ({ matchers: [{ prefix }], routeAction: { single: { upstream: { name } } } });
  dir = await makeConfigDir({
    'config.yaml': [
      upstream('weighted-rr', [{ addr: '127.0.0.1', port: a.port, loadBalancingWeight: 3 }, { addr: '127.0.0.1', port: b.port, loadBalancingWeight: 1 }]),
      upstream('weighted-random', [{ addr: '127.0.0.1', port: a.port, loadBalancingWeight: 3 }, { addr: '127.0.0.1', port: b.port }], { loadBalancerConfig: { random: {} } }),
      upstream('least', [{ addr: '127.0.0.1', port: slow.port }, { addr: '127.0.0.1', port: a.port }], { loadBalancerConfig: { leastRequest: { choiceCount: 2 } } }),
      upstream('guarded', [{ addr: '127.0.0.1', port: slow.port }], { circuitBreakers: { maxConnections: 1, maxPendingRequests: 1 } }),
      upstream('outliers', [{ addr: '127.0.0.1', port: broken.port }, { addr: '127.0.0.1', port: a.port }], { outlierDetection: { consecutive5xx: 3, baseEjectionTime: '30s', maxEjectionPercent: 50 } }),
      upstream('checked', [{ addr: '127.0.0.1', port: flapping.port }, { addr: '127.0.0.1', port: b.port }], {
        healthChecks: [{ timeout: '500ms', interval: '100ms', healthyThreshold: 2, unhealthyThreshold: 2, httpHealthCheck: { path: '/healthz' } }],
      }),
      {
        apiVersion: 'gateway.solo.io/v1',
        kind: 'VirtualService',
        metadata: { name: 'lb' },
        spec: { virtualHost: { domains: ['*'], routes: [route('/rr', 'weighted-rr'), route('/random', 'weighted-random'), route('/least', 'least'), route('/guarded', 'guarded'), route('/outliers', 'outliers'), route('/checked', 'checked')] } },
      },
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
});

afterAll(async () => {
  await gatehouse?.stop();
  await Promise.all([a?.close(), b?.close(), slow?.close(), broken?.close(), flapping?.close()]);
  await dir?.cleanup();
});

async function tally(path: string, n: number, concurrency = 8): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        next++;
        const r = await send(gatehouse.url, { path, agent: undefined });
        const name = (JSON.parse(r.body) as Echo).upstream;
        counts[name] = (counts[name] ?? 0) + 1;
      }
    }),
  );
  return counts;
}

describe('load balancing (Gloo loadBalancerConfig, loadBalancingWeight)', () => {
  it('weighted round robin: weights 3:1 over 2,000 requests give exactly 3:1', async () => {
    expect(await tally('/rr', 2000)).toEqual({ a: 1500, b: 500 });
  });

  it('random with weights 3:1: within ±5% of 75% over 2,000 requests', async () => {
    const counts = await tally('/random', 2000);
    expect(counts.a! / 2000).toBeGreaterThan(0.7);
    expect(counts.a! / 2000).toBeLessThan(0.8);
  });

  it('least request sends most requests to the host that answers fast', async () => {
    const counts = await tally('/least', 60, 6);
    expect(counts.a!).toBeGreaterThan(counts.slow ?? 0);
  });
});

describe('circuitBreakers', () => {
  it('one connection and one pending request: a third concurrent request gets 503 with x-envoy-overloaded', async () => {
    const replies = await Promise.all([0, 1, 2].map((i) => send(gatehouse.url, { path: `/guarded/${i}` })));
    const statuses = replies.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 503]);
    const refused = replies.find((r) => r.status === 503)!;
    expect(refused.headers['x-envoy-overloaded']).toBe('true');
    expect(refused.headers['x-gatehouse-error']).toBe('GH_UPSTREAM_OVERFLOW');
  });
});

describe('outlierDetection', () => {
  it('a host that answers 5xx three times in a row is ejected: the next requests all go to the healthy one', async () => {
    // Round robin alternates: six requests give the broken host its three 5xx.
    const first = await tally('/outliers', 6, 1);
    expect(first).toEqual({ broken: 3, a: 3 });
    expect(await tally('/outliers', 20, 1)).toEqual({ a: 20 });
  });
});

describe('healthChecks (HTTP)', () => {
  it('a host failing its health check gets no traffic, and gets it back once it passes again', async () => {
    // Probes run every 100 ms; two failures mark the host down (polled, so a loaded machine only waits longer).
    let down: Record<string, number> = {};
    for (let i = 0; i < 30 && down.b !== 20; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      down = await tally('/checked', 20, 1);
    }
    expect(down).toEqual({ b: 20 });
    flappingUp = true;
    let after: Record<string, number> = {};
    for (let i = 0; i < 30 && !after.flapping; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      after = await tally('/checked', 20, 1);
    }
    expect(after.flapping).toBeGreaterThan(0);
    expect(after.b).toBeGreaterThan(0);
  });
});
