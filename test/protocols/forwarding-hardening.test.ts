/**
 * The forwarding side of issue 29, against a real `gatehouse run` and real upstreams (node:http,
 * node:http2, @grpc/grpc-js, a TLS server that also speaks h2, an ext_authz server built from
 * Envoy's protos): client cancellation reaches the upstream on HTTP/1.1 and HTTP/2 alike and
 * never reaches the process's unhandled-error guard; clients that stop reading cannot pin an
 * upstream's connections; gRPC trailers-only responses stay trailers-only; bodies go to auth
 * over HTTP/2; `Expect: 100-continue` and upstream `103 Early Hints` work; a TLS upstream
 * without `useHttp2` is offered HTTP/1.1 only (so WebSockets reach it); huge `grpc-timeout`s
 * do not overflow the timer; a request pipelined after `Connection: close` loses nothing.
 */
import { execFile, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import { connect as h2connect, constants as h2, createSecureServer, createServer as createH2cServer, type ClientHttp2Session, type Http2SecureServer, type Http2Server } from 'node:http2';
import { connect as netConnect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { startEnvoyAuthServer } from '../extauth/support.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, rawRequest } from '../support/http.ts';

const run = promisify(execFile);
const inCi = process.env.CI === 'true';
const missing = ['curl', 'openssl'].filter((tool) => {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return false;
  } catch {
    return true;
  }
});
if (missing.length > 0) {
  if (inCi) throw new Error(`forwarding hardening tests need ${missing.join(', ')}`);
  console.warn(`\n*** SKIPPED: forwarding hardening tests: ${missing.join(', ')} not installed (apt-get install curl openssl) ***\n`);
}

const PROTO = `
syntax = "proto3";
package edge;
message Msg { string text = 1; int32 n = 2; }
service Calls {
  rpc Echo (Msg) returns (Msg);
  rpc Hold (Msg) returns (Msg);
  rpc Late (Msg) returns (Msg);
  rpc Fail (Msg) returns (Msg);
  rpc None (Msg) returns (stream Msg);
  rpc FailLater (Msg) returns (stream Msg);
}
`;
interface Msg {
  text: string;
  n: number;
}
type Unary = (msg: Msg, metadata: grpc.Metadata, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Msg) => void) => grpc.ClientUnaryCall;
type CallsClient = grpc.Client & { Echo: Unary; Hold: Unary; Late: Unary; Fail: Unary; None(msg: Msg, metadata?: grpc.Metadata): grpc.ClientReadableStream<Msg>; FailLater(msg: Msg, metadata?: grpc.Metadata): grpc.ClientReadableStream<Msg> };

let work: string;
const f = (name: string) => join(work, name);
let Calls: grpc.ServiceClientConstructor;
let grpcServer: grpc.Server;
let grpcPort: number;
/** What the upstreams saw. */
const seen = {
  grpcHeld: 0,
  /** `Late` calls the gRPC upstream received, and those it answered (300 ms later). */
  lateStarted: 0,
  lateAnswered: 0,
  grpcCancelled: [] as string[],
  /** HTTP/1.1 `/hold` requests open at the upstream now, and those that ended by the gateway going away. */
  h1Open: 0,
  h1Aborted: 0,
  h1Started: 0,
  /** `/hold` paths open at the HTTP/1.1 upstream, and those the gateway gave up. */
  h1OpenPaths: new Set<string>(),
  h1AbortedPaths: [] as string[],
  /** HTTP/2 upstream `/hold` streams open now, and those the gateway reset. */
  h2Open: 0,
  h2Reset: 0,
  expectHeaders: [] as (string | undefined)[],
  /** Bytes written by `/big` responses whose client never read (per request, last first). */
  bigOpen: 0,
};
let app: Server;
let h2app: Http2Server;
let tlsApp: Http2SecureServer;
let wss: WebSocketServer;
let auth: Awaited<ReturnType<typeof startEnvoyAuthServer>>;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;

const port = (server: { address(): AddressInfo | string | null }) => (server.address() as AddressInfo).port;

