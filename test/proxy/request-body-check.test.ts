/**
 * What the auth server receives when a route asks for the body (SPEC 5.3 "Request body"), seen
 * by a real ext_authz server built from Envoy's protos: behind `gatehouse run` (a
 * passThroughAuth step, so the body crosses the in-process engine and then gRPC) and as the
 * `--extauth-address` of `gatehouse gateway` (the remote authorizer). Also what Envoy users
 * rely on: `x-envoy-auth-partial-body` true/false, `size`, a 413 the client can read, GraphQL
 * routes and empty bodies that do not hang.
 */
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envoyAuthClient, startEnvoyAuthServer } from '../extauth/support.ts';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startBodyRecorder } from '../support/upstream.ts';

/** 100 000 bytes that are not valid UTF-8: only an exact byte copy matches. */
const binary = Buffer.from(Array.from({ length: 100_000 }, (_, i) => (i * 7 + 3) & 0xff));
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** A CheckRequest's http attributes as the recorder decodes them (defaults filled in). */
interface CheckedHttp {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  raw_body: Buffer;
  size: string;
}


let upstream: Awaited<ReturnType<typeof startBodyRecorder>>;
let recorder: Awaited<ReturnType<typeof startEnvoyAuthServer>>;
let config: ConfigDir;
const checked = (): CheckedHttp => (recorder.requests.at(-1) as { attributes: { request: { http: CheckedHttp } } }).attributes.request.http;

beforeAll(async () => {
  upstream = await startBodyRecorder('upstream ok');
  // Allows everything, except that `x-deny` gets a 403 with a body.
  recorder = await startEnvoyAuthServer((req) =>
    req.attributes.request.http.headers['x-deny'] ? { status: { code: 7 }, denied_response: { status: { code: 403 }, body: 'denied' } } : { status: { code: 0 }, ok_response: {} },
  );
  const up = { routeAction: { single: { upstream: { name: 'up' } } } };
  const body = (requestBody: object) => ({ options: { extauth: { requestBody } } });
  config = await makeConfigDir({
    'body.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.authConfig('recorded', [{ passThroughAuth: { grpc: { address: recorder.address } } }]),
      manifests.graphqlApi('hello', {
        schemaDefinition: 'type Query { hello: String @resolve(name: "hello") }',
        executor: { local: { resolutions: { hello: { mockResolver: { syncResponse: 'world' } } } } },
      }),
      manifests.virtualService('body', {
        domains: ['*'],
        // The AuthConfig comes from the virtual host; each route adds its own requestBody.
        options: { extauth: { configRef: { name: 'recorded' } } },
        routes: [
          { matchers: [{ prefix: '/bytes/' }], ...body({ maxRequestBytes: 200_000, packAsBytes: true }), ...up },
          { matchers: [{ prefix: '/text/' }], ...body({ maxRequestBytes: 200_000 }), ...up },
          { matchers: [{ prefix: '/small/' }], ...body({ maxRequestBytes: 1000, packAsBytes: true }), ...up },
          { matchers: [{ prefix: '/partial/' }], ...body({ maxRequestBytes: 1000, allowPartialMessage: true, packAsBytes: true }), ...up },
          { matchers: [{ prefix: '/graphql' }], ...body({ maxRequestBytes: 10_000 }), graphqlApiRef: { name: 'hello' } },
          { matchers: [{ prefix: '/' }], ...up },
        ],
      }),
    ],
  });
});

