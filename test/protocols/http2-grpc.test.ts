/**
 * HTTP/2 downstream and gRPC proxying through a real `gatehouse run` (SPEC 3.2.1, issue 12
 * items 2 and 3): curl and h2load (Debian nghttp2-client) as HTTP/2 clients over h2c and TLS,
 * a real @grpc/grpc-js server behind the gateway (h2c and TLS upstreams, private CA made with
 * the openssl CLI), a grpc-js client for unary, server-streaming and bidi calls, and Basic Auth
 * (htpasswd) deciding before the call.
 */
import { execFile, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect as h2connect, constants as h2, createServer as createH2cServer, type ClientHttp2Session, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';

const run = promisify(execFile);
const inCi = process.env.CI === 'true';
const missing = ['curl', 'h2load', 'openssl', 'htpasswd'].filter((tool) => {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return false;
  } catch {
    return true;
  }
});
if (missing.length > 0) {
  if (inCi) throw new Error(`HTTP/2 and gRPC tests need ${missing.join(', ')} (Debian nghttp2-client, curl, openssl, apache2-utils)`);
  console.warn(`\n*** SKIPPED: HTTP/2 and gRPC tests: ${missing.join(', ')} not installed (apt-get install nghttp2-client curl openssl apache2-utils) ***\n`);
}

const ECHO_PROTO = `
syntax = "proto3";
package test;
message Msg { string text = 1; int32 n = 2; }
service Echo {
  rpc Unary (Msg) returns (Msg);
  rpc Count (Msg) returns (stream Msg);
  rpc Chat (stream Msg) returns (stream Msg);
  rpc Slow (Msg) returns (Msg);
}
`;

interface Msg {
  text: string;
  n: number;
}
type EchoClient = grpc.Client & {
  Unary(msg: Msg, metadata: grpc.Metadata, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Msg) => void): grpc.ClientUnaryCall;
  Slow(msg: Msg, metadata: grpc.Metadata, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Msg) => void): grpc.ClientUnaryCall;
  Count(msg: Msg, metadata?: grpc.Metadata): grpc.ClientReadableStream<Msg>;
  Chat(metadata?: grpc.Metadata): grpc.ClientDuplexStream<Msg, Msg>;
};

let work: string;
const f = (name: string) => join(work, name);
const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
let EchoService: grpc.ServiceClientConstructor;
let ca: string;
/** What the gRPC servers saw: `x-user-id` of each call, and calls the client cancelled. */
const seen: { userIds: (string | undefined)[]; cancelled: string[] } = { userIds: [], cancelled: [] };
const grpcServers: grpc.Server[] = [];
let h2cOnly: Http2Server;
let hang: Http2Server;
const hangResets: number[] = [];
let echo: TestServer;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;
let httpsPort: number;
let basic: string;

