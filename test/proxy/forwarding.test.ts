// Route options, header handling and the gateway's own error responses (SPEC 3.2, 4, 7),
// through one real `gatehouse run` process.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send, type Reply } from '../support/http.ts';
import { refusedPort, startServer, type Echo, type TestServer } from '../support/upstream.ts';

let gw: GatehouseProcess;
let config: ConfigDir;
let special: TestServer;
/** Requests the special upstream received, by path (without query). */
const hits = new Map<string, number>();

function echo(req: IncomingMessage, res: ServerResponse, extraHeaders: Record<string, string> = {}): void {
  let bytes = 0;
  req.on('data', (c: Buffer) => (bytes += c.length));
  req.on('end', () => {
    const body: Echo = { method: req.method!, url: req.url!, headers: req.headers, bodyBytes: bytes, body: '', upstream: 'special' };
    res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'special', ...extraHeaders });
    res.end(JSON.stringify(body));
  });
}

/** One upstream whose behaviour depends on the path. */
function specialUpstream(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url!, 'http://upstream');
  const path = url.pathname;
  hits.set(path, (hits.get(path) ?? 0) + 1);
  if (path === '/slow') {
    const timer = setTimeout(() => res.end('slow done'), Number(url.searchParams.get('ms') ?? 2000));
    res.on('close', () => clearTimeout(timer));
  } else if (path.startsWith('/flaky/')) {
    // First attempt for each path fails; later ones succeed.
    req.resume();
    req.on('end', () => {
      if (hits.get(path) === 1) res.writeHead(500, { 'x-attempt': '1' }).end('first attempt fails');
      else res.writeHead(200, { 'x-attempt': String(hits.get(path)) }).end('ok');
    });
  } else if (path === '/err500') {
    res.writeHead(500, { 'content-type': 'application/problem+json', 'x-custom': 'kept' });
    res.end('{"error":"boom"}');
  } else if (path === '/reset') {
    req.socket.destroy();
  } else if (path === '/hop') {
    echo(req, res, { connection: 'keep-alive, x-resp-hop', 'keep-alive': 'timeout=5', 'x-resp-hop': 'secret', 'proxy-authenticate': 'Basic', 'x-kept': 'yes' });
  } else if (path === '/passthrough') {
    // Repeated headers, chunked body, status from the query.
    const status = Number(url.searchParams.get('status') ?? 200);
    res.writeHead(status, [['set-cookie', 'a=1; Path=/'], ['set-cookie', 'b=2; HttpOnly'], ['x-multi', 'one'], ['x-multi', 'two'], ['cache-control', 'no-store']].flat());
    if (status === 204 || status === 304 || req.method === 'HEAD') return void res.end();
    res.write('chunk-1,');
    setTimeout(() => res.end('chunk-2'), 20);
  } else if (path === '/cors/own') {
    echo(req, res, { 'access-control-allow-origin': '*', vary: 'accept-encoding' });
  } else if (path === '/hm') {
    echo(req, res, { 'x-resp-append': 'upstream', 'x-resp-replace': 'upstream', 'x-secret': 'hidden' });
  } else {
    echo(req, res);
  }
}

function get(host: string, path = '/', headers: Record<string, string> = {}, method = 'GET', body?: string): Promise<Reply> {
  return send(gw.url, { method, path, headers: { host, ...headers }, ...(body !== undefined ? { body } : {}) });
}

function echoOf(reply: Reply): Echo {
  expect(reply.status, reply.body).toBe(200);
  return JSON.parse(reply.body) as Echo;
}

const to = (upstream: string) => ({ single: { upstream: { name: upstream } } });

