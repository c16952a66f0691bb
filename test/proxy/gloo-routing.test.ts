/**
 * Gloo routing compatibility (issue 15) through a real `gatehouse run` with real upstreams:
 * regexes on RE2 (`(?i)`, RE2-only syntax, lookaround and backreferences refused at load);
 * delegateAction + RouteTable (by ref and selector, prefix rules, weights, cycles); kube Upstreams
 * resolved through cluster DNS (`--kube-cluster-domain`, `--resolve` standing in for the DNS);
 * ring hash and Maglev on a header, a cookie or the source IP.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));

function validate(...paths: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', ...paths], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 20_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr });
    });
  });
}

const upstream = (name: string, port: number) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } } });
const virtualService = (name: string, domains: string[], routes: object[]) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name }, spec: { virtualHost: { domains, routes } } });
const to = (name: string) => ({ single: { upstream: { name } } });
const tagged = (tag: string) => ({ headerManipulation: { responseHeadersToAdd: [{ header: { key: 'x-route', value: tag } }] } });

const routeTable = (name: string, namespace: string, routes: object[], extra: { labels?: Record<string, string>; weight?: number } = {}) => ({
  apiVersion: 'gateway.solo.io/v1',
  kind: 'RouteTable',
  metadata: { name, namespace, ...(extra.labels ? { labels: extra.labels } : {}) },
  spec: { routes, ...(extra.weight !== undefined ? { weight: extra.weight } : {}) },
});
const toIn = (name: string, namespace: string) => ({ single: { upstream: { name, namespace } } });

let echo: TestServer;
let other: TestServer;
let third: TestServer;
let dir: ConfigDir;
let gw: GatehouseProcess;

beforeAll(async () => {
  [echo, other, third] = await Promise.all([startEcho('echo'), startEcho('other'), startEcho('third')]);
  const three = [echo, other, third].map((s) => ({ addr: '127.0.0.1', port: s.port }));
  dir = await makeConfigDir({
    'upstreams.yaml': [upstream('echo', echo.port)],
    're2.yaml': [
      virtualService('re2', ['re2.test'], [
        { matchers: [{ regex: '(?i)/Tenant-[0-9]+/.*' }], routeAction: to('echo'), options: tagged('tenant') },
        { matchers: [{ prefix: '/auth', headers: [{ name: 'authorization', value: '(?i)bearer [a-z0-9.]+', regex: true }] }], routeAction: to('echo'), options: tagged('bearer') },
        { matchers: [{ prefix: '/q', queryParameters: [{ name: 'word', value: '[[:alpha:]]+', regex: true }] }], routeAction: to('echo'), options: tagged('posix') },
        {
          matchers: [{ prefix: '/rx/' }],
          routeAction: to('echo'),
          options: { ...tagged('rewrite'), regexRewrite: { pattern: { regex: '^/rx/(?P<kind>[a-z]+)/([0-9]+)$', googleRe2: { maxProgramSize: 1000 } }, substitution: '/items/\\2/\\1' } },
        },
      ]),
    ],
    'delegation.yaml': [
      { ...upstream('other', other.port), metadata: { name: 'other', namespace: 'team-a' } },
      virtualService('delegating', ['delegate.test'], [
        { matchers: [{ prefix: '/a/' }], options: tagged('inherited-from-vs'), delegateAction: { ref: { name: 'a-routes', namespace: 'team-a' } } },
        { matchers: [{ prefix: '/s/' }], delegateAction: { selector: { namespaces: ['team-a', 'team-b'], labels: { app: 'shop' } } } },
        { matchers: [{ prefix: '/v/', headers: [{ name: 'x-tenant', value: 't1' }] }], inheritableMatchers: true, delegateAction: { name: 'v-routes', namespace: 'team-a' } },
        { matchers: [{ prefix: '/' }], routeAction: to('echo'), options: tagged('fallback') },
      ]),
      routeTable('a-routes', 'team-a', [
        // References resolve in the table's namespace: "other" is team-a's.
        { matchers: [{ prefix: '/a/1' }], routeAction: { single: { upstream: { name: 'other' } } } },
        { matchers: [{ exact: '/a/2' }], routeAction: toIn('echo', 'default'), options: tagged('a-2') },
        { matchers: [{ prefix: '/elsewhere' }], routeAction: toIn('echo', 'default'), options: tagged('escaped') },
        { matchers: [{ prefix: '/a/n/' }], delegateAction: { ref: { name: 'nested', namespace: 'team-b' } } },
      ]),
      routeTable('nested', 'team-b', [{ matchers: [{ regex: '/a/n/[0-9]+' }], routeAction: toIn('echo', 'default'), options: tagged('nested') }]),
      // Both match /s/x; the lighter one's route comes first.
      routeTable('shop-heavy', 'team-b', [{ matchers: [{ prefix: '/s/' }], routeAction: toIn('echo', 'default'), options: tagged('heavy') }], { labels: { app: 'shop' }, weight: 20 }),
      routeTable('shop-light', 'team-a', [{ matchers: [{ prefix: '/s/' }], routeAction: toIn('echo', 'default'), options: tagged('light') }], { labels: { app: 'shop' }, weight: 5 }),
      routeTable('v-routes', 'team-a', [{ matchers: [{ prefix: '/v/1' }], routeAction: toIn('echo', 'default'), options: tagged('v1') }]),
    ],
    'cycle.yaml': [
      routeTable('ping', 'default', [{ matchers: [{ prefix: '/p/' }], delegateAction: { ref: { name: 'pong' } } }]),
      routeTable('pong', 'default', [{ matchers: [{ prefix: '/p/' }], delegateAction: { ref: { name: 'ping' } } }]),
    ],
    'kube-both.yaml': [{ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'both' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 1 }] }, kube: { serviceName: 'x', servicePort: 80 } } }],
    'kube.yaml': [
      { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'shop-svc', namespace: 'gloo-system' }, spec: { kube: { serviceName: 'shop', serviceNamespace: 'shop', servicePort: other.port } } },
      { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'picky', namespace: 'shop' }, spec: { kube: { serviceName: 'shop', servicePort: other.port, selector: { version: 'v2' } } } },
      virtualService('kube', ['kube.test'], [
        { matchers: [{ prefix: '/picky' }], routeAction: { single: { upstream: { name: 'picky', namespace: 'shop' } } } },
        { matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'shop-svc', namespace: 'gloo-system' } } } },
      ]),
    ],
    'hashing.yaml': [
      { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'ring' }, spec: { static: { hosts: three }, loadBalancerConfig: { ringHash: { ringHashConfig: { minimumRingSize: 1024, maximumRingSize: 65536 } } } } },
      { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'maglev' }, spec: { static: { hosts: three }, loadBalancerConfig: { maglev: {} } } },
      virtualService('hashing', ['hash.test'], [
        { matchers: [{ prefix: '/ring/user' }], routeAction: to('ring'), options: { lbHash: { hashPolicies: [{ header: 'x-user' }] } } },
        { matchers: [{ prefix: '/ring/ip' }], routeAction: to('ring'), options: { lbHash: { hashPolicies: [{ sourceIp: true }] } } },
        { matchers: [{ prefix: '/maglev' }], routeAction: to('maglev'), options: { lbHash: { hashPolicies: [{ cookie: { name: 'session' }, terminal: true }, { header: 'x-user' }] } } },
        { matchers: [{ prefix: '/generated' }], routeAction: to('ring'), options: { lbHash: { hashPolicies: [{ cookie: { name: 'session', ttl: '1h' } }] } } },
      ]),
    ],
    'lookahead.yaml': [virtualService('lookahead', ['ahead.test'], [{ matchers: [{ regex: '/a(?=b).*' }], routeAction: to('echo') }])],
    'backref.yaml': [virtualService('backref', ['back.test'], [{ matchers: [{ prefix: '/', headers: [{ name: 'x-pair', value: '(a)\\1', regex: true }] }], routeAction: to('echo') }])],
  });
  gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false', '--kube-cluster-domain', 'cluster.test', '--resolve', 'shop.shop.svc.cluster.test=127.0.0.1']);
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([echo?.close(), other?.close(), third?.close()]);
  await dir?.cleanup();
});

async function statusOf(name: string): Promise<{ state: string; reasons: { code: string; path: string; message: string }[] }> {
  const resources = (JSON.parse((await send(gw.adminUrl, { path: '/config' })).body) as { resources: { name: string; state: string; reasons: never[] }[] }).resources;
  return resources.find((r) => r.name === name)!;
}

describe('regexes follow RE2 (Envoy safe_regex)', () => {
  it('(?i) path and header regexes, POSIX classes in query regexes', async () => {
    const route = async (path: string, headers: Record<string, string> = {}) => (await send(gw.url, { path, headers: { host: 're2.test', ...headers } })).headers['x-route'];
    expect(await route('/TENANT-42/orders')).toBe('tenant');
    expect(await route('/tenant-x/orders')).toBeUndefined();
    expect(await route('/auth', { authorization: 'BEARER abc.def' })).toBe('bearer');
    expect(await route('/auth', { authorization: 'Basic abc' })).toBeUndefined();
    expect(await route('/q?word=hello')).toBe('posix');
    expect(await route('/q?word=hello1')).toBeUndefined();
  });

  it('regexRewrite with RE2 named groups and Envoy\'s \\N substitution; the query is kept', async () => {
    const r = await send(gw.url, { path: '/rx/books/42?x=1', headers: { host: 're2.test' } });
    expect((JSON.parse(r.body) as Echo).url).toBe('/items/42/books?x=1');
  });

  it('lookahead and backreferences are refused at load with the field path; gatehouse validate says so', async () => {
    const ahead = await statusOf('lookahead');
    expect(ahead.state).toBe('Rejected');
    expect(ahead.reasons[0]).toMatchObject({ code: 'GH_CONFIG_BAD_REGEX', path: 'spec.virtualHost.routes[0].matchers[0].regex' });
    expect(ahead.reasons[0]!.message).toContain('lookahead');
    expect((await send(gw.url, { path: '/abc', headers: { host: 'ahead.test' } })).status).toBe(404);
    const { code, out } = await validate(join(dir.path, 'upstreams.yaml'), join(dir.path, 'backref.yaml'));
    expect(code).toBe(1);
    expect(out).toContain('spec.virtualHost.routes[0].matchers[0].headers[0].value: the backreference "\\1" is not supported: regexes use RE2 syntax');
    expect(out).toContain('[GH_CONFIG_BAD_REGEX]');
  });
});

describe('delegateAction and RouteTable', () => {
  const get = (path: string, headers: Record<string, string> = {}) => send(gw.url, { path, headers: { host: 'delegate.test', ...headers } });

  it('by ref: the table\'s routes serve under the prefix, resolving references in the table\'s namespace and inheriting options', async () => {
    const one = await get('/a/1/x');
    expect(one.headers['x-upstream']).toBe('other');
    // The delegating route's options reach delegated routes without options of their own.
    expect(one.headers['x-route']).toBe('inherited-from-vs');
    expect((await get('/a/2')).headers['x-route']).toBe('a-2');
    // Not in the table: the virtual host's next routes are tried (the tree is flattened, as Gloo does).
    expect((await get('/a/3')).headers['x-route']).toBe('fallback');
  });

  it('a delegated route outside the delegating prefix is not served; gatehouse validate warns naming it', async () => {
    expect((await get('/elsewhere')).headers['x-route']).toBe('fallback');
    const status = await statusOf('delegating');
    expect(status.state).toBe('Warning');
    expect(status.reasons).toContainEqual(expect.objectContaining({ code: 'GH_CONFIG_DELEGATION', path: 'spec.virtualHost.routes[0].delegateAction', message: expect.stringContaining('RouteTable team-a/a-routes routes[2]: matchers[0] "/elsewhere" does not start with the delegating prefix "/a/"') }));
  });

  it('nested tables', async () => {
    expect((await get('/a/n/42')).headers['x-route']).toBe('nested');
    expect((await get('/a/n/x')).headers['x-route']).toBe('fallback');
  });

  it('by selector across namespaces: tables in ascending weight', async () => {
    expect((await get('/s/x')).headers['x-route']).toBe('light');
  });

  it('inheritableMatchers: delegated routes must match the parent\'s headers too', async () => {
    expect((await get('/v/1', { 'x-tenant': 't1' })).headers['x-route']).toBe('v1');
    expect((await get('/v/1')).headers['x-route']).toBe('fallback');
  });

  it('a delegation cycle is rejected with the loop named', async () => {
    const pong = await statusOf('pong');
    expect(pong, JSON.stringify(pong)).toMatchObject({ state: 'Rejected' });
    expect(pong.reasons[0]).toMatchObject({ code: 'GH_CONFIG_DELEGATION_CYCLE', message: 'RouteTable default/ping routes[0]: delegation cycle: RouteTable default/pong → RouteTable default/ping → RouteTable default/pong' });
    const { code, out } = await validate(join(dir.path, 'cycle.yaml'));
    expect(code).toBe(1);
    expect(out).toContain('error: RouteTable default/pong: spec.routes[0].delegateAction: RouteTable default/ping routes[0]: delegation cycle: RouteTable default/pong → RouteTable default/ping → RouteTable default/pong [GH_CONFIG_DELEGATION_CYCLE]');
  });
});

describe('kube Upstreams', () => {
  it('serviceName.serviceNamespace.svc.<cluster domain>:servicePort, through DNS; serviceNamespace defaults to the Upstream\'s', async () => {
    const r = await send(gw.url, { path: '/x', headers: { host: 'kube.test' } });
    expect(r.status).toBe(200);
    expect(r.headers['x-upstream']).toBe('other');
    expect((await send(gw.url, { path: '/picky', headers: { host: 'kube.test' } })).headers['x-upstream']).toBe('other');
  });

  it('a selector cannot narrow DNS resolution: a warning names the field', async () => {
    const picky = await statusOf('picky');
    expect(picky.state).toBe('Warning');
    expect(picky.reasons[0]).toMatchObject({ code: 'GH_CONFIG_IGNORED', path: 'spec.kube.selector' });
    expect((await statusOf('shop-svc')).state).toBe('Accepted');
  });

  it('static and kube together are refused', async () => {
    const { code, out } = await validate(join(dir.path, 'kube-both.yaml'));
    expect(code).toBe(1);
    expect(out).toContain('exactly one of "static", "kube" must be set');
  });
});

describe('ring hash and Maglev (loadBalancerConfig + route options.lbHash)', () => {
  const upstreamOf = async (path: string, headers: Record<string, string> = {}) => (await send(gw.url, { path, headers: { host: 'hash.test', ...headers } })).headers['x-upstream'] as string;

  it.each(['/ring/user', '/maglev'])('%s: one user always reaches the same host; users spread over all three', async (path) => {
    const hostOf = new Map<string, string>();
    for (let u = 0; u < 30; u++) {
      const seen = new Set<string>();
      for (let i = 0; i < 4; i++) seen.add(await upstreamOf(path, { 'x-user': `user-${u}` }));
      expect(seen.size).toBe(1);
      hostOf.set(`user-${u}`, [...seen][0]!);
    }
    expect(new Set(hostOf.values())).toEqual(new Set(['echo', 'other', 'third']));
  });

  it('source IP: every request from this client reaches one host', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) seen.add(await upstreamOf('/ring/ip'));
    expect(seen.size).toBe(1);
  });

  it('a terminal cookie policy wins over the header after it', async () => {
    const byCookie = await upstreamOf('/maglev', { cookie: 'session=s-1' });
    for (let u = 0; u < 10; u++) expect(await upstreamOf('/maglev', { cookie: 'session=s-1', 'x-user': `user-${u}` })).toBe(byCookie);
  });

  it('a cookie policy with ttl: a request without the cookie gets one generated (Envoy), and requests carrying it stick to one host', async () => {
    expect((await statusOf('hashing')).state).toBe('Accepted');
    const first = await send(gw.url, { path: '/generated', headers: { host: 'hash.test' } });
    const cookie = first.headers['set-cookie'];
    expect(cookie).toHaveLength(1);
    const [, value] = /^session="([0-9a-f]{16})"; Max-Age=3600; HttpOnly$/.exec(cookie![0]!) ?? [];
    expect(value).toBeDefined();
    // The client sends it back (quoted as set, or bare): every request reaches the host the first one did.
    for (const sent of [`session="${value}"`, `session=${value}`]) {
      for (let i = 0; i < 5; i++) {
        const r = await send(gw.url, { path: '/generated', headers: { host: 'hash.test', cookie: sent } });
        expect(r.headers['x-upstream']).toBe(first.headers['x-upstream']);
        // A request carrying the cookie gets none set.
        expect(r.headers['set-cookie']).toBeUndefined();
      }
    }
  });
});