async function makeCerts(): Promise<void> {
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-subj', '/CN=gatehouse-h2-test-ca', '-days', '2']);
  let serial = 1;
  for (const [name, sans] of [
    ['edge', 'DNS:h2.test,DNS:grpcs.test'],
    ['backend', 'DNS:grpc-backend.internal'],
  ] as const) {
    openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${name}`]);
    await writeFile(f(`${name}.ext`), `subjectAltName=${sans}\n`);
    openssl(['x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', String(serial++), '-out', f(`${name}.pem`), '-days', '2', '-extfile', f(`${name}.ext`)]);
  }
  ca = await readFile(f('ca.pem'), 'utf8');
}

/** A real gRPC server: Unary echoes, Count streams n messages, Chat echoes each message, Slow answers after 2 s. */
async function startGrpc(name: string, credentials: grpc.ServerCredentials): Promise<number> {
  const server = new grpc.Server();
  const userId = (call: { metadata: grpc.Metadata }) => call.metadata.get('x-user-id')[0]?.toString();
  server.addService(EchoService.service, {
    Unary(call: grpc.ServerUnaryCall<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) {
      seen.userIds.push(userId(call));
      cb(null, { text: `${name}:${call.request.text}`, n: call.request.n + 1 });
    },
    Slow(call: grpc.ServerUnaryCall<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) {
      const timer = setTimeout(() => cb(null, { text: 'late', n: 0 }), 2_000);
      call.on('cancelled', () => {
        clearTimeout(timer);
        seen.cancelled.push(`Slow:${call.request.text}`);
      });
    },
    Count(call: grpc.ServerWritableStream<Msg, Msg>) {
      let i = 0;
      let stopped = false;
      call.on('cancelled', () => {
        stopped = true;
        seen.cancelled.push(`Count:${call.request.text}`);
      });
      const tick = () => {
        if (stopped) return;
        if (i === call.request.n) return call.end();
        call.write({ text: call.request.text, n: i++ });
        // An endless count paces itself so a cancelled one is easy to see stop.
        if (call.request.n < 0) setTimeout(tick, 5);
        else setImmediate(tick);
      };
      tick();
    },
    Chat(call: grpc.ServerDuplexStream<Msg, Msg>) {
      call.on('data', (m: Msg) => call.write({ text: `${name}:${m.text}`, n: m.n }));
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', credentials, (error, p) => (error ? reject(error) : resolve(p))));
  grpcServers.push(server);
  return port;
}

beforeAll(async () => {
  if (missing.length > 0) return;
  work = await mkdtemp(join(tmpdir(), 'gatehouse-h2-'));
  await writeFile(f('echo.proto'), ECHO_PROTO);
  EchoService = (grpc.loadPackageDefinition(protoLoader.loadSync(f('echo.proto'), { keepCase: true, defaults: true })).test as grpc.GrpcObject).Echo as grpc.ServiceClientConstructor;
  await makeCerts();
  const line = execFileSync('htpasswd', ['-nbm', 'alice', 'wonderland'], { encoding: 'utf8' }).trim();
  const [, salt, hash] = /\$apr1\$([^$]+)\$(.+)$/.exec(line)!;
  basic = `Basic ${Buffer.from('alice:wonderland').toString('base64')}`;

  const grpcPlain = await startGrpc('plain', grpc.ServerCredentials.createInsecure());
  const grpcTls = await startGrpc('tls', grpc.ServerCredentials.createSsl(Buffer.from(ca), [{ cert_chain: await readFile(f('backend.pem')), private_key: await readFile(f('backend.key')) }], false));
  // An upstream that speaks only HTTP/2 cleartext: an HTTP/1.1 request to it fails.
  h2cOnly = createH2cServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`h2c-only saw HTTP/${req.httpVersion} ${req.method} ${req.url} host=${req.headers[':authority']}`);
  });
  h2cOnly.listen(0, '127.0.0.1');
  await once(h2cOnly, 'listening');
  // A gRPC-looking upstream that never answers and ignores grpc-timeout: only the gateway's deadline can end its calls.
  hang = createH2cServer();
  hang.on('stream', (stream) => {
    stream.on('error', () => {});
    stream.on('close', () => hangResets.push(stream.rstCode));
  });
  hang.listen(0, '127.0.0.1');
  await once(hang, 'listening');
  echo = await startEcho('echo');

  const upstream = (name: string, port: number, extra: object = {}) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] }, ...extra } });
  const route = (prefix: string, upstreamName: string, auth = false) => ({
    matchers: [{ prefix }],
    ...(auth ? { options: { extauth: { configRef: { name: 'basic' } } } } : {}),
    routeAction: { single: { upstream: { name: upstreamName } } },
  });
  const vs = (name: string, domains: string[], routes: object[], sslConfig?: object) => ({
    apiVersion: 'gateway.solo.io/v1',
    kind: 'VirtualService',
    metadata: { name },
    spec: { ...(sslConfig ? { sslConfig } : {}), virtualHost: { domains, routes } },
  });
  const edgeTls = { sslFiles: { tlsCert: f('edge.pem'), tlsKey: f('edge.key') }, sniDomains: ['h2.test', 'grpcs.test'] };
  dir = await makeConfigDir({
    'config.yaml': [
      upstream('echo', echo.port),
      upstream('h2c-only', (h2cOnly.address() as AddressInfo).port, { useHttp2: true }),
      upstream('grpc-plain', grpcPlain, { useHttp2: true }),
      upstream('grpc-tls', grpcTls, { useHttp2: true, sslConfig: { sslFiles: { rootCa: f('ca.pem') }, sni: 'grpc-backend.internal' } }),
      upstream('nothing', 1, { useHttp2: true }),
      upstream('hang', (hang.address() as AddressInfo).port, { useHttp2: true }),
      { apiVersion: 'enterprise.gloo.solo.io/v1', kind: 'AuthConfig', metadata: { name: 'basic' }, spec: { configs: [{ basicAuth: { realm: 'h2', apr: { users: { alice: { salt, hashedPassword: hash } } } } }] } },
      vs('plain', ['plain.test'], [route('/auth', 'echo', true), route('/', 'echo')]),
      vs('h2c-only', ['h2c-only.test'], [route('/', 'h2c-only')]),
      vs('grpc', ['grpc.test'], [route('/test.Echo/', 'grpc-plain'), route('/hang.Service/', 'hang')]),
      vs('grpc-auth', ['grpc-auth.test'], [route('/test.Echo/', 'grpc-plain', true)]),
      vs('grpc-down', ['grpc-down.test'], [route('/', 'nothing')]),
      vs('h2-tls', ['h2.test'], [route('/auth', 'echo', true), route('/', 'echo')], edgeTls),
      vs('grpcs', ['grpcs.test'], [route('/test.Echo/', 'grpc-tls')], edgeTls),
      // No sniDomains: the default certificate, for names nobody claims and clients that send no SNI.
      vs('default-tls', ['127.0.0.1'], [route('/', 'echo')], { sslFiles: { tlsCert: f('edge.pem'), tlsKey: f('edge.key') } }),
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path]);
  httpsPort = gatehouse.listening.httpsPort as number;
}, 60_000);

afterAll(async () => {
  await gatehouse?.stop();
  for (const server of grpcServers) server.forceShutdown();
  h2cOnly?.close();
  hang?.close();
  await echo?.close();
  await dir?.cleanup();
  if (work) await rm(work, { recursive: true, force: true });
});

/** curl, with `-w` writing the HTTP version and status after the body. */
async function curl(args: string[]): Promise<{ body: string; version: string; status: number }> {
  const { stdout } = await run('curl', ['-sS', '--max-time', '10', '-w', '\n%{http_version} %{http_code}', ...args]);
  const cut = stdout.lastIndexOf('\n');
  const [version, status] = stdout.slice(cut + 1).split(' ');
  return { body: stdout.slice(0, cut), version: version!, status: Number(status) };
}

const tlsArgs = (name: string) => ['--cacert', f('ca.pem'), '--resolve', `${name}:${httpsPort}:127.0.0.1`];

function grpcClient(authority: string, secure = false): EchoClient {
  const credentials = secure ? grpc.credentials.createSsl(Buffer.from(ca)) : grpc.credentials.createInsecure();
  const target = secure ? `127.0.0.1:${httpsPort}` : `127.0.0.1:${gatehouse.port}`;
  return new EchoService(target, credentials, { 'grpc.default_authority': authority, ...(secure ? { 'grpc.ssl_target_name_override': authority } : {}) }) as unknown as EchoClient;
}

function unary(client: EchoClient, msg: Msg, metadata = new grpc.Metadata(), options: grpc.CallOptions = {}): Promise<Msg> {
  return new Promise((resolve, reject) => client.Unary(msg, metadata, options, (error, res) => (error ? reject(error) : resolve(res!))));
}

function collect(stream: grpc.ClientReadableStream<Msg>): Promise<Msg[]> {
  const got: Msg[] = [];
  return new Promise((resolve, reject) => {
    stream.on('data', (m: Msg) => got.push(m));
    stream.on('end', () => resolve(got));
    stream.on('error', reject);
  });
}

const h2loadStats = (out: string) => {
  const m = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out);
  const done = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(out);
  return { ok2xx: Number(m?.[1]), ok4xx: Number(m?.[3]), succeeded: Number(done?.[4]), failed: Number(done?.[5]), errored: Number(done?.[6]) };
};

describe.skipIf(missing.length > 0)('HTTP/2 downstream through gatehouse run', () => {
  it('curl --http2-prior-knowledge on the plain port: h2c through routes with and without auth', async () => {
    const open = await curl(['--http2-prior-knowledge', '-H', 'host: plain.test', `http://127.0.0.1:${gatehouse.port}/hello?x=1`]);
    expect(open.version).toBe('2');
    expect(open.status).toBe(200);
    expect(JSON.parse(open.body)).toMatchObject({ upstream: 'echo', method: 'GET', url: '/hello?x=1', headers: { host: 'plain.test', 'x-forwarded-proto': 'http' } });
    const denied = await curl(['--http2-prior-knowledge', '-H', 'host: plain.test', `http://127.0.0.1:${gatehouse.port}/auth/x`]);
    expect([denied.version, denied.status]).toEqual(['2', 401]);
    const allowed = await curl(['--http2-prior-knowledge', '-H', 'host: plain.test', '-H', `authorization: ${basic}`, '--data-binary', 'posted body', `http://127.0.0.1:${gatehouse.port}/auth/x`]);
    expect([allowed.version, allowed.status]).toEqual(['2', 200]);
    expect(JSON.parse(allowed.body)).toMatchObject({ method: 'POST', body: 'posted body', headers: { 'x-user-id': 'h2;alice' } });
  });

  it('curl --http2 over TLS negotiates h2 by ALPN; HTTP/1.1 clients on the same port still get HTTP/1.1', async () => {
    const h2res = await curl(['--http2', ...tlsArgs('h2.test'), '-H', `authorization: ${basic}`, `https://h2.test:${httpsPort}/auth/tls`]);
    expect([h2res.version, h2res.status]).toEqual(['2', 200]);
    expect(JSON.parse(h2res.body)).toMatchObject({ url: '/auth/tls', headers: { host: `h2.test:${httpsPort}`, 'x-forwarded-proto': 'https', 'x-user-id': 'h2;alice' } });
    const h1res = await curl(['--http1.1', ...tlsArgs('h2.test'), `https://h2.test:${httpsPort}/plain`]);
    expect([h1res.version, h1res.status]).toEqual(['1.1', 200]);
  });

  it('a client that sends no SNI gets the default certificate and h2 (h2load to an IP address)', async () => {
    const hello = execFileSync('openssl', ['s_client', '-connect', `127.0.0.1:${httpsPort}`, '-noservername', '-alpn', 'h2,http/1.1'], { input: '', encoding: 'utf8', stdio: ['pipe', 'pipe', 'ignore'] });
    expect(hello).toMatch(/ALPN protocol: h2/);
    expect(hello).toMatch(/subject=CN\s?=\s?edge/);
    const load = await run('h2load', ['-n', '200', '-c', '2', '-m', '4', `https://127.0.0.1:${httpsPort}/no-sni`]);
    expect(load.stdout).toContain('Application protocol: h2');
    expect(h2loadStats(load.stdout)).toMatchObject({ ok2xx: 200, failed: 0, errored: 0 });
  });

  it('`curl --http2` on the plain port (Upgrade: h2c) is answered over HTTP/1.1, not taken as a tunnel', async () => {
    const res = await curl(['--http2', '-H', 'host: plain.test', `http://127.0.0.1:${gatehouse.port}/upgrade-asked`]);
    expect([res.version, res.status]).toEqual(['1.1', 200]);
    expect(JSON.parse(res.body).headers).not.toHaveProperty('upgrade');
    expect(JSON.parse(res.body).headers).not.toHaveProperty('http2-settings');
  });

  it('h2load: 2,000 multiplexed requests over h2c and over TLS, with and without auth, all answered', async () => {
    const base = ['-n', '2000', '-c', '4', '-m', '16'];
    // `:authority` routes (RFC 9113 8.3.1): `-H host:` would only add a host header next to the URL's.
    const plain = await run('h2load', [...base, '-H', ':authority: plain.test', `http://127.0.0.1:${gatehouse.port}/load`]);
    expect(h2loadStats(plain.stdout)).toMatchObject({ ok2xx: 2000, succeeded: 2000, failed: 0, errored: 0 });
    const authed = await run('h2load', [...base, '-H', ':authority: plain.test', '-H', `authorization: ${basic}`, `http://127.0.0.1:${gatehouse.port}/auth/load`]);
    expect(h2loadStats(authed.stdout)).toMatchObject({ ok2xx: 2000, failed: 0, errored: 0 });
    const unauthed = await run('h2load', [...base, '-H', ':authority: plain.test', `http://127.0.0.1:${gatehouse.port}/auth/load`]);
    expect(h2loadStats(unauthed.stdout)).toMatchObject({ ok2xx: 0, ok4xx: 2000, errored: 0 });
    // h2load does not verify certificates; the name is sent as SNI and :authority.
    const tls = await run('h2load', [...base, '--connect-to', `127.0.0.1:${httpsPort}`, `https://h2.test:${httpsPort}/load-tls`]);
    expect(tls.stdout).toContain('Application protocol: h2');
    expect(h2loadStats(tls.stdout)).toMatchObject({ ok2xx: 2000, failed: 0, errored: 0 });
  });

  it('an h2c-only upstream (useHttp2) answers through the gateway, for HTTP/1.1 and HTTP/2 clients alike', async () => {
    const h1 = await curl(['-H', 'host: h2c-only.test', `http://127.0.0.1:${gatehouse.port}/only`]);
    expect([h1.version, h1.status]).toEqual(['1.1', 200]);
    expect(h1.body).toBe('h2c-only saw HTTP/2.0 GET /only host=h2c-only.test');
    const h2res = await curl(['--http2-prior-knowledge', '-H', 'host: h2c-only.test', `http://127.0.0.1:${gatehouse.port}/only`]);
    expect([h2res.version, h2res.status, h2res.body]).toEqual(['2', 200, 'h2c-only saw HTTP/2.0 GET /only host=h2c-only.test']);
  });

  it('a client resetting streams as fast as it opens them (rapid reset) loses its connection; others are served', async () => {
    const session = h2connect(`http://127.0.0.1:${gatehouse.port}`);
    let goaway: number | undefined;
    session.on('goaway', (code: number) => (goaway = code));
    session.on('error', () => {});
    const closed = new Promise((resolve) => session.once('close', resolve));
    for (let i = 0; i < 2_000 && !session.destroyed && !session.closed; i++) {
      const stream = session.request({ ':path': `/reset/${i}`, ':authority': 'plain.test' });
      stream.on('error', () => {});
      stream.close(h2.NGHTTP2_CANCEL);
      if (i % 100 === 99) await new Promise((r) => setImmediate(r));
    }
    await Promise.race([closed, new Promise((_, reject) => setTimeout(() => reject(new Error('the gateway kept a rapid-reset connection open')), 5_000))]);
    // nghttp2's stream-reset rate limit answers with GOAWAY (INTERNAL_ERROR).
    expect(goaway).toBe(h2.NGHTTP2_INTERNAL_ERROR);
    const after = await curl(['--http2-prior-knowledge', '-H', 'host: plain.test', `http://127.0.0.1:${gatehouse.port}/after-reset`]);
    expect([after.version, after.status]).toEqual(['2', 200]);
  });
});

