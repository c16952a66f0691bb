/**
 * passThroughAuth in full (Gloo's PassThroughGrpc / PassThroughHttp) through a real
 * `gatehouse run`: real ext_authz gRPC servers (plain and TLS with an openssl-made CA), a real
 * HTTP auth server, a real upstream.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PassThroughStep } from '../../core/src/extauth/pass-through/pass-through-step.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { refusedPort, startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { authConfig, authorizationService, captureLogger, checkRequest, startEnvoyAuthServer } from './support.ts';

type Seen = { attributes: { request: { http: { headers: Record<string, string> } }; metadata_context?: { filter_metadata?: Record<string, { fields: Record<string, unknown> }> } } };

/** A certificate authority and a server certificate for localhost/127.0.0.1, from the openssl CLI. */
async function makeCerts(): Promise<{ dir: string; ca: string; cert: string; key: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-pt-tls-'));
  const f = (name: string) => join(dir, name);
  const run = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  run(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-subj', '/CN=gatehouse-test-ca', '-days', '2']);
  run(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=localhost']);
  await writeFile(f('ext.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  run(['x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.pem'), '-days', '2', '-extfile', f('ext.cnf')]);
  return { dir, ca: f('ca.pem'), cert: f('server.pem'), key: f('server.key') };
}

/** An HTTP auth server: records each request and answers as `reply` says. */
async function startHttpAuthServer(reply: (req: IncomingMessage, body: string) => { status: number; headers?: Record<string, string>; body?: string }) {
  const seen: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c)).on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const answer = reply(req, body);
      res.writeHead(answer.status, answer.headers ?? {}).end(answer.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const structValue = (value: unknown): unknown => {
  const v = value as Record<string, unknown>;
  if ('stringValue' in v) return v.stringValue;
  if ('numberValue' in v) return v.numberValue;
  if ('boolValue' in v) return v.boolValue;
  if ('structValue' in v) return Object.fromEntries(Object.entries((v.structValue as { fields: Record<string, unknown> }).fields).map(([k, x]) => [k, structValue(x)]));
  if ('listValue' in v) return ((v.listValue as { values?: unknown[] }).values ?? []).map(structValue);
  return null;
};
const fromStruct = (struct: { fields: Record<string, unknown> } | undefined) => (struct ? Object.fromEntries(Object.entries(struct.fields).map(([k, v]) => [k, structValue(v)])) : undefined);

let echo: TestServer;
let plain: Awaited<ReturnType<typeof startEnvoyAuthServer>>;
let secure: { address: string; requests: unknown[]; close(): Promise<void> };
let httpAuth: Awaited<ReturnType<typeof startHttpAuthServer>>;
let certs: Awaited<ReturnType<typeof makeCerts>>;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;
let refused: number;

const ok = { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-checked-by', value: 'grpc' } }] } };

beforeAll(async () => {
  echo = await startEcho('echo');
  plain = await startEnvoyAuthServer(() => ok);
  certs = await makeCerts();
  // The same Check service over TLS.
  const server = new grpc.Server();
  const requests: unknown[] = [];
  server.addService(authorizationService().service, { Check: (call: grpc.ServerUnaryCall<unknown, object>, callback: grpc.sendUnaryData<object>) => (requests.push(call.request), callback(null, ok)) } as grpc.UntypedServiceImplementation);
  const creds = grpc.ServerCredentials.createSsl(null, [{ cert_chain: await readFile(certs.cert), private_key: await readFile(certs.key) }]);
  const tlsPort = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', creds, (e, p) => (e ? reject(e) : resolve(p))));
  secure = { address: `localhost:${tlsPort}`, requests, close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())) };
  httpAuth = await startHttpAuthServer((req, body): { status: number; headers?: Record<string, string>; body?: string } => {
    if (req.headers['x-verdict'] === 'deny') return { status: 401, headers: { 'www-authenticate': 'Bearer realm="team"', 'x-internal-reason': 'bad token' } };
    if (req.headers['x-verdict'] === 'broken') return { status: 503 };
    if (req.url === '/session') return { status: 200, headers: { 'x-session-refreshed': 'yes', 'x-internal': 'not for the client', 'set-cookie': ['sid=new; HttpOnly; Path=/', 'csrf=t0k; Path=/'] as never } };
    return { status: 200, headers: { 'x-user': 'carol', 'x-not-allowed': 'leak' }, body: JSON.stringify({ state: { from: 'http', seen: JSON.parse(body || '{}') as unknown } }) };
  });
  refused = await refusedPort();
  const route = (prefix: string, config: string) => ({ matchers: [{ prefix }], options: { extauth: { configRef: { name: config } } }, routeAction: { single: { upstream: { name: 'echo' } } } });
  const gloo = (name: string, configs: object[]) => ({ ...authConfig(name, configs), apiVersion: 'enterprise.gloo.solo.io/v1' });
  dir = await makeConfigDir({
    'auth.yaml': [
      // Gloo's passThrough gRPC guide's AuthConfig shape (connectionTimeout), with a config block.
      gloo('grpc', [{ passThroughAuth: { grpc: { address: plain.address, connectionTimeout: '3s' }, config: { customKey: 'value', nested: { list: [1, true, 'x'] } } } }]),
      gloo('down', [{ passThroughAuth: { grpc: { address: `127.0.0.1:${refused}` } } }]),
      gloo('down-allow', [{ passThroughAuth: { grpc: { address: `127.0.0.1:${refused}` }, failureModeAllow: true } }]),
      gloo('tls', [{ passThroughAuth: { grpc: { address: secure.address, tlsConfig: {} } } }]),
      gloo('tls-missing', [{ passThroughAuth: { grpc: { address: secure.address } } }]),
      gloo('http', [
        {
          name: 'http',
          passThroughAuth: {
            http: {
              url: `${httpAuth.url}/check/v1`,
              request: { allowedHeaders: ['authorization', 'x-verdict'], headersToAdd: { 'x-from': 'gatehouse' }, passThroughState: true, passThroughBody: false },
              response: { allowedUpstreamHeaders: ['x-user'], allowedClientHeadersOnDenied: ['www-authenticate'], readStateFromResponse: true },
              connectionTimeout: '2s',
            },
            config: { tier: 'gold' },
          },
        },
        // The next step: the gRPC server sees the State the HTTP server returned.
        { name: 'grpc', passThroughAuth: { grpc: { address: plain.address } } },
      ]),
      gloo('http-session', [
        {
          passThroughAuth: {
            http: { url: `${httpAuth.url}/session`, response: { allowedClientHeadersOnSuccess: ['X-Session-Refreshed', 'set-cookie'] } },
          },
        },
      ]),
      gloo('http-down-allow', [{ passThroughAuth: { http: { url: `http://127.0.0.1:${refused}/` }, failureModeAllow: true } }]),
    ],
    'routes.yaml': [
      { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: echo.port }] } } },
      {
        apiVersion: 'gateway.gatehouse.dev/v1',
        kind: 'VirtualService',
        metadata: { name: 'api' },
        spec: { virtualHost: { domains: ['*'], routes: ['grpc', 'down', 'down-allow', 'tls', 'tls-missing', 'http', 'http-session', 'http-down-allow'].map((name) => route(`/${name}/`, name)) } },
      },
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false'], { env: { GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: certs.ca } });
});

afterAll(async () => {
  await gatehouse?.stop();
  await Promise.all([echo?.close(), plain?.close(), secure?.close(), httpAuth?.close()]);
  await dir?.cleanup();
  if (certs) await rm(certs.dir, { recursive: true, force: true });
});

async function get(path: string, headers: Record<string, string> = {}) {
  const response = await fetch(gatehouse.url + path, { headers });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

describe('passThroughAuth.grpc (Gloo) through gatehouse run', () => {
  it('Gloo\'s guide AuthConfig loads and works; the server gets Envoy\'s pseudo-headers and the step\'s config in filter_metadata', async () => {
    const before = plain.requests.length;
    const r = await get('/grpc/items?page=2');
    expect(r.status).toBe(200);
    expect((JSON.parse(r.body) as Echo).headers['x-checked-by']).toBe('grpc');
    const seen = plain.requests[before] as Seen;
    expect(seen.attributes.request.http.headers).toMatchObject({ ':authority': new URL(gatehouse.url).host, ':method': 'GET', ':path': '/grpc/items?page=2' });
    expect(fromStruct(seen.attributes.metadata_context?.filter_metadata?.['solo.auth.passthrough.config'])).toEqual({ customKey: 'value', nested: { list: [1, true, 'x'] } });
  });

  it('an unreachable server denies (403), or allows with failureModeAllow', async () => {
    expect((await get('/down/x')).status).toBe(403);
    const allowed = await get('/down-allow/x');
    expect(allowed.status).toBe(200);
    await gatehouse.waitForLog((line) => String(line.msg).includes('passThroughAuth allowed the request (failureModeAllow)'));
  });

  it('tlsConfig: TLS to the server, verified against the trust store (a CA made by openssl); without it the TLS server cannot be reached', async () => {
    const before = secure.requests.length;
    expect((await get('/tls/x')).status).toBe(200);
    expect(secure.requests.length).toBe(before + 1);
    expect((await get('/tls-missing/x')).status).toBe(403);
  });
});

describe('passThroughAuth.http (Gloo) through gatehouse run', () => {
  it('POSTs to the URL (path kept) with only the allowed headers, headersToAdd, and {state, config}; 200 allows with only allowedUpstreamHeaders; its State reaches the next step', async () => {
    const before = httpAuth.seen.length;
    const grpcBefore = plain.requests.length;
    const r = await get('/http/x', { authorization: 'Bearer t0ken', 'x-secret': 'not for the auth server' });
    expect(r.status).toBe(200);
    const seen = httpAuth.seen[before]!;
    expect(seen.method).toBe('POST');
    expect(seen.url).toBe('/check/v1');
    expect(seen.headers.authorization).toBe('Bearer t0ken');
    expect(seen.headers['x-from']).toBe('gatehouse');
    expect(seen.headers['x-secret']).toBeUndefined();
    expect(JSON.parse(seen.body)).toEqual({ state: {}, config: { tier: 'gold' } });
    const upstream = (JSON.parse(r.body) as Echo).headers;
    expect(upstream['x-user']).toBe('carol');
    expect(upstream['x-not-allowed']).toBeUndefined();
    // The gRPC step after it received the State the HTTP server answered with.
    const next = plain.requests[grpcBefore] as Seen;
    expect(fromStruct(next.attributes.metadata_context?.filter_metadata?.['solo.auth.passthrough'])).toEqual({ from: 'http', seen: { state: {}, config: { tier: 'gold' } } });
  });

  it("an allowedUpstreamHeaders header is the auth server's alone: the client's own copy never reaches the upstream (issue 24 finding 8)", async () => {
    const upstream = (JSON.parse((await get('/http/x', { 'x-user': 'admin' })).body) as Echo).headers;
    expect(upstream['x-user']).toBe('carol');
  });

  it("allowedClientHeadersOnSuccess: a 200 answer's named headers reach the client's response (every set-cookie on its own line), no others, never the upstream", async () => {
    const r = await get('/http-session/x');
    expect(r.status).toBe(200);
    expect(r.headers.get('x-session-refreshed')).toBe('yes');
    expect(r.headers.getSetCookie()).toEqual(['sid=new; HttpOnly; Path=/', 'csrf=t0k; Path=/']);
    expect(r.headers.get('x-internal')).toBeNull();
    // Without the option (the 'http' step), nothing of the answer reaches the client.
    expect((await get('/http/x')).headers.get('x-user')).toBeNull();
    const upstream = (JSON.parse(r.body) as Echo).headers;
    expect(upstream['x-session-refreshed']).toBeUndefined();
    expect(upstream['set-cookie']).toBeUndefined();
  });

  it('a 4xx denies with that status and only allowedClientHeadersOnDenied; a 5xx is a failure (403)', async () => {
    const denied = await get('/http/x', { 'x-verdict': 'deny' });
    expect(denied.status).toBe(401);
    expect(denied.headers.get('www-authenticate')).toBe('Bearer realm="team"');
    expect(denied.headers.get('x-internal-reason')).toBeNull();
    expect((await get('/http/x', { 'x-verdict': 'broken' })).status).toBe(403);
    expect((await get('/http-down-allow/x')).status).toBe(200);
  });
});

describe('passThroughAuth.grpc retryPolicy', () => {
  it('retries a server that cannot be reached yet, with back-off, within the step deadline', async () => {
    const port = await refusedPort();
    const { logger } = captureLogger();
    const step = new PassThroughStep(
      { grpc: { address: `127.0.0.1:${port}`, connectionTimeout: '6s', retryPolicy: { numRetries: 8, retryBackOff: { baseInterval: '200ms', maxInterval: '1s' } } } },
      { name: 'retrying', logger },
    );
    const noRetry = new PassThroughStep({ grpc: { address: `127.0.0.1:${port}`, connectionTimeout: '6s' } }, { name: 'once', logger });
    try {
      expect((await noRetry.authorize(checkRequest('default.x'))).allowed).toBe(false);
      // The server comes up 400 ms after the check started.
      const late = new grpc.Server();
      late.addService(authorizationService().service, { Check: (_call: unknown, callback: grpc.sendUnaryData<object>) => callback(null, ok) } as grpc.UntypedServiceImplementation);
      setTimeout(() => late.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), () => {}), 400);
      const decision = await step.authorize(checkRequest('default.x'));
      expect(decision).toMatchObject({ allowed: true, headersToSet: [{ key: 'x-checked-by', value: 'grpc' }] });
      await new Promise<void>((resolve) => late.tryShutdown(() => resolve()));
    } finally {
      await step.close();
      await noRetry.close();
    }
  });
});
