/**
 * Active gRPC health checks (issue 15 item 4, Gloo's healthChecks[].grpcHealthCheck) through a
 * real `gatehouse run`: two real grpc-js servers with the standard health service behind an
 * HTTP/2 Upstream; the one whose health turns NOT_SERVING stops getting calls and gets them back
 * once SERVING again. Which server answered: the health entry "who-a" is SERVING on server a and
 * NOT_SERVING on server b, so a Check for it through the gateway tells them apart.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { HealthImplementation } from 'grpc-health-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';

const require = createRequire(import.meta.url);
const protoDir = join(dirname(require.resolve('grpc-health-check/package.json')), 'proto');
const Health = (grpc.loadPackageDefinition(loadSync('health/v1/health.proto', { keepCase: true, enums: String, defaults: true, includeDirs: [protoDir] })) as unknown as { grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } } }).grpc.health.v1.Health;

interface HealthServer {
  port: number;
  health: HealthImplementation;
  server: grpc.Server;
}

async function startHealthServer(name: string): Promise<HealthServer> {
  const server = new grpc.Server();
  const health = new HealthImplementation({ '': 'SERVING', 'who-a': name === 'a' ? 'SERVING' : 'NOT_SERVING', 'orders.v1.Orders': 'SERVING' });
  health.addToServer(server);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, p) => (error ? reject(error) : resolve(p))));
  return { port, health, server };
}

let a: HealthServer;
let b: HealthServer;
let dir: ConfigDir;
let gw: GatehouseProcess;

beforeAll(async () => {
  [a, b] = await Promise.all([startHealthServer('a'), startHealthServer('b')]);
  const upstream = (name: string, extra: object) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: [a, b].map((s) => ({ addr: '127.0.0.1', port: s.port })) }, ...extra } });
  const check = (grpcHealthCheck: object) => ({ healthChecks: [{ timeout: '1s', interval: '100ms', healthyThreshold: 2, unhealthyThreshold: 2, grpcHealthCheck }] });
  dir = await makeConfigDir({
    'config.yaml': [
      upstream('whole', { useHttp2: true, ...check({}) }),
      upstream('orders', { useHttp2: true, ...check({ serviceName: 'orders.v1.Orders', authority: 'orders.internal' }) }),
      {
        apiVersion: 'gateway.solo.io/v1',
        kind: 'VirtualService',
        metadata: { name: 'grpc' },
        spec: { virtualHost: { domains: ['whole.test'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'whole' } } } }] } },
      },
      {
        apiVersion: 'gateway.solo.io/v1',
        kind: 'VirtualService',
        metadata: { name: 'orders' },
        spec: { virtualHost: { domains: ['orders.test'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'orders' } } } }] } },
      },
    ],
    'http1.yaml': [{ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'http1' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: a.port }] }, ...check({}) } }],
  });
  gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
});

afterAll(async () => {
  await gw?.stop();
  a?.server.forceShutdown();
  b?.server.forceShutdown();
  await dir?.cleanup();
});

/** Which server answered each of `n` calls through the gateway. */
async function tally(authority: string, n: number): Promise<Record<string, number>> {
  const client = new Health(`127.0.0.1:${gw.port}`, grpc.credentials.createInsecure(), { 'grpc.default_authority': authority }) as unknown as { check: Function; close(): void };
  const counts: Record<string, number> = {};
  try {
    for (let i = 0; i < n; i++) {
      const who = await new Promise<string>((resolve) =>
        client.check({ service: 'who-a' }, { deadline: Date.now() + 5_000 }, (error: grpc.ServiceError | null, response?: { status: string }) => resolve(error ? `error ${error.code}` : response!.status === 'SERVING' ? 'a' : 'b')),
      );
      counts[who] = (counts[who] ?? 0) + 1;
    }
  } finally {
    client.close();
  }
  return counts;
}

async function until(authority: string, expected: Record<string, number>, n: number): Promise<Record<string, number>> {
  let last: Record<string, number> = {};
  for (let i = 0; i < 40; i++) {
    last = await tally(authority, n);
    if (JSON.stringify(last) === JSON.stringify(expected)) return last;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return last;
}

describe('healthChecks: grpcHealthCheck (grpc.health.v1 over HTTP/2)', () => {
  it('both servers SERVING: calls go to both', async () => {
    const counts = await tally('whole.test', 10);
    expect(counts).toEqual({ a: 5, b: 5 });
  });

  it('a server whose health turns NOT_SERVING gets no calls; SERVING again, it gets them back', async () => {
    a.health.setStatus('', 'NOT_SERVING');
    expect(await until('whole.test', { b: 10 }, 10)).toEqual({ b: 10 });
    a.health.setStatus('', 'SERVING');
    expect(await until('whole.test', { a: 5, b: 5 }, 10)).toEqual({ a: 5, b: 5 });
  });

  it('serviceName checks that service: the whole server SERVING does not keep a host whose service is down', async () => {
    b.health.setStatus('orders.v1.Orders', 'NOT_SERVING');
    expect(await until('orders.test', { a: 10 }, 10)).toEqual({ a: 10 });
    // The other Upstream checks the server as a whole: b still serves there.
    expect(await tally('whole.test', 10)).toEqual({ a: 5, b: 5 });
    b.health.setStatus('orders.v1.Orders', 'SERVING');
    expect(await until('orders.test', { a: 5, b: 5 }, 10)).toEqual({ a: 5, b: 5 });
  });

  it('a gRPC health check on an Upstream without useHttp2 is refused at load', async () => {
    const status = (JSON.parse((await send(gw.adminUrl, { path: '/config' })).body) as { resources: { name: string; state: string; reasons: { path: string; message: string }[] }[] }).resources.find((r) => r.name === 'http1')!;
    expect(status.state).toBe('Rejected');
    expect(status.reasons[0]).toMatchObject({ path: 'spec.healthChecks[0].grpcHealthCheck', message: 'a gRPC health check needs useHttp2: true (gRPC runs over HTTP/2)' });
  });
});
