import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { parseManifests } from '../config/manifest.ts';
import { ConfigStore } from '../config/store.ts';
import type { Authorizer } from '../extauth/authorizer.ts';
import { Gateway } from './gateway.ts';
import { UpstreamRegistry } from './upstream/upstream-cluster.ts';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

async function listen(handler: Parameters<typeof createServer>[1]): Promise<number> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

function snapshotFor(upstreamPort: number) {
  const docs = [
    { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'up' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: upstreamPort }] } } },
    { apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name: 'slow' }, spec: { configs: [{ passThroughAuth: { grpc: { address: '127.0.0.1:1' } } }] } },
    {
      apiVersion: 'gateway.gatehouse.dev/v1',
      kind: 'VirtualService',
      metadata: { name: 'vs' },
      spec: { virtualHost: { domains: ['*'], options: { extauth: { configRef: { name: 'slow' } } }, routes: [{ routeAction: { single: { upstream: { name: 'up' } } } }] } },
    },
  ];
  return new ConfigStore({ apiGroupDomain: 'gatehouse.dev' }).load(parseManifests('c.yaml', docs.map((d) => stringify(d)).join('---\n')).documents);
}

describe('a client that leaves while its request is being authorized', () => {
  test('is not forwarded upstream, and the gateway closes promptly', async () => {
    let upstreamRequests = 0;
    const upstreamPort = await listen((_req, res) => {
      upstreamRequests++;
      res.end('never read');
    });
    let decided!: () => void;
    const decisionMade = new Promise<void>((r) => (decided = r));
    const authorizer: Authorizer = {
      check: () =>
        new Promise((resolve) =>
          setTimeout(() => {
            resolve({ allowed: true, headersToSet: [], headersToRemove: [] });
            setImmediate(decided);
          }, 200),
        ),
      close: async () => {},
    };
    const upstreams = new UpstreamRegistry();
    const gateway = new Gateway({ logger: pino({ level: 'silent' }), upstreams, authorizer, accessLog: false });
    gateway.update(snapshotFor(upstreamPort));
    const port = await listen(gateway.handle);

    const client = request({ host: '127.0.0.1', port, path: '/' });
    client.on('error', () => {});
    client.end();
    setTimeout(() => client.destroy(), 50);
    await decisionMade;
    await new Promise((r) => setTimeout(r, 100));
    expect(upstreamRequests).toBe(0);

    const closed = await Promise.race([gateway.close().then(() => 'closed'), new Promise((r) => setTimeout(() => r('hung'), 2_000))]);
    expect(closed).toBe('closed');
  });
});
