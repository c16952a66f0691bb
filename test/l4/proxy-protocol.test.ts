/**
 * The PROXY protocol (v1 and v2) on real `gatehouse run` listeners (docs/proxy-protocol.md):
 * behind a real HAProxy (`send-proxy`, `send-proxy-v2`) and from hand-made headers, over
 * HTTP/1.1, h2c and TLS (HTTP/1.1 and h2), the address the header names is the request's
 * client address (`x-forwarded-for`, per-address rate limits, `%DOWNSTREAM_REMOTE_ADDRESS%` in
 * a Gateway's access log). Hostile headers (truncated, oversized, wrong signature, unknown
 * family, byte-at-a-time, never sent, a flood of silent connections) close the connection and
 * are counted, and the process neither dies nor logs an unhandled error.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect as h2connect } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCert } from '../conformance/support.ts';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { freePort } from '../support/ports.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { findHaproxy, startHaproxy, type Haproxy } from './haproxy.ts';

const haproxyBinary = findHaproxy('test/l4/proxy-protocol.test.ts');

const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const v1 = (src: string, sport = 40000) => Buffer.from(`PROXY TCP4 ${src} 10.9.9.9 ${sport} 443\r\n`);
function v2(command: number, family: number, body: Buffer, length = body.length): Buffer {
  const head = Buffer.from([0x20 | command, family, length >> 8, length & 0xff]);
  return Buffer.concat([V2_SIGNATURE, head, body]);
}
function v2ipv4(src: number[], sport = 40000): Buffer {
  const body = Buffer.alloc(12);
  body.set(src, 0);
  body.set([10, 9, 9, 9], 4);
  body.writeUInt16BE(sport, 8);
  body.writeUInt16BE(443, 10);
  return v2(1, 0x11, body);
}

/** Sends `bytes` then reads until the server closes (or `timeoutMs`); resolves with what came back and whether it closed. */
function exchange(port: number, bytes: Buffer | Buffer[], options: { host?: string; localAddress?: string; timeoutMs?: number; gapMs?: number; /** Each part written and flushed to the kernel before the next (no timer between: fast on any machine). */ flushEach?: boolean } = {}): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: options.host ?? '127.0.0.1', ...(options.localAddress ? { localAddress: options.localAddress } : {}) });
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => (text += c));
    socket.on('error', () => {});
    const timer = setTimeout(() => (socket.destroy(), resolve({ text, closed: false })), options.timeoutMs ?? 5_000);
    socket.on('close', () => (clearTimeout(timer), resolve({ text, closed: true })));
    socket.on('connect', async () => {
      const parts = Array.isArray(bytes) ? bytes : [bytes];
      if (options.flushEach) socket.setNoDelay(true);
      for (const part of parts) {
        if (socket.destroyed) return;
        if (options.flushEach) await new Promise<void>((r) => socket.write(part, () => setImmediate(r)));
        else socket.write(part);
        if (options.gapMs) await new Promise((r) => setTimeout(r, options.gapMs));
      }
    });
  });
}

const get = (path: string) => Buffer.from(`GET ${path} HTTP/1.1\r\nhost: app.test\r\nconnection: close\r\n\r\n`);
const echoOf = (text: string): Echo => JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as Echo;
const statusOf = (text: string) => Number(text.slice(9, 12));

/** An h2c request on a connection that first writes `header`. */
async function h2cGet(port: number, header: Buffer, path: string): Promise<Echo> {
  const session = h2connect(`http://app.test:${port}`, {
    createConnection: () => {
      const socket = connect(port, '127.0.0.1');
      socket.write(header);
      return socket;
    },
  });
  try {
    return await new Promise<Echo>((resolve, reject) => {
      const req = session.request({ ':path': path, ':authority': 'app.test' });
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => resolve(JSON.parse(body) as Echo));
      req.on('error', reject);
      req.end();
    });
  } finally {
    session.close();
  }
}

