/**
 * Issue 29, the listener side, against a real `gatehouse run` with its plain (HTTP/1.1 + h2c) and
 * HTTPS (HTTP/1.1 + h2) listeners: request lines a client can use to crash the process (1),
 * h2c connections that escaped the timeouts and the connection caps (5), readiness (7), the SNI
 * binding of virtual hosts (8), fragments (9), `:authority` (10), method spellings (11), Upgrade
 * lists (12), the HTTPS port (17), `Upgrade: h2c` over TLS and the header count (18), and the
 * TLS policy (19). Each case failed before its fix: the process died, a policy was skipped, or a
 * connection stayed open.
 */
import { execFile } from 'node:child_process';
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { connect as h2connect, type ClientHttp2Session, type OutgoingHttpHeaders } from 'node:http2';
import { connect as netConnect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type ConnectionOptions, type TLSSocket } from 'node:tls';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, rawRequest } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';

const run = promisify(execFile);
let work: string;
const f = (name: string) => join(work, name);
const openssl = (args: string[]) => run('openssl', args);

/** A CA and leaf certificates it signs (P-256 keys: the ECDSA suites of the intermediate profile). */
async function makeCa() {
  await openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-subj', '/CN=gatehouse-edge-ca', '-days', '2']);
  let serial = 1;
  return async (name: string, sans: string[]) => {
    await openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${name}`]);
    await writeFile(f(`${name}.ext`), sans.length ? `subjectAltName=${sans.map((s) => `DNS:${s}`).join(',')}\n` : 'basicConstraints=CA:FALSE\n');
    await openssl(['x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', String(serial++), '-out', f(`${name}.pem`), '-days', '2', '-extfile', f(`${name}.ext`)]);
    return { cert: await readFile(f(`${name}.pem`), 'utf8'), key: await readFile(f(`${name}.key`), 'utf8') };
  };
}

const b64 = (text: string) => Buffer.from(text).toString('base64');
const secret = (name: string, pair: { cert: string; key: string }, ca?: string) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  type: 'kubernetes.io/tls',
  metadata: { name },
  data: { 'tls.crt': b64(pair.cert), 'tls.key': b64(pair.key), ...(ca ? { 'ca.crt': b64(ca) } : {}) },
});
const toEcho = { routeAction: { single: { upstream: { name: 'echo' } } } };
const toUpgrade = { routeAction: { single: { upstream: { name: 'upgrade' } } } };
const deny = { directResponseAction: { status: 403, body: 'protected' } };
const vs = (name: string, domains: string[], routes: object[], sslConfig?: object) => ({
  apiVersion: 'gateway.solo.io/v1',
  kind: 'VirtualService',
  metadata: { name },
  spec: { ...(sslConfig ? { sslConfig } : {}), virtualHost: { domains, routes } },
});
/** Routes with policies a spelling trick must not skip, then a public catch-all to the echo upstream. */
const guardedRoutes = [
  { matchers: [{ exact: '/admin' }], ...deny },
  { matchers: [{ regex: '/adm.n/x' }], ...deny },
  { matchers: [{ prefix: '/write', methods: ['POST', 'PUT', 'DELETE'] }], ...deny },
  { matchers: [{ prefix: '/ws' }], ...toUpgrade },
  { matchers: [{ prefix: '/' }], ...toEcho },
];

let issue: Awaited<ReturnType<typeof makeCa>>;
let ca: string;
let echo: TestServer;
let upgradeSeen: string[] = [];
let upgradeServer: Server;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;
let httpsPort: number;
let client: { cert: string; key: string };

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'gatehouse-edge-'));
  issue = await makeCa();
  ca = await readFile(f('ca.pem'), 'utf8');
  const open = await issue('open', ['open.test']);
  const mtls = await issue('mtls', ['mtls.test']);
  const v13 = await issue('v13', ['v13.test']);
  const shared = await issue('shared', ['a.shared.test', 'b.shared.test']);
  const suites = await issue('suites', ['suites.test']);
  client = await issue('client', []);
  echo = await startEcho('echo');
  // An upstream that takes any upgrade it is offered (h2c included) and says what it was offered.
  upgradeServer = createHttpServer((_req, res) => res.end('plain'));
  upgradeServer.on('upgrade', (req: IncomingMessage, socket: Socket) => {
    upgradeSeen.push(String(req.headers.upgrade));
    socket.end(`HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: ${req.headers.upgrade}\r\n\r\n`);
  });
  await new Promise<void>((resolve) => upgradeServer.listen(0, '127.0.0.1', resolve));
  const upstream = (name: string, port: number) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } } });
  dir = await makeConfigDir({
    'secrets.yaml': [secret('open-tls', open), secret('mtls-tls', mtls, ca), secret('v13-tls', v13), secret('shared-tls', shared), secret('suites-tls', suites)],
    'upstreams.yaml': [upstream('echo', echo.port), upstream('upgrade', (upgradeServer.address() as AddressInfo).port)],
    'vs.yaml': [
      vs('open', ['open.test', 'other.test'], guardedRoutes),
      vs('protected', ['protected.test'], [{ matchers: [{ prefix: '/' }], ...deny }]),
      vs('open-https', ['open.test'], guardedRoutes, { secretRef: { name: 'open-tls' }, sniDomains: ['open.test'] }),
      vs('mtls-https', ['mtls.test'], [{ matchers: [{ prefix: '/' }], ...toEcho }], { secretRef: { name: 'mtls-tls' }, sniDomains: ['mtls.test'] }),
      vs('v13-https', ['v13.test'], [{ matchers: [{ prefix: '/' }], ...toEcho }], { secretRef: { name: 'v13-tls' }, sniDomains: ['v13.test'], parameters: { minimumProtocolVersion: 'TLSv1_3' } }),
      // One certificate and policy for two names: a connection may serve both (coalescing).
      vs('shared-a', ['a.shared.test'], [{ matchers: [{ prefix: '/' }], ...toEcho }], { secretRef: { name: 'shared-tls' }, sniDomains: ['a.shared.test'] }),
      vs('shared-b', ['b.shared.test'], [{ matchers: [{ prefix: '/' }], ...toEcho }], { secretRef: { name: 'shared-tls' }, sniDomains: ['b.shared.test'] }),
      vs('suites-https', ['suites.test'], [{ matchers: [{ prefix: '/' }], ...toEcho }], {
        secretRef: { name: 'suites-tls' },
        sniDomains: ['suites.test'],
        parameters: { cipherSuites: ['[ECDHE-ECDSA-AES256-GCM-SHA384|ECDHE-ECDSA-CHACHA20-POLY1305]'], ecdhCurves: ['P-256'], maximumProtocolVersion: 'TLSv1_2' },
      }),
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false', '--request-headers-timeout', '1s', '--max-connections', '400', '--max-connections-per-client', '40']);
  httpsPort = gatehouse.listening.httpsPort as number;
});

afterAll(async () => {
  await gatehouse?.stop();
  await echo?.close();
  upgradeServer?.closeAllConnections();
  await new Promise((resolve) => upgradeServer?.close(resolve));
  await dir?.cleanup();
  if (work) await rm(work, { recursive: true, force: true });
});

/** `gatehouse_unhandled_errors_total`, all kinds summed. */
async function unhandledErrors(adminUrl = gatehouse.adminUrl): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith('gatehouse_unhandled_errors_total')) sum += Number(line.split(' ').pop());
  return sum;
}

/** The status line and body of a raw HTTP/1.1 answer. */
const statusOf = (raw: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);

/** One HTTP/2 request on `session`; resolves with status and body (status 0 when the stream was reset). */
function h2request(session: ClientHttp2Session, headers: OutgoingHttpHeaders, body?: string): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve) => {
    const stream = session.request(headers, { endStream: body === undefined });
    let status = 0;
    let text = '';
    let got: Record<string, unknown> = {};
    stream.on('response', (h) => {
      status = Number(h[':status']);
      got = h;
    });
    stream.setEncoding('utf8').on('data', (c: string) => (text += c));
    stream.on('close', () => resolve({ status, body: text, headers: got }));
    stream.on('error', () => {});
    if (body !== undefined) stream.end(body);
  });
}

function h2c(): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = h2connect(gatehouse.url);
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

function h2tls(servername: string, extra: ConnectionOptions = {}): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = h2connect(`https://127.0.0.1:${httpsPort}`, { servername, ca, ...extra });
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

/** An HTTP/1.1 request over TLS with SNI `servername` (raw, so Host is whatever `text` says); resolves with the raw answer. */
function tlsRaw(servername: string, text: string, extra: ConnectionOptions = {}): Promise<string> {
  return new Promise((resolve) => {
    const socket = tlsConnect({ host: '127.0.0.1', port: httpsPort, servername, ca, ALPNProtocols: ['http/1.1'], ...extra }, () => socket.write(text));
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => (data += c));
    socket.on('error', () => resolve(data));
    socket.on('close', () => resolve(data));
    socket.setTimeout(5_000, () => socket.destroy());
  });
}

/** Whether a TLS handshake with these options completes (and the connection is not closed right after it). */
function handshake(options: ConnectionOptions): Promise<{ ok: boolean; cipher?: string; protocol?: string | null }> {
  return new Promise((resolve) => {
    let cipher: string | undefined;
    let protocol: string | null = null;
    const socket: TLSSocket = tlsConnect({ host: '127.0.0.1', port: httpsPort, ca, ALPNProtocols: ['http/1.1'], ...options }, () => {
      cipher = socket.getCipher().name;
      protocol = socket.getProtocol();
      socket.write(`GET / HTTP/1.1\r\nhost: ${options.servername}\r\nconnection: close\r\n\r\n`);
    });
    let data = '';
    socket.on('data', (c: Buffer) => (data += c.toString('latin1')));
    const done = () => resolve(statusOf(data) === 200 ? { ok: true, ...(cipher ? { cipher } : {}), protocol } : { ok: false });
    socket.on('error', done);
    socket.on('close', done);
  });
}

describe('HTTP/1.1 request lines and headers', () => {
  it('finding 1: 150 requests whose request line ends in HTTP/2.0 (or HTTP/0.9) get 505, with no unhandled error; the process lives', async () => {
    const pid = gatehouse.child.pid;
    for (let i = 0; i < 150; i++) {
      const raw = await rawRequest(gatehouse.port, `GET /x${i} HTTP/2.0\r\nhost: open.test\r\n\r\n`);
      expect(statusOf(raw)).toBe(505);
    }
    expect(statusOf(await rawRequest(gatehouse.port, 'GET / HTTP/0.9\r\nhost: open.test\r\n\r\n'))).toBe(505);
    expect(await unhandledErrors()).toBe(0);
    expect(gatehouse.child.exitCode).toBeNull();
    expect(gatehouse.child.pid).toBe(pid);
    expect(statusOf(await rawRequest(gatehouse.port, 'GET / HTTP/1.1\r\nhost: open.test\r\nconnection: close\r\n\r\n'))).toBe(200);
  });

  it('finding 18: more than 100 request header fields get 431 (Envoy max_headers_count); 100 pass', async () => {
    const headers = (n: number) => Array.from({ length: n }, (_, i) => `x-h${i}: v\r\n`).join('');
    expect(statusOf(await rawRequest(gatehouse.port, `GET / HTTP/1.1\r\nhost: open.test\r\n${headers(98)}connection: close\r\n\r\n`))).toBe(200);
    expect(statusOf(await rawRequest(gatehouse.port, `GET / HTTP/1.1\r\nhost: open.test\r\n${headers(101)}connection: close\r\n\r\n`))).toBe(431);
    expect(statusOf(await tlsRaw('open.test', `GET / HTTP/1.1\r\nhost: open.test\r\n${headers(300)}connection: close\r\n\r\n`))).toBe(431);
  });

  it('finding 9: a fragment in the request target is a 400 on every listener; exact and regex routes are never skipped by it', async () => {
    for (const target of ['/admin#x', '/admin#', '/adm1n/x#y', '/x?q=1#/admin']) {
      expect(statusOf(await rawRequest(gatehouse.port, `GET ${target} HTTP/1.1\r\nhost: open.test\r\nconnection: close\r\n\r\n`)), target).toBe(400);
      expect(statusOf(await tlsRaw('open.test', `GET ${target} HTTP/1.1\r\nhost: open.test\r\nconnection: close\r\n\r\n`)), target).toBe(400);
    }
    const session = await h2c();
    try {
      expect((await h2request(session, { ':path': '/admin#x', ':authority': 'open.test' })).status).toBe(400);
      // Encoded, `#` is an ordinary path character: no fragment, and no match of /admin either.
      expect((await h2request(session, { ':path': '/admin%23x', ':authority': 'open.test' })).status).toBe(200);
      expect((await h2request(session, { ':path': '/admin', ':authority': 'open.test' })).body).toBe('protected');
    } finally {
      session.close();
    }
  });
});

describe('HTTP/2 requests', () => {
  it('finding 10: :authority routes, not host; a host header next to it is discarded, as Envoy does', async () => {
    const session = await h2c();
    try {
      expect((await h2request(session, { ':path': '/', ':authority': 'protected.test', host: 'open.test' })).body).toBe('protected');
      const echoed = JSON.parse((await h2request(session, { ':path': '/', ':authority': 'open.test', host: 'protected.test' })).body) as Echo;
      expect(echoed.upstream).toBe('echo');
      expect(echoed.headers.host).toBe('open.test');
      // Without :authority, host routes (RFC 9113 8.3.1 allows either).
      expect((await h2request(session, { ':path': '/', host: 'protected.test' })).body).toBe('protected');
    } finally {
      session.close();
    }
  });

  it('finding 11: a lower-case or unknown method never falls through to a weaker route (400), on h2c and h2', async () => {
    for (const open of [h2c, () => h2tls('open.test')]) {
      const session = await open();
      try {
        for (const method of ['post', 'Post', 'pUT', 'delete', 'FOO']) {
          // The gateway's own 400, before routing: the echo upstream's parser would refuse these too, but others upper-case them.
          const answer = await h2request(session, { ':method': method, ':path': '/write', ':authority': 'open.test' }, 'x');
          expect(answer.status, method).toBe(400);
          expect(answer.body, method).toContain('unknown method');
        }
        expect((await h2request(session, { ':method': 'POST', ':path': '/write', ':authority': 'open.test' }, 'x')).body).toBe('protected');
        expect(JSON.parse((await h2request(session, { ':method': 'GET', ':path': '/write', ':authority': 'open.test' })).body).upstream).toBe('echo');
      } finally {
        session.close();
      }
    }
  });
});

describe('Upgrade', () => {
  it('finding 12: h2c is never forwarded: a list holding h2c reaches the upstream as websocket alone; other protocols are refused (403)', async () => {
    upgradeSeen = [];
    const upgrade = (value: string) => rawRequest(gatehouse.port, `GET /ws HTTP/1.1\r\nhost: open.test\r\nconnection: upgrade, http2-settings\r\nupgrade: ${value}\r\nhttp2-settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n`);
    expect(statusOf(await upgrade('h2c, websocket'))).toBe(101);
    expect(statusOf(await upgrade('websocket, H2C'))).toBe(101);
    expect(upgradeSeen).toEqual(['websocket', 'websocket']);
    for (const value of ['foo', 'h2c, foo', 'websocket, foo', 'TLS/1.0']) {
      const raw = await upgrade(value);
      expect(statusOf(raw), value).toBe(403);
      expect(raw).toContain('GH_UPGRADE_NOT_ALLOWED');
    }
    // `Upgrade: h2c` alone is served over HTTP/1.1 (Envoy), without the upgrade reaching the upstream.
    const plain = await rawRequest(gatehouse.port, 'GET /ws HTTP/1.1\r\nhost: open.test\r\nconnection: upgrade, http2-settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n');
    expect(statusOf(plain)).toBe(200);
    expect(plain.endsWith('plain')).toBe(true);
    expect(upgradeSeen).toEqual(['websocket', 'websocket']);
  });

  it('finding 18: Upgrade: h2c on the TLS listener is ignored (served over HTTP/1.1), not tunnelled into a 502', async () => {
    upgradeSeen = [];
    const raw = await tlsRaw('open.test', 'GET / HTTP/1.1\r\nhost: open.test\r\nconnection: upgrade, http2-settings, close\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n');
    expect(statusOf(raw)).toBe(200);
    const echoed = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as Echo;
    expect(echoed.headers.upgrade).toBeUndefined();
    expect(echoed.headers['http2-settings']).toBeUndefined();
  });
});

describe('TLS: SNI binds the virtual host (SPEC 3.2.1)', () => {
  it('finding 8: SNI open.test without a client certificate cannot reach mtls.test or v13.test by Host (421), over HTTP/1.1 and HTTP/2', async () => {
    for (const host of ['mtls.test', 'v13.test', 'MTLS.test.', 'mtls.test:443']) {
      const raw = await tlsRaw('open.test', `GET / HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`, { maxVersion: 'TLSv1.2' });
      expect(statusOf(raw), host).toBe(421);
      expect(raw).toContain('GH_MISDIRECTED_REQUEST');
    }
    // A WebSocket upgrade takes the same path: refused before anything is tunnelled.
    const ws = await tlsRaw('open.test', 'GET /ws HTTP/1.1\r\nhost: mtls.test\r\nconnection: upgrade\r\nupgrade: websocket\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n');
    expect(statusOf(ws)).toBe(421);
    const session = await h2tls('open.test', { maxVersion: 'TLSv1.2' });
    try {
      // Connection coalescing: a browser reusing open.test's connection for mtls.test gets 421 and reconnects.
      expect((await h2request(session, { ':path': '/', ':authority': 'mtls.test' })).status).toBe(421);
      expect((await h2request(session, { ':path': '/', ':authority': 'v13.test' })).status).toBe(421);
      expect((await h2request(session, { ':path': '/', ':authority': 'open.test' })).status).toBe(200);
    } finally {
      session.close();
    }
  });

  it('finding 8: the right SNI still serves, a certificate policy shared by two names coalesces, and a host of no TLS VirtualService is a 404', async () => {
    expect(statusOf(await tlsRaw('mtls.test', 'GET / HTTP/1.1\r\nhost: mtls.test\r\nconnection: close\r\n\r\n', { cert: client.cert, key: client.key }))).toBe(200);
    // No certificate on the name that wants one: the connection is closed after the handshake.
    expect(statusOf(await tlsRaw('mtls.test', 'GET / HTTP/1.1\r\nhost: mtls.test\r\nconnection: close\r\n\r\n'))).toBe(0);
    // SNI with a trailing dot or in capitals names the same server, with the same policy.
    expect(statusOf(await tlsRaw('MTLS.test.', 'GET / HTTP/1.1\r\nhost: mtls.test\r\nconnection: close\r\n\r\n', { cert: client.cert, key: client.key, checkServerIdentity: () => undefined }))).toBe(200);
    expect(statusOf(await tlsRaw('MTLS.test.', 'GET / HTTP/1.1\r\nhost: mtls.test\r\nconnection: close\r\n\r\n', { checkServerIdentity: () => undefined }))).toBe(0);
    expect(statusOf(await tlsRaw('a.shared.test', 'GET / HTTP/1.1\r\nhost: b.shared.test\r\nconnection: close\r\n\r\n'))).toBe(200);
    expect(statusOf(await tlsRaw('open.test', 'GET / HTTP/1.1\r\nhost: nobody.test\r\nconnection: close\r\n\r\n'))).toBe(404);
    // A host only the plain listener serves is not served over TLS either.
    expect(statusOf(await tlsRaw('open.test', 'GET / HTTP/1.1\r\nhost: protected.test\r\nconnection: close\r\n\r\n'))).toBe(404);
  });
});

describe('TLS policy (finding 19)', () => {
  it('the listener offers only Mozilla intermediate suites: CBC, static-RSA and TLS 1.1 clients fail the handshake', async () => {
    expect((await handshake({ servername: 'open.test', maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-SHA' })).ok).toBe(false);
    expect((await handshake({ servername: 'open.test', maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES256-SHA384' })).ok).toBe(false);
    expect((await handshake({ servername: 'open.test', maxVersion: 'TLSv1.1', minVersion: 'TLSv1', ciphers: 'DEFAULT:@SECLEVEL=0' })).ok).toBe(false);
    const good = await handshake({ servername: 'open.test', maxVersion: 'TLSv1.2' });
    expect(good).toMatchObject({ ok: true, protocol: 'TLSv1.2' });
    expect(good.cipher).toMatch(/^ECDHE-ECDSA-(AES\d+-GCM|CHACHA20-POLY1305)/);
    expect((await handshake({ servername: 'open.test' })).protocol).toBe('TLSv1.3');
  });

  it("sslConfig.parameters cipherSuites, ecdhCurves and maximumProtocolVersion are honoured for that name only", async () => {
    expect((await handshake({ servername: 'suites.test', maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' })).ok).toBe(false);
    expect(await handshake({ servername: 'suites.test', maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES256-GCM-SHA384' })).toMatchObject({ ok: true, cipher: 'ECDHE-ECDSA-AES256-GCM-SHA384' });
    // A client offering its default lists (TLS 1.3 first, X25519 first) negotiates what the
    // VirtualService allows, as with Envoy's per-SNI TLS contexts, instead of being cut off.
    const defaults = await handshake({ servername: 'suites.test' });
    expect(defaults).toMatchObject({ ok: true, protocol: 'TLSv1.2' });
    expect(['ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305']).toContain(defaults.cipher);
    // What the VirtualService does not allow still fails: TLS 1.3 only, or X25519 only.
    expect((await handshake({ servername: 'suites.test', minVersion: 'TLSv1.3' })).ok).toBe(false);
    expect((await handshake({ servername: 'suites.test', ecdhCurve: 'X25519' })).ok).toBe(false);
    expect((await handshake({ servername: 'suites.test', ecdhCurve: 'X25519:P-256' })).ok).toBe(true);
    // The same policy whether the name is spelled in capitals or with a trailing dot.
    expect((await handshake({ servername: 'SUITES.test.', minVersion: 'TLSv1.3', checkServerIdentity: () => undefined })).ok).toBe(false);
    expect((await handshake({ servername: 'SUITES.test.', checkServerIdentity: () => undefined })).protocol).toBe('TLSv1.2');
    expect((await handshake({ servername: 'open.test', maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' })).ok).toBe(true);
  });

  it('a client certificate is asked for only on names whose VirtualService verifies one (openssl s_client)', async () => {
    const probe = async (servername: string) => {
      const child = execFile('openssl', ['s_client', '-connect', `127.0.0.1:${httpsPort}`, '-servername', servername], { timeout: 10_000 });
      let out = '';
      child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
      child.stdin!.end();
      await new Promise((resolve) => child.on('close', resolve));
      return out;
    };
    // A CertificateRequest shows as the signature algorithms it lists.
    expect(await probe('open.test')).not.toContain('Requested Signature Algorithms');
    const mtls = await probe('mtls.test');
    expect(mtls).toContain('Acceptable client certificate CA names');
    expect(mtls).toContain('Requested Signature Algorithms');
  });
});

/** `gatehouse_downstream_connections_refused_total` for `reason`. */
async function refusedCount(reason: string): Promise<number> {
  const text = await (await fetch(`${gatehouse.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`gatehouse_downstream_connections_refused_total{reason="${reason}"}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** A raw TCP connection to the HTTPS port that writes `bytes`; resolves with what came back once the gateway closed it. */
function rawHttps(bytes: Buffer): Promise<Buffer> {
  return new Promise((resolve) => {
    const socket = netConnect({ port: httpsPort, host: '127.0.0.1' }, () => socket.write(bytes, () => {}));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => {});
    socket.on('close', () => resolve(Buffer.concat(chunks)));
  });
}

/**
 * A relay in front of the HTTPS port that re-sends the client's ClientHello as one-byte TLS
 * records, each its own write (and TCP segment), then passes everything else through.
 */
async function fragmentingRelay(): Promise<{ port: number; close(): Promise<void> }> {
  const server = createNetServer((client) => {
    const upstream = netConnect({ port: httpsPort, host: '127.0.0.1' });
    upstream.setNoDelay(true);
    const fail = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', fail).on('close', fail);
    upstream.on('error', fail).on('close', fail);
    upstream.pipe(client);
    let first: Buffer | null = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      if (first === null) return void upstream.write(chunk);
      first = Buffer.concat([first, chunk]);
      if (first.length < 5 || first.length < 5 + first.readUInt16BE(3)) return;
      const hello = first;
      first = null;
      const end = 5 + hello.readUInt16BE(3);
      client.pause();
      let i = 5;
      const next = (): void => {
        if (i === end) {
          if (hello.length > end) upstream.write(hello.subarray(end));
          client.resume();
          return;
        }
        upstream.write(Buffer.from([22, 3, 1, 0, 1, hello[i++]!]), () => setImmediate(next));
      };
      next();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('the ClientHello reader on hostile input (finding 19: SNI read before the handshake)', () => {
  it('a ClientHello sent as one-byte records, one segment each, still chooses its policy and is served', async () => {
    const relay = await fragmentingRelay();
    try {
      expect(await handshake({ port: relay.port, servername: 'suites.test' })).toMatchObject({ ok: true, protocol: 'TLSv1.2', cipher: expect.stringMatching(/^ECDHE-ECDSA-(AES256-GCM-SHA384|CHACHA20-POLY1305)$/) });
      expect(await handshake({ port: relay.port, servername: 'open.test' })).toMatchObject({ ok: true, protocol: 'TLSv1.3' });
    } finally {
      await relay.close();
    }
  });

  it('non-TLS bytes, an oversized or malformed ClientHello are closed without an answer, counted, and nothing else is disturbed', async () => {
    const before = await refusedCount('tls_client_hello');
    const errors = await unhandledErrors();
    const hostile = [
      Buffer.from('GET / HTTP/1.1\r\nhost: open.test\r\n\r\n'),
      Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'),
      // An alert record where the hello should be; a record over 2^14; a zero-length record.
      Buffer.from([21, 3, 3, 0, 2, 2, 40]),
      Buffer.from([22, 3, 1, 0x40, 0x01, 1]),
      Buffer.from([22, 3, 1, 0, 0]),
      // A ClientHello announcing 16 MiB.
      Buffer.from([22, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff]),
      // A 3,000-byte hello in one-byte records: 18 KB on the wire, over the 16 KiB bound.
      Buffer.concat([Buffer.from([22, 3, 1, 0, 4, 1, 0, 0x0b, 0xb8]), ...Array.from({ length: 3_000 }, () => Buffer.from([22, 3, 1, 0, 1, 0x41]))]),
      // A whole hello whose server_name entry is not a host name.
      helloWith(Buffer.from([0, 0, 0, 8, 0, 6, 1, 0, 3, 0x61, 0x2e, 0x62])),
    ];
    const answers = await Promise.all(hostile.map((bytes) => rawHttps(bytes)));
    for (const [i, answer] of answers.entries()) expect(answer.length, `input ${i}`).toBe(0);
    expect(await refusedCount('tls_client_hello')).toBe(before + hostile.length);
    expect(await unhandledErrors()).toBe(errors);
    expect((await handshake({ servername: 'open.test' })).ok).toBe(true);
  });

  it('a ClientHello trickled for ever (slowloris) is closed at the request headers timeout while others are served', async () => {
    const before = await refusedCount('tls_client_hello_timeout');
    const socket = netConnect({ port: httpsPort, host: '127.0.0.1' });
    socket.on('error', () => {});
    // A hello announcing 200 bytes, then one byte every 100 ms: activity keeps an inactivity timer from ever firing.
    socket.write(Buffer.from([22, 3, 1, 0, 200, 1, 0, 0, 196]));
    const trickle = setInterval(() => socket.writable && socket.write(Buffer.from([0])), 100);
    const started = Date.now();
    try {
      expect((await handshake({ servername: 'open.test' })).ok).toBe(true);
      await new Promise((resolve) => socket.once('close', resolve));
      // 1 s here; generous for a busy machine, far under the 20 s the trickle would take to finish.
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(await refusedCount('tls_client_hello_timeout')).toBe(before + 1);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
  });
});

/** A minimal ClientHello record (TLS 1.2, one suite) carrying `extensions`. */
function helloWith(extensions: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from([3, 3]), Buffer.alloc(32, 7), Buffer.from([0, 0, 2, 0xc0, 0x2b, 1, 0, extensions.length >> 8, extensions.length & 0xff]), extensions]);
  const message = Buffer.concat([Buffer.from([1, 0, body.length >> 8, body.length & 0xff]), body]);
  return Buffer.concat([Buffer.from([22, 3, 1, message.length >> 8, message.length & 0xff]), message]);
}

describe('HTTP/2 connections and the connection caps (finding 5)', () => {
  /** A raw connection from `localAddress`; resolves once connected. `allowHalfOpen`: the client may close its side only. */
  const open = (localAddress: string, allowHalfOpen = false) =>
    new Promise<Socket>((resolve, reject) => {
      const socket = netConnect({ port: gatehouse.port, host: '127.0.0.1', localAddress, allowHalfOpen }, () => resolve(socket));
      socket.on('error', reject);
    });
  /** Resolves when the gateway has closed its side (FIN or reset). */
  const closed = (socket: Socket) =>
    new Promise<void>((resolve) => {
      if (socket.destroyed || socket.readableEnded) return resolve();
      socket.once('end', () => resolve());
      socket.once('close', () => resolve());
    });
  const PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';
  const EMPTY_SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);

  it('a preface-only h2c session is closed at the request headers timeout (1 s here), not the 5 min idle timeout', async () => {
    const socket = await open('127.0.0.1');
    socket.on('error', () => {});
    socket.on('data', () => {});
    socket.write(PREFACE);
    socket.write(EMPTY_SETTINGS);
    const started = Date.now();
    await closed(socket);
    // Generous: the machine is busy; the old behaviour kept it for 300 s.
    expect(Date.now() - started).toBeLessThan(60_000);
  });

  it('an h2c session the client closed its side of is closed by the gateway (no CLOSE-WAIT)', async () => {
    const socket = await open('127.0.0.1', true);
    socket.on('error', () => {});
    socket.on('data', () => {});
    socket.write(PREFACE);
    socket.write(EMPTY_SETTINGS);
    // A request first (GET / for open.test, HPACK by hand), so the first-stream timer is not what closes it.
    const block = Buffer.concat([Buffer.from([0x82, 0x84, 0x86, 0x41, 9]), Buffer.from('open.test')]);
    socket.write(Buffer.concat([Buffer.from([0, 0, block.length, 1, 0x05, 0, 0, 0, 1]), block]));
    socket.end();
    const ended = new Promise<void>((resolve) => socket.once('end', () => resolve()));
    await ended;
  });

  it('one client address holds at most --max-connections-per-client sockets; others are served meanwhile and it is served again once it leaves', async () => {
    const attacker: Socket[] = [];
    const refused: Promise<void>[] = [];
    for (let i = 0; i < 60; i++) {
      const socket = await open('127.0.0.2');
      socket.on('error', () => {});
      socket.on('data', () => {});
      socket.write(PREFACE.slice(0, 10));
      attacker.push(socket);
      refused.push(closed(socket));
    }
    // 20 of the 60 are closed at once (the cap is 40); the rest are left until the headers timeout.
    let gone = 0;
    for (const p of refused) void p.then(() => gone++);
    const early = await eventually(async () => gone >= 20 && gone, 10_000);
    expect(early).toBeGreaterThanOrEqual(20);
    // Another client is served meanwhile.
    expect(statusOf(await rawRequest(gatehouse.port, 'GET / HTTP/1.1\r\nhost: open.test\r\nconnection: close\r\n\r\n'))).toBe(200);
    for (const socket of attacker) socket.destroy();
    await Promise.all(refused);
    // Served again as soon as the gateway has seen the attacker's sockets close (polled: the closes race the next connect).
    const served = await eventually(async () => {
      const back = await open('127.0.0.2');
      let data = '';
      back.on('data', (c: Buffer) => (data += c.toString('latin1')));
      back.write('GET / HTTP/1.1\r\nhost: open.test\r\nconnection: close\r\n\r\n');
      await closed(back);
      return statusOf(data) === 200;
    }, 5_000);
    expect(served).toBe(true);
    // The TLS listener has the same cap, and a refused TLS connection is no error of the process.
    const tlsSockets = await Promise.all(
      Array.from({ length: 60 }, () => new Promise<TLSSocket>((resolve) => {
        // localAddress goes through to net.connect (the typings of tls.connect omit it).
        const socket = tlsConnect({ host: '127.0.0.1', port: httpsPort, localAddress: '127.0.0.3', servername: 'open.test', ca } as ConnectionOptions);
        socket.on('error', () => {});
        socket.once('secureConnect', () => resolve(socket));
        socket.once('close', () => resolve(socket));
      })),
    );
    expect(tlsSockets.filter((s) => s.destroyed).length).toBeGreaterThanOrEqual(20);
    for (const socket of tlsSockets) socket.destroy();
    const metrics = await (await fetch(`${gatehouse.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/gatehouse_downstream_connections_refused_total\{reason="per_client_limit"\} [1-9]/);
    expect(await unhandledErrors()).toBe(0);
  });
});

describe('the HTTPS listener binds only when needed (finding 17)', () => {
  it('without --https-port and without TLS VirtualServices, two gateways start side by side and neither holds an HTTPS port', async () => {
    const plain = await makeConfigDir({ 'vs.yaml': [vs('only-http', ['*'], [{ matchers: [{ prefix: '/' }], ...deny }])] });
    const first = await startGatehouse('run', ['--config-dir', plain.path, '--access-log', 'false'], { httpsPort: false });
    try {
      const second = await startGatehouse('run', ['--config-dir', plain.path, '--access-log', 'false'], { httpsPort: false });
      try {
        expect(first.listening.httpsPort).toBeUndefined();
        expect(second.listening.httpsPort).toBeUndefined();
        expect((await fetch(second.url)).status).toBe(403);
      } finally {
        await second.stop();
      }
    } finally {
      await first.stop();
      await plain.cleanup();
    }
  });

  it('--https-port 0 picks a free port, reported in the listening line, even without TLS VirtualServices', async () => {
    const plain = await makeConfigDir({ 'vs.yaml': [vs('only-http', ['*'], [{ matchers: [{ prefix: '/' }], ...deny }])] });
    const gw = await startGatehouse('run', ['--config-dir', plain.path, '--access-log', 'false']);
    try {
      expect(gw.listening.httpsPort).toEqual(expect.any(Number));
      expect(gw.listening.httpsPort).not.toBe(8443);
    } finally {
      await gw.stop();
      await plain.cleanup();
    }
  });
});

describe('HTTP/2 PING (finding 7)', () => {
  const frame = (type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)) => {
    const head = Buffer.alloc(9);
    head.writeUIntBE(payload.length, 0, 3);
    head[3] = type;
    head[4] = flags;
    head.writeUInt32BE(stream, 5);
    return Buffer.concat([head, payload]);
  };
  /** Frame types the gateway sent on `socket` until it answered stream 1 or closed. */
  const framesAfter = (socket: Socket | TLSSocket, bytes: Buffer) =>
    new Promise<number[]>((resolve) => {
      let data = Buffer.alloc(0);
      const types: number[] = [];
      const done = () => {
        socket.destroy();
        resolve(types);
      };
      socket.on('data', (chunk: Buffer) => {
        data = Buffer.concat([data, chunk]);
        while (data.length >= 9 && data.length >= 9 + data.readUIntBE(0, 3)) {
          types.push(data[3]!);
          // DATA with END_STREAM on stream 1: the request was answered.
          if (data[3] === 0 && (data[4]! & 1) === 1 && data.readUInt32BE(5) === 1) return done();
          data = data.subarray(9 + data.readUIntBE(0, 3));
        }
      });
      socket.on('error', done);
      socket.on('close', done);
      socket.setTimeout(10_000, done);
      socket.write(bytes);
    });
  const request = (authority: string) => {
    const block = Buffer.concat([Buffer.from([0x82, 0x84, 0x87, 0x41, authority.length]), Buffer.from(authority)]);
    return Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), frame(4, 0, 0), frame(6, 1, 0, Buffer.alloc(8)), frame(6, 1, 0, Buffer.from('unasked!')), frame(1, 5, 1, block)]);
  };

  it('an unsolicited PING ACK is ignored (RFC 9113 6.7, as nghttp2 and Envoy do): no GOAWAY, the request on that connection is answered', async () => {
    const plain = await new Promise<Socket>((resolve) => {
      const socket = netConnect(gatehouse.port, '127.0.0.1', () => resolve(socket));
    });
    const h2cFrames = await framesAfter(plain, request('open.test'));
    expect(h2cFrames).not.toContain(7);
    expect(h2cFrames).toContain(1);
    const tls = await new Promise<TLSSocket>((resolve) => {
      const socket = tlsConnect({ host: '127.0.0.1', port: httpsPort, servername: 'open.test', ca, ALPNProtocols: ['h2'] }, () => resolve(socket));
    });
    const h2Frames = await framesAfter(tls, request('open.test'));
    expect(h2Frames).not.toContain(7);
    expect(h2Frames).toContain(1);
  });
});

describe('readiness with workers (finding 7)', () => {
  it('with every worker killed, /readyz says not ready until a worker listens again: whenever it says ready, traffic is served', async () => {
    const config = await makeConfigDir({ 'vs.yaml': [vs('only-http', ['*'], [{ matchers: [{ prefix: '/' }], ...deny }])] });
    // `--port 0`: the workers forked after every other died bind the port the first ones got.
    const gw = await startGatehouse('run', ['--config-dir', config.path, '--access-log', 'false', '--workers', '2'], { timeoutMs: 30_000 });
    try {
      const workers = (await readFile(`/proc/${gw.child.pid}/task/${gw.child.pid}/children`, 'utf8')).trim().split(/\s+/).map(Number);
      expect(workers).toHaveLength(2);
      for (const pid of workers) process.kill(pid, 'SIGKILL');
      // Killed means dead (a zombie, or reaped already), not merely signalled.
      const dead = async (pid: number) => !(await readFile(`/proc/${pid}/stat`, 'latin1').then((s) => !/\) [ZX] /.test(s), () => false));
      await eventually(async () => (await Promise.all(workers.map(dead))).every(Boolean), 5_000, 5);
      let sawNotReady = false;
      let readyAndServed = 0;
      const deadline = Date.now() + 20_000;
      while (readyAndServed < 5 && Date.now() < deadline) {
        const ready = await fetch(`${gw.adminUrl}/readyz`);
        if (ready.status !== 200) {
          sawNotReady = true;
          continue;
        }
        // Ready: the traffic port must answer now, not refuse the connection.
        const status = statusOf(await rawRequest(gw.port, 'GET / HTTP/1.1\r\nhost: x.test\r\nconnection: close\r\n\r\n'));
        expect(status, `served while /readyz said ready (after not ready: ${sawNotReady})`).toBe(403);
        if (sawNotReady) readyAndServed++;
      }
      expect(sawNotReady).toBe(true);
      expect(readyAndServed).toBe(5);
    } finally {
      await gw.stop();
      await config.cleanup();
    }
  }, 60_000);
});