/** The HTTP/1.1 upstream. */
function startApp(): Promise<Server> {
  const server = createHttpServer((req, res) => {
    const path = req.url ?? '/';
    if (path.startsWith('/hold')) {
      seen.h1Open++;
      seen.h1Started++;
      seen.h1OpenPaths.add(path);
      req.resume();
      // Never answers: only the gateway going away ends it.
      res.on('close', () => {
        seen.h1Open--;
        seen.h1OpenPaths.delete(path);
        if (!res.writableEnded) {
          seen.h1Aborted++;
          seen.h1AbortedPaths.push(path);
        }
      });
      return;
    }
    if (path.startsWith('/h2-forbidden-header')) {
      // A header HTTP/1.1 allows and HTTP/2 forbids in a response (RFC 9113 8.2.2).
      res.setHeader('http2-settings', 'AAMAAABkAAQAoAAAAAIAAAAA');
      return void res.end('fine for HTTP/1.1');
    }
    if (path.startsWith('/hints')) {
      res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
      res.setHeader('content-type', 'text/plain');
      return void setTimeout(() => res.end('after hints'), 20);
    }
    if (path.startsWith('/big')) {
      // An endless body: only the gateway (or its client) can end it.
      seen.bigOpen++;
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
      };
      res.on('drain', pump);
      res.on('close', () => seen.bigOpen--);
      return pump();
    }
    seen.expectHeaders.push(req.headers.expect);
    let bytes = 0;
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ method: req.method, url: req.url, bytes, httpVersion: req.httpVersion }));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** The HTTP/2 cleartext upstream: `/hold` never answers; `/hints` sends 103 then 200. */
async function startH2App(): Promise<Http2Server> {
  const server = createH2cServer();
  server.on('stream', (stream, headers) => {
    stream.on('error', () => {});
    const path = String(headers[':path']);
    if (path.startsWith('/hold')) {
      seen.h2Open++;
      stream.on('close', () => {
        seen.h2Open--;
        if (stream.rstCode !== h2.NGHTTP2_NO_ERROR) seen.h2Reset++;
      });
      return;
    }
    if (path.startsWith('/hints')) {
      stream.additionalHeaders({ ':status': 103, link: '</h2.css>; rel=preload; as=style' });
      return void setTimeout(() => {
        if (stream.destroyed) return;
        stream.respond({ ':status': 200, 'content-type': 'text/plain' });
        stream.end('h2 after hints');
      }, 20);
    }
    stream.respond({ ':status': 200 });
    stream.end('h2 ok');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

async function startGrpcServer(): Promise<void> {
  grpcServer = new grpc.Server();
  grpcServer.addService(Calls.service, {
    Echo(call: grpc.ServerUnaryCall<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) {
      cb(null, { text: `echo:${call.request.text}`, n: call.request.n + 1 });
    },
    Hold(call: grpc.ServerUnaryCall<Msg, Msg>) {
      seen.grpcHeld++;
      call.on('cancelled', () => seen.grpcCancelled.push(call.request.text));
    },
    Late(_call: grpc.ServerUnaryCall<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) {
      seen.lateStarted++;
      setTimeout(() => {
        seen.lateAnswered++;
        cb(null, { text: 'late', n: 0 });
      }, 300);
    },
    Fail(call: grpc.ServerUnaryCall<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) {
      const metadata = new grpc.Metadata();
      metadata.set('x-why', 'because');
      metadata.set('detail-bin', Buffer.from([0, 1, 2, 255]));
      cb({ code: grpc.status.NOT_FOUND, details: `no such thing: ${call.request.text}`, metadata });
    },
    None(call: grpc.ServerWritableStream<Msg, Msg>) {
      call.end();
    },
    FailLater(call: grpc.ServerWritableStream<Msg, Msg>) {
      call.write({ text: 'one', n: 1 });
      call.emit('error', { code: grpc.status.ABORTED, details: 'stopped after one' });
    },
  });
  grpcPort = await new Promise<number>((resolve, reject) => grpcServer.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, p) => (error ? reject(error) : resolve(p))));
}

/** A TLS server that offers h2 and HTTP/1.1 by ALPN and takes WebSocket upgrades over HTTP/1.1. */
async function startTlsApp(): Promise<Http2SecureServer> {
  const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-subj', '/CN=gatehouse-fwd-test-ca', '-days', '2']);
  openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('tls.key'), '-out', f('tls.csr'), '-subj', '/CN=tls-backend']);
  await writeFile(f('tls.ext'), 'subjectAltName=DNS:tls-backend.internal\n');
  openssl(['x509', '-req', '-in', f('tls.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', '7', '-out', f('tls.pem'), '-days', '2', '-extfile', f('tls.ext')]);
  const server = createSecureServer({ allowHTTP1: true, key: await readFile(f('tls.key')), cert: await readFile(f('tls.pem')) }, (req, res) => {
    res.setHeader('content-type', 'text/plain');
    res.end(`tls saw HTTP/${req.httpVersion}`);
  });
  wss = new WebSocketServer({ noServer: true });
  wss.on('connection', (ws) => ws.on('message', (data) => ws.send(`tls echo: ${String(data)}`)));
  server.on('upgrade', (req: IncomingMessage, socket, head) => wss.handleUpgrade(req, socket as never, head, (ws) => wss.emit('connection', ws, req)));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

beforeAll(async () => {
  if (missing.length > 0) return;
  work = await mkdtemp(join(tmpdir(), 'gatehouse-fwd-'));
  await writeFile(f('calls.proto'), PROTO);
  Calls = (grpc.loadPackageDefinition(protoLoader.loadSync(f('calls.proto'), { keepCase: true, defaults: true })).edge as grpc.GrpcObject).Calls as grpc.ServiceClientConstructor;
  app = await startApp();
  h2app = await startH2App();
  await startGrpcServer();
  tlsApp = await startTlsApp();
  auth = await startEnvoyAuthServer(() => ({ status: { code: 0 }, ok_response: {} }));

  const upstream = (name: string, p: number, extra: object = {}) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: p }] }, ...extra } });
  const to = (name: string, extra: object = {}) => ({ ...extra, routeAction: { single: { upstream: { name } } } });
  const bodyToAuth = { options: { extauth: { configRef: { name: 'recorded' }, requestBody: { maxRequestBytes: 10_000 } } } };
  dir = await makeConfigDir({
    'config.yaml': [
      upstream('app', port(app)),
      // Four connections: a handful of clients could pin them all.
      upstream('app-small', port(app), { circuitBreakers: { maxConnections: 4 } }),
      upstream('h2app', port(h2app), { useHttp2: true }),
      upstream('grpc', grpcPort, { useHttp2: true }),
      upstream('tls-h1', port(tlsApp), { sslConfig: { sslFiles: { rootCa: f('ca.pem') }, sni: 'tls-backend.internal' } }),
      { apiVersion: 'enterprise.gloo.solo.io/v1', kind: 'AuthConfig', metadata: { name: 'recorded' }, spec: { configs: [{ passThroughAuth: { grpc: { address: auth.address } } }] } },
      {
        apiVersion: 'gateway.solo.io/v1',
        kind: 'VirtualService',
        metadata: { name: 'edge' },
        spec: {
          virtualHost: {
            domains: ['*'],
            routes: [
              { matchers: [{ prefix: '/edge.Calls/Echo' }], ...to('grpc', bodyToAuth) },
              { matchers: [{ prefix: '/edge.Calls/' }], ...to('grpc') },
              { matchers: [{ prefix: '/h2/' }], ...to('h2app', { options: { prefixRewrite: '/' } }) },
              { matchers: [{ prefix: '/small/' }], ...to('app-small', { options: { prefixRewrite: '/', timeout: '2s' } }) },
              { matchers: [{ prefix: '/slow-small/' }], ...to('app-small', { options: { prefixRewrite: '/', timeout: '20s' } }) },
              { matchers: [{ prefix: '/tls/' }], ...to('tls-h1', { options: { prefixRewrite: '/' } }) },
              { matchers: [{ prefix: '/authbody/' }], ...to('app', bodyToAuth) },
              { matchers: [{ prefix: '/authpartial/' }], ...to('app', { options: { extauth: { configRef: { name: 'recorded' }, requestBody: { maxRequestBytes: 1000, allowPartialMessage: true } } } }) },
              { matchers: [{ prefix: '/' }], ...to('app') },
            ],
          },
        },
      },
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path]);
}, 60_000);

