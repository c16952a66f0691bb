/**
 * Containment (SPEC 4.1, issue 29): every listener of one real `gatehouse run` (HTTP/1.1 plain,
 * h2c, h2 over TLS, HTTP/1.1 over TLS, WebSocket upgrades on both) flooded with the malformed
 * inputs of issue 29 and of the earlier reliability corpus (issue 17, hostile-requests.test.ts).
 * Whatever each answer is, the process must answer or reset every one of them on its own: the
 * unhandled-error counter stays at 0 and the PID does not change, and a good request is still
 * served afterwards. Before issue 29, the `HTTP/2.0` request lines alone were a remote kill switch.
 */
import { execFile } from 'node:child_process';
import { connect as h2connect, type ClientHttp2Session, type OutgoingHttpHeaders } from 'node:http2';
import { connect as netConnect } from 'node:net';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { rawRequest } from '../support/http.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';

const run = promisify(execFile);
let work: string;
let ca: string;
let echo: TestServer;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;
let httpsPort: number;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'gatehouse-containment-'));
  const f = (n: string) => join(work, n);
  await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-subj', '/CN=containment-ca', '-days', '2']);
  await run('openssl', ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('site.key'), '-out', f('site.csr'), '-subj', '/CN=site.test']);
  await writeFile(f('site.ext'), 'subjectAltName=DNS:site.test,DNS:other.test\n');
  await run('openssl', ['x509', '-req', '-in', f('site.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', '1', '-out', f('site.pem'), '-days', '2', '-extfile', f('site.ext')]);
  ca = await readFile(f('ca.pem'), 'utf8');
  echo = await startEcho('echo');
  const routes = [
    { matchers: [{ exact: '/admin' }], directResponseAction: { status: 403, body: 'protected' } },
    { matchers: [{ prefix: '/write', methods: ['POST'] }], directResponseAction: { status: 403, body: 'protected' } },
    { matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } },
  ];
  const vs = (name: string, domains: string[], sslConfig?: object) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name }, spec: { ...(sslConfig ? { sslConfig } : {}), virtualHost: { domains, routes } } });
  dir = await makeConfigDir({
    'upstream.yaml': { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'echo' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: echo.port }] } } },
    'vs.yaml': [vs('plain', ['site.test', 'other.test']), vs('tls', ['site.test'], { sslFiles: { tlsCert: f('site.pem'), tlsKey: f('site.key') }, sniDomains: ['site.test'] })],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false', '--request-headers-timeout', '2s']);
  httpsPort = gatehouse.listening.httpsPort as number;
});

afterAll(async () => {
  await gatehouse?.stop();
  await echo?.close();
  await dir?.cleanup();
  if (work) await rm(work, { recursive: true, force: true });
});

const WS = 'connection: upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n';
const many = (n: number) => Array.from({ length: n }, (_, i) => `x-h${i}: v\r\n`).join('');