/** A TLS request (HTTP/1.1, or h2 with `alpn`) on a connection that first writes `header`. */
async function tlsGet(port: number, header: Buffer, path: string, alpn: 'http/1.1' | 'h2'): Promise<{ echo: Echo; alpn: string | false | null }> {
  const raw = connect(port, '127.0.0.1');
  await new Promise((resolve) => raw.once('connect', resolve));
  raw.write(header);
  const tls: TLSSocket = tlsConnect({ socket: raw, servername: 'app.test', rejectUnauthorized: false, ALPNProtocols: [alpn] });
  await new Promise((resolve, reject) => (tls.once('secureConnect', resolve), tls.once('error', reject)));
  if (alpn === 'h2') {
    const session = h2connect('https://app.test', { createConnection: () => tls });
    try {
      const echo = await new Promise<Echo>((resolve, reject) => {
        const req = session.request({ ':path': path });
        let body = '';
        req.setEncoding('utf8');
        req.on('data', (c: string) => (body += c));
        req.on('end', () => resolve(JSON.parse(body) as Echo));
        req.on('error', reject);
        req.end();
      });
      return { echo, alpn: tls.alpnProtocol };
    } finally {
      session.close();
    }
  }
  tls.write(get(path));
  let text = '';
  tls.setEncoding('latin1');
  tls.on('data', (c: string) => (text += c));
  await new Promise((resolve) => tls.once('close', resolve));
  return { echo: echoOf(text), alpn: tls.alpnProtocol };
}

