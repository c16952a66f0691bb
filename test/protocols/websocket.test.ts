/**
 * WebSocket through a real `gatehouse run` (SPEC 3.2.1, issue 12 item 4): a real `ws` echo
 * server upstream, a `ws` client, Basic Auth (htpasswd) deciding before the upgrade.
 */
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';

const line = execFileSync('htpasswd', ['-nbm', 'alice', 'wonderland'], { encoding: 'utf8' }).trim();
const [, salt, hash] = /\$apr1\$([^$]+)\$(.+)$/.exec(line)!;
const basic = `Basic ${Buffer.from('alice:wonderland').toString('base64')}`;

let echo: WebSocketServer;
const seenHeaders: Record<string, string | string[] | undefined>[] = [];
const serverClosed: number[] = [];
let dir: ConfigDir;
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  echo = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  echo.on('connection', (socket, req) => {
    seenHeaders.push(req.headers);
    socket.on('message', (data, binary) => (data.toString() === 'server-close' ? socket.close(4001, 'server says bye') : socket.send(data, { binary })));
    socket.on('close', (code) => serverClosed.push(code));
  });
  await once(echo, 'listening');
  const port = (echo.address() as AddressInfo).port;
  dir = await makeConfigDir({
    'config.yaml': [
      { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'ws' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } } },
      { apiVersion: 'enterprise.gloo.solo.io/v1', kind: 'AuthConfig', metadata: { name: 'basic' }, spec: { configs: [{ basicAuth: { realm: 'ws', apr: { users: { alice: { salt, hashedPassword: hash } } } } }] } },
      {
        apiVersion: 'gateway.solo.io/v1',
        kind: 'VirtualService',
        metadata: { name: 'ws' },
        spec: {
          virtualHost: {
            domains: ['*'],
            routes: [
              { matchers: [{ prefix: '/open' }], routeAction: { single: { upstream: { name: 'ws' } } } },
              { matchers: [{ prefix: '/secure' }], options: { extauth: { configRef: { name: 'basic' } } }, routeAction: { single: { upstream: { name: 'ws' } } } },
            ],
          },
        },
      },
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path]);
});

afterAll(async () => {
  await gatehouse?.stop();
  echo?.close();
  await dir?.cleanup();
});

/** Opens a client; resolves once open, or with the HTTP status of a refused handshake. */
function connect(path: string, headers: Record<string, string> = {}): Promise<WebSocket | { refused: number }> {
  const ws = new WebSocket(`${gatehouse.url.replace('http', 'ws')}${path}`, { headers });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => resolve({ refused: res.statusCode! }));
    ws.once('error', reject);
  });
}

describe('WebSocket through gatehouse run', () => {
  it('auth runs before the upgrade: no credentials → 401, no upstream connection; with them, 10,000 messages flow both ways', async () => {
    const before = seenHeaders.length;
    expect(await connect('/secure/chat')).toEqual({ refused: 401 });
    expect(seenHeaders.length).toBe(before);
    const ws = (await connect('/secure/chat', { authorization: basic })) as WebSocket;
    expect(seenHeaders.at(-1)).toMatchObject({ 'x-user-id': 'ws;alice', 'x-forwarded-proto': 'http' });
    const count = 10_000;
    let received = 0;
    let mismatch = 0;
    const all = new Promise<void>((resolve) =>
      ws.on('message', (data) => {
        if (data.toString() !== `message ${received}`) mismatch++;
        if (++received === count) resolve();
      }),
    );
    for (let i = 0; i < count; i++) ws.send(`message ${i}`);
    await all;
    expect(mismatch).toBe(0);
    ws.close(1000, 'done');
    const [code] = (await once(ws, 'close')) as [number];
    expect(code).toBe(1000);
  });

  it('either side closing closes the other', async () => {
    const ws = (await connect('/open/a')) as WebSocket;
    ws.send('server-close');
    const [code, reason] = (await once(ws, 'close')) as [number, Buffer];
    expect(code).toBe(4001);
    expect(reason.toString()).toBe('server says bye');
    const other = (await connect('/open/b')) as WebSocket;
    const closedBefore = serverClosed.length;
    other.terminate();
    for (let i = 0; i < 100 && serverClosed.length === closedBefore; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(serverClosed.length).toBe(closedBefore + 1);
  });

  it('logs the connection once in the access log with status 101', async () => {
    const ws = (await connect('/open/logged')) as WebSocket;
    ws.close();
    await once(ws, 'close');
    const entry = await gatehouse.waitForLog((l) => l.path === '/open/logged');
    expect(entry).toMatchObject({ status: 101, route: expect.any(String) });
    // A marker connection opened and closed after it: once its line is logged, a second line for
    // the first connection (at upgrade or at close) would have been logged before it.
    const marker = (await connect('/open/logged-marker')) as WebSocket;
    marker.close();
    await once(marker, 'close');
    await gatehouse.waitForLog((l) => l.path === '/open/logged-marker');
    expect(gatehouse.logs.filter((l) => l.path === '/open/logged')).toHaveLength(1);
  });
});
