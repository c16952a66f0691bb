/**
 * Upstream connectionConfig and the cluster-wide circuit breakers (issue 15) through a real
 * `gatehouse run` with real upstreams: maxRequestsPerConnection (sockets the upstream sees),
 * commonHttpProtocolOptions.idleTimeout (when the upstream sees the socket close),
 * tcpKeepalive.keepaliveTime (the kernel's keep-alive timer on the gateway's socket, read from
 * /proc/net/tcp), maxStreamDuration (504, or a reset once the response started), maxHeadersCount,
 * circuitBreakers.maxRequests (503 + x-envoy-overloaded) and maxRetries (retries in flight), and the
 * warnings `gatehouse validate` prints for the fields Node cannot honour.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));

/** Every socket an upstream accepted: its remote port, when it closed. */
interface Tracked {
  server: TestServer;
  sockets: { port: number; closedAt?: number }[];
  hits: number;
}

async function tracked(handler: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse, t: Tracked) => void): Promise<Tracked> {
  const t: Tracked = { server: undefined as unknown as TestServer, sockets: [], hits: 0 };
  t.server = await startServer((req, res) => {
    t.hits++;
    handler(req, res, t);
  });
  t.server.server.on('connection', (socket: Socket) => {
    const entry: { port: number; closedAt?: number } = { port: socket.remotePort! };
    t.sockets.push(entry);
    socket.once('close', () => (entry.closedAt = Date.now()));
  });
  return t;
}

const ok = (_req: unknown, res: import('node:http').ServerResponse) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');

let plain: Tracked;
let perConnection: Tracked;
let idle: Tracked;
let keepalive: Tracked;
let slow: Tracked;
let headersy: Tracked;
let failing: Tracked;
let failingDefault: Tracked;
let dir: ConfigDir;
let gw: GatehouseProcess;

beforeAll(async () => {
  [plain, perConnection, idle, keepalive, headersy] = await Promise.all([
    tracked(ok),
    tracked(ok),
    tracked(ok),
    tracked(ok),
    tracked((req, res) => {
      const many = req.url === '/many';
      const extra = Object.fromEntries(Array.from({ length: many ? 12 : 1 }, (_, i) => [`x-extra-${i}`, String(i)]));
      res.writeHead(200, { 'content-type': 'text/plain', ...extra }).end('ok');
    }),
  ]);
  slow = await tracked((req, res) => {
    if (req.url === '/stream') {
      // Headers and a first chunk at once, then more every 100 ms for 3 s.
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first\n');
      const timer = setInterval(() => res.write('more\n'), 100);
      setTimeout(() => (clearInterval(timer), res.end('end\n')), 3_000);
      res.once('close', () => clearInterval(timer));
      return;
    }
    setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain' }).end('slow'), req.url === '/slow' ? 2_000 : 300);
  });
  const fail = (_req: unknown, res: import('node:http').ServerResponse) => setTimeout(() => res.writeHead(503, { 'content-type': 'text/plain' }).end('down'), 250);
  [failing, failingDefault] = await Promise.all([tracked(fail), tracked(fail)]);
  const upstream = (name: string, t: Tracked, extra: object = {}) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name, namespace: 'gloo-system' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: t.server.port }] }, ...extra } });
  const route = (prefix: string, name: string, options?: object) => ({ matchers: [{ prefix }], routeAction: { single: { upstream: { name, namespace: 'gloo-system' } } }, ...(options ? { options } : {}) });
  dir = await makeConfigDir({
    'upstreams.yaml': [
      upstream('plain', plain),
      upstream('per-connection', perConnection, { connectionConfig: { maxRequestsPerConnection: 2 } }),
      upstream('idle', idle, { connectionConfig: { commonHttpProtocolOptions: { idleTimeout: '300ms' } } }),
      upstream('keepalive', keepalive, { connectionConfig: { tcpKeepalive: { keepaliveProbes: 3, keepaliveTime: '7s', keepaliveInterval: '2s' }, perConnectionBufferLimitBytes: 32768 } }),
      upstream('capped', slow, { connectionConfig: { commonHttpProtocolOptions: { maxStreamDuration: '400ms', headersWithUnderscoresAction: 'REJECT_REQUEST' }, http1ProtocolOptions: { enableTrailers: true, properCaseHeaderKeyFormat: true } } }),
      upstream('limited', slow, { circuitBreakers: { maxConnections: 16, maxRequests: 2 } }),
      upstream('headersy', headersy, { connectionConfig: { commonHttpProtocolOptions: { maxHeadersCount: 8 } } }),
      upstream('retry-limited', failing, { circuitBreakers: { maxRetries: 1 } }),
      upstream('retry-default', failingDefault),
    ],
    'vs.yaml': [
      {
        apiVersion: 'gateway.solo.io/v1',
        kind: 'VirtualService',
        metadata: { name: 'connections', namespace: 'gloo-system' },
        spec: {
          virtualHost: {
            domains: ['*'],
            routes: [
              route('/plain', 'plain'),
              route('/per-connection', 'per-connection'),
              route('/idle', 'idle'),
              route('/keepalive', 'keepalive'),
              { matchers: [{ prefix: '/capped/' }], routeAction: { single: { upstream: { name: 'capped', namespace: 'gloo-system' } } }, options: { prefixRewrite: '/' } },
              { matchers: [{ prefix: '/limited/' }], routeAction: { single: { upstream: { name: 'limited', namespace: 'gloo-system' } } }, options: { prefixRewrite: '/' } },
              { matchers: [{ prefix: '/headers/' }], routeAction: { single: { upstream: { name: 'headersy', namespace: 'gloo-system' } } }, options: { prefixRewrite: '/' } },
              route('/retry-limited', 'retry-limited', { retries: { retryOn: '5xx', numRetries: 1 } }),
              route('/retry-default', 'retry-default', { retries: { retryOn: '5xx', numRetries: 1 } }),
            ],
          },
        },
      },
    ],
  });
  gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([plain, perConnection, idle, keepalive, slow, headersy, failing, failingDefault].map((t) => t?.server.close()));
  await dir?.cleanup();
});