/** HTTP/1.1 byte strings no well-behaved client sends (issue 29, issue 17, classic smuggling shapes). */
const HTTP1_CORPUS: (string | Buffer)[] = [
  'GET / HTTP/2.0\r\nhost: site.test\r\n\r\n',
  'GET / HTTP/2.0\r\nhost: site.test\r\ncontent-length: 5\r\n\r\nhello',
  'POST /write HTTP/2.0\r\nhost: site.test\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
  'GET / HTTP/0.9\r\nhost: site.test\r\n\r\n',
  'GET / HTTP/1.2\r\nhost: site.test\r\n\r\n',
  'GET / HTTP/9.9\r\n\r\n',
  'get / HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'FOO / HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET /admin#x HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET /x?y#/admin HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET # HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET * HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'OPTIONS * HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET http://a@site.test/ HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET http:// HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET https://site.test:99999/ HTTP/1.1\r\n\r\n',
  'CONNECT site.test:443 HTTP/1.1\r\nhost: site.test:443\r\n\r\n',
  'PRI * HTTP/1.1\r\n\r\n',
  'PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n',
  'GET /%zz HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET /%2fadmin HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET /a\\b HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET /x/../../admin HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET //admin HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET /%61dmin HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET / HTTP/1.1\r\nhost: \r\n\r\n',
  'GET / HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n',
  'GET / HTTP/1.1\r\nhost: a@site.test\r\n\r\n',
  'GET / HTTP/1.1\r\nhost: site.test:abc\r\n\r\n',
  'GET / HTTP/1.1\r\nhost: [::1\r\n\r\n',
  `GET / HTTP/1.1\r\nhost: ${'a'.repeat(300)}\r\n\r\n`,
  `GET / HTTP/1.1\r\nhost: site.test\r\n${many(150)}\r\n`,
  `GET / HTTP/1.1\r\nhost: site.test\r\n${many(3000)}\r\n`,
  `GET / HTTP/1.1\r\nhost: site.test\r\nx-big: ${'b'.repeat(70_000)}\r\n\r\n`,
  'GET / HTTP/1.1\r\nhost: site.test\r\nx-fold: a\r\n b\r\n\r\n',
  'GET / HTTP/1.1\r\nhost: site.test\r\nx-nul: a\0b\r\n\r\n',
  'POST / HTTP/1.1\r\nhost: site.test\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n',
  'POST / HTTP/1.1\r\nhost: site.test\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd',
  'POST / HTTP/1.1\r\nhost: site.test\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n',
  'POST / HTTP/1.1\r\nhost: site.test\r\ntransfer-encoding: gzip\r\n\r\n',
  'POST / HTTP/1.1\r\nhost: site.test\r\ncontent-length: -1\r\n\r\n',
  'POST / HTTP/1.1\r\nhost: site.test\r\ncontent-length: 10\r\nexpect: 100-continue\r\n\r\n',
  'POST / HTTP/1.1\r\nhost: site.test\r\ncontent-length: 100\r\n\r\nshort',
  'GET / HTTP/1.1\r\nhost: site.test\r\nconnection: x-user-id, host, content-length\r\nx-user-id: admin\r\n\r\n',
  'GET / HTTP/1.1\r\nhost: site.test\r\nx_user_id: admin\r\n\r\n',
  'GET / HTTP/1.1\r\nhost: site.test\r\nconnection: close\r\n\r\nGET /admin HTTP/1.1\r\nhost: site.test\r\n\r\n',
  'GET / HTTP/1.1\r\nhost: site.test\r\n\r\nGET / HTTP/2.0\r\nhost: site.test\r\n\r\n',
  `GET /ws HTTP/1.1\r\nhost: site.test\r\nupgrade: h2c, websocket\r\n${WS}\r\n`,
  `GET /ws HTTP/1.1\r\nhost: site.test\r\nupgrade: websocket, h2c\r\nhttp2-settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n${WS}\r\n`,
  `GET /ws HTTP/1.1\r\nhost: site.test\r\nupgrade: foo\r\n${WS}\r\n`,
  `GET /ws HTTP/1.1\r\nhost: site.test\r\nupgrade: ,,,\r\n${WS}\r\n`,
  `GET /ws HTTP/1.1\r\nhost: site.test\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n`,
  `POST /ws HTTP/1.1\r\nhost: site.test\r\nupgrade: websocket\r\ncontent-length: 5\r\n${WS}\r\nhello`,
  `GET /admin HTTP/1.1\r\nhost: site.test\r\nupgrade: websocket\r\n${WS}\r\n`,
  `GET /ws HTTP/2.0\r\nhost: site.test\r\nupgrade: websocket\r\n${WS}\r\n`,
  `GET /ws#x HTTP/1.1\r\nhost: site.test\r\nupgrade: websocket\r\n${WS}\r\n`,
  `get /ws HTTP/1.1\r\nhost: site.test\r\nupgrade: websocket\r\n${WS}\r\n`,
  `GET /ws HTTP/1.1\r\nhost: nobody.test\r\nupgrade: websocket\r\n${WS}\r\n`,
  `GET /ws HTTP/1.1\r\nhost: site.test\r\nupgrade: websocket\r\n${WS}${many(150)}\r\n`,
  'GET / HTTP/1.1\r\nhost: site.test\r\nupgrade: h2c\r\nconnection: upgrade, http2-settings\r\nhttp2-settings: !!!\r\n\r\n',
  'GET / HTTP/1.1\r\nhost: site.test\r\n',
  'GET / HTT',
  '\r\n\r\n\r\n',
  Buffer.from([0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00]),
  Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 7919) % 256)),
];

