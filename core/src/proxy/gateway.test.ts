import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from '../config/manifest.ts';
import { ConfigStore, type ConfigSnapshot } from '../config/store.ts';
import type { Authorizer } from '../extauth/authorizer.ts';
import type { AuthDecision, CheckRequest } from '../extauth/step.ts';
import { closeGracefully, listen } from '../server/listen.ts';
import { Gateway, parseAbsoluteTarget } from './gateway.ts';
import { UpstreamRegistry } from './upstream/upstream-registry.ts';
import { createAccessLog, type AccessEntry, type AccessLog } from '../log/access-log.ts';

// The request path in-process: a real Gateway on a real listener, real upstream servers.

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** Resolves once `condition` holds (polled; the test's own timeout bounds it). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((r) => setTimeout(r, 5));
}

function send(port: number, path: string, headers: Record<string, string> = {}, method = 'GET', body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, headers: { host: 'gw.test', ...headers }, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function startUpstream(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; port: number }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

function stopServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((r) => server.close(() => r()));
}

/** Upstream requests seen, newest last. */
const seen: { url: string; headers: IncomingMessage['headers'] }[] = [];
const attempts = new Map<string, number>();
let echo: { server: Server; port: number };
let refusedPort: number;

/** Authorizer whose decision each test sets; records every CheckRequest. */
class TestAuthorizer implements Authorizer {
  readonly checks: CheckRequest[] = [];
  decide: (request: CheckRequest) => Promise<AuthDecision> = async () => ({ allowed: true, headersToSet: [], headersToRemove: [] });
  check(request: CheckRequest): Promise<AuthDecision> {
    this.checks.push(request);
    return this.decide(request);
  }
  async close(): Promise<void> {}
}

const logLines: Record<string, unknown>[] = [];
const logger = pino(
  { level: 'info' },
  new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) logLines.push(JSON.parse(line));
      done();
    },
  }),
);

function snapshotOf(...manifests: object[]): ConfigSnapshot {
  const { documents } = parseManifests('test.yaml', manifests.map((m) => stringify(m)).join('---\n'));
  const snapshot = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' }).load(documents);
  const rejected = snapshot.statuses.filter((s) => s.state === 'Rejected');
  if (rejected.length > 0) throw new Error(`test config rejected: ${JSON.stringify(rejected)}`);
  return snapshot;
}

const upstream = (name: string, ports: number[]) => ({ apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: ports.map((port) => ({ addr: '127.0.0.1', port })) } } });
const authConfig = { apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name: 'auth' }, spec: { configs: [{ basicAuth: { apr: { users: { u: { salt: 's', hashedPassword: 'h' } } } } }] } };
const to = (name: string) => ({ single: { upstream: { name } } });

function config(): ConfigSnapshot {
  return snapshotOf(
    upstream('echo', [echo.port]),
    upstream('half', [refusedPort, echo.port]),
    authConfig,
    { apiVersion: 'graphql.gatehouse.dev/v1beta1', kind: 'GraphQLApi', metadata: { name: 'api' }, spec: { executableSchema: { schemaDefinition: 'type Query { a: String }', executor: { remote: { upstreamRef: { name: 'echo' } } } } } },
    {
      apiVersion: 'gateway.gatehouse.dev/v1',
      kind: 'VirtualService',
      metadata: { name: 'vs' },
      spec: {
        virtualHost: {
          domains: ['gw.test'],
          options: { extauth: { configRef: { name: 'auth' } } },
          routes: [
            { name: 'public', matchers: [{ prefix: '/public' }], routeAction: to('echo'), options: { extauth: { disable: true } } },
            { name: 'retry-connect', matchers: [{ prefix: '/retry-connect' }], routeAction: to('half'), options: { extauth: { disable: true }, retries: { retryOn: 'connect-failure', numRetries: 1 } } },
            { name: 'per-try', matchers: [{ prefix: '/per-try' }], routeAction: to('echo'), options: { extauth: { disable: true }, retries: { retryOn: '5xx', numRetries: 1, perTryTimeout: '200ms' } } },
            { name: 'graphql', matchers: [{ prefix: '/graphql' }], graphqlApiRef: { name: 'api' }, options: { extauth: { disable: true } } },
            { name: 'protected', routeAction: to('echo') },
          ],
        },
      },
    },
  );
}

