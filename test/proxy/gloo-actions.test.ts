/**
 * Gloo route actions through a real `gatehouse run` (issue 15 item 1, part): directResponseAction,
 * redirectAction (Envoy's location rules) and weighted routeAction.multi, in Gloo's own shapes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, startServer, type Echo, type TestServer } from '../support/upstream.ts';

let flaky: TestServer;
const flakyCalls = new Map<string, number>();
let blue: TestServer;
let green: TestServer;
let grey: TestServer;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  [blue, green, grey] = await Promise.all([startEcho('blue'), startEcho('green'), startEcho('grey')]);
  // Answers 429 to the first two tries of each path, then 200.
  flaky = await startServer((req, res) => {
    const n = (flakyCalls.get(req.url!) ?? 0) + 1;
    flakyCalls.set(req.url!, n);
    res.writeHead(n <= 2 ? 429 : 200, { 'content-type': 'text/plain' }).end(`try ${n}`);
  });
  const upstream = (name: string, port: number) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name, namespace: 'gloo-system' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } } });
  const ref = (name: string) => ({ upstream: { name, namespace: 'gloo-system' } });
  dir = await makeConfigDir({
    'config.yaml': [
      upstream('blue', blue.port),
      upstream('green', green.port),
      upstream('grey', grey.port),
      upstream('flaky', flaky.port),
      { apiVersion: 'gloo.solo.io/v1', kind: 'UpstreamGroup', metadata: { name: 'colors', namespace: 'gloo-system' }, spec: { destinations: [{ weight: 1, destination: { upstream: { name: 'blue' } } }, { weight: 1, destination: { upstream: { name: 'green' } } }, { weight: 0, destination: { upstream: { name: 'grey' } } }] } },
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'upstream-creds', namespace: 'gloo-system' }, stringData: { 'x-api-token': 's3cr3t' } },
      {
        apiVersion: 'gateway.solo.io/v1',
        kind: 'VirtualService',
        metadata: { name: 'shop', namespace: 'gloo-system' },
        spec: {
          virtualHost: {
            domains: ['shop.test'],
            options: { cors: { allowOrigin: ['https://app.test'], allowMethods: ['GET'], maxAge: '86400' } },
            routes: [
              { matchers: [{ prefix: '/private' }], routeAction: { single: ref('blue') }, options: { cors: { disableForRoute: true } } },
              { matchers: [{ exact: '/teapot' }], directResponseAction: { status: 418, body: "I'm a teapot" } },
              { matchers: [{ exact: '/gone' }], directResponseAction: { status: 410 } },
              { matchers: [{ prefix: '/secure' }], redirectAction: { httpsRedirect: true } },
              { matchers: [{ prefix: '/moved' }], redirectAction: { hostRedirect: 'new.shop.test', responseCode: 'FOUND', stripQuery: true } },
              { matchers: [{ prefix: '/old' }], redirectAction: { prefixRewrite: '/new', responseCode: 'PERMANENT_REDIRECT' } },
              { matchers: [{ exact: '/home' }], redirectAction: { pathRedirect: '/index.html?from=home', portRedirect: 8081 } },
              { matchers: [{ prefix: '/retry-429' }], routeAction: { single: ref('flaky') }, options: { retries: { retryOn: 'retriable-status-codes', retriableStatusCodes: [429], numRetries: 3, retryBackOff: { baseInterval: '10ms', maxInterval: '50ms' } } } },
              { matchers: [{ prefix: '/no-retry-429' }], routeAction: { single: ref('flaky') }, options: { retries: { retryOn: '5xx', numRetries: 3 } } },
              { matchers: [{ prefix: '/rx/' }], routeAction: { single: ref('blue') }, options: { regexRewrite: { pattern: { regex: '^/rx/([a-z]+)/([0-9]+)$' }, substitution: '/items/\\2/\\1' } } },
              { matchers: [{ prefix: '/strip' }], routeAction: { single: ref('blue') }, options: { prefixRewrite: '', hostRewrite: 'internal.example' } },
              {
                matchers: [{ prefix: '/dynamic' }],
                routeAction: { single: ref('blue') },
                options: {
                  headerManipulation: {
                    requestHeadersToAdd: [
                      { header: { key: 'x-client', value: '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%' } },
                      { header: { key: 'x-tenant-copy', value: 'tenant=%REQ(x-tenant)% via %PROTOCOL% at 100%%' } },
                      { header: { key: 'x-started', value: '%START_TIME%' } },
                      { headerSecretRef: { name: 'upstream-creds', namespace: 'gloo-system' } },
                    ],
                    responseHeadersToAdd: [{ header: { key: 'x-echo-tenant', value: '%REQ(x-tenant)%' } }],
                  },
                },
              },
              { matchers: [{ prefix: '/group' }], routeAction: { upstreamGroup: { name: 'colors', namespace: 'gloo-system' } } },
              { matchers: [{ prefix: '/canary' }], routeAction: { multi: { destinations: [{ weight: 3, destination: ref('blue') }, { weight: 1, destination: ref('green') }, { weight: 0, destination: ref('grey') }] } } },
              // Gloo's header-manipulation guide: headers per weighted destination, on top of the route's.
              {
                matchers: [{ prefix: '/per-destination' }],
                options: { headerManipulation: { requestHeadersToAdd: [{ header: { key: 'x-route', value: 'canary' } }], responseHeadersToAdd: [{ header: { key: 'x-served-by', value: 'route' } }] } },
                routeAction: {
                  multi: {
                    destinations: [
                      { weight: 1, destination: ref('blue'), options: { headerManipulation: { requestHeadersToAdd: [{ header: { key: 'x-dest', value: 'blue' } }], requestHeadersToRemove: ['x-remove-me'] } } },
                      { weight: 1, destination: ref('green'), options: { headerManipulation: { requestHeadersToAdd: [{ header: { key: 'x-dest', value: 'green' } }], responseHeadersToAdd: [{ header: { key: 'x-served-by', value: 'green' }, append: false }] } } },
                    ],
                  },
                },
              },
            ],
          },
        },
      },
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
});

afterAll(async () => {
  await gatehouse?.stop();
  await Promise.all([blue?.close(), green?.close(), grey?.close(), flaky?.close()]);
  await dir?.cleanup();
});

const get = (path: string, host = 'shop.test:8080') => send(gatehouse.url, { path, headers: { host } });

describe('directResponseAction', () => {
  it('answers with the configured status and body, as a configured answer (no x-gatehouse-error)', async () => {
    const teapot = await get('/teapot');
    expect(teapot.status).toBe(418);
    expect(teapot.body).toBe("I'm a teapot");
    expect(teapot.headers['x-gatehouse-error']).toBeUndefined();
    const gone = await get('/gone');
    expect(gone.status).toBe(410);
    expect(gone.headers['content-length']).toBe('0');
  });
});

describe('redirectAction (Envoy location rules)', () => {
  it('httpsRedirect: 301 to https, the port dropped, path and query kept', async () => {
    const r = await get('/secure/cart?id=7');
    expect(r.status).toBe(301);
    expect(r.headers.location).toBe('https://shop.test/secure/cart?id=7');
  });
  it('hostRedirect with FOUND and stripQuery', async () => {
    const r = await get('/moved/a?b=1');
    expect(r.status).toBe(302);
    expect(r.headers.location).toBe('http://new.shop.test:8080/moved/a');
  });
  it('prefixRewrite replaces the matched prefix (308)', async () => {
    const r = await get('/old/items/1?x=y');
    expect(r.status).toBe(308);
    expect(r.headers.location).toBe('http://shop.test:8080/new/items/1?x=y');
  });
  it('pathRedirect with its own query, and portRedirect', async () => {
    const r = await get('/home?ignored=1');
    expect(r.status).toBe(301);
    expect(r.headers.location).toBe('http://shop.test:8081/index.html?from=home');
  });
});

describe('routeAction.multi', () => {
  it('spreads requests in proportion to the weights; weight 0 gets none', async () => {
    const counts: Record<string, number> = {};
    for (let i = 0; i < 400; i++) {
      const r = await get('/canary');
      const name = (JSON.parse(r.body) as Echo).upstream;
      counts[name] = (counts[name] ?? 0) + 1;
    }
    // Binomial(400, 3/4): mean 300, sd ~8.7; the bounds are ~9 sd wide.
    expect(counts.blue).toBeGreaterThan(220);
    expect(counts.blue).toBeLessThan(380);
    expect(counts.green).toBeGreaterThan(20);
    expect(counts.grey).toBeUndefined();
  });
});

describe('routeAction.multi with per-destination options.headerManipulation', () => {
  it('each destination adds its own headers after the route\'s, in both directions', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 40; i++) {
      const r = await send(gatehouse.url, { path: '/per-destination', headers: { host: 'shop.test:8080', 'x-remove-me': 'yes' } });
      const echo = JSON.parse(r.body) as Echo;
      seen.add(echo.upstream);
      expect(echo.headers['x-dest']).toBe(echo.upstream);
      expect(echo.headers['x-route']).toBe('canary');
      expect(echo.headers['x-remove-me']).toBe(echo.upstream === 'blue' ? undefined : 'yes');
      expect(r.headers['x-served-by']).toBe(echo.upstream === 'green' ? 'green' : 'route');
    }
    expect([...seen].sort()).toEqual(['blue', 'green']);
  });
});

describe('retries (Envoy retry_on)', () => {
  it('retriable-status-codes retries the listed statuses with back-off; 5xx does not retry a 429', async () => {
    const retried = await get('/retry-429');
    expect(retried.status).toBe(200);
    expect(retried.body).toBe('try 3');
    expect(flakyCalls.get('/retry-429')).toBe(3);
    const passed = await get('/no-retry-429');
    expect(passed.status).toBe(429);
    expect(flakyCalls.get('/no-retry-429')).toBe(1);
  });
});

describe('rewrites', () => {
  it('regexRewrite substitutes capture groups (Envoy \\1 syntax); the query is kept', async () => {
    const echo = JSON.parse((await get('/rx/books/42?x=1')).body) as Echo;
    expect(echo.url).toBe('/items/42/books?x=1');
  });
  it('prefixRewrite "" removes the prefix (a bare prefix becomes "/"); hostRewrite sets the upstream Host', async () => {
    const echo = JSON.parse((await get('/strip/a/b')).body) as Echo;
    expect(echo.url).toBe('/a/b');
    expect(echo.headers.host).toBe('internal.example');
    expect((JSON.parse((await get('/strip')).body) as Echo).url).toBe('/');
  });
});

describe('cors (Gloo shape)', () => {
  const preflight = (path: string) => send(gatehouse.url, { method: 'OPTIONS', path, headers: { host: 'shop.test', origin: 'https://app.test', 'access-control-request-method': 'GET' } });
  it('maxAge as a string of seconds; disableForRoute turns the virtual host\'s policy off on that route', async () => {
    const allowed = await preflight('/canary');
    expect(allowed.headers['access-control-allow-origin']).toBe('https://app.test');
    expect(allowed.headers['access-control-max-age']).toBe('86400');
    const disabled = await preflight('/private');
    expect(disabled.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('headerManipulation with Envoy variables and headerSecretRef', () => {
  it('renders %VARIABLES% per request (both directions) and adds a Secret\'s keys as headers', async () => {
    const before = Date.now();
    const r = await send(gatehouse.url, { path: '/dynamic', headers: { host: 'shop.test', 'x-tenant': 'acme' } });
    const echo = JSON.parse(r.body) as Echo;
    expect(echo.headers['x-client']).toBe('127.0.0.1');
    expect(echo.headers['x-tenant-copy']).toBe('tenant=acme via HTTP/1.1 at 100%');
    const started = Date.parse(echo.headers['x-started'] as string);
    expect(started).toBeGreaterThanOrEqual(before - 1000);
    expect(started).toBeLessThanOrEqual(Date.now());
    expect(echo.headers['x-api-token']).toBe('s3cr3t');
    expect(r.headers['x-echo-tenant']).toBe('acme');
  });

  it('an unknown variable is rejected at load, naming it', async () => {
    const { parseManifests } = await import('../../core/src/config/manifest.ts');
    const { ConfigStore } = await import('../../core/src/config/store.ts');
    const { stringify } = await import('yaml');
    const docs = [
      { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'u' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 1 }] } } },
      { apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name: 'v' }, spec: { virtualHost: { domains: ['v.test'], routes: [{ routeAction: { single: { upstream: { name: 'u' } } }, options: { headerManipulation: { requestHeadersToAdd: [{ header: { key: 'x', value: '%UPSTREAM_METADATA(["a"])%' } }] } } }] } } },
    ];
    const parsed = parseManifests('v.yaml', docs.map((d) => stringify(d)).join('---\n'));
    const snapshot = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' }).load(parsed.documents, parsed.diagnostics);
    expect(snapshot.diagnostics.map((d) => `${d.path}: ${d.message}`)).toEqual([expect.stringMatching(/^spec\.virtualHost\.routes\[0\]\.options\.headerManipulation\.requestHeadersToAdd\[0\]\.header\.value: header variable %UPSTREAM_METADATA% is not supported/)]);
  });
});

describe('UpstreamGroup (Gloo)', () => {
  it('routeAction.upstreamGroup spreads requests over the group\'s weighted destinations (refs resolved in the group\'s namespace)', async () => {
    const counts: Record<string, number> = {};
    for (let i = 0; i < 200; i++) {
      const name = (JSON.parse((await get('/group')).body) as Echo).upstream;
      counts[name] = (counts[name] ?? 0) + 1;
    }
    // Binomial(200, 1/2): mean 100, sd ~7; the bounds are ~7 sd wide.
    expect(counts.blue).toBeGreaterThan(50);
    expect(counts.green).toBeGreaterThan(50);
    expect(counts.grey).toBeUndefined();
  });
});