afterAll(async () => {
  await upstream?.close();
  await recorder?.close();
  await config?.cleanup();
});

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request on a fresh connection; `chunked` sends the body in 7000-byte writes without content-length. */
function send(base: string, method: string, path: string, body: Buffer | undefined, headers: Record<string, string> = {}, chunked = false): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(new URL(path, base), { method, agent: false, headers: { ...headers, ...(body && !chunked ? { 'content-length': String(body.length) } : {}) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path}: no answer within 10 s`)));
    req.on('error', reject);
    if (body && chunked) {
      for (let at = 0; at < body.length; at += 7000) req.write(body.subarray(at, at + 7000));
      req.end();
    } else req.end(body);
  });
}

/** A raw HTTP/1.1 connection: what the server sent so far, and whether it closed the connection. */
function rawConnection(port: number): { socket: Socket; received: () => string; closed: Promise<number> } {
  const socket = connect(port, '127.0.0.1');
  const opened = Date.now();
  let data = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => (data += chunk));
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now() - opened)));
  return { socket, received: () => data, closed };
}

const until = async (predicate: () => boolean, what: string, timeoutMs = 5_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe.each([
  ['gatehouse run, passThroughAuth step', 'run'],
  ['gatehouse gateway --extauth-address', 'gateway'],
] as const)('the CheckRequest body fields (%s)', (_name, shape) => {
  let gatehouse: GatehouseProcess;
  const post = (path: string, body: Buffer, headers: Record<string, string> = {}, chunked = false) => send(gatehouse.url, 'POST', path, body, headers, chunked);

  beforeAll(async () => {
    // The remote authorizer talks to the recorder directly: it gets the gateway's own CheckRequest.
    const auth = shape === 'run' ? [] : ['--extauth-address', recorder.address];
    gatehouse = await startGatehouse(shape, ['--config-dir', config.path, '--access-log', 'false', '--extauth-timeout', '3s', ...auth]);
  });

  afterAll(async () => {
    await gatehouse?.stop();
  });

  it('packAsBytes: raw_body holds the exact 100 KB, size and partial=false are set, the upstream gets identical bytes (content-length and chunked)', async () => {
    for (const chunked of [false, true]) {
      const reply = await post('/bytes/hook', binary, { 'content-type': 'application/octet-stream' }, chunked);
      expect(reply.status, `chunked=${chunked}`).toBe(200);
      const http = checked();
      expect(Buffer.from(http.raw_body).equals(binary)).toBe(true);
      expect(http.body).toBe('');
      expect(http.size).toBe(String(binary.length));
      expect(http.headers['x-envoy-auth-partial-body']).toBe('false');
      expect(upstream.seen.at(-1)).toMatchObject({ path: '/bytes/hook', bytes: binary.length, sha256: sha(binary) });
      // The check's header never goes upstream.
      expect(upstream.seen.at(-1)!.headers['x-envoy-auth-partial-body']).toBeUndefined();
    }
  });

  it('without packAsBytes the body is a UTF-8 string in body', async () => {
    const text = Buffer.from('{"héllo":"wörld ✓"}');
    expect((await post('/text/x', text, { 'content-type': 'application/json' })).status).toBe(200);
    expect(checked().body).toBe(text.toString('utf8'));
    expect(checked().raw_body.length).toBe(0);
    expect(upstream.seen.at(-1)).toMatchObject({ bytes: text.length, sha256: sha(text) });
  });

  it('allowPartialMessage: the first maxRequestBytes, x-envoy-auth-partial-body: true; the upstream still gets every byte', async () => {
    for (const chunked of [false, true]) {
      expect((await post('/partial/x', binary, {}, chunked)).status).toBe(200);
      expect(Buffer.from(checked().raw_body).equals(binary.subarray(0, 1000))).toBe(true);
      expect(checked().headers['x-envoy-auth-partial-body']).toBe('true');
      expect(upstream.seen.at(-1)).toMatchObject({ bytes: binary.length, sha256: sha(binary) });
    }
  });

  it('a client cannot claim the partial mark: the gateway sets it', async () => {
    expect((await post('/small/x', binary.subarray(0, 10), { 'x-envoy-auth-partial-body': 'true' })).status).toBe(200);
    expect(checked().headers['x-envoy-auth-partial-body']).toBe('false');
  });

  it('413 GH_BODY_TOO_LARGE the client can read, for a 4 MB body declared or chunked; neither auth nor the upstream is called; the gateway keeps serving', async () => {
    const big = Buffer.alloc(4 * 1024 * 1024, 'a');
    const before = { checks: recorder.requests.length, upstream: upstream.seen.length };
    for (const chunked of [false, true]) {
      const reply = await post('/small/x', big, {}, chunked);
      expect(reply.status, `chunked=${chunked}`).toBe(413);
      expect(reply.headers['x-gatehouse-error']).toBe('GH_BODY_TOO_LARGE');
    }
    expect(recorder.requests.length).toBe(before.checks);
    expect(upstream.seen.length).toBe(before.upstream);
    expect((await post('/small/x', binary.subarray(0, 10))).status).toBe(200);
  });

  it('413 at once for a declared body that never finishes, and the connection is closed about a second later (not held open)', async () => {
    const conn = rawConnection(gatehouse.port);
    conn.socket.write('POST /small/x HTTP/1.1\r\nhost: t\r\ncontent-length: 100000000\r\n\r\n' + 'a'.repeat(5000));
    await until(() => conn.received().includes('\r\n\r\n'), 'the 413');
    expect(conn.received()).toMatch(/^HTTP\/1\.1 413 /);
    expect(conn.received()).toContain('x-gatehouse-error: GH_BODY_TOO_LARGE');
    // The client stalls mid-body: the gateway closes after its linger (1 s), far before any request timeout.
    const openFor = await Promise.race([conn.closed, new Promise<number>((r) => setTimeout(() => r(-1), 5_000))]);
    conn.socket.destroy();
    expect(openFor).toBeGreaterThan(900);
    expect(openFor).toBeLessThan(4_000);
  });

  it('a denied partial body is discarded: the keep-alive connection serves the next request', async () => {
    const conn = rawConnection(gatehouse.port);
    const head = `POST /partial/x HTTP/1.1\r\nhost: t\r\nx-deny: 1\r\ncontent-length: ${binary.length}\r\n\r\n`;
    conn.socket.write(Buffer.concat([Buffer.from(head), binary]));
    await until(() => conn.received().includes('denied'), 'the denial');
    expect(conn.received()).toMatch(/^HTTP\/1\.1 403 /);
    const before = upstream.seen.length;
    conn.socket.write('GET /bytes/next HTTP/1.1\r\nhost: t\r\n\r\n');
    await until(() => conn.received().includes('upstream ok'), 'the second answer on the same connection');
    conn.socket.destroy();
    expect(upstream.seen.length).toBe(before + 1);
    expect(upstream.seen.at(-1)!.path).toBe('/bytes/next');
  });

  it('a client that leaves mid-body is never checked nor forwarded, and the gateway keeps serving', async () => {
    const before = { checks: recorder.requests.length, upstream: upstream.seen.length };
    const conn = rawConnection(gatehouse.port);
    conn.socket.write(`POST /bytes/left HTTP/1.1\r\nhost: t\r\ncontent-length: ${binary.length}\r\n\r\n`);
    conn.socket.write(binary.subarray(0, 30_000));
    await new Promise((r) => setTimeout(r, 100));
    conn.socket.destroy();
    await new Promise((r) => setTimeout(r, 100));
    expect(recorder.requests.length).toBe(before.checks);
    expect(upstream.seen.length).toBe(before.upstream);
    expect((await post('/bytes/after', binary)).status).toBe(200);
  });

  it('a GET on a requestBody route is checked as before: no body fields, no partial mark', async () => {
    expect((await send(gatehouse.url, 'GET', '/bytes/x', undefined)).status).toBe(200);
    const http = checked();
    expect(http.method).toBe('GET');
    expect(http.raw_body.length + http.body.length).toBe(0);
    expect(http.headers['x-envoy-auth-partial-body']).toBeUndefined();
  });

  it('an empty chunked body is forwarded and answered, not left hanging', async () => {
    expect((await post('/bytes/empty', Buffer.alloc(0), {}, true)).status).toBe(200);
    expect(upstream.seen.at(-1)).toMatchObject({ path: '/bytes/empty', bytes: 0 });
  });

  it('a GraphQL route gets its POST body after the check (which saw the query)', async () => {
    const query = Buffer.from(JSON.stringify({ query: '{ hello }' }));
    for (const chunked of [false, true]) {
      const reply = await post('/graphql', query, { 'content-type': 'application/json' }, chunked);
      expect(reply.status, `chunked=${chunked}`).toBe(200);
      expect(JSON.parse(reply.body)).toEqual({ data: { hello: 'world' } });
      expect(checked().body).toBe(query.toString());
    }
    // An empty body is a GraphQL 400, not a request that never ends.
    const empty = await post('/graphql', Buffer.alloc(0), { 'content-type': 'application/json' }, true);
    expect(empty.status).toBe(400);
  });
});

describe('gatehouse extauth hands raw_body on', () => {
  let extauth: GatehouseProcess;

  beforeAll(async () => {
    extauth = await startGatehouse('extauth', ['--config-dir', config.path, '--host', '127.0.0.1']);
  });

  afterAll(async () => {
    await extauth?.stop();
  });

  it('raw_body from an Envoy-proto gRPC client reaches the passThroughAuth server byte for byte, with body and size', async () => {
    const client = envoyAuthClient(`127.0.0.1:${extauth.port}`);
    try {
      const response = await client.check({
        attributes: {
          request: { http: { method: 'POST', path: '/hook', host: 'hooks.test', scheme: 'https', headers: { 'x-envoy-auth-partial-body': 'false' }, raw_body: binary, size: String(binary.length) } },
          context_extensions: { config_id: 'default.recorded' },
        },
      });
      expect(response.status.code).toBe(0);
      expect(Buffer.from(checked().raw_body).equals(binary)).toBe(true);
      expect(checked().size).toBe(String(binary.length));
      await client.check({
        attributes: { request: { http: { method: 'POST', path: '/hook', host: 'hooks.test', scheme: 'https', headers: {}, body: 'plain ✓' } }, context_extensions: { config_id: 'default.recorded' } },
      });
      expect(checked().body).toBe('plain ✓');
      expect(checked().raw_body.length).toBe(0);
    } finally {
      client.close();
    }
  });
});