/** Writes `bytes` on a new connection (TLS when `servername` is given) and waits for the gateway to close it, or 3 s. */
function blast(bytes: string | Buffer, servername?: string): Promise<void> {
  return new Promise((resolve) => {
    const socket = servername ? tlsConnect({ host: '127.0.0.1', port: httpsPort, servername, ca, ALPNProtocols: ['http/1.1'] }, () => socket.write(bytes)) : netConnect(gatehouse.port, '127.0.0.1', () => socket.write(bytes));
    // Answered: a kept-alive connection is let go a moment later (a pipelined second answer may follow).
    socket.once('data', () => setTimeout(() => socket.destroy(), 200));
    socket.on('data', () => {});
    socket.on('error', () => resolve());
    socket.on('close', () => resolve());
    socket.setTimeout(3_000, () => socket.destroy());
  });
}

/** HTTP/2 header blocks a client library lets through (issue 29 findings 9-11, and pseudo-header oddities). */
const H2_CORPUS: OutgoingHttpHeaders[] = [
  { ':method': 'post', ':path': '/write' },
  { ':method': 'Post', ':path': '/write' },
  { ':method': 'FOO', ':path': '/' },
  { ':method': 'CONNECT', ':authority': 'site.test:443' },
  { ':path': '/admin#x' },
  { ':path': '#' },
  { ':path': '*', ':method': 'OPTIONS' },
  { ':path': 'admin' },
  { ':path': 'http://site.test/admin' },
  { ':path': '/%zz' },
  { ':path': '/%2fadmin' },
  { ':path': '/a\\b' },
  { ':path': '/x/../../admin' },
  { ':path': '/', ':authority': 'other.test', host: 'site.test' },
  { ':path': '/', ':authority': 'a@site.test' },
  { ':path': '/', ':authority': '' },
  { ':path': '/', ':authority': 'site.test:99999' },
  { ':path': '/', host: ['a', 'b'] },
  { ':path': '/', 'x-user-id': 'admin', x_user_id: 'admin' },
  { ':path': '/', upgrade: 'websocket' },
  { ':path': '/', te: 'trailers' },
  { ':path': '/', 'content-length': '10' },
  { ':path': '/', 'grpc-timeout': '99999999H', 'content-type': 'application/grpc' },
  Object.fromEntries([[':path', '/'], ...Array.from({ length: 150 }, (_, i) => [`x-h${i}`, 'v'])]),
  { ':path': '/', 'x-big': 'b'.repeat(70_000) },
];

/** Sends every block of {@link H2_CORPUS} on one session, some cancelled at once; resolves when all streams closed. */
async function h2blast(session: ClientHttp2Session): Promise<void> {
  await Promise.all(
    H2_CORPUS.map(
      (headers, i) =>
        new Promise<void>((resolve) => {
          try {
            const stream = session.request({ ':authority': 'site.test', ...headers }, { endStream: i % 3 !== 0 });
            stream.on('error', () => {});
            stream.on('close', () => resolve());
            stream.resume();
            if (i % 3 === 0) stream.end('body');
            if (i % 4 === 0) stream.close(8);
          } catch {
            // The client library refused to send it: nothing reached the gateway.
            resolve();
          }
        }),
    ),
  );
}

