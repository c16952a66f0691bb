/**
 * Active TCP health checks (issue 31 item 4, Gloo's healthChecks[].tcpHealthCheck, Envoy's
 * TcpHealthCheck) through a real `gatehouse run`: two real upstreams answer the check's bytes; the
 * one whose answer stops matching stops getting requests, and gets them back once it matches again.
 * The check is an HTTP/1.0 request written as raw bytes (hex `send`), passing on " 200 " (`receive`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

const hex = (text: string) => Buffer.from(text).toString('hex');
const healthy = { a: true, b: true };
let a: TestServer;
let b: TestServer;
let dir: ConfigDir;
let gw: GatehouseProcess;

function server(name: 'a' | 'b'): Promise<TestServer> {
  return startServer((req, res) => {
    if (req.url === '/healthz') return res.writeHead(healthy[name] ? 200 : 503).end();
    res.writeHead(200, { 'x-upstream': name }).end(name);
  });
}

beforeAll(async () => {
  [a, b] = await Promise.all([server('a'), server('b')]);
  dir = await makeConfigDir({
    'config.yaml': [
      {
        apiVersion: 'gloo.solo.io/v1',
        kind: 'Upstream',
        metadata: { name: 'pair' },
        spec: {
          static: { hosts: [a, b].map((s) => ({ addr: '127.0.0.1', port: s.port })) },
          healthChecks: [{ timeout: '1s', interval: '100ms', healthyThreshold: 1, unhealthyThreshold: 1, tcpHealthCheck: { send: { text: hex('GET /healthz HTTP/1.0\r\n\r\n') }, receive: [{ binary: Buffer.from(' 200 ').toString('base64') }] } }],
        },
      },
      { apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name: 'vs' }, spec: { virtualHost: { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'pair' } } } }] } } },
    ],
  });
  gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  await Promise.all([a?.close(), b?.close()]);
  await dir?.cleanup();
});

const served = async (n: number) => {
  const names = new Set<string>();
  for (let i = 0; i < n; i++) names.add((await send(gw.url, { path: '/x' })).headers['x-upstream'] as string);
  return names;
};

describe('tcpHealthCheck through gatehouse run', () => {
  it('the Upstream loads without a warning and both hosts serve while both answer the check', async () => {
    const resources = (JSON.parse((await send(gw.adminUrl, { path: '/config' })).body) as { resources: { name: string; state: string }[] }).resources;
    expect(resources.find((r) => r.name === 'pair')!.state).toBe('Accepted');
    await eventually(async () => (await served(10)).size === 2);
  });

  it('a host whose answer stops matching gets no requests, and gets them back once it matches again', async () => {
    healthy.b = false;
    // Once the check has seen b fail, only a serves (the check runs every 100 ms).
    await eventually(async () => {
      const names = await served(10);
      return names.size === 1 && names.has('a');
    });
    expect(await served(20)).toEqual(new Set(['a']));
    healthy.b = true;
    await eventually(async () => (await served(10)).has('b'));
  });
});