beforeAll(async () => {
  special = await startServer(specialUpstream);
  config = await makeConfigDir({
    'upstreams.yaml': [manifests.upstream('special', [{ addr: '127.0.0.1', port: special.port }]), manifests.upstream('refused', [{ addr: '127.0.0.1', port: await refusedPort() }])],
    'options.yaml': manifests.virtualService('options', {
      domains: ['opt.test'],
      routes: [
        { matchers: [{ prefix: '/auto' }], routeAction: to('special'), options: { autoHostRewrite: true } },
        { matchers: [{ prefix: '/old/' }], routeAction: to('special'), options: { prefixRewrite: '/new/' } },
        { matchers: [{ prefix: '/strip/' }], routeAction: to('special'), options: { prefixRewrite: '/' } },
        { matchers: [{ exact: '/exact-old' }], routeAction: to('special'), options: { prefixRewrite: '/exact-new' } },
        { matchers: [{ prefix: '/slow' }], routeAction: to('special'), options: { timeout: '300ms' } },
        { matchers: [{ prefix: '/flaky/' }], routeAction: to('special'), options: { retries: { retryOn: '5xx', numRetries: 2 } } },
        {
          matchers: [{ prefix: '/hm' }],
          routeAction: to('special'),
          options: {
            headerManipulation: {
              requestHeadersToAdd: [
                { header: { key: 'x-appended', value: 'gateway' } },
                { header: { key: 'x-replaced', value: 'gateway' }, append: false },
                { header: { key: 'x-new', value: 'gateway' }, append: false },
              ],
              requestHeadersToRemove: ['x-drop'],
              responseHeadersToAdd: [
                { header: { key: 'x-resp-append', value: 'gateway' }, append: true },
                { header: { key: 'x-resp-replace', value: 'gateway' }, append: false },
              ],
              responseHeadersToRemove: ['x-secret'],
            },
          },
        },
        { matchers: [{ prefix: '/cors-down' }], routeAction: to('refused'), options: { cors: { allowOrigin: ['https://app.example'] } } },
        {
          matchers: [{ prefix: '/cors' }],
          routeAction: to('special'),
          options: {
            cors: {
              allowOrigin: ['https://app.example'],
              allowOriginRegex: ['https://[a-z]+\\.trusted\\.example'],
              allowMethods: ['GET', 'POST'],
              allowHeaders: ['x-token'],
              exposeHeaders: ['x-upstream'],
              maxAge: '10m',
              allowCredentials: true,
            },
          },
        },
        { routeAction: to('special') },
      ],
    }),
    'errors.yaml': manifests.virtualService('errors', {
      domains: ['err.test'],
      routes: [
        { matchers: [{ prefix: '/refused' }], routeAction: to('refused') },
        { matchers: [{ prefix: '/slow' }], routeAction: to('special'), options: { timeout: '200ms' } },
        { matchers: [{ prefix: '/reset' }, { prefix: '/err500' }, { prefix: '/passthrough' }], routeAction: to('special') },
      ],
    }),
  });
  gw = await startGatehouse('run', ['--config-dir', config.path]);
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([special?.close(), config?.cleanup()]);
});