afterAll(async () => {
  await gatehouse?.stop();
  grpcServer?.forceShutdown();
  app?.closeAllConnections();
  app?.close();
  h2app?.close();
  tlsApp?.close();
  wss?.close();
  await auth?.close();
  await dir?.cleanup();
  if (work) await rm(work, { recursive: true, force: true });
});

function grpcClient(): CallsClient {
  return new Calls(`127.0.0.1:${gatehouse.port}`, grpc.credentials.createInsecure(), { 'grpc.default_authority': 'edge.test' }) as unknown as CallsClient;
}

/** The unhandled-error counter of the gateway's /metrics (absent counts as 0). */
async function unhandledErrors(): Promise<number> {
  const text = await (await fetch(`${gatehouse.adminUrl}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n')) if (line.startsWith('gatehouse_unhandled_errors_total')) total += Number(line.split(' ').at(-1));
  return total;
}

/** One gRPC message frame (uncompressed) holding Msg{text}. */
function grpcFrame(text: string): Buffer {
  const payload = Buffer.concat([Buffer.from([0x0a, Buffer.byteLength(text)]), Buffer.from(text)]);
  const frame = Buffer.alloc(5);
  frame.writeUInt32BE(payload.length, 1);
  return Buffer.concat([frame, payload]);
}

function h2session(): ClientHttp2Session {
  const session = h2connect(`http://127.0.0.1:${gatehouse.port}`);
  session.on('error', () => {});
  return session;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(missing.length > 0)('cancellation reaches the upstream, on every protocol (issue 29, findings 2 and 3)', () => {
  it('gRPC calls cancelled before the response headers never reach the unhandled-error guard (150 calls, PID unchanged)', async () => {
    const pid = gatehouse.child.pid;
    const before = await unhandledErrors();
    const session = h2session();
    try {
      // Each call is reset once the upstream has it and before its answer (300 ms later) arrives.
      for (let batch = 0; batch < 5; batch++) {
        const started = seen.lateStarted;
        const streams = Array.from({ length: 30 }, (_, i) => {
          const stream = session.request({ ':method': 'POST', ':path': '/edge.Calls/Late', ':authority': 'edge.test', 'content-type': 'application/grpc', te: 'trailers' });
          stream.on('error', () => {});
          stream.end(grpcFrame(`late-${batch}-${i}`));
          return stream;
        });
        await eventually(async () => seen.lateStarted - started === 30, 10_000);
        for (const stream of streams) stream.close(h2.NGHTTP2_CANCEL);
      }
    } finally {
      session.close();
    }
    // The upstream's answer timers have all run (each answered its call unless the cancel reached it first).
    await eventually(async () => seen.lateAnswered >= seen.lateStarted, 10_000);
    // A call after them all, on a new connection: the process still serves, and has seen every answer.
    const client = grpcClient();
    try {
      const res = await new Promise<Msg>((resolve, reject) => client.Late({ text: 'still', n: 1 }, new grpc.Metadata(), {}, (e, r) => (e ? reject(e) : resolve(r!))));
      expect(res).toEqual({ text: 'late', n: 0 });
    } finally {
      client.close();
    }
    expect(gatehouse.logs.filter((l) => l.code === 'GH_UNHANDLED')).toEqual([]);
    expect(await unhandledErrors()).toBe(before);
    expect(gatehouse.child.exitCode).toBeNull();
    expect(gatehouse.child.pid).toBe(pid);
  });

  it('an HTTP/2 stream reset aborts its HTTP/1.1 upstream request at once; HEADERS+RST_STREAM bursts leave no upstream request behind', async () => {
    const session = h2session();
    try {
      const startedBefore = seen.h1Started;
      const abortedBefore = seen.h1Aborted;
      const streams = Array.from({ length: 20 }, (_, i) => {
        const stream = session.request({ ':path': `/hold/${i}`, ':authority': 'edge.test' });
        stream.on('error', () => {});
        return stream;
      });
      await eventually(async () => seen.h1Started - startedBefore === 20, 10_000);
      for (const stream of streams) stream.close(h2.NGHTTP2_CANCEL);
      await eventually(async () => seen.h1Aborted - abortedBefore === 20, 5_000);
      // 30 resets a second, as in the report (below nghttp2's rapid-reset limit): nothing piles up upstream.
      for (let i = 0; i < 90; i++) {
        const stream = session.request({ ':path': `/hold/burst-${i}`, ':authority': 'edge.test' });
        stream.on('error', () => {});
        setImmediate(() => stream.close(h2.NGHTTP2_CANCEL));
        if (i % 10 === 9) await sleep(330);
      }
      await eventually(async () => seen.h1Open === 0, 5_000);
    } finally {
      session.close();
    }
  });

  it('an HTTP/2 stream reset cancels its HTTP/2 upstream stream (RST_STREAM upstream)', async () => {
    const session = h2session();
    try {
      const resetBefore = seen.h2Reset;
      const streams = Array.from({ length: 10 }, (_, i) => {
        const stream = session.request({ ':path': `/h2/hold/${i}`, ':authority': 'edge.test' });
        stream.on('error', () => {});
        return stream;
      });
      await eventually(async () => seen.h2Open === 10, 10_000);
      for (const stream of streams) stream.close(h2.NGHTTP2_CANCEL);
      await eventually(async () => seen.h2Reset - resetBefore === 10 && seen.h2Open === 0, 5_000);
    } finally {
      session.close();
    }
  });

  it('an HTTP/1.1 client abort and an HTTP/2 client cancel take the same path: both end the upstream request', async () => {
    const req = httpRequest({ host: '127.0.0.1', port: gatehouse.port, path: '/hold/h1-abort', headers: { host: 'edge.test' } });
    req.on('error', () => {});
    req.end();
    await eventually(async () => seen.h1OpenPaths.has('/hold/h1-abort'), 10_000);
    req.destroy();
    await eventually(async () => seen.h1AbortedPaths.includes('/hold/h1-abort'), 5_000);
  });

  it('a gRPC client cancelling before the response headers cancels the upstream call at once (not at the route timeout)', async () => {
    const client = grpcClient();
    try {
      const heldBefore = seen.grpcHeld;
      const call = client.Hold({ text: 'cancel-me', n: 0 }, new grpc.Metadata(), {}, () => {});
      await eventually(async () => seen.grpcHeld > heldBefore, 10_000);
      call.cancel();
      await eventually(async () => seen.grpcCancelled.includes('cancel-me'), 5_000);
    } finally {
      client.close();
    }
  });
});

/** A grpc-js unary call as a promise. */
function call(method: Unary, msg: Msg, metadata = new grpc.Metadata(), options: grpc.CallOptions = {}): Promise<Msg> {
  return new Promise((resolve, reject) => method(msg, metadata, options, (error, res) => (error ? reject(error) : resolve(res!))));
}

/** A raw HTTP/2 gRPC call: the response header block, its flags, the DATA bytes and the trailers. */
async function rawGrpc(path: string, text: string, extra: Record<string, string> = {}): Promise<{ headers: Record<string, string>; flags: number; data: number; trailers: Record<string, string> | undefined }> {
  const session = h2session();
  try {
    const stream = session.request({ ':method': 'POST', ':path': path, ':authority': 'edge.test', 'content-type': 'application/grpc', te: 'trailers', ...extra });
    stream.on('error', () => {});
    stream.end(grpcFrame(text));
    let data = 0;
    let trailers: Record<string, string> | undefined;
    stream.on('data', (c: Buffer) => (data += c.length));
    stream.on('trailers', (t) => (trailers = t as Record<string, string>));
    const [headers, flags] = (await once(stream, 'response')) as [Record<string, string>, number];
    await once(stream, 'close');
    return { headers, flags, data, trailers };
  } finally {
    session.close();
  }
}

describe.skipIf(missing.length > 0)('gRPC answers and deadlines (findings 13, 7)', () => {
  it('trailers-only answers stay trailers-only: status, details and metadata of an error reach the client', async () => {
    const client = grpcClient();
    try {
      const error = (await call(client.Fail.bind(client), { text: 'x42', n: 0 }).then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      ))!;
      expect(error.code).toBe(grpc.status.NOT_FOUND);
      expect(error.details).toBe('no such thing: x42');
      expect(error.metadata.get('x-why')).toEqual(['because']);
      expect(error.metadata.get('detail-bin')).toEqual([Buffer.from([0, 1, 2, 255])]);
      // OK with no message is trailers-only too.
      const none: Msg[] = [];
      const stream = client.None({ text: '', n: 0 });
      stream.on('data', (m: Msg) => none.push(m));
      const status = await new Promise<grpc.StatusObject>((resolve, reject) => {
        stream.on('status', resolve);
        stream.on('error', reject);
      });
      expect([status.code, none]).toEqual([grpc.status.OK, []]);
      // A status after messages still comes in trailers.
      const later: Msg[] = [];
      const failing = client.FailLater({ text: '', n: 0 });
      failing.on('data', (m: Msg) => later.push(m));
      const failed = await new Promise<grpc.ServiceError>((resolve) => failing.on('error', resolve));
      expect([failed.code, failed.details, later.map((m) => m.text)]).toEqual([grpc.status.ABORTED, 'stopped after one', ['one']]);
    } finally {
      client.close();
    }
  });

  it('on the wire: one header block with END_STREAM and the status in it, no DATA frame', async () => {
    const answer = await rawGrpc('/edge.Calls/Fail', 'wire');
    expect(answer.headers['grpc-status']).toBe(String(grpc.status.NOT_FOUND));
    expect(answer.flags & h2.NGHTTP2_FLAG_END_STREAM).toBe(h2.NGHTTP2_FLAG_END_STREAM);
    expect([answer.data, answer.trailers]).toEqual([0, undefined]);
  });

  it('grpc-timeout 99999999H (valid, beyond any timer) does not expire at once: the call is answered', async () => {
    const answer = await rawGrpc('/edge.Calls/Late', 'long', { 'grpc-timeout': '99999999H' });
    expect(answer.headers[':status']).toBe(200);
    expect(answer.trailers?.['grpc-status']).toBe('0');
    const tiny = await rawGrpc('/edge.Calls/Late', 'short', { 'grpc-timeout': '50m' });
    expect(tiny.headers['grpc-status']).toBe(String(grpc.status.DEADLINE_EXCEEDED));
  });
});

describe.skipIf(missing.length > 0)('1xx, Expect and TLS upstreams (findings 14, 15, 16)', () => {
  it('103 Early Hints from an HTTP/1.1 upstream reach an HTTP/1.1 client, then the answer', async () => {
    const hints: { status: number; link: unknown }[] = [];
    const body = await new Promise<string>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: gatehouse.port, path: '/hints', headers: { host: 'edge.test' } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve(`${res.statusCode} ${text}`));
      });
      req.on('information', (info) => hints.push({ status: info.statusCode, link: info.headers.link }));
      req.on('error', reject);
      req.end();
    });
    expect(body).toBe('200 after hints');
    expect(hints).toEqual([{ status: 103, link: '</style.css>; rel=preload; as=style' }]);
  });

  it('103 Early Hints reach HTTP/2 clients, from HTTP/1.1 and HTTP/2 upstreams alike', async () => {
    for (const [path, link, text] of [
      ['/hints', '</style.css>; rel=preload; as=style', 'after hints'],
      ['/h2/hints', '</h2.css>; rel=preload; as=style', 'h2 after hints'],
    ] as const) {
      const session = h2session();
      try {
        const stream = session.request({ ':path': path, ':authority': 'edge.test' });
        const informational: Record<string, unknown>[] = [];
        stream.on('headers', (h) => informational.push(h));
        let got = '';
        stream.setEncoding('utf8');
        stream.on('data', (c: string) => (got += c));
        const [headers] = (await once(stream, 'response')) as [Record<string, unknown>];
        await once(stream, 'end');
        expect([headers[':status'], got]).toEqual([200, text]);
        expect(informational.map((h) => [h[':status'], h.link])).toEqual([[103, link]]);
      } finally {
        session.close();
      }
    }
  });

  it('a 103 to an HTTP/1.1 client from an HTTP/2 upstream, and curl over both protocols, keep the answer whole', async () => {
    const h1 = await run('curl', ['-sS', '--max-time', '10', '-H', 'host: edge.test', '-w', ' %{http_code}', `http://127.0.0.1:${gatehouse.port}/h2/hints`]);
    expect(h1.stdout).toBe('h2 after hints 200');
    const h2c = await run('curl', ['-sS', '--max-time', '10', '--http2-prior-knowledge', '-H', 'host: edge.test', '-w', ' %{http_code}', `http://127.0.0.1:${gatehouse.port}/hints`]);
    expect(h2c.stdout).toBe('after hints 200');
  });

  it('Expect: 100-continue uploads (curl, 2 MiB) go through over HTTP/1.1 and HTTP/2; the upstream gets the body without Expect', async () => {
    await writeFile(f('upload.bin'), Buffer.alloc(2 * 1024 * 1024, 0x5a));
    for (const protocol of ['--http1.1', '--http2-prior-knowledge']) {
      const before = seen.expectHeaders.length;
      const { stdout } = await run('curl', ['-sS', '--max-time', '20', protocol, '-H', 'host: edge.test', '-H', 'expect: 100-continue', '--data-binary', `@${f('upload.bin')}`, '-w', ' %{http_code}', `http://127.0.0.1:${gatehouse.port}/upload`]);
      const cut = stdout.lastIndexOf(' ');
      expect(stdout.slice(cut + 1)).toBe('200');
      expect(JSON.parse(stdout.slice(0, cut))).toMatchObject({ method: 'POST', bytes: 2 * 1024 * 1024 });
      expect(seen.expectHeaders.slice(before)).toEqual([undefined]);
    }
  });

  it('a TLS upstream without useHttp2 is offered HTTP/1.1 only: requests and a WebSocket reach it (the server also speaks h2)', async () => {
    const plain = await run('curl', ['-sS', '--max-time', '10', '-H', 'host: edge.test', `http://127.0.0.1:${gatehouse.port}/tls/x`]);
    expect(plain.stdout).toBe('tls saw HTTP/1.1');
    const ws = new WebSocket(`ws://127.0.0.1:${gatehouse.port}/tls/socket`, { headers: { host: 'edge.test' } });
    try {
      const opened = await Promise.race([once(ws, 'open').then(() => 'open'), once(ws, 'unexpected-response').then(([, res]) => `refused ${(res as IncomingMessage).statusCode}`), once(ws, 'error').then(([e]) => `error ${(e as Error).message}`)]);
      expect(opened).toBe('open');
      ws.send('hello');
      const [reply] = await once(ws, 'message');
      expect(String(reply)).toBe('tls echo: hello');
    } finally {
      ws.terminate();
    }
  });
});

