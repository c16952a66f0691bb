// gRPC-Web through `gatehouse run` (docs/grpc-web.md): a real gRPC-Web client
// (@connectrpc/connect-node's createGrpcWebTransport, HTTP/1.1) calls a real grpc-js server
// behind the gateway, as Envoy's grpc_web filter bridges it: unary, server streaming, errors
// (trailers-only and in trailers), the base64 text variant, CORS preflight, the Gateway's
// `grpcWeb.disable`, and hostile input (truncated and oversized frames, bad base64, a client
// that cancels mid-stream): the gateway answers and keeps serving (SPEC 4.1).
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect, createServer as createH2cServer, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { create, createFileRegistry, fromBinary, toBinary, type DescMessage, type DescService } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcWebTransport } from '@connectrpc/connect-node';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually } from '../support/http.ts';
import { freePort } from '../support/ports.ts';
import { refusedPort } from '../support/upstream.ts';

const PROTO = fileURLToPath(new URL('./fixtures/grpc-web/echo.proto', import.meta.url));
const GUIDE = fileURLToPath(new URL('./fixtures/grpc-web/gloo-grpc-web-guide.yaml', import.meta.url));
const definition = loadSync(PROTO, { keepCase: false, defaults: true });
// The client's descriptors come from the same .proto: proto-loader keeps the compiled FileDescriptorProto.
const fileProto = fromBinary(FileDescriptorProtoSchema, (definition['gatehouse.test.EchoRequest'] as unknown as { fileDescriptorProtos: Buffer[] }).fileDescriptorProtos[0]!);
const registry = createFileRegistry(fileProto, () => undefined);
const EchoService = registry.getService('gatehouse.test.Echo') as DescService;
const EchoRequest = registry.getMessage('gatehouse.test.EchoRequest') as DescMessage;
const EchoReply = registry.getMessage('gatehouse.test.EchoReply') as DescMessage;

interface Req {
  text: string;
  count: number;
  code: number;
  afterHeaders: boolean;
  forever: boolean;
}

let gw: GatehouseProcess;
let config: ConfigDir;
let server: grpc.Server;
/** An HTTP/2 upstream that is not a gRPC server: it answers with an HTML page. */
let html: Http2Server;
let port: number;
let plainPort: number;
/** Server-streaming calls the server saw cancelled. */
let cancelled = 0;
let streaming = 0;

function trailer(): grpc.Metadata {
  const m = new grpc.Metadata();
  m.set('x-detail', 'from-server');
  return m;
}