describe('route options', () => {
  it('autoHostRewrite sends the upstream host address as Host', async () => {
    expect(echoOf(await get('opt.test', '/auto')).headers.host).toBe('127.0.0.1');
    // Without it, the client's Host goes through.
    expect(echoOf(await get('opt.test:8080', '/plain')).headers.host).toBe('opt.test:8080');
  });

  it('prefixRewrite swaps the matched prefix and keeps the rest and the query', async () => {
    expect(echoOf(await get('opt.test', '/old/a/b?x=1&y=%20')).url).toBe('/new/a/b?x=1&y=%20');
    expect(echoOf(await get('opt.test', '/strip/a')).url).toBe('/a');
    // Exact matchers rewrite the whole path.
    expect(echoOf(await get('opt.test', '/exact-old?q=1')).url).toBe('/exact-new?q=1');
  });

  it('timeout: an upstream slower than the route timeout gets 504', async () => {
    const started = performance.now();
    const reply = await get('opt.test', '/slow?ms=3000');
    const elapsed = performance.now() - started;
    expect(reply.status).toBe(504);
    expect(reply.headers['x-gatehouse-error']).toBe('GH_UPSTREAM_TIMEOUT');
    expect(elapsed).toBeGreaterThanOrEqual(280);
    expect(elapsed).toBeLessThan(2500);
    // Within the timeout the response passes.
    const fast = await get('opt.test', '/slow?ms=10');
    expect(fast.status).toBe(200);
    expect(fast.body).toBe('slow done');
  });

  it('retries: a 5xx is retried for a GET and the retry answer is returned', async () => {
    const reply = await get('opt.test', '/flaky/get');
    expect(reply.status).toBe(200);
    expect(reply.headers['x-attempt']).toBe('2');
    expect(hits.get('/flaky/get')).toBe(2);
  });

  it('retries: a POST with a body is not retried; the 5xx goes to the client', async () => {
    const reply = await get('opt.test', '/flaky/post', { 'content-type': 'text/plain' }, 'POST', 'payload');
    expect(reply.status).toBe(500);
    expect(reply.body).toBe('first attempt fails');
    expect(hits.get('/flaky/post')).toBe(1);
  });

  it('headerManipulation: request headers added (append or replace) and removed', async () => {
    const seen = echoOf(await get('opt.test', '/hm', { 'x-appended': 'client', 'x-replaced': 'client', 'x-drop': 'bye', 'x-keep': 'me' }));
    expect(seen.headers['x-appended']).toBe('client, gateway');
    expect(seen.headers['x-replaced']).toBe('gateway');
    expect(seen.headers['x-new']).toBe('gateway');
    expect(seen.headers['x-drop']).toBeUndefined();
    expect(seen.headers['x-keep']).toBe('me');
  });

  it('headerManipulation: response headers added (append or replace) and removed', async () => {
    const reply = await get('opt.test', '/hm');
    expect(reply.status).toBe(200);
    expect(reply.headers['x-resp-append']).toBe('upstream, gateway');
    expect(reply.headers['x-resp-replace']).toBe('gateway');
    expect(reply.headers['x-secret']).toBeUndefined();
  });

  it('cors: a preflight from an allowed origin is answered by the gateway', async () => {
    const before = hits.get('/cors') ?? 0;
    for (const origin of ['https://app.example', 'https://eu.trusted.example']) {
      const reply = await get('opt.test', '/cors', { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-token' }, 'OPTIONS');
      expect(reply.status).toBe(200);
      expect(reply.headers['access-control-allow-origin']).toBe(origin);
      expect(reply.headers['access-control-allow-methods']).toBe('GET,POST');
      expect(reply.headers['access-control-allow-headers']).toBe('x-token');
      expect(reply.headers['access-control-max-age']).toBe('600');
      expect(reply.headers['access-control-allow-credentials']).toBe('true');
      expect(reply.body).toBe('');
    }
    expect(hits.get('/cors') ?? 0).toBe(before);
  });

  it('cors: a preflight from another origin gets no CORS headers', async () => {
    for (const origin of ['https://evil.example', 'https://eu.trusted.example.evil', 'https://x.y.trusted.example']) {
      const reply = await get('opt.test', '/cors', { origin, 'access-control-request-method': 'POST' }, 'OPTIONS');
      expect(reply.headers['access-control-allow-origin'], origin).toBeUndefined();
      expect(reply.headers['access-control-allow-methods']).toBeUndefined();
    }
  });

  it('cors: an actual request gets allow-origin and expose-headers on the upstream response', async () => {
    const reply = await get('opt.test', '/cors', { origin: 'https://app.example' });
    expect(reply.status).toBe(200);
    expect(reply.headers['x-upstream']).toBe('special');
    expect(reply.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(reply.headers['access-control-expose-headers']).toBe('x-upstream');
    expect(reply.headers['access-control-allow-credentials']).toBe('true');
    const other = await get('opt.test', '/cors', { origin: 'https://evil.example' });
    expect(other.status).toBe(200);
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
  });

  it("cors: the gateway's allow-origin replaces the upstream's own, and vary keeps both values", async () => {
    const reply = await get('opt.test', '/cors/own', { origin: 'https://app.example' });
    expect(reply.status).toBe(200);
    expect(reply.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(reply.headers.vary).toBe('accept-encoding, origin');
  });

  it("cors: the gateway's own error replies carry the CORS headers too, so a browser can read them", async () => {
    const reply = await get('opt.test', '/cors-down', { origin: 'https://app.example' });
    expect(reply.status).toBe(503);
    expect(reply.headers['x-gatehouse-error']).toBe('GH_UPSTREAM_UNAVAILABLE');
    expect(reply.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(reply.headers.vary).toBe('origin');
  });

  it('cors: OPTIONS without Access-Control-Request-Method is an ordinary request', async () => {
    expect(echoOf(await get('opt.test', '/cors', { origin: 'https://app.example' }, 'OPTIONS')).method).toBe('OPTIONS');
  });
});

describe('forwarded headers', () => {
  it('removes hop-by-hop request headers, including those named in Connection', async () => {
    const seen = echoOf(
      await get('opt.test', '/', {
        connection: 'x-hop-a, X-Hop-B, close',
        'x-hop-a': '1',
        'x-hop-b': '2',
        'keep-alive': 'timeout=5',
        'proxy-connection': 'keep-alive',
        te: 'trailers',
        'x-end-to-end': 'kept',
      }),
    );
    for (const name of ['x-hop-a', 'x-hop-b', 'keep-alive', 'proxy-connection', 'te']) expect(seen.headers[name], name).toBeUndefined();
    expect(String(seen.headers.connection ?? '')).not.toMatch(/x-hop/i);
    expect(seen.headers['x-end-to-end']).toBe('kept');
  });

  it('removes hop-by-hop response headers, including those named in Connection', async () => {
    const reply = await get('opt.test', '/hop');
    expect(reply.status).toBe(200);
    expect(reply.headers['x-kept']).toBe('yes');
    expect(reply.headers['x-resp-hop']).toBeUndefined();
    expect(reply.headers['proxy-authenticate']).toBeUndefined();
    expect(reply.headers['keep-alive']).not.toBe('timeout=5');
    expect(String(reply.headers.connection ?? '')).not.toMatch(/x-resp-hop/i);
  });

  it('appends the client address to x-forwarded-for and sets x-forwarded-proto', async () => {
    const first = echoOf(await get('opt.test', '/'));
    expect(first.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(first.headers['x-forwarded-proto']).toBe('http');
    const chained = echoOf(await get('opt.test', '/', { 'x-forwarded-for': '203.0.113.9, 10.0.0.1', 'x-forwarded-proto': 'https' }));
    expect(chained.headers['x-forwarded-for']).toBe('203.0.113.9, 10.0.0.1, 127.0.0.1');
    // The gateway speaks plain HTTP; a client cannot claim otherwise.
    expect(chained.headers['x-forwarded-proto']).toBe('http');
  });

  it('keeps the client x-request-id, or generates one', async () => {
    expect(echoOf(await get('opt.test', '/', { 'x-request-id': 'client-id-1' })).headers['x-request-id']).toBe('client-id-1');
    const a = echoOf(await get('opt.test', '/')).headers['x-request-id'] as string;
    const b = echoOf(await get('opt.test', '/')).headers['x-request-id'] as string;
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(b).toMatch(/^[0-9a-f-]{36}$/);
    expect(a).not.toBe(b);
  });

  it('streams a request body through unchanged', async () => {
    const body = 'x'.repeat(100_000);
    const seen = echoOf(await get('opt.test', '/upload', { 'content-type': 'text/plain' }, 'PUT', body));
    expect(seen.method).toBe('PUT');
    expect(seen.bodyBytes).toBe(100_000);
    expect(seen.headers['content-length']).toBe('100000');
  });
});

describe('gateway error responses (SPEC 7)', () => {
  async function expectLocalReply(reply: Reply, status: number, code: string): Promise<void> {
    expect(reply.status).toBe(status);
    expect(reply.headers['x-gatehouse-error']).toBe(code);
    expect(reply.headers['content-type']).toMatch(/^text\/plain/);
    expect(reply.body.length).toBeGreaterThan(0);
    expect(reply.body.length).toBeLessThan(200);
    expect(reply.headers['content-length']).toBe(String(Buffer.byteLength(reply.body)));
  }

  it('404 GH_NO_VIRTUAL_HOST when no domain matches', async () => {
    await expectLocalReply(await get('nowhere.test', '/'), 404, 'GH_NO_VIRTUAL_HOST');
    // A request without Host (HTTP/1.0) is no different.
    await expectLocalReply(await send(gw.url, { headers: { host: '' } }), 404, 'GH_NO_VIRTUAL_HOST');
  });

  it('404 GH_NO_ROUTE when the virtual host has no matching route', async () => {
    await expectLocalReply(await get('err.test', '/nothing-here'), 404, 'GH_NO_ROUTE');
  });

  it('503 GH_UPSTREAM_UNAVAILABLE when the upstream refuses connections', async () => {
    await expectLocalReply(await get('err.test', '/refused'), 503, 'GH_UPSTREAM_UNAVAILABLE');
    // Still 503 once the only host is ejected (it is tried anyway, there is no other).
    await expectLocalReply(await get('err.test', '/refused'), 503, 'GH_UPSTREAM_UNAVAILABLE');
  });

  it('503 GH_UPSTREAM_UNAVAILABLE when the upstream resets the connection', async () => {
    await expectLocalReply(await get('err.test', '/reset'), 503, 'GH_UPSTREAM_UNAVAILABLE');
  });

  it('504 GH_UPSTREAM_TIMEOUT when the upstream does not answer in time', async () => {
    await expectLocalReply(await get('err.test', '/slow?ms=5000'), 504, 'GH_UPSTREAM_TIMEOUT');
  });

  it('upstream responses pass through unchanged: repeated headers, chunked bodies, HEAD, 204, 304, 4xx', async () => {
    const ok = await get('err.test', '/passthrough');
    expect(ok.status).toBe(200);
    expect(ok.body).toBe('chunk-1,chunk-2');
    expect(ok.headers['transfer-encoding']).toBe('chunked');
    expect(ok.headers['set-cookie']).toEqual(['a=1; Path=/', 'b=2; HttpOnly']);
    expect(ok.headers['x-multi']).toBe('one, two');
    expect(ok.headers['cache-control']).toBe('no-store');
    const head = await get('err.test', '/passthrough', {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(head.headers['set-cookie']).toHaveLength(2);
    for (const status of [204, 304, 404, 429]) {
      const reply = await get('err.test', `/passthrough?status=${status}`);
      expect(reply.status).toBe(status);
      expect(reply.headers['x-gatehouse-error']).toBeUndefined();
      expect(reply.headers['set-cookie']).toHaveLength(2);
    }
  });

  it("an upstream's own 500 passes through unchanged", async () => {
    const reply = await get('err.test', '/err500');
    expect(reply.status).toBe(500);
    expect(reply.body).toBe('{"error":"boom"}');
    expect(reply.headers['content-type']).toBe('application/problem+json');
    expect(reply.headers['x-custom']).toBe('kept');
    expect(reply.headers['x-gatehouse-error']).toBeUndefined();
  });
});