let gateway: Gateway;
let authorizer: TestAuthorizer;
let accessLogger: AccessLog;
let port: number;
let server: Server;

beforeAll(async () => {
  echo = await startUpstream((req, res) => {
    seen.push({ url: req.url!, headers: req.headers });
    const n = (attempts.get(req.url!) ?? 0) + 1;
    attempts.set(req.url!, n);
    req.resume();
    if (req.url!.startsWith('/per-try') && n === 1) return; // never answers the first try
    if (req.url!.endsWith('/slow')) return void setTimeout(() => res.end('slow done'), 300);
    res.setHeader('x-attempt', String(n));
    res.end(JSON.stringify({ url: req.url, headers: req.headers }));
  });
  const closed = await startUpstream(() => {});
  refusedPort = closed.port;
  await stopServer(closed.server);
  authorizer = new TestAuthorizer();
  // Access lines in JSON, as createAccessLog writes them to stdout.
  accessLogger = createAccessLog('gateway', { level: 'info', destination: { write: (line) => logLines.push(JSON.parse(Buffer.from(line).toString('utf8'))) } });
  gateway = new Gateway({ logger, upstreams: new UpstreamRegistry(), authorizer, accessLogger });
  gateway.update(config());
  ({ server, port } = await listen(gateway.handle, 0, '127.0.0.1'));
});

afterAll(async () => {
  await closeGracefully(server, 100);
  await gateway.close();
  await stopServer(echo.server);
});

afterEach(() => {
  authorizer.decide = async () => ({ allowed: true, headersToSet: [], headersToRemove: [] });
});

describe('parseAbsoluteTarget', () => {
  test.each([
    ['http://Example.com/a?b=1', { host: 'example.com', path: '/a?b=1' }],
    ['https://example.com:8443', { host: 'example.com:8443', path: '/' }],
    ['HTTP://example.com?x', { host: 'example.com', path: '/?x' }],
    ['http://[::1]:80/p', { host: '[::1]:80', path: '/p' }],
  ])('%s', (target, expected) => {
    expect(parseAbsoluteTarget(target)).toEqual(expected);
  });

  test.each(['*', 'example.com/a', 'ftp://example.com/', 'http:///nohost', 'http://user@example.com/'])('%s is not accepted', (target) => {
    expect(parseAbsoluteTarget(target)).toBeUndefined();
  });
});