beforeAll(async () => {
  server = new grpc.Server();
  const service = (grpc.loadPackageDefinition(definition) as unknown as { gatehouse: { test: { Echo: grpc.ServiceClientConstructor } } }).gatehouse.test.Echo.service;
  server.addService(service, {
    say(call: grpc.ServerUnaryCall<Req, unknown>, callback: grpc.sendUnaryData<unknown>) {
      const r = call.request;
      if (r.code !== 0) {
        if (r.afterHeaders) call.sendMetadata(new grpc.Metadata());
        return callback({ code: r.code, details: `failed: ${r.text}`, metadata: trailer() });
      }
      callback(null, { text: `hello ${r.text}`, index: 0 }, trailer());
    },
    count(call: grpc.ServerWritableStream<Req, unknown>) {
      const r = call.request;
      streaming++;
      call.on('cancelled', () => cancelled++);
      if (r.forever) {
        let i = 0;
        const timer = setInterval(() => {
          if (call.cancelled) return clearInterval(timer);
          call.write({ text: 'tick', index: i++ });
        }, 20);
        call.on('cancelled', () => clearInterval(timer));
        return;
      }
      for (let i = 0; i < r.count; i++) call.write({ text: `${r.text} ${i}`, index: i });
      if (r.code !== 0) return void call.emit('error', { code: r.code, details: `stream failed: ${r.text}`, metadata: trailer() });
      call.end(trailer());
    },
  });
  const grpcPort = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, p) => (error ? reject(error) : resolve(p))));
  const downPort = await refusedPort();
  html = createH2cServer((req, res) => {
    req.resume();
    res.writeHead(req.url.includes('Missing') ? 404 : 200, { 'content-type': 'text/html' });
    res.end('<html><body>not a gRPC server</body></html>');
  });
  await new Promise<void>((resolve) => html.listen(0, '127.0.0.1', resolve));
  const htmlPort = (html.address() as AddressInfo).port;
  [port, plainPort] = await Promise.all([freePort(), freePort()]);
  const guide = parse(await readFile(GUIDE, 'utf8')) as { spec: object };
  const gateway = (name: string, bindPort: number, options: object) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'Gateway', metadata: { name, namespace: 'default' }, spec: { bindAddress: '127.0.0.1', bindPort, httpGateway: { options } } });
  config = await makeConfigDir({
    'upstream.yaml': [
      { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'echo', namespace: 'default' }, spec: { useHttp2: true, static: { hosts: [{ addr: '127.0.0.1', port: grpcPort }] } } },
      { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'down', namespace: 'default' }, spec: { useHttp2: true, static: { hosts: [{ addr: '127.0.0.1', port: downPort }] } } },
      { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'html', namespace: 'default' }, spec: { useHttp2: true, static: { hosts: [{ addr: '127.0.0.1', port: htmlPort }] } } },
    ],
    'vs.yaml': {
      apiVersion: 'gateway.solo.io/v1',
      kind: 'VirtualService',
      metadata: { name: 'echo', namespace: 'default' },
      spec: {
        virtualHost: {
          domains: ['*'],
          options: { cors: { allowOrigin: ['https://app.example'], allowHeaders: ['content-type', 'x-grpc-web', 'x-user-agent', 'grpc-timeout'], allowMethods: ['POST'], exposeHeaders: ['grpc-status', 'grpc-message'], maxAge: '600' } },
          routes: [
            { matchers: [{ prefix: '/', headers: [{ name: 'x-target', value: 'down' }] }], routeAction: { single: { upstream: { name: 'down', namespace: 'default' } } } },
            { matchers: [{ prefix: '/', headers: [{ name: 'x-target', value: 'html' }] }], routeAction: { single: { upstream: { name: 'html', namespace: 'default' } } } },
            // The body read whole first (Envoy's buffer filter), then decoded from base64 for a text call.
            { matchers: [{ prefix: '/', headers: [{ name: 'x-buffered', value: 'yes' }] }], options: { bufferPerRoute: { buffer: { maxRequestBytes: 100_000 } } }, routeAction: { single: { upstream: { name: 'echo', namespace: 'default' } } } },
            { matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo', namespace: 'default' } } } },
          ],
        },
      },
    },
    // Gloo's default (grpcWeb on) on one listener, `disable` on the other: the Gateway of Gloo's gRPC-Web guide, on a free port.
    'gw.yaml': [gateway('web', port, {}), { ...guide, spec: { ...guide.spec, bindPort: plainPort } }],
  });
  gw = await startGatehouse('run', ['--config-dir', config.path], { timeoutMs: 30_000 });
});

afterAll(async () => {
  await gw?.stop();
  server?.forceShutdown();
  html?.close();
  await config?.cleanup();
});

function client(onPort = port) {
  return createClient(EchoService, createGrpcWebTransport({ baseUrl: `http://127.0.0.1:${onPort}`, httpVersion: '1.1' }));
}

type AnyClient = any;

async function expectAlive(): Promise<void> {
  const reply = await (client() as AnyClient).say({ text: 'still here' });
  expect(reply.text).toBe('hello still here');
}