async function sequential(path: string, n: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) statuses.push((await send(gw.url, { path })).status);
  return statuses;
}

describe('connectionConfig', () => {
  it('maxRequestsPerConnection: 2 closes each upstream connection after two requests (one connection without it)', async () => {
    expect(await sequential('/per-connection', 6)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(perConnection.sockets).toHaveLength(3);
    expect(await sequential('/plain', 6)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(plain.sockets).toHaveLength(1);
  });

  it('commonHttpProtocolOptions.idleTimeout: an idle upstream connection is closed after it (the default keeps it)', async () => {
    expect((await send(gw.url, { path: '/idle' })).status).toBe(200);
    const sent = Date.now();
    const closed = await eventually(async () => idle.sockets[0]?.closedAt, 5_000);
    expect(closed - sent).toBeGreaterThanOrEqual(250);
    expect(closed - sent).toBeLessThan(3_000);
    // The plain Upstream (30 s default) still holds its connection.
    expect(plain.sockets.every((s) => s.closedAt === undefined)).toBe(true);
  });

  it('tcpKeepalive.keepaliveTime: the kernel keep-alive timer on the gateway socket runs from 7 s (undici default 60 s)', async () => {
    expect((await send(gw.url, { path: '/keepalive' })).status).toBe(200);
    expect((await send(gw.url, { path: '/plain' })).status).toBe(200);
    const timers = await keepaliveTimers();
    const configured = timers.get(keepalive.server.port);
    const other = timers.get(plain.server.port);
    // /proc/net/tcp: timer 2 is keep-alive, its expiry in clock ticks (USER_HZ, 100 a second).
    expect(configured, 'the gateway socket to the keepalive upstream').toBeDefined();
    expect(configured!).toBeLessThanOrEqual(7);
    expect(configured!).toBeGreaterThan(4);
    expect(other!).toBeGreaterThan(30);
  });

  it('maxStreamDuration: a try still waiting for headers after it gets 504; a streaming one is cut', async () => {
    const started = Date.now();
    const reply = await send(gw.url, { path: '/capped/slow' });
    expect(reply.status).toBe(504);
    expect(reply.headers['x-gatehouse-error']).toBe('GH_UPSTREAM_TIMEOUT');
    expect(reply.body).toContain('max stream duration');
    expect(Date.now() - started).toBeLessThan(1_800);
    // A response that started is reset (the client sees the connection end early).
    const streamed = await new Promise<{ status: number; body: string; error?: string; ms: number }>((resolve) => {
      const t0 = Date.now();
      const url = new URL(gw.url);
      const req = request({ host: url.hostname, port: url.port, path: '/capped/stream', agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c));
        res.on('error', (e) => resolve({ status: res.statusCode!, body, error: e.message, ms: Date.now() - t0 }));
        res.on('aborted', () => resolve({ status: res.statusCode!, body, error: 'aborted', ms: Date.now() - t0 }));
        res.on('end', () => resolve({ status: res.statusCode!, body, ms: Date.now() - t0 }));
      });
      req.on('error', (e) => resolve({ status: 0, body: '', error: e.message, ms: Date.now() - t0 }));
      req.end();
    });
    expect(streamed.status).toBe(200);
    expect(streamed.body.startsWith('first\n')).toBe(true);
    expect(streamed.body).not.toContain('end\n');
    expect(streamed.error).toBeDefined();
    expect(streamed.ms).toBeLessThan(2_500);
    // Without the cap the same upstream answers (300 ms) through another Upstream.
    expect((await send(gw.url, { path: '/limited/fast' })).status).toBe(200);
  });

  it('maxHeadersCount: a response with more header fields is refused with 503', async () => {
    expect((await send(gw.url, { path: '/headers/few' })).status).toBe(200);
    const many = await send(gw.url, { path: '/headers/many' });
    expect(many.status).toBe(503);
    expect(many.body).toContain('maxHeadersCount');
  });
});

