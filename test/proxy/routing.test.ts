// Route matching, virtual host selection and destinations through a real `gatehouse run`
// process (SPEC 3.1, 3.2, 4): one gateway for the whole file, one virtual host per concern.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send, type Reply } from '../support/http.ts';
import { refusedPort, startEcho, type Echo, type TestServer } from '../support/upstream.ts';

let gw: GatehouseProcess;
let config: ConfigDir;
let echoA: TestServer;
let echoB: TestServer;

/** A route answering with `x-route: <name>` so tests can tell which route matched. */
function route(name: string, matchers: object[] | undefined, upstream = 'echo-a', options: object = {}) {
  return {
    name,
    ...(matchers ? { matchers } : {}),
    routeAction: { single: { upstream: { name: upstream } } },
    options: { headerManipulation: { responseHeadersToAdd: [{ header: { key: 'x-route', value: name } }] }, ...options },
  };
}

function get(host: string, path = '/', headers: Record<string, string> = {}, method = 'GET'): Promise<Reply> {
  return send(gw.url, { method, path, headers: { host, ...headers } });
}

async function routeOf(host: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<string | undefined> {
  const reply = await get(host, path, headers, method);
  return reply.headers['x-route'] as string | undefined;
}

async function adminConfig(): Promise<{ generation: number; resources: { kind: string; name: string; state: string; serving: string; reasons: { code: string; message: string }[] }[] }> {
  const reply = await send(gw.adminUrl, { path: '/config' });
  return JSON.parse(reply.body);
}

beforeAll(async () => {
  [echoA, echoB] = await Promise.all([startEcho('a'), startEcho('b')]);
  config = await makeConfigDir({
    'upstreams.yaml': [
      manifests.upstream('echo-a', [{ addr: '127.0.0.1', port: echoA.port }]),
      manifests.upstream('echo-b', [{ addr: '127.0.0.1', port: echoB.port }]),
      manifests.upstream('pair', [
        { addr: '127.0.0.1', port: echoA.port },
        { addr: '127.0.0.1', port: echoB.port },
      ]),
      manifests.upstream('half-down', [
        { addr: '127.0.0.1', port: await refusedPort() },
        { addr: '127.0.0.1', port: echoA.port },
      ]),
    ],
    'matchers.yaml': manifests.virtualService('matchers', {
      domains: ['match.test'],
      routes: [
        route('exact', [{ exact: '/exact' }]),
        route('regex', [{ regex: '/items/[0-9]+' }]),
        route('post-only', [{ prefix: '/api/', methods: ['POST', 'put'] }]),
        route('header-value', [{ prefix: '/h', headers: [{ name: 'X-Env', value: 'prod' }] }]),
        route('header-regex', [{ prefix: '/h', headers: [{ name: 'x-env', value: 'stag(ing)?-[0-9]', regex: true }] }]),
        route('header-present', [{ prefix: '/h', headers: [{ name: 'x-debug' }] }]),
        route('header-inverted', [{ prefix: '/h', headers: [{ name: 'x-block', value: 'yes', invertMatch: true }] }]),
        route('query-value', [{ prefix: '/q', queryParameters: [{ name: 'mode', value: 'fast' }] }]),
        route('query-regex', [{ prefix: '/q', queryParameters: [{ name: 'id', value: '[0-9]{3}', regex: true }] }]),
        route('query-present', [{ prefix: '/q', queryParameters: [{ name: 'flag' }] }]),
        route('case-insensitive', [{ prefix: '/CaSe', caseSensitive: false }]),
        route('case-sensitive', [{ prefix: '/Strict' }]),
        route('either', [{ exact: '/one' }, { exact: '/two' }]),
        route('combined', [{ prefix: '/both', methods: ['GET'], headers: [{ name: 'x-a', value: '1' }], queryParameters: [{ name: 'b', value: '2' }] }]),
        route('prefix', [{ prefix: '/api/' }]),
      ],
    }),
    'default-matcher.yaml': manifests.virtualService('default-matcher', { domains: ['default.test'], routes: [route('catch-all', undefined)] }),
    'domains.yaml': [
      manifests.virtualService('exact-host', { domains: ['exact.test', 'api.wild.test'], routes: [route('vh-exact', [])] }),
      manifests.virtualService('suffix', { domains: ['*.wild.test'], routes: [route('vh-suffix', [])] }),
      manifests.virtualService('longer-suffix', { domains: ['*.deep.wild.test'], routes: [route('vh-longer-suffix', [])] }),
    ],
    'destinations.yaml': [
      manifests.virtualService('round-robin', { domains: ['rr.test'], routes: [route('rr', [], 'pair')] }),
      manifests.virtualService('passive', { domains: ['passive.test'], routes: [route('passive', [], 'half-down')] }),
      manifests.virtualService('kube', {
        domains: ['kube.test'],
        routes: [
          {
            matchers: [{ prefix: '/rewrite' }],
            routeAction: { single: { kube: { ref: { name: 'echo', namespace: 'demo' }, port: echoB.port } } },
            options: { autoHostRewrite: true },
          },
          { routeAction: { single: { kube: { ref: { name: 'echo', namespace: 'demo' }, port: echoB.port } } } },
        ],
      }),
    ],
  });
  gw = await startGatehouse('run', ['--config-dir', config.path, '--resolve', 'echo.demo.svc.cluster.local=127.0.0.1']);
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([echoA?.close(), echoB?.close(), config?.cleanup()]);
});

describe('route matchers', () => {
  it('exact matches only the exact path', async () => {
    expect(await routeOf('match.test', '/exact')).toBe('exact');
    expect(await routeOf('match.test', '/exact?x=1')).toBe('exact');
    expect((await get('match.test', '/exact/more')).status).toBe(404);
    expect((await get('match.test', '/exac')).status).toBe(404);
  });

  it('regex matches the full path, not a substring', async () => {
    expect(await routeOf('match.test', '/items/42')).toBe('regex');
    expect((await get('match.test', '/items/42/x')).status).toBe(404);
    expect((await get('match.test', '/x/items/42')).status).toBe(404);
    expect((await get('match.test', '/items/abc')).status).toBe(404);
  });

  it('prefix with methods matches only the listed methods (case-insensitive in config)', async () => {
    expect(await routeOf('match.test', '/api/users', {}, 'POST')).toBe('post-only');
    expect(await routeOf('match.test', '/api/users', {}, 'PUT')).toBe('post-only');
    // GET falls through to the later plain prefix route: routes are tried in order.
    expect(await routeOf('match.test', '/api/users', {}, 'GET')).toBe('prefix');
    expect((await get('match.test', '/apiary')).status).toBe(404);
  });

  it('header matchers: exact value, regex, presence, inverted', async () => {
    expect(await routeOf('match.test', '/h', { 'x-env': 'prod' })).toBe('header-value');
    expect(await routeOf('match.test', '/h', { 'x-env': 'staging-3' })).toBe('header-regex');
    expect(await routeOf('match.test', '/h', { 'x-env': 'stag-1' })).toBe('header-regex');
    // A regex matches the whole value: "xstaging-3" contains a match but is not one.
    expect(await routeOf('match.test', '/h', { 'x-env': 'xstaging-3', 'x-block': 'yes' })).toBeUndefined();
    expect(await routeOf('match.test', '/h', { 'x-debug': '' })).toBe('header-present');
    expect(await routeOf('match.test', '/h', { 'x-debug': 'anything', 'x-block': 'yes' })).toBe('header-present');
    // invertMatch with a value: matches a present x-block that is not exactly "yes"; as in
    // Envoy (issue 15), a request without the header does not match it.
    expect(await routeOf('match.test', '/h', { 'x-block': 'no' })).toBe('header-inverted');
    expect(await routeOf('match.test', '/h')).toBeUndefined();
    const blocked = await get('match.test', '/h', { 'x-block': 'yes' });
    expect(blocked.status).toBe(404);
    expect(blocked.headers['x-gatehouse-error']).toBe('GH_NO_ROUTE');
  });

  it('query parameter matchers: value, regex, presence', async () => {
    expect(await routeOf('match.test', '/q?mode=fast')).toBe('query-value');
    expect(await routeOf('match.test', '/q?x=1&mode=fast&y=2')).toBe('query-value');
    expect(await routeOf('match.test', '/q?mode=slow&id=123')).toBe('query-regex');
    expect(await routeOf('match.test', '/q?id=1234')).toBeUndefined();
    expect(await routeOf('match.test', '/q?flag')).toBe('query-present');
    expect(await routeOf('match.test', '/q?flag=')).toBe('query-present');
    expect(await routeOf('match.test', '/q?mode=%66ast')).toBe('query-value');
    expect((await get('match.test', '/q')).status).toBe(404);
    expect((await get('match.test', '/q?mode=FAST')).status).toBe(404);
  });

  it('caseSensitive: false matches the path in any case; the default is case-sensitive', async () => {
    expect(await routeOf('match.test', '/case/x')).toBe('case-insensitive');
    expect(await routeOf('match.test', '/CASE')).toBe('case-insensitive');
    expect(await routeOf('match.test', '/Strict/x')).toBe('case-sensitive');
    expect((await get('match.test', '/strict/x')).status).toBe(404);
  });

  it('any matcher entry of a route may match', async () => {
    expect(await routeOf('match.test', '/one')).toBe('either');
    expect(await routeOf('match.test', '/two')).toBe('either');
    expect((await get('match.test', '/three')).status).toBe(404);
  });

  it('within one matcher entry every condition must hold', async () => {
    expect(await routeOf('match.test', '/both?b=2', { 'x-a': '1' })).toBe('combined');
    expect((await get('match.test', '/both?b=2')).status).toBe(404);
    expect((await get('match.test', '/both', { 'x-a': '1' })).status).toBe(404);
    expect((await get('match.test', '/both?b=2', { 'x-a': '1' }, 'DELETE')).status).toBe(404);
  });

  it('no matchers means prefix "/"', async () => {
    expect(await routeOf('default.test', '/')).toBe('catch-all');
    expect(await routeOf('default.test', '/any/path?x=1', {}, 'DELETE')).toBe('catch-all');
  });
});

describe('virtual host domains', () => {
  it('matches exact domains ignoring the port and case', async () => {
    expect(await routeOf('exact.test', '/')).toBe('vh-exact');
    expect(await routeOf('exact.test:8080', '/')).toBe('vh-exact');
    expect(await routeOf('EXACT.Test', '/')).toBe('vh-exact');
  });

  it('most specific wins: exact, then the longest *.suffix', async () => {
    expect(await routeOf('api.wild.test', '/')).toBe('vh-exact');
    expect(await routeOf('foo.wild.test', '/')).toBe('vh-suffix');
    expect(await routeOf('a.b.wild.test:443', '/')).toBe('vh-suffix');
    expect(await routeOf('x.deep.wild.test', '/')).toBe('vh-longer-suffix');
    expect(await routeOf('deep.wild.test', '/')).toBe('vh-suffix');
  });

  it('an unknown host gets 404 GH_NO_VIRTUAL_HOST while no "*" domain exists', async () => {
    for (const host of ['wild.test', 'unknown.test', 'exact.test.evil']) {
      const reply = await get(host, '/');
      expect(reply.status, host).toBe(404);
      expect(reply.headers['x-gatehouse-error']).toBe('GH_NO_VIRTUAL_HOST');
    }
  });

  it('"*" catches every other host but never beats a more specific domain', async () => {
    const before = (await adminConfig()).generation;
    await config.write('zz-catch-all.yaml', manifests.virtualService('catch-all', { domains: ['*'], routes: [route('vh-any', [])] }));
    await eventually(async () => (await adminConfig()).generation > before);
    expect(await routeOf('unknown.test', '/')).toBe('vh-any');
    expect(await routeOf('wild.test', '/')).toBe('vh-any');
    expect(await routeOf('foo.wild.test', '/')).toBe('vh-suffix');
    expect(await routeOf('exact.test', '/')).toBe('vh-exact');
  });

  it('a domain already served is rejected in a second VirtualService; the first keeps serving', async () => {
    const before = (await adminConfig()).generation;
    // Sorted first in the directory, so load order alone would favour it.
    await config.write('aa-conflict.yaml', manifests.virtualService('intruder', { domains: ['exact.test', 'intruder.test'], routes: [route('vh-intruder', [])] }));
    const cfg = await eventually(async () => {
      const c = await adminConfig();
      return c.generation > before && c;
    });
    const intruder = cfg.resources.find((r) => r.kind === 'VirtualService' && r.name === 'intruder')!;
    expect(intruder.state).toBe('Rejected');
    expect(intruder.serving).toBe('none');
    expect(intruder.reasons.map((r) => r.code)).toContain('GH_CONFIG_DOMAIN_CONFLICT');
    expect(intruder.reasons[0]!.message).toContain('exact.test');
    expect(cfg.resources.find((r) => r.name === 'exact-host')!.state).toBe('Accepted');
    expect(await routeOf('exact.test', '/')).toBe('vh-exact');
    // The rejected VirtualService serves none of its domains (its own falls to "*").
    expect(await routeOf('intruder.test', '/')).toBe('vh-any');
    await config.remove('aa-conflict.yaml');
  });
});

describe('destinations', () => {
  it('routeAction.single.upstream balances round-robin over static hosts', async () => {
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      const reply = await get('rr.test', '/');
      expect(reply.status).toBe(200);
      seen.push(reply.headers['x-upstream'] as string);
    }
    expect(seen.filter((u) => u === 'a')).toHaveLength(3);
    expect(seen.filter((u) => u === 'b')).toHaveLength(3);
    // Strict alternation.
    for (let i = 1; i < seen.length; i++) expect(seen[i]).not.toBe(seen[i - 1]);
  });

  it('passive health: a host that refuses connections is skipped for the next requests', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await get('passive.test', '/')).status);
    // Only a request sent to the refusing host before it was ejected may fail.
    expect(statuses.filter((s) => s === 503).length).toBeLessThanOrEqual(1);
    const firstOk = statuses.indexOf(200);
    expect(firstOk).toBeLessThanOrEqual(1);
    expect(statuses.slice(firstOk)).toEqual(Array(8 - firstOk).fill(200));
  });

  it('routeAction.single.kube reaches <name>.<namespace>.svc.cluster.local (via --resolve)', async () => {
    const reply = await get('kube.test', '/hello');
    expect(reply.status).toBe(200);
    const echo = JSON.parse(reply.body) as Echo;
    expect(echo.upstream).toBe('b');
    expect(echo.url).toBe('/hello');
    // Without autoHostRewrite the client's Host goes upstream unchanged.
    expect(echo.headers.host).toBe('kube.test');
  });

  it('autoHostRewrite on a kube destination sends the service name as Host', async () => {
    const reply = await get('kube.test', '/rewrite');
    expect(reply.status).toBe(200);
    const echo = JSON.parse(reply.body) as Echo;
    expect(echo.upstream).toBe('b');
    expect(echo.headers.host).toBe('echo.demo.svc.cluster.local');
  });
});