describe('external auth on the request path (SPEC 4 step 2)', () => {
  test('sends a CheckRequest describing the request and the effective AuthConfig', async () => {
    const before = authorizer.checks.length;
    await send(port, '/orders?id=7', { 'X-Custom': 'v', 'x-request-id': 'rid-1' }, 'POST', 'body');
    const check = authorizer.checks[before]!;
    expect(check.attributes.context_extensions).toEqual({ config_id: 'default.auth', source_type: 'virtual_host', source_name: 'default.vs' });
    expect(check.attributes.request.http).toMatchObject({ id: 'rid-1', method: 'POST', path: '/orders?id=7', query: 'id=7', host: 'gw.test', scheme: 'http', protocol: 'HTTP/1.1' });
    expect(check.attributes.request.http.headers['x-custom']).toBe('v');
  });

  test('allowed: OK headers are set (overwrite or append) and removed headers dropped upstream', async () => {
    authorizer.decide = async () => ({
      allowed: true,
      headersToSet: [
        { key: 'X-User-Id', value: 'realm;alice' },
        { key: 'x-tags', value: 'added', append: true },
      ],
      headersToRemove: ['authorization'],
    });
    const reply = await send(port, '/allowed', { 'x-user-id': 'forged', 'x-tags': 'client', authorization: 'Basic abc' });
    expect(reply.status).toBe(200);
    const upstreamSaw = JSON.parse(reply.body).headers as Record<string, string>;
    expect(upstreamSaw['x-user-id']).toBe('realm;alice');
    expect(upstreamSaw['x-tags']).toBe('client,added');
    expect(upstreamSaw.authorization).toBeUndefined();
  });

  test('denied: the denial status, headers and body go to the client and nothing reaches the upstream', async () => {
    authorizer.decide = async () => ({ allowed: false, status: 401, headers: [{ key: 'www-authenticate', value: 'Basic realm=""' }, { key: 'content-length', value: '999' }], body: '' });
    const before = seen.length;
    const reply = await send(port, '/denied');
    expect(reply.status).toBe(401);
    expect(reply.headers['www-authenticate']).toBe('Basic realm=""');
    expect(reply.headers['content-length']).toBe('0');
    expect(reply.body).toBe('');
    const forbidden = await (async () => {
      authorizer.decide = async () => ({ allowed: false, status: 403, headers: [], body: 'nope' });
      return send(port, '/denied');
    })();
    expect(forbidden).toMatchObject({ status: 403, body: 'nope' });
    expect(seen.length).toBe(before);
  });

  test('an authorizer that throws fails closed with 403', async () => {
    authorizer.decide = async () => {
      throw new Error('broken authorizer');
    };
    const reply = await send(port, '/throws');
    expect(reply.status).toBe(403);
    expect(reply.headers['x-gatehouse-error']).toBe('GH_EXTAUTH_ERROR');
  });

  test('routes with auth disabled are not checked', async () => {
    const before = authorizer.checks.length;
    expect((await send(port, '/public')).status).toBe(200);
    expect(authorizer.checks.length).toBe(before);
  });

  test('without an authorizer, routes that need auth are denied (fail closed)', async () => {
    const bare = new Gateway({ logger, upstreams: new UpstreamRegistry(), accessLog: false });
    bare.update(config());
    const listening = await listen(bare.handle, 0, '127.0.0.1');
    const before = seen.length;
    expect((await send(listening.port, '/protected')).status).toBe(403);
    expect((await send(listening.port, '/public')).status).toBe(200);
    expect(seen.length).toBe(before + 1);
    await closeGracefully(listening.server, 100);
    await bare.close();
  });
});

describe('destinations and retries', () => {
  test('a graphqlApiRef route without a GraphQL subsystem answers 503', async () => {
    const reply = await send(port, '/graphql');
    expect(reply.status).toBe(503);
    expect(reply.headers['x-gatehouse-error']).toBe('GH_UPSTREAM_UNAVAILABLE');
  });

  test('connect-failure retries go to the next host', async () => {
    // Round-robin starts on the refusing host; the retry lands on the echo.
    for (let i = 0; i < 4; i++) expect((await send(port, `/retry-connect/${i}`)).status).toBe(200);
  });

  test('perTryTimeout abandons a hung try and retries', async () => {
    const reply = await send(port, '/per-try/1');
    expect(reply.status).toBe(200);
    expect(reply.headers['x-attempt']).toBe('2');
  });
});