function h2session(tls: boolean): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = tls ? h2connect(`https://127.0.0.1:${httpsPort}`, { servername: 'site.test', ca }) : h2connect(gatehouse.url);
    session.on('error', () => {});
    session.once('connect', () => resolve(session));
    session.once('close', () => reject(new Error('session closed before connecting')));
  });
}

const frame = (type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)) => {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream, 5);
  return Buffer.concat([head, payload]);
};
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
const GET_BLOCK = Buffer.concat([Buffer.from([0x82, 0x84, 0x86, 0x41, 9]), Buffer.from('site.test')]);

/** Raw HTTP/2 frame sequences (h2c): the framing layer's own hostile cases. */
const FRAME_CORPUS: Buffer[] = [
  Buffer.concat([PREFACE, frame(4, 0, 0), frame(6, 1, 0, Buffer.alloc(8))]),
  Buffer.concat([PREFACE, frame(4, 0, 0), frame(1, 4, 1, GET_BLOCK), frame(3, 0, 1, Buffer.from([0, 0, 0, 8]))]),
  Buffer.concat([PREFACE, frame(4, 0, 0), ...Array.from({ length: 50 }, (_, i) => Buffer.concat([frame(1, 5, 2 * i + 1, GET_BLOCK), frame(3, 0, 2 * i + 1, Buffer.from([0, 0, 0, 8]))]))]),
  Buffer.concat([PREFACE, frame(4, 0, 0), frame(9, 4, 1, GET_BLOCK)]),
  Buffer.concat([PREFACE, frame(4, 0, 0), frame(1, 0, 1, GET_BLOCK), frame(0, 1, 3, Buffer.from('x'))]),
  Buffer.concat([PREFACE, frame(4, 0, 0), frame(8, 0, 0, Buffer.from([0, 0, 0, 0]))]),
  Buffer.concat([PREFACE, frame(4, 0, 0), frame(7, 0, 0, Buffer.alloc(8))]),
  Buffer.concat([PREFACE, frame(4, 0, 0, Buffer.from([0, 4, 0xff, 0xff, 0xff, 0xff]))]),
  Buffer.concat([PREFACE, frame(4, 0, 0), frame(1, 5, 1, Buffer.from([0xff, 0xff, 0xff, 0xff]))]),
  Buffer.concat([PREFACE, frame(4, 0, 0), frame(1, 5, 2, GET_BLOCK)]),
  Buffer.concat([PREFACE, frame(0xfa, 0xff, 1, Buffer.from('unknown frame type'))]),
  Buffer.concat([PREFACE, frame(4, 0, 0), frame(1, 4, 1, GET_BLOCK)]),
  PREFACE.subarray(0, 10),
];

/** A TLS record (default: handshake) carrying `body`. */
const record = (body: Buffer | number[], type = 22) => Buffer.concat([Buffer.from([type, 3, 1, body.length >> 8, body.length & 0xff]), Buffer.from(body)]);
/** A ClientHello body (TLS 1.2, one suite) with `extensions`. */
const hello = (extensions: Buffer | number[]) => {
  const ext = Buffer.from(extensions);
  const body = Buffer.concat([Buffer.from([3, 3]), Buffer.alloc(32, 1), Buffer.from([0, 0, 2, 0xc0, 0x2b, 1, 0, ext.length >> 8, ext.length & 0xff]), ext]);
  return Buffer.concat([Buffer.from([1, 0, body.length >> 8, body.length & 0xff]), body]);
};
const SNI = [0, 0, 0, 8, 0, 6, 0, 0, 3, 0x61, 0x2e, 0x62];

/**
 * Raw bytes where a ClientHello belongs, on the HTTPS port (read before the handshake, issue 29
 * finding 19): truncated, oversized, fragmented, lying lengths, repeated or malformed SNI, and
 * every line of the HTTP/1.1 corpus (not TLS at all).
 */