describe.skipIf(missing.length > 0)('upgrades to an HTTP/2 upstream (containment)', () => {
  it('a WebSocket to a useHttp2 Upstream is refused with 502, and nothing reaches the unhandled-error guard', async () => {
    const before = await unhandledErrors();
    for (let i = 0; i < 5; i++) {
      const answer = await rawRequest(gatehouse.port, `GET /h2/ws-${i} HTTP/1.1\r\nHost: edge.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
      expect(answer).toMatch(/^HTTP\/1\.1 50[23] /);
    }
    expect(gatehouse.logs.filter((l) => l.code === 'GH_UNHANDLED')).toEqual([]);
    expect(await unhandledErrors()).toBe(before);
  });
});

describe.skipIf(missing.length > 0)('upstream answers HTTP/2 cannot carry (containment)', () => {
  it('a response header HTTP/2 forbids: 502 to HTTP/2 clients, the answer to HTTP/1.1 ones, nothing to the process guard', async () => {
    const before = await unhandledErrors();
    const h1 = await run('curl', ['-sS', '--max-time', '10', '-H', 'host: edge.test', '-w', ' %{http_code}', `http://127.0.0.1:${gatehouse.port}/h2-forbidden-header`]);
    expect(h1.stdout).toBe('fine for HTTP/1.1 200');
    for (let i = 0; i < 3; i++) {
      const h2res = await run('curl', ['-sS', '--max-time', '10', '--http2-prior-knowledge', '-H', 'host: edge.test', '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${gatehouse.port}/h2-forbidden-header`]);
      expect(h2res.stdout).toBe('502');
    }
    expect(gatehouse.logs.filter((l) => l.code === 'GH_UNHANDLED')).toEqual([]);
    expect(await unhandledErrors()).toBe(before);
  });
});

describe.skipIf(missing.length > 0)('bodies for auth over HTTP/2 and gRPC (finding 6)', () => {
  const lastCheck = () => (auth.requests.at(-1) as { attributes: { request: { http: { body?: string; raw_body?: Buffer; headers: Record<string, string> } } } }).attributes.request.http;

  it('an HTTP/2 request with a body on a route that sends the body to auth is answered, and auth saw the body', async () => {
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--http2-prior-knowledge', '-H', 'host: edge.test', '--data-binary', 'the h2 body', '-w', ' %{http_version} %{http_code}', `http://127.0.0.1:${gatehouse.port}/authbody/x`]);
    expect(stdout).toMatch(/ 2 200$/);
    expect(JSON.parse(stdout.slice(0, -' 2 200'.length))).toMatchObject({ method: 'POST', bytes: 'the h2 body'.length });
    expect(lastCheck().body).toBe('the h2 body');
    expect(lastCheck().headers['x-envoy-auth-partial-body']).toBe('false');
  });

  it('over HTTP/2 a partial body goes to auth (first maxRequestBytes, partial: true) and the whole body upstream', async () => {
    await writeFile(f('partial.bin'), Buffer.alloc(300_000, 0x62));
    const { stdout } = await run('curl', ['-sS', '--max-time', '10', '--http2-prior-knowledge', '-H', 'host: edge.test', '--data-binary', `@${f('partial.bin')}`, '-w', ' %{http_version} %{http_code}', `http://127.0.0.1:${gatehouse.port}/authpartial/x`]);
    expect(stdout).toMatch(/ 2 200$/);
    expect(JSON.parse(stdout.slice(0, -' 2 200'.length))).toMatchObject({ method: 'POST', bytes: 300_000 });
    expect(lastCheck().body).toBe('b'.repeat(1000));
    expect(lastCheck().headers['x-envoy-auth-partial-body']).toBe('true');
  });

  it('a gRPC call on such a route is answered, and auth saw the message frame', async () => {
    const client = grpcClient();
    try {
      expect(await call(client.Echo.bind(client), { text: 'authed', n: 1 })).toEqual({ text: 'echo:authed', n: 2 });
      expect(lastCheck().body).toContain('authed');
    } finally {
      client.close();
    }
  });

  it('a gRPC call whose message is over maxRequestBytes gets RESOURCE_EXHAUSTED, not an HTTP 413 it cannot read', async () => {
    const client = grpcClient();
    try {
      const checks = auth.requests.length;
      const error = await call(client.Echo.bind(client), { text: 'x'.repeat(20_000), n: 1 }).then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      );
      expect(error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(auth.requests.length).toBe(checks);
      // The connection is fine for the next call.
      expect(await call(client.Echo.bind(client), { text: 'small', n: 1 })).toEqual({ text: 'echo:small', n: 2 });
    } finally {
      client.close();
    }
  });

  it('an HTTP/2 client that leaves while its body is being buffered is forgotten: no check, nothing upstream', async () => {
    const checks = auth.requests.length;
    const upstreamRequests = seen.expectHeaders.length;
    const session = h2session();
    const stream = session.request({ ':method': 'POST', ':path': '/authbody/gone', ':authority': 'edge.test' });
    stream.on('error', () => {});
    stream.write('part of a body');
    await sleep(100);
    // The connection goes without a frame more (a Node client's stream.close() sends END_STREAM first).
    session.destroy();
    await sleep(300);
    expect(auth.requests.length).toBe(checks);
    expect(seen.expectHeaders.length).toBe(upstreamRequests);
  });

  it('a WebSocket upgrade that declares a body on such a route is refused (400), never checked with an empty body', async () => {
    const checks = auth.requests.length;
    const answer = await rawRequest(gatehouse.port, 'GET /authbody/ws HTTP/1.1\r\nHost: edge.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nContent-Length: 5\r\n\r\nhello');
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(auth.requests.length).toBe(checks);
  });
});

describe.skipIf(missing.length > 0)('clients that stop reading (finding 4)', () => {
  it('non-reading HTTP/1.1 downloads cannot pin every upstream connection: others are answered, the stalled ones cut', async () => {
    // Four connections to app-small, route timeout 2 s: six clients that never read.
    const stalled = Array.from({ length: 6 }, () => {
      const socket = netConnect(gatehouse.port, '127.0.0.1');
      socket.on('error', () => {});
      socket.write('GET /small/big HTTP/1.1\r\nHost: edge.test\r\n\r\n');
      // Never read: the kernel buffers fill and the gateway's writes stop draining.
      socket.pause();
      return socket;
    });
    try {
      await eventually(async () => seen.bigOpen >= 4, 10_000);
      // Another client of the same upstream gets its answer while the stalled ones still hold on.
      const answered = await eventually(async () => {
        const reply = await run('curl', ['-sS', '--max-time', '6', '-H', 'host: edge.test', '-w', ' %{http_code}', `http://127.0.0.1:${gatehouse.port}/small/echo`]).catch(() => undefined);
        return reply?.stdout.endsWith(' 200') ? reply.stdout : undefined;
      }, 20_000);
      expect(JSON.parse(answered.slice(0, -4))).toMatchObject({ url: '/echo' });
      await eventually(async () => seen.bigOpen === 0, 20_000);
      expect(stalled.every((s) => !s.destroyed)).toBe(true);
    } finally {
      for (const s of stalled) s.destroy();
    }
  });

  it('zero-window HTTP/2 streams cannot pin them either', async () => {
    const sessions = Array.from({ length: 2 }, () => {
      const session = h2connect(`http://127.0.0.1:${gatehouse.port}`, { settings: { initialWindowSize: 0 } });
      session.on('error', () => {});
      return session;
    });
    try {
      for (const session of sessions) {
        for (let i = 0; i < 4; i++) {
          const stream = session.request({ ':path': '/small/big', ':authority': 'edge.test' });
          stream.on('error', () => {});
        }
      }
      await eventually(async () => seen.bigOpen >= 4, 10_000);
      await eventually(async () => {
        const reply = await run('curl', ['-sS', '--max-time', '6', '--http2-prior-knowledge', '-H', 'host: edge.test', '-w', ' %{http_code}', `http://127.0.0.1:${gatehouse.port}/small/echo`]).catch(() => undefined);
        return reply?.stdout.endsWith(' 200');
      }, 20_000);
      await eventually(async () => seen.bigOpen === 0, 20_000);
    } finally {
      for (const session of sessions) session.destroy();
    }
  });
});

describe.skipIf(missing.length > 0)('clients that stop reading, long route timeout (finding 4, pool fairness)', () => {
  it('while others wait for the upstream, a client that reads nothing gives its connection up long before the route timeout', async () => {
    // Route timeout 20 s: without fairness the stalled clients would hold all four connections
    // for 20 s each and a waiting request would get its 504 at 20 s.
    const stalled = Array.from({ length: 6 }, () => {
      const socket = netConnect(gatehouse.port, '127.0.0.1');
      socket.on('error', () => {});
      socket.write('GET /slow-small/big HTTP/1.1\r\nHost: edge.test\r\n\r\n');
      socket.pause();
      return socket;
    });
    try {
      await eventually(async () => seen.bigOpen >= 4, 10_000);
      const { stdout } = await run('curl', ['-sS', '--max-time', '15', '-H', 'host: edge.test', '-w', ' %{http_code}', `http://127.0.0.1:${gatehouse.port}/slow-small/waiting`]);
      expect(stdout.slice(-4)).toBe(' 200');
      expect(JSON.parse(stdout.slice(0, -4))).toMatchObject({ url: '/waiting' });
    } finally {
      for (const s of stalled) s.destroy();
    }
    await eventually(async () => seen.bigOpen === 0, 10_000);
  });

  it('with nobody waiting, a client that pauses reading for longer than that keeps its download', async () => {
    const got = await new Promise<number>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: gatehouse.port, path: '/slow-small/big', headers: { host: 'edge.test' } }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => {
          bytes += c.length;
          if (bytes > 8 * 1024 * 1024) {
            req.destroy();
            resolve(bytes);
          }
        });
        res.on('error', () => {});
        res.on('close', () => resolve(bytes));
        // Reads a little, then nothing for 3 s (longer than the contended limit), then on.
        res.pause();
        setTimeout(() => res.resume(), 3_000);
      });
      req.on('error', reject);
      req.end();
    });
    expect(got).toBeGreaterThan(8 * 1024 * 1024);
    await eventually(async () => seen.bigOpen === 0, 10_000);
  });
});

describe.skipIf(missing.length > 0)('pipelining (finding 18)', () => {
  it('a request pipelined after Connection: close: the first is answered in full, then the connection closes', async () => {
    const answer = await rawRequest(gatehouse.port, 'GET /first HTTP/1.1\r\nHost: edge.test\r\nConnection: close\r\n\r\nGET /second HTTP/1.1\r\nHost: edge.test\r\n\r\n', 10_000);
    const responses = answer.match(/^HTTP\/1\.1 \d+/gm) ?? [];
    expect(responses).toEqual(['HTTP/1.1 200']);
    const length = Number(/content-length: (\d+)/i.exec(answer)?.[1]);
    const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
    expect(body.length).toBe(length);
    expect(JSON.parse(body)).toMatchObject({ url: '/first' });
  });
});