describe('reloads and the access log', () => {
  test('a request in flight finishes on the config it started with', async () => {
    const inFlight = send(port, '/public/slow');
    await new Promise((r) => setTimeout(r, 50));
    // The new config no longer has the route or the upstream.
    gateway.update(snapshotOf(upstream('other', [refusedPort]), { apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name: 'vs' }, spec: { virtualHost: { domains: ['gw.test'], routes: [{ routeAction: to('other') }] } } }));
    const reply = await inFlight;
    expect(reply).toMatchObject({ status: 200, body: 'slow done' });
    expect((await send(port, '/public')).status).toBe(503);
    gateway.update(config());
    expect((await send(port, '/public')).status).toBe(200);
  });

  test('one access log line per request with method, path, status, duration, route and upstream', async () => {
    await send(port, '/public/logged?x=1', { 'x-request-id': 'log-1' }, 'PUT', 'b');
    await new Promise((r) => setTimeout(r, 20));
    accessLogger.flush();
    const lines = logLines.filter((l) => l.msg === 'access' && l.reqId === 'log-1');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ method: 'PUT', path: '/public/logged?x=1', status: 200, route: 'public', virtualHost: 'default/vs', upstream: `http://127.0.0.1:${echo.port}` });
    expect(typeof lines[0]!.durationMs).toBe('number');
  });

  test('access entries carry the request and response only for a log that reads them', async () => {
    // The default JSON log never reads them, and a queued entry holding them kept both alive
    // until it was encoded; format-string logs (readsMessages undefined) read headers and addresses.
    const kept: AccessEntry[] = [];
    const dropped: AccessEntry[] = [];
    const pair = await Promise.all(
      [{ write: (e: AccessEntry) => kept.push(e), flush() {} }, { write: (e: AccessEntry) => dropped.push(e), flush() {}, readsMessages: false }].map(async (log) => {
        const gw = new Gateway({ logger, upstreams: new UpstreamRegistry(), authorizer, accessLogger: log });
        gw.update(config());
        return { gw, ...(await listen(gw.handle, 0, '127.0.0.1')) };
      }),
    );
    try {
      for (const { port: p } of pair) expect((await send(p, '/public/entry', { 'x-request-id': 'entry-1' })).status).toBe(200);
      await until(() => kept.length > 0 && dropped.length > 0);
      expect(kept[0]).toMatchObject({ reqId: 'entry-1', status: 200, path: '/public/entry' });
      expect(kept[0]!.req?.headers['x-request-id']).toBe('entry-1');
      expect(kept[0]!.res?.statusCode).toBe(200);
      expect(dropped[0]).toMatchObject({ reqId: 'entry-1', status: 200, path: '/public/entry', route: 'public', upstream: `http://127.0.0.1:${echo.port}` });
      expect(dropped[0]!.req).toBeUndefined();
      expect(dropped[0]!.res).toBeUndefined();
    } finally {
      for (const { gw, server: s } of pair) {
        await closeGracefully(s, 100);
        await gw.close();
      }
    }
  });

  test('the access log line of a request auth allowed (and changed headers of) names its upstream', async () => {
    // Regression: the allowed request went on with a copy of its context, so the upstream the
    // forward recorded never reached the access log.
    authorizer.decide = async () => ({ allowed: true, headersToSet: [{ key: 'x-user-id', value: 'alice' }], headersToRemove: [] });
    const reply = await send(port, '/allowed/logged', { 'x-request-id': 'log-auth-1' });
    expect(reply.status).toBe(200);
    expect((JSON.parse(reply.body) as { headers: Record<string, string> }).headers['x-user-id']).toBe('alice');
    await new Promise((r) => setTimeout(r, 20));
    accessLogger.flush();
    const lines = logLines.filter((l) => l.msg === 'access' && l.reqId === 'log-auth-1');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ path: '/allowed/logged', status: 200, upstream: `http://127.0.0.1:${echo.port}` });
  });

  test('a client that disconnects aborts the upstream request', async () => {
    const aborted = new Promise<void>((resolve) => {
      echo.server.once('request', (req: IncomingMessage) => req.socket.once('close', () => resolve()));
    });
    const req = request({ host: '127.0.0.1', port, path: '/public/slow', headers: { host: 'gw.test' }, agent: false });
    req.on('error', () => {});
    req.end();
    await new Promise((r) => setTimeout(r, 50));
    req.destroy();
    await aborted;
  });
});