/** One gRPC-Web frame. */
function frame(flag: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

/** Frames of a gRPC-Web body: data frames and the trailer frame's text. */
function parseFrames(body: Buffer): { messages: Buffer[]; trailers: string | undefined } {
  const messages: Buffer[] = [];
  let trailers: string | undefined;
  let at = 0;
  while (at + 5 <= body.length) {
    const flag = body[at]!;
    const length = body.readUInt32BE(at + 1);
    const payload = body.subarray(at + 5, at + 5 + length);
    if (flag & 0x80) trailers = payload.toString('latin1');
    else messages.push(payload);
    at += 5 + length;
  }
  expect(at).toBe(body.length);
  return { messages, trailers };
}

interface Raw {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

function post(path: string, headers: Record<string, string>, body: Buffer | string, onPort = port): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: onPort, path, method: 'POST', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.setTimeout(15_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

const message = (fields: Partial<Req>) => Buffer.from(toBinary(EchoRequest, create(EchoRequest, fields)));

describe('gRPC-Web (Envoy grpc_web, on by default as in Gloo)', () => {
  it('unary: a real gRPC-Web client gets the reply and the trailers', async () => {
    const trailers = new Headers();
    const reply = await (client() as AnyClient).say({ text: 'web' }, { onTrailer: (t: Headers) => t.forEach((v, k) => trailers.set(k, v)) });
    expect(reply.text).toBe('hello web');
    expect(trailers.get('x-detail')).toBe('from-server');
  });

  it('server streaming: every message in order, then the status', async () => {
    const got: { text: string; index: number }[] = [];
    for await (const r of (client() as AnyClient).count({ text: 'n', count: 50 })) got.push({ text: r.text, index: r.index });
    expect(got).toEqual(Array.from({ length: 50 }, (_, i) => ({ text: `n ${i}`, index: i })));
  });

  it('errors: trailers-only and after headers both reach the client with their code and message', async () => {
    for (const afterHeaders of [false, true]) {
      const error = await (client() as AnyClient).say({ text: 'x', code: Code.NotFound, afterHeaders }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, `afterHeaders=${afterHeaders}`).toBeInstanceOf(ConnectError);
      expect((error as ConnectError).code).toBe(Code.NotFound);
      expect((error as ConnectError).rawMessage).toBe('failed: x');
      expect((error as ConnectError).metadata.get('x-detail')).toBe('from-server');
    }
    // A stream that fails after messages: the messages, then the error in the trailer frame.
    const got: number[] = [];
    const streamed = await (async () => {
      for await (const r of (client() as AnyClient).count({ text: 's', count: 3, code: Code.ResourceExhausted })) got.push(r.index);
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(got).toEqual([0, 1, 2]);
    expect((streamed as ConnectError).code).toBe(Code.ResourceExhausted);
  });

  it('the gateway\'s own answers (upstream down) are gRPC-Web too: the client reads UNAVAILABLE', async () => {
    const error = await (client() as AnyClient).say({ text: 'x' }, { headers: { 'x-target': 'down' } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as ConnectError).code).toBe(Code.Unavailable);
    const raw = await post('/gatehouse.test.Echo/Say', { 'content-type': 'application/grpc-web-text', 'x-target': 'down' }, frame(0, message({ text: 'x' })).toString('base64'));
    expect([raw.headers['content-type'], raw.headers['grpc-status']]).toEqual(['application/grpc-web-text+proto', '14']);
  });

  it('an upstream that answers with something other than gRPC: its HTTP status as a gRPC status, its body dropped', async () => {
    const missing = await (client() as AnyClient).say({ text: 'x' }, { headers: { 'x-target': 'html' } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    // HTTP 200 with an HTML page: UNKNOWN (Envoy's mapping of a 200 that is not gRPC).
    expect((missing as ConnectError).code).toBe(Code.Unknown);
    expect((missing as ConnectError).rawMessage).toMatch(/upstream answered HTTP 200 \(text\/html\), not gRPC/);
    const raw = await post('/gatehouse.test.Missing/Say', { 'content-type': 'application/grpc-web+proto', 'x-target': 'html' }, frame(0, message({ text: 'x' })));
    expect([raw.status, raw.headers['content-type'], raw.headers['grpc-status'], raw.body.length]).toEqual([200, 'application/grpc-web+proto', '12', 0]);
  });

  it('the wire format: binary and base64 text bodies, content types and the trailer frame', async () => {
    const body = frame(0, message({ text: 'raw' }));
    const binary = await post('/gatehouse.test.Echo/Say', { 'content-type': 'application/grpc-web+proto', 'x-grpc-web': '1' }, body);
    expect(binary.status).toBe(200);
    expect(binary.headers['content-type']).toBe('application/grpc-web+proto');
    const frames = parseFrames(binary.body);
    expect(fromBinary(EchoReply, frames.messages[0]!)).toMatchObject({ text: 'hello raw' });
    expect(frames.trailers).toMatch(/^grpc-status: 0\r\n/m);
    expect(frames.trailers).toMatch(/x-detail: from-server\r\n/);

    // Text: the request in base64, in two separately padded pieces (as browsers' clients send it).
    const encoded = body.subarray(0, 4).toString('base64') + body.subarray(4).toString('base64');
    const text = await post('/gatehouse.test.Echo/Say', { 'content-type': 'application/grpc-web-text', accept: 'application/grpc-web-text' }, encoded);
    expect(text.status).toBe(200);
    expect(text.headers['content-type']).toBe('application/grpc-web-text+proto');
    expect(text.body.toString('latin1')).toMatch(/^[A-Za-z0-9+/]+=*$/);
    const decoded = parseFrames(Buffer.from(text.body.toString('latin1'), 'base64'));
    expect(fromBinary(EchoReply, decoded.messages[0]!)).toMatchObject({ text: 'hello raw' });
    expect(decoded.trailers).toMatch(/grpc-status: 0\r\n/);

    // The same text call on a route that buffers the body first: the decoder reads it after the buffer filter.
    const buffered = await post('/gatehouse.test.Echo/Say', { 'content-type': 'application/grpc-web-text', 'x-buffered': 'yes' }, encoded);
    expect(fromBinary(EchoReply, parseFrames(Buffer.from(buffered.body.toString('latin1'), 'base64')).messages[0]!)).toMatchObject({ text: 'hello raw' });
    const over = await post('/gatehouse.test.Echo/Say', { 'content-type': 'application/grpc-web-text', 'x-buffered': 'yes' }, Buffer.alloc(150_000, 'A'));
    // Over the buffer limit: the gateway's 413 as a gRPC-Web status (RESOURCE_EXHAUSTED or the 413's mapping), never a hang.
    expect(over.headers['content-type']).toBe('application/grpc-web-text+proto');
    expect(over.headers['grpc-status']).toBeDefined();
    expect(over.headers['grpc-status']).not.toBe('0');

    // Server streaming in text.
    const stream = await post('/gatehouse.test.Echo/Count', { 'content-type': 'application/grpc-web-text+proto' }, frame(0, message({ text: 't', count: 20 })).toString('base64'));
    const streamed = parseFrames(Buffer.from(stream.body.toString('latin1'), 'base64'));
    expect(streamed.messages.map((m) => (fromBinary(EchoReply, m) as unknown as { index: number }).index)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it('over HTTP/2 (h2c) as well: the messages, then the trailer frame, in DATA frames', async () => {
    const session = connect(`http://127.0.0.1:${port}`);
    try {
      const { headers, body } = await new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        const stream = session.request({ ':method': 'POST', ':path': '/gatehouse.test.Echo/Count', 'content-type': 'application/grpc-web+proto', 'x-grpc-web': '1' });
        let head: Record<string, unknown> = {};
        const chunks: Buffer[] = [];
        stream.on('response', (h) => (head = h));
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => resolve({ headers: head, body: Buffer.concat(chunks) }));
        stream.on('error', reject);
        stream.end(frame(0, message({ text: 'h2', count: 5 })));
      });
      expect([headers[':status'], headers['content-type']]).toEqual([200, 'application/grpc-web+proto']);
      const frames = parseFrames(body);
      expect(frames.messages.map((m) => (fromBinary(EchoReply, m) as unknown as { text: string }).text)).toEqual(['h2 0', 'h2 1', 'h2 2', 'h2 3', 'h2 4']);
      expect(frames.trailers).toMatch(/grpc-status: 0\r\n/);
    } finally {
      session.close();
    }
  });

  it('a CORS preflight for a gRPC-Web call is answered by the CORS filter', async () => {
    const reply = await new Promise<Raw>((resolve, reject) => {
      const req = httpRequest(
        { host: '127.0.0.1', port, path: '/gatehouse.test.Echo/Say', method: 'OPTIONS', agent: false, headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,x-grpc-web,x-user-agent' } },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.alloc(0) }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(reply.status).toBe(200);
    expect(reply.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(String(reply.headers['access-control-allow-headers'])).toContain('x-grpc-web');
    // The actual call carries the exposed headers.
    const call = await post('/gatehouse.test.Echo/Say', { 'content-type': 'application/grpc-web+proto', origin: 'https://app.example' }, frame(0, message({ text: 'c' })));
    expect(call.headers['access-control-expose-headers']).toContain('grpc-status');
  });

  it('the Gateway of Gloo\'s gRPC-Web guide (grpcWeb.disable) passes gRPC-Web through untranslated (the gRPC server refuses it)', async () => {
    const error = await (client(plainPort) as AnyClient).say({ text: 'off' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConnectError);
    // Translated, the same call succeeds on the other listener.
    await expectAlive();
  });
});

describe('gRPC-Web hostile input', () => {
  it('a truncated frame, a frame claiming 4 GB, and a body cut inside a frame header get a gRPC error, not a hang', async () => {
    const whole = frame(0, message({ text: 'cut' }));
    const truncated = await post('/gatehouse.test.Echo/Say', { 'content-type': 'application/grpc-web+proto' }, whole.subarray(0, whole.length - 2));
    const huge = Buffer.concat([Buffer.from([0, 0xff, 0xff, 0xff, 0xff]), Buffer.alloc(64, 1)]);
    const oversized = await post('/gatehouse.test.Echo/Say', { 'content-type': 'application/grpc-web+proto' }, huge);
    const header = await post('/gatehouse.test.Echo/Say', { 'content-type': 'application/grpc-web+proto' }, Buffer.from([0, 0, 0]));
    for (const reply of [truncated, oversized, header]) {
      // The status is in the headers (trailers-only) or in the trailer frame; it is never OK.
      const status = reply.headers['grpc-status'] ?? /grpc-status: (\d+)/.exec(parseFrames(reply.body).trailers ?? '')?.[1];
      expect(status).toBeDefined();
      expect(status).not.toBe('0');
    }
    // Over grpc-js's 4 MB receive limit.
    expect(oversized.headers['grpc-status']).toBe('8');
    await expectAlive();
  });

  it('bad base64 in a text request: the call fails, the log names it, the gateway keeps serving', async () => {
    for (const body of ['!!!!AAAA', 'AAAAA', 'AA=A']) {
      const reply = await post('/gatehouse.test.Echo/Say', { 'content-type': 'application/grpc-web-text' }, body);
      const status = reply.headers['grpc-status'] ?? /grpc-status: (\d+)/.exec(parseFrames(Buffer.from(reply.body.toString('latin1'), 'base64')).trailers ?? '')?.[1];
      // The upstream call is cancelled: the gateway answers UNAVAILABLE, in gRPC-Web's form.
      expect([status, reply.headers['content-type']], body).toEqual(['14', 'application/grpc-web-text+proto']);
    }
    await gw.waitForLog((l) => l.code === 'GH_GRPC_WEB_BAD_REQUEST');
    await expectAlive();
  });

  it('a client that cancels mid-stream: the upstream call is cancelled too', async () => {
    const before = cancelled;
    const startedBefore = streaming;
    const abort = new AbortController();
    let seen = 0;
    const outcome = await (async () => {
      for await (const _ of (client() as AnyClient).count({ text: 'f', forever: true }, { signal: abort.signal })) {
        if (++seen === 3) abort.abort();
      }
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(seen).toBe(3);
    expect((outcome as ConnectError).code).toBe(Code.Canceled);
    expect(streaming).toBe(startedBefore + 1);
    await eventually(async () => cancelled > before);
    await expectAlive();
  });

  it('many concurrent calls, some cancelled at once, leave nothing behind', async () => {
    const calls = Array.from({ length: 40 }, async (_, i) => {
      const abort = new AbortController();
      if (i % 2 === 0) setImmediate(() => abort.abort());
      try {
        for await (const _ of (client() as AnyClient).count({ text: 'c', count: 20 }, { signal: abort.signal })) {
          // read all
        }
        return 'ok';
      } catch (error) {
        return (error as ConnectError).code === Code.Canceled ? 'cancelled' : `error ${(error as Error).message}`;
      }
    });
    const results = await Promise.all(calls);
    expect(results.filter((r) => r !== 'ok' && r !== 'cancelled')).toEqual([]);
    expect(results.filter((r) => r === 'ok').length).toBeGreaterThanOrEqual(20);
    await expectAlive();
  });
});