describe('circuitBreakers (per Upstream)', () => {
  it('maxRequests: 2 lets two requests in flight; a third gets 503 with x-envoy-overloaded', async () => {
    const replies = await Promise.all([0, 1, 2].map((i) => send(gw.url, { path: `/limited/${i}` })));
    expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 503]);
    const refused = replies.find((r) => r.status === 503)!;
    expect(refused.headers['x-envoy-overloaded']).toBe('true');
    expect(refused.headers['x-gatehouse-error']).toBe('GH_UPSTREAM_OVERFLOW');
    // Slots free again once those finish.
    expect((await send(gw.url, { path: '/limited/again' })).status).toBe(200);
  });

  it('maxRetries: 1 retries one of three concurrent failures; the others get the original 503 (default 3: all retried)', async () => {
    const limited = await Promise.all([0, 1, 2].map(() => send(gw.url, { path: '/retry-limited' })));
    expect(limited.map((r) => r.status)).toEqual([503, 503, 503]);
    // The upstream's own 503 came back (not a gateway error): no retry hid it.
    expect(limited.every((r) => r.body === 'down' && r.headers['x-gatehouse-error'] === undefined)).toBe(true);
    expect(failing.hits).toBe(4);
    await Promise.all([0, 1, 2].map(() => send(gw.url, { path: '/retry-default' })));
    expect(failingDefault.hits).toBe(6);
    // Slots are released: one request alone is retried again.
    failing.hits = 0;
    expect((await send(gw.url, { path: '/retry-limited' })).status).toBe(503);
    expect(failing.hits).toBe(2);
  });
});

describe('gatehouse validate', () => {
  it('accepts the Upstreams with a warning naming each field Node cannot honour, none for honoured ones', async () => {
    const { code, out } = await new Promise<{ code: number; out: string }>((resolve) => {
      execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', dir.path], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 20_000 }, (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
      );
    });
    expect(code, out).toBe(0);
    for (const field of ['tcpKeepalive.keepaliveProbes', 'tcpKeepalive.keepaliveInterval', 'perConnectionBufferLimitBytes', 'commonHttpProtocolOptions.headersWithUnderscoresAction', 'http1ProtocolOptions.properCaseHeaderKeyFormat']) {
      expect(out, field).toContain(field);
    }
    for (const honoured of ['maxRequestsPerConnection', 'keepaliveTime', 'idleTimeout', 'maxStreamDuration', 'maxHeadersCount', 'maxRequests', 'maxRetries', 'enableTrailers']) {
      expect(out, honoured).not.toMatch(new RegExp(`\\.${honoured}\\b`));
    }
  });
});

/** Seconds until the keep-alive timer fires on the gateway's sockets to each remote port (127.0.0.1, IPv4). */
async function keepaliveTimers(): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  const text = await readFile('/proc/net/tcp', 'utf8');
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 6 || f[3] !== '01') continue; // ESTABLISHED
    const remotePort = parseInt(f[2]!.split(':')[1]!, 16);
    const [timer, when] = f[5]!.split(':');
    if (timer === '02') out.set(remotePort, parseInt(when!, 16) / 100);
  }
  return out;
}