describe.skipIf(missing.length > 0)('gRPC through gatehouse run', () => {
  for (const secure of [false, true]) {
    const label = secure ? 'TLS downstream, TLS upstream (private CA, sni)' : 'h2c downstream, h2c upstream';
    it(`unary, server streaming and bidi calls: ${label}`, async () => {
      const client = grpcClient(secure ? 'grpcs.test' : 'grpc.test', secure);
      const name = secure ? 'tls' : 'plain';
      try {
        expect(await unary(client, { text: 'hi', n: 41 })).toEqual({ text: `${name}:hi`, n: 42 });
        const counted = await collect(client.Count({ text: 'c', n: 500 }));
        expect(counted.map((m) => m.n)).toEqual(Array.from({ length: 500 }, (_, i) => i));
        const chat = client.Chat();
        const replies = collect(chat);
        for (let i = 0; i < 200; i++) chat.write({ text: `m${i}`, n: i });
        chat.end();
        expect((await replies).map((m) => m.text)).toEqual(Array.from({ length: 200 }, (_, i) => `${name}:m${i}`));
      } finally {
        client.close();
      }
    });
  }

  it('auth decides before the call: none → UNAUTHENTICATED, wrong password → UNAUTHENTICATED, right → the call with x-user-id', async () => {
    const client = grpcClient('grpc-auth.test');
    try {
      await expect(unary(client, { text: 'x', n: 0 })).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
      const wrong = new grpc.Metadata();
      wrong.set('authorization', `Basic ${Buffer.from('alice:nope').toString('base64')}`);
      const before = seen.userIds.length;
      await expect(unary(client, { text: 'x', n: 0 }, wrong)).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
      expect(seen.userIds.length).toBe(before);
      const right = new grpc.Metadata();
      right.set('authorization', basic);
      expect(await unary(client, { text: 'ok', n: 1 }, right)).toEqual({ text: 'plain:ok', n: 2 });
      expect(seen.userIds.at(-1)).toBe('h2;alice');
    } finally {
      client.close();
    }
  });

  it('no upstream to reach → UNAVAILABLE; an unknown service path → UNIMPLEMENTED (gateway 404)', async () => {
    const down = grpcClient('grpc-down.test');
    const unknown = grpcClient('nowhere.test');
    try {
      await expect(unary(down, { text: 'x', n: 0 })).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
      await expect(unary(unknown, { text: 'x', n: 0 })).rejects.toMatchObject({ code: grpc.status.UNIMPLEMENTED });
    } finally {
      down.close();
      unknown.close();
    }
  });

  it('grpc-timeout is the gateway deadline: DEADLINE_EXCEEDED from the gateway itself, and the upstream call is cancelled', async () => {
    // A raw HTTP/2 call, so the status seen is the gateway's, not a client-side timer's.
    const session: ClientHttp2Session = h2connect(`http://127.0.0.1:${gatehouse.port}`);
    try {
      const frame = Buffer.alloc(5 + 4);
      frame.writeUInt32BE(4, 1);
      Buffer.from([0x0a, 0x02, 0x64, 0x6c]).copy(frame, 5); // Msg{text:"dl"}
      const stream = session.request({ ':method': 'POST', ':path': '/hang.Service/Call', ':authority': 'grpc.test', 'content-type': 'application/grpc', te: 'trailers', 'grpc-timeout': '300m' });
      const started = performance.now();
      stream.end(frame);
      const [headers, flags] = (await once(stream, 'response')) as [Record<string, string>, number];
      const elapsed = performance.now() - started;
      expect(headers['grpc-status']).toBe(String(grpc.status.DEADLINE_EXCEEDED));
      expect(headers['x-gatehouse-error']).toBe('GH_GRPC_DEADLINE_EXCEEDED');
      // Trailers-only: the header block ends the stream.
      expect(flags & h2.NGHTTP2_FLAG_END_STREAM).toBe(h2.NGHTTP2_FLAG_END_STREAM);
      expect(elapsed).toBeGreaterThanOrEqual(290);
      expect(elapsed).toBeLessThan(1_500);
      await expect.poll(() => hangResets).toContain(h2.NGHTTP2_CANCEL);
    } finally {
      session.close();
    }
  });

  it('a client cancelling a streaming call cancels it upstream; the grpc-js client deadline works end to end', async () => {
    const client = grpcClient('grpc.test');
    try {
      const endless = client.Count({ text: 'endless', n: -1 });
      endless.on('error', () => {});
      await once(endless, 'data');
      endless.cancel();
      await expect.poll(() => seen.cancelled, { timeout: 3_000 }).toContain('Count:endless');
      await expect(
        new Promise((resolve, reject) => client.Slow({ text: 'client-deadline', n: 0 }, new grpc.Metadata(), { deadline: Date.now() + 250 }, (e, r) => (e ? reject(e) : resolve(r)))),
      ).rejects.toMatchObject({ code: grpc.status.DEADLINE_EXCEEDED });
      await expect.poll(() => seen.cancelled, { timeout: 3_000 }).toContain('Slow:client-deadline');
    } finally {
      client.close();
    }
  });
});