const HELLO_CORPUS: Buffer[] = [
  record(hello(SNI)).subarray(0, 20),
  record([1, 0xff, 0xff, 0xff]),
  record([1, 0, 0x40, 0]),
  Buffer.concat(Array.from({ length: 4_000 }, () => record([1]))),
  Buffer.concat([...hello(SNI)].map((b) => record([b]))),
  record(hello([...SNI, ...SNI])),
  record(hello([0, 0, 0, 8, 0, 6, 1, 0, 3, 0x61, 0x2e, 0x62])),
  record(hello([0, 0, 0, 8, 0, 6, 0, 0, 3, 0x61, 0, 0x62])),
  record(hello([0, 0, 0, 0xff, 0, 6, 0, 0, 3, 0x61, 0x2e, 0x62])),
  record(hello([0, 0, 0, 4, 0, 2, 0, 0])),
  record(hello(SNI).subarray(0, 30)),
  Buffer.concat([record(hello(SNI)), Buffer.alloc(4_000, 0x17)]),
  record([2, 0, 0, 0]),
  record([1, 0, 0, 0]),
  Buffer.from([0x16, 0x03, 0x01, 0x40, 0x01]),
  Buffer.from([0x16, 0x03, 0x01, 0x00, 0x00]),
  record([21, 3, 3, 0, 2, 2, 40], 21),
  ...HTTP1_CORPUS.map((b) => Buffer.from(b)),
];

/** Writes `bytes` raw to the HTTPS port; `reset`: then aborts with a TCP RST instead of waiting for the gateway. */
function blastHello(bytes: Buffer, reset: boolean): Promise<void> {
  return new Promise((resolve) => {
    const socket = netConnect(httpsPort, '127.0.0.1', () => socket.write(bytes, () => (reset ? socket.resetAndDestroy() : undefined)));
    socket.on('data', () => {});
    socket.on('error', () => resolve());
    socket.on('close', () => resolve());
    socket.setTimeout(3_000, () => socket.destroy());
  });
}

describe('containment (SPEC 4.1): no input reaches the unhandled-error guard', () => {
  it('floods every listener with the malformed corpus; the unhandled-error count stays 0 and the PID is unchanged', async () => {
    const pid = gatehouse.child.pid;
    const before = await unhandled();
    for (let round = 0; round < 3; round++) {
      // A few at a time: the point is the inputs, not the load.
      for (let i = 0; i < HTTP1_CORPUS.length; i += 16) {
        const batch = HTTP1_CORPUS.slice(i, i + 16);
        await Promise.all([...batch.map((b) => blast(b)), ...batch.map((b) => blast(b, 'site.test'))]);
      }
      for (const tls of [false, true]) {
        const session = await h2session(tls);
        await h2blast(session);
        session.destroy();
      }
      await Promise.all(FRAME_CORPUS.map((b) => blast(b)));
      for (let i = 0; i < HELLO_CORPUS.length; i += 16) await Promise.all(HELLO_CORPUS.slice(i, i + 16).map((b, j) => blastHello(b, (i + j + round) % 3 === 0)));
    }
    expect(gatehouse.child.exitCode).toBeNull();
    expect(gatehouse.child.pid).toBe(pid);
    expect(await unhandled()).toBe(before);
    expect(before).toBe(0);
    expect(gatehouse.logs.filter((l) => l.code === 'GH_UNHANDLED')).toEqual([]);
    // And it still serves, on both listeners.
    const session = await h2session(true);
    const status = await new Promise<number>((resolve) => {
      const stream = session.request({ ':path': '/', ':authority': 'site.test' });
      stream.on('response', (h) => resolve(Number(h[':status'])));
      stream.on('error', () => resolve(0));
      stream.resume();
    });
    session.close();
    expect(status).toBe(200);
    expect(await rawRequest(gatehouse.port, 'GET / HTTP/1.1\r\nhost: site.test\r\nconnection: close\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
  }, 120_000);
});

async function unhandled(): Promise<number> {
  const text = await (await fetch(`${gatehouse.adminUrl}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith('gatehouse_unhandled_errors_total')) sum += Number(line.split(' ').pop());
  return sum;
}