async function metric(gh: GatehouseProcess, name: string, labels = ''): Promise<number> {
  const text = (await send(gh.adminUrl, { path: '/metrics' })).body;
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `) || (labels === '' && l.startsWith(`${name} `)));
  return line ? Number(line.split(' ').pop()) : 0;
}
const refused = (gh: GatehouseProcess, reason: string) => metric(gh, 'gatehouse_downstream_connections_refused_total', `reason="${reason}"`);

let work: string;
let echo: TestServer;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'gatehouse-l4-pp-'));
  echo = await startEcho('echo');
});
afterAll(async () => {
  await echo?.close();
  await rm(work, { recursive: true, force: true });
});

describe('--proxy-protocol true: the --port and --https-port listeners', () => {
  let config: ConfigDir;
  let gh: GatehouseProcess;
  let httpsPort: number;

  beforeAll(async () => {
    const pair = await selfSignedCert(work, 'app', ['app.test']);
    config = await makeConfigDir({
      'all.yaml': [
        manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
        manifests.virtualService('plain', {
          domains: ['app.test'],
          routes: [
            { matchers: [{ prefix: '/limited' }], routeAction: { single: { upstream: { name: 'echo' } } }, options: { ratelimitBasic: { anonymousLimits: { requestsPerUnit: 2, unit: 'DAY' } } } },
            { matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } },
          ],
        }),
        { ...manifests.virtualService('tls', { domains: ['app.test'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] }), spec: { sslConfig: { sslFiles: { tlsCert: pair.certFile, tlsKey: pair.keyFile } }, virtualHost: { domains: ['app.test'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] } } },
      ],
    });
    gh = await startGatehouse('run', ['--config-dir', config.path, '--proxy-protocol', 'true', '--request-headers-timeout', '1s', '--max-connections-per-client', '4']);
    httpsPort = gh.listening.httpsPort as number;
  });
  afterAll(async () => {
    await gh?.stop();
    await config?.cleanup();
  });

  it('HTTP/1.1: the v1 and v2 source address is the client address (x-forwarded-for)', async () => {
    const one = await exchange(gh.port, [v1('192.0.2.7'), get('/a')]);
    expect(echoOf(one.text).headers['x-forwarded-for']).toBe('192.0.2.7');
    const two = await exchange(gh.port, Buffer.concat([v2ipv4([198, 51, 100, 23]), get('/b')]));
    expect(echoOf(two.text).headers['x-forwarded-for']).toBe('198.51.100.23');
    // A client's own x-forwarded-for is kept, with the PROXY address appended.
    const forwarded = await exchange(gh.port, Buffer.concat([v1('192.0.2.8'), Buffer.from('GET / HTTP/1.1\r\nhost: app.test\r\nx-forwarded-for: 1.1.1.1\r\nconnection: close\r\n\r\n')]));
    expect(echoOf(forwarded.text).headers['x-forwarded-for']).toBe('1.1.1.1, 192.0.2.8');
  });

  it('h2c (prior knowledge) after the header', async () => {
    const echoed = await h2cGet(gh.port, v2ipv4([203, 0, 113, 5]), '/h2c');
    expect(echoed.headers['x-forwarded-for']).toBe('203.0.113.5');
  });

  it('TLS: the header comes before the ClientHello; HTTP/1.1 and h2 both see its address', async () => {
    const h1 = await tlsGet(httpsPort, v1('192.0.2.44'), '/tls1', 'http/1.1');
    expect(h1.alpn).toBe('http/1.1');
    expect(h1.echo.headers['x-forwarded-for']).toBe('192.0.2.44');
    expect(h1.echo.headers['x-forwarded-proto']).toBe('https');
    const h2 = await tlsGet(httpsPort, v2ipv4([192, 0, 2, 45]), '/tls2', 'h2');
    expect(h2.alpn).toBe('h2');
    expect(h2.echo.headers['x-forwarded-for']).toBe('192.0.2.45');
  });

  it('rate limits count per PROXY address, not per load balancer', async () => {
    const hit = async (src: string) => statusOf((await exchange(gh.port, [v1(src), get('/limited')])).text);
    expect([await hit('10.1.1.1'), await hit('10.1.1.1'), await hit('10.1.1.1')]).toEqual([200, 200, 429]);
    // Another client behind the same balancer (the same TCP peer, 127.0.0.1) has its own budget.
    expect(await hit('10.2.2.2')).toBe(200);
  });

  it('the per-client connection cap counts the PROXY address, not the balancer', async () => {
    // Four kept-alive connections of one client, each answered (so admitted), all from the same TCP peer.
    const held: Socket[] = [];
    for (let i = 0; i < 4; i++) {
      const socket = connect(gh.port, '127.0.0.1');
      socket.on('error', () => {});
      await new Promise<void>((resolve) => {
        socket.once('data', () => resolve());
        socket.write(Buffer.concat([v1('192.0.2.50'), Buffer.from('GET /held HTTP/1.1\r\nhost: app.test\r\n\r\n')]));
      });
      held.push(socket);
    }
    const before = await refused(gh, 'per_client_limit');
    expect(await exchange(gh.port, [v1('192.0.2.50'), get('/fifth')])).toEqual({ text: '', closed: true });
    expect(await refused(gh, 'per_client_limit')).toBe(before + 1);
    // Another client behind the same balancer is not held back.
    expect(echoOf((await exchange(gh.port, [v1('192.0.2.51'), get('/other')])).text).headers['x-forwarded-for']).toBe('192.0.2.51');
    for (const socket of held) socket.destroy();
  });

  it('v2 LOCAL (a health check) and v1 UNKNOWN are served with the connection address', async () => {
    const local = await exchange(gh.port, Buffer.concat([v2(0, 0x00, Buffer.alloc(0)), get('/local')]));
    expect(echoOf(local.text).headers['x-forwarded-for']).toBe('127.0.0.1');
    const unknown = await exchange(gh.port, Buffer.concat([Buffer.from('PROXY UNKNOWN\r\n'), get('/unknown')]));
    expect(echoOf(unknown.text).headers['x-forwarded-for']).toBe('127.0.0.1');
  });

  it('hostile headers close the connection, each counted by reason', async () => {
    const before = { invalid: await refused(gh, 'proxy_protocol_invalid'), missing: await refused(gh, 'proxy_protocol_missing'), timeout: await refused(gh, 'proxy_protocol_timeout') };
    const invalid: [string, Buffer][] = [
      ['oversized v1', Buffer.from(`PROXY TCP4 ${'1'.repeat(120)}`)],
      ['bad v1 address', Buffer.concat([Buffer.from('PROXY TCP4 300.1.1.1 10.0.0.1 1 2\r\n'), get('/')])],
      ['wrong v2 signature', Buffer.concat([Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0b]), Buffer.alloc(20)])],
      ['v2 AF_UNIX', Buffer.concat([v2(1, 0x31, Buffer.alloc(216)), get('/')])],
      ['v2 unknown family', Buffer.concat([v2(1, 0x51, Buffer.alloc(12)), get('/')])],
      ['v2 oversized length', v2(1, 0x11, Buffer.alloc(0), 65535)],
      ['v2 command 0xF', v2(0xf, 0x11, Buffer.alloc(12))],
    ];
    for (const [name, bytes] of invalid) {
      const reply = await exchange(gh.port, bytes);
      expect(reply, name).toEqual({ text: '', closed: true });
    }
    // No header at all: HTTP/1.1, the h2c preface, a ClientHello on the TLS port.
    expect(await exchange(gh.port, get('/'))).toEqual({ text: '', closed: true });
    expect(await exchange(gh.port, Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'))).toEqual({ text: '', closed: true });
    expect(await exchange(httpsPort, Buffer.from([0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00]))).toEqual({ text: '', closed: true });
    // Truncated (the client stops mid-header) and slow (a byte every 150 ms: the 1 s deadline is absolute).
    expect((await exchange(gh.port, Buffer.from('PROXY TCP4 192.0.2.1 10.0.'), { timeoutMs: 8_000 })).closed).toBe(true);
    const slow = await exchange(gh.port, [...v1('192.0.2.9')].map((b) => Buffer.from([b])), { gapMs: 150, timeoutMs: 10_000 });
    expect(slow).toEqual({ text: '', closed: true });
    await eventually(async () => (await refused(gh, 'proxy_protocol_invalid')) >= before.invalid + invalid.length);
    expect(await refused(gh, 'proxy_protocol_missing')).toBeGreaterThanOrEqual(before.missing + 3);
    expect(await refused(gh, 'proxy_protocol_timeout')).toBeGreaterThanOrEqual(before.timeout + 2);
  });

  it('a header sent a byte at a time within the deadline is read', async () => {
    const bytes = Buffer.concat([v1('192.0.2.77'), get('/trickle')]);
    // The whole PROXY header one byte per write, each flushed before the next (no timers: inside the 1 s deadline on any machine), then the request.
    const header = v1('192.0.2.77').length;
    const reply = await exchange(gh.port, [...bytes.subarray(0, header)].map((b) => Buffer.from([b])).concat([bytes.subarray(header)]), { flushEach: true });
    expect(echoOf(reply.text).headers['x-forwarded-for']).toBe('192.0.2.77');
  });

  it('a flood of connections that never send is closed at the deadline, and the process serves on', async () => {
    const pid = gh.child.pid;
    const before = await refused(gh, 'proxy_protocol_timeout');
    const sockets: Socket[] = [];
    const closed = new Set<Socket>();
    for (let i = 0; i < 300; i++) {
      const s = connect(i % 2 ? gh.port : httpsPort, '127.0.0.1');
      s.on('error', () => {});
      s.on('close', () => closed.add(s));
      sockets.push(s);
    }
    await eventually(async () => closed.size === sockets.length, 20_000);
    expect(await refused(gh, 'proxy_protocol_timeout')).toBeGreaterThanOrEqual(before + 300);
    const after = await exchange(gh.port, [v1('192.0.2.99'), get('/after')]);
    expect(echoOf(after.text).headers['x-forwarded-for']).toBe('192.0.2.99');
    expect(gh.child.pid).toBe(pid);
    expect(gh.child.exitCode).toBeNull();
    expect(await metric(gh, 'gatehouse_unhandled_errors_total')).toBe(0);
  });

  describe.skipIf(!haproxyBinary)('behind a real HAProxy', () => {
    let haproxy: Haproxy;
    beforeAll(async () => {
      haproxy = await startHaproxy(haproxyBinary!, work, {
        v1: { bind: '127.0.0.2', target: gh.port, send: 'send-proxy' },
        v2: { bind: '127.0.0.2', target: gh.port, send: 'send-proxy-v2' },
        tls: { bind: '127.0.0.2', target: httpsPort, send: 'send-proxy-v2' },
      });
    });
    afterAll(() => haproxy?.stop());

    it('send-proxy (v1) and send-proxy-v2: the client behind HAProxy is the client address', async () => {
      // The client connects from 127.0.0.3; HAProxy connects to the gateway from 127.0.0.1.
      const one = await exchange(haproxy.ports.v1!, get('/via-v1'), { host: '127.0.0.2', localAddress: '127.0.0.3' });
      expect(echoOf(one.text).headers['x-forwarded-for']).toBe('127.0.0.3');
      const two = await exchange(haproxy.ports.v2!, get('/via-v2'), { host: '127.0.0.2', localAddress: '127.0.0.4' });
      expect(echoOf(two.text).headers['x-forwarded-for']).toBe('127.0.0.4');
    });

    it('send-proxy-v2 in front of the TLS listener (TLS passes through HAProxy)', async () => {
      const raw = connect({ host: '127.0.0.2', port: haproxy.ports.tls!, localAddress: '127.0.0.5' });
      const tls = tlsConnect({ socket: raw, servername: 'app.test', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });
      await new Promise((resolve, reject) => (tls.once('secureConnect', resolve), tls.once('error', reject)));
      tls.write(get('/via-tls'));
      let text = '';
      tls.setEncoding('latin1');
      tls.on('data', (c: string) => (text += c));
      await new Promise((resolve) => tls.once('close', resolve));
      expect(echoOf(text).headers['x-forwarded-for']).toBe('127.0.0.5');
    });
  });
});

describe('Gateway useProxyProto and options.proxyProtocol', () => {
  let config: ConfigDir;
  let gh: GatehouseProcess;
  let strictPort: number;
  let lenientPort: number;
  const log = () => join(work, 'gateway-access.log');

  beforeAll(async () => {
    [strictPort, lenientPort] = await Promise.all([freePort(), freePort()]);
    const gateway = (name: string, port: number, extra: object) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'Gateway', metadata: { name, namespace: 'default' }, spec: { bindAddress: '127.0.0.1', bindPort: port, httpGateway: {}, ...extra } });
    config = await makeConfigDir({
      'all.yaml': [
        manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
        manifests.virtualService('plain', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] }),
        gateway('strict', strictPort, { useProxyProto: true, options: { accessLoggingService: { accessLog: [{ fileSink: { path: log(), stringFormat: '%DOWNSTREAM_REMOTE_ADDRESS% %REQ(:PATH)%' } }] } } }),
        gateway('lenient', lenientPort, { options: { proxyProtocol: { allowRequestsWithoutProxyProtocol: true } } }),
      ],
    });
    gh = await startGatehouse('run', ['--config-dir', config.path]);
    await gh.waitForLog((l) => l.msg === 'Gateway listener bound' && l.gateway === 'default/lenient');
    await gh.waitForLog((l) => l.msg === 'Gateway listener bound' && l.gateway === 'default/strict');
  });
  afterAll(async () => {
    await gh?.stop();
    await config?.cleanup();
  });

  it('useProxyProto: true reads the header; the access log shows its address and port', async () => {
    const reply = await exchange(strictPort, [v1('192.0.2.61', 51234), get('/logged')]);
    expect(echoOf(reply.text).headers['x-forwarded-for']).toBe('192.0.2.61');
    await eventually(async () => (await readFile(log(), 'utf8').catch(() => '')).includes('192.0.2.61:51234 /logged'));
    // Without a header: refused.
    expect(await exchange(strictPort, get('/'))).toEqual({ text: '', closed: true });
  });

  it('allowRequestsWithoutProxyProtocol serves connections with and without a header', async () => {
    const withHeader = await exchange(lenientPort, [v2ipv4([192, 0, 2, 62]), get('/with')]);
    expect(echoOf(withHeader.text).headers['x-forwarded-for']).toBe('192.0.2.62');
    const without = await exchange(lenientPort, get('/without'));
    expect(echoOf(without.text).headers['x-forwarded-for']).toBe('127.0.0.1');
    // A malformed header is still refused.
    expect(await exchange(lenientPort, Buffer.from('PROXY TCP4 x y 1 2\r\n'))).toEqual({ text: '', closed: true });
  });
});
