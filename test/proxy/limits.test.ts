/**
 * Issue 17 findings 7 and 8 against a real `gatehouse run`: clients that drip request bodies
 * pin every pooled upstream connection; other requests to that upstream must get a 504 within
 * the route timeout (not wait for ever) and, past the pending-request limit, a 503 at once.
 * Connections that never send a byte are closed after the request headers timeout.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

/** The gateway's pool size per upstream host (core/src/proxy/upstream/upstream-cluster.ts). */
const POOL = 128;

let upstream: TestServer;
let config: ConfigDir;
let gw: GatehouseProcess;
const drips: Socket[] = [];

beforeAll(async () => {
  // Reads bodies as they come; answers once a body ends.
  upstream = await startServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('done'));
  });
  config = await makeConfigDir({
    'config.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.virtualService('vs', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], options: { timeout: '1s' }, routeAction: { single: { upstream: { name: 'up' } } } }] }),
    ],
  });
  gw = await startGatehouse('run', ['--config-dir', config.path, '--max-pending-requests', '4', '--request-headers-timeout', '1s', '--access-log', 'false']);
});

afterAll(async () => {
  for (const socket of drips) socket.destroy();
  await gw?.stop();
  await upstream?.close();
  await config?.cleanup();
});

/** A client that sends headers and the first byte of a 1 MB body, then nothing. */
function dripClient(port: number): Promise<Socket> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write('POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nx');
      resolve(socket);
    });
    socket.on('error', () => {});
    drips.push(socket);
  });
}

describe('slow clients cannot starve an upstream (finding 7)', () => {
  it('with every pooled connection pinned, a request gets 504 within its route timeout, and past the pending limit 503 at once', async () => {
    await Promise.all(Array.from({ length: POOL + 2 }, () => dripClient(gw.port)));
    // Let the gateway dispatch them all upstream.
    await new Promise((r) => setTimeout(r, 500));
    const queued = Array.from({ length: 2 }, () => send(gw.url, { path: '/fast', timeoutMs: 5_000 }));
    const replies = await Promise.all(queued);
    for (const r of replies) {
      expect(r.status).toBe(504);
      expect(r.headers['x-gatehouse-error']).toBe('GH_UPSTREAM_TIMEOUT');
    }
    // Still pinned: 2 drips already wait in the queue, so a burst of 6 passes the limit of 4.
    const burst = await Promise.all(Array.from({ length: 6 }, () => send(gw.url, { path: '/fast', timeoutMs: 5_000 })));
    const statuses = burst.map((r) => r.status);
    expect(statuses).toContain(503);
    const overflow = burst.find((r) => r.status === 503)!;
    expect(overflow.headers['x-gatehouse-error']).toBe('GH_UPSTREAM_OVERFLOW');
    expect(overflow.headers['x-envoy-overloaded']).toBe('true');
    for (const socket of drips.splice(0)) socket.destroy();
    // Once the slow clients are gone, the upstream serves again.
    await expect.poll(async () => (await send(gw.url, { path: '/fast' })).status, { timeout: 5_000 }).toBe(200);
  });
});

describe('idle connections (finding 8)', () => {
  it('a connection that never sends a byte is closed after the request headers timeout', async () => {
    const closedAfter = await new Promise<number>((resolve) => {
      const started = performance.now();
      const socket = connect(gw.port, '127.0.0.1');
      socket.on('error', () => {});
      const timer = setTimeout(() => (socket.destroy(), resolve(-1)), 5_000);
      socket.on('close', () => (clearTimeout(timer), resolve(performance.now() - started)));
    });
    expect(closedAfter).toBeGreaterThan(500);
  });
});
