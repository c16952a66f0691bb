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
  grpcCancelled: [] as string[],
  /** HTTP/1.1 `/hold` requests open at the upstream now, and those that ended by the gateway going away. */
  h1Open: 0,
  h1Aborted: 0,
  h1Started: 0,
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
      req.resume();
      // Never answers: only the gateway going away ends it.
      res.on('close', () => {
        seen.h1Open--;
        if (!res.writableEnded) seen.h1Aborted++;
      });
      return;
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
    Late(call: grpc.ServerUnaryCall<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) {
      setTimeout(() => cb(null, { text: 'late', n: 0 }), 150);
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
              { matchers: [{ prefix: '/tls/' }], ...to('tls-h1', { options: { prefixRewrite: '/' } }) },
              { matchers: [{ prefix: '/authbody/' }], ...to('app', bodyToAuth) },
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
      // Each call is reset after the gateway has sent it on and before the upstream's answer (150 ms) arrives.
      for (let batch = 0; batch < 5; batch++) {
        const streams = Array.from({ length: 30 }, (_, i) => {
          const stream = session.request({ ':method': 'POST', ':path': '/edge.Calls/Late', ':authority': 'edge.test', 'content-type': 'application/grpc', te: 'trailers' });
          stream.on('error', () => {});
          stream.end(grpcFrame(`late-${batch}-${i}`));
          return stream;
        });
        await sleep(40);
        for (const stream of streams) stream.close(h2.NGHTTP2_CANCEL);
        await sleep(200);
      }
    } finally {
      session.close();
    }
    // The late answers have all arrived by now; none may have thrown.
    await sleep(300);
    expect(gatehouse.logs.filter((l) => l.code === 'GH_UNHANDLED')).toEqual([]);
    expect(await unhandledErrors()).toBe(before);
    expect(gatehouse.child.exitCode).toBeNull();
    expect(gatehouse.child.pid).toBe(pid);
    const client = grpcClient();
    try {
      const res = await new Promise<Msg>((resolve, reject) => client.Late({ text: 'still', n: 1 }, new grpc.Metadata(), {}, (e, r) => (e ? reject(e) : resolve(r!))));
      expect(res).toEqual({ text: 'late', n: 0 });
    } finally {
      client.close();
    }
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
    const abortedBefore = seen.h1Aborted;
    const req = httpRequest({ host: '127.0.0.1', port: gatehouse.port, path: '/hold/h1', headers: { host: 'edge.test' } });
    req.on('error', () => {});
    req.end();
    await eventually(async () => seen.h1Open === 1, 10_000);
    req.destroy();
    await eventually(async () => seen.h1Aborted - abortedBefore === 1 && seen.h1Open === 0, 5_000);
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
