import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from '../../config/manifest.ts';
import { ConfigStore, type ConfigSnapshot } from '../../config/store.ts';
import { DEFAULT_TIMEOUT_MS, compileRouteTable, matchRoute, type CompiledVirtualHost } from './route-table.ts';
import { UpstreamRegistry } from '../upstream/upstream-cluster.ts';

const upstream = (name: string, port = 9000, namespace?: string) => ({
  apiVersion: 'gatehouse.gatehouse.dev/v1',
  kind: 'Upstream',
  metadata: { name, ...(namespace ? { namespace } : {}) },
  spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } },
});
const authConfig = (name: string, namespace?: string) => ({
  apiVersion: 'enterprise.gatehouse.dev/v1',
  kind: 'AuthConfig',
  metadata: { name, ...(namespace ? { namespace } : {}) },
  spec: { configs: [{ basicAuth: { apr: { users: { u: { salt: 's', hashedPassword: 'h' } } } } }] },
});
const virtualService = (name: string, virtualHost: object, namespace?: string) => ({
  apiVersion: 'gateway.gatehouse.dev/v1',
  kind: 'VirtualService',
  metadata: { name, ...(namespace ? { namespace } : {}) },
  spec: { virtualHost },
});
const to = (name: string, namespace?: string) => ({ single: { upstream: { name, ...(namespace ? { namespace } : {}) } } });

function snapshotOf(...manifests: object[]): ConfigSnapshot {
  const { documents, diagnostics } = parseManifests('test.yaml', manifests.map((m) => stringify(m)).join('---\n'));
  const snapshot = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' }).load(documents, diagnostics);
  const rejected = snapshot.statuses.filter((s) => s.state === 'Rejected');
  if (rejected.length > 0) throw new Error(`test config rejected: ${JSON.stringify(rejected)}`);
  return snapshot;
}

function compile(...manifests: object[]) {
  const upstreams = new UpstreamRegistry();
  return { table: compileRouteTable(snapshotOf(...manifests), { upstreams }), upstreams };
}

function vhost(table: ReturnType<typeof compile>['table'], host: string): CompiledVirtualHost {
  const vh = table.hosts.match(host);
  if (!vh) throw new Error(`no virtual host for ${host}`);
  return vh;
}

describe('compileRouteTable', () => {
  test('a virtual host without domains (empty or absent) serves any Host, as "*" does (Gloo, Envoy)', async () => {
    const { table, upstreams } = compile(upstream('up'), virtualService('anything', { routes: [{ routeAction: to('up') }] }));
    expect(vhost(table, 'whatever.test').name).toBe('default/anything');
    const empty = compile(upstream('up'), virtualService('empty', { domains: [], routes: [{ routeAction: to('up') }] }));
    expect(vhost(empty.table, 'other.test').name).toBe('default/empty');
    await upstreams.close();
    await empty.upstreams.close();
  });

  test('routes keep their order and are named by `name` or namespace/vs/index', async () => {
    const { table, upstreams } = compile(
      upstream('up'),
      virtualService('site', { domains: ['site.test'], routes: [{ name: 'first', matchers: [{ prefix: '/a' }], routeAction: to('up') }, { routeAction: to('up') }] }),
    );
    const vh = vhost(table, 'site.test');
    expect(vh.name).toBe('default/site');
    expect(vh.routes.map((r) => r.name)).toEqual(['first', 'default/site/1']);
    expect(matchRoute(vh, { method: 'GET', path: '/a/x', query: '', headers: {} })!.route.name).toBe('first');
    expect(matchRoute(vh, { method: 'GET', path: '/b', query: '', headers: {} })!.route.name).toBe('default/site/1');
    await upstreams.close();
  });

  test('routes to the same Upstream share one cluster; refs resolve in the VirtualService namespace', async () => {
    const { table, upstreams } = compile(
      upstream('up', 9001, 'team'),
      upstream('up', 9002),
      virtualService('a', { domains: ['a.test'], routes: [{ routeAction: to('up') }, { routeAction: to('up', 'default') }] }, 'team'),
    );
    const [r0, r1] = vhost(table, 'a.test').routes;
    if (r0!.destination.kind !== 'upstream' || r1!.destination.kind !== 'upstream') throw new Error('expected upstream destinations');
    expect(r0!.destination.cluster.name).toBe('team/up');
    expect(r0!.destination.cluster.hosts[0]!.port).toBe(9001);
    expect(r1!.destination.cluster.name).toBe('default/up');
    expect(table.clusters.size).toBe(2);
    await upstreams.close();
  });

  test('kube destinations dial <name>.<namespace>.svc.<cluster domain>:<port>', async () => {
    const upstreams = new UpstreamRegistry();
    const snapshot = snapshotOf(virtualService('k', { domains: ['k.test'], routes: [{ routeAction: { single: { kube: { ref: { name: 'echo' }, port: 8080 } } } }] }, 'demo'));
    const route = vhost(compileRouteTable(snapshot, { upstreams }), 'k.test').routes[0]!;
    expect(route.destination.kind === 'upstream' && route.destination.cluster.hosts[0]).toMatchObject({ addr: 'echo.demo.svc.cluster.local', port: 8080 });
    const custom = vhost(compileRouteTable(snapshot, { upstreams, kubeClusterDomain: 'corp.internal' }), 'k.test').routes[0]!;
    expect(custom.destination.kind === 'upstream' && custom.destination.cluster.hosts[0]!.addr).toBe('echo.demo.svc.corp.internal');
    await upstreams.close();
  });

  test('retries: retriable-4xx, retriable-status-codes, back-off, and the virtual host\'s policy for routes without their own', async () => {
    const { table, upstreams } = compile(
      upstream('up'),
      virtualService('r', {
        domains: ['r.test'],
        options: { retries: { retryOn: 'retriable-4xx', numRetries: 2 } },
        routes: [
          { routeAction: to('up'), matchers: [{ prefix: '/codes' }], options: { retries: { retryOn: 'retriable-status-codes,connect-failure', retriableStatusCodes: [418, 429], retryBackOff: { baseInterval: '100ms', maxInterval: '2s' } } } },
          { routeAction: to('up'), matchers: [{ prefix: '/' }] },
        ],
      }),
    );
    const [codes, inherited] = vhost(table, 'r.test').routes;
    expect(codes!.retry).toMatchObject({ onConnectFailure: true, onReset: false, onTimeout: false, backoff: { baseMs: 100, maxMs: 2000 } });
    expect([418, 429].map((s) => codes!.retry!.onStatus(s))).toEqual([true, true]);
    expect([409, 500, 503].map((s) => codes!.retry!.onStatus(s))).toEqual([false, false, false]);
    expect(inherited!.retry).toMatchObject({ numRetries: 2, onConnectFailure: false, onReset: false });
    expect([409, 500].map((s) => inherited!.retry!.onStatus(s))).toEqual([true, false]);
    await upstreams.close();
  });

  test('unknown retryOn tokens, and retriable-status-codes without codes, are rejected at load', () => {
    const { documents, diagnostics } = parseManifests('test.yaml', [upstream('up'), virtualService('bad', { domains: ['b.test'], routes: [{ routeAction: to('up'), options: { retries: { retryOn: '5xx,retriable-headers,retriable-status-codes' } } }] })].map((m) => stringify(m)).join('---\n'));
    const snapshot = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' }).load(documents, diagnostics);
    expect(snapshot.diagnostics.map((d) => `${d.path}: ${d.message}`)).toEqual([
      'spec.virtualHost.routes[0].options.retries.retryOn: retryOn token "retriable-headers" is not supported; use 5xx, gateway-error, reset, connect-failure, retriable-4xx, retriable-status-codes',
      'spec.virtualHost.routes[0].options.retries.retriableStatusCodes: retryOn has retriable-status-codes but no retriableStatusCodes are listed',
    ]);
  });

  test('timeouts, retries, rewrites and host rewrite compile from route options', async () => {
    const { table, upstreams } = compile(
      upstream('up'),
      virtualService('o', {
        domains: ['o.test'],
        routes: [
          { routeAction: to('up'), matchers: [{ prefix: '/plain' }] },
          { routeAction: to('up'), matchers: [{ prefix: '/tuned' }], options: { timeout: '2.5s', prefixRewrite: '/v2/', autoHostRewrite: true, retries: { numRetries: 3, perTryTimeout: '300ms' } } },
          { routeAction: to('up'), matchers: [{ prefix: '/gw' }], options: { retries: { retryOn: 'gateway-error' } } },
          { routeAction: to('up'), matchers: [{ prefix: '/5xx' }], options: { retries: { retryOn: '5xx' } } },
        ],
      }),
    );
    const [plain, tuned, gw, fivexx] = vhost(table, 'o.test').routes;
    expect(plain).toMatchObject({ timeoutMs: DEFAULT_TIMEOUT_MS, retry: undefined, prefixRewrite: undefined, autoHostRewrite: false });
    expect(DEFAULT_TIMEOUT_MS).toBe(15_000);
    // Envoy's default retry_on when only numRetries is given.
    expect(tuned).toMatchObject({ timeoutMs: 2_500, prefixRewrite: '/v2/', autoHostRewrite: true, retry: { numRetries: 3, onTimeout: true, onConnectFailure: true, onReset: true, perTryTimeoutMs: 300 } });
    expect([500, 501, 503, 599].every((s) => tuned!.retry!.onStatus(s))).toBe(true);
    // gateway-error: 502, 503, 504 and connect failures/resets, not other 5xx.
    expect(gw!.retry).toMatchObject({ numRetries: 1, onTimeout: true, onConnectFailure: true, onReset: true, perTryTimeoutMs: undefined, backoff: { baseMs: 25, maxMs: 250 } });
    expect([502, 503, 504].every((s) => gw!.retry!.onStatus(s))).toBe(true);
    expect(gw!.retry!.onStatus(500)).toBe(false);
    // "5xx" includes connect failures and resets (Envoy semantics).
    expect(fivexx!.retry).toMatchObject({ onConnectFailure: true, onReset: true });
    expect(fivexx!.retry!.onStatus(500)).toBe(true);
    expect(fivexx!.retry!.onStatus(409)).toBe(false);
    await upstreams.close();
  });

  test('effective auth: route configRef overrides the host, disable turns it off, otherwise inherit', async () => {
    const { table, upstreams } = compile(
      upstream('up'),
      authConfig('host-auth'),
      authConfig('route-auth', 'security'),
      virtualService('s', {
        domains: ['s.test'],
        options: { extauth: { configRef: { name: 'host-auth' } } },
        routes: [
          { name: 'inherits', matchers: [{ prefix: '/i' }], routeAction: to('up') },
          { name: 'overrides', matchers: [{ prefix: '/o' }], routeAction: to('up'), options: { extauth: { configRef: { name: 'route-auth', namespace: 'security' } } } },
          { name: 'public', matchers: [{ prefix: '/p' }], routeAction: to('up'), options: { extauth: { disable: true } } },
        ],
      }),
      virtualService('open', { domains: ['open.test'], routes: [{ routeAction: to('up') }] }),
    );
    const [inherits, overrides, open] = vhost(table, 's.test').routes;
    expect(inherits!.auth).toEqual({ configId: 'default.host-auth', sourceType: 'virtual_host', sourceName: 'default.s' });
    expect(overrides!.auth).toEqual({ configId: 'security.route-auth', sourceType: 'route', sourceName: 'overrides' });
    expect(open!.auth).toBeUndefined();
    expect(vhost(table, 'open.test').routes[0]!.auth).toBeUndefined();
    await upstreams.close();
  });

  test('effective requestBody: the route’s wins, else the host’s, whichever level names the config; disable drops it', async () => {
    const hostBody = { maxRequestBytes: 1000 };
    const { table, upstreams } = compile(
      upstream('up'),
      authConfig('host-auth'),
      authConfig('route-auth'),
      virtualService('s', {
        domains: ['s.test'],
        options: { extauth: { configRef: { name: 'host-auth' }, requestBody: hostBody } },
        routes: [
          { name: 'inherits', matchers: [{ prefix: '/i' }], routeAction: to('up') },
          { name: 'own-config', matchers: [{ prefix: '/c' }], routeAction: to('up'), options: { extauth: { configRef: { name: 'route-auth' } } } },
          { name: 'own-body', matchers: [{ prefix: '/b' }], routeAction: to('up'), options: { extauth: { requestBody: { maxRequestBytes: 5, allowPartialMessage: true, packAsBytes: true } } } },
          { name: 'public', matchers: [{ prefix: '/p' }], routeAction: to('up'), options: { extauth: { disable: true } } },
        ],
      }),
      // A body setting without any AuthConfig asks for nothing: there is no check to send it with.
      virtualService('open', { domains: ['open.test'], options: { extauth: { requestBody: hostBody } }, routes: [{ routeAction: to('up') }] }),
    );
    const [inherits, ownConfig, ownBody, open] = vhost(table, 's.test').routes;
    expect(inherits!.auth!.body).toEqual({ maxBytes: 1000, allowPartial: false, packAsBytes: false });
    expect(ownConfig!.auth).toMatchObject({ configId: 'default.route-auth', body: { maxBytes: 1000 } });
    expect(ownBody!.auth).toEqual({ configId: 'default.host-auth', sourceType: 'virtual_host', sourceName: 'default.s', body: { maxBytes: 5, allowPartial: true, packAsBytes: true } });
    expect(open!.auth).toBeUndefined();
    expect(vhost(table, 'open.test').routes[0]!.auth).toBeUndefined();
    await upstreams.close();
  });

  test('route cors replaces the host policy; header manipulation merges host then route', async () => {
    const { table, upstreams } = compile(
      upstream('up'),
      virtualService('c', {
        domains: ['c.test'],
        options: { cors: { allowOrigin: ['https://host.example'] }, headerManipulation: { responseHeadersToAdd: [{ header: { key: 'x-host', value: '1' } }] } },
        routes: [
          { matchers: [{ prefix: '/own' }], routeAction: to('up'), options: { cors: { allowOrigin: ['https://route.example'] }, headerManipulation: { responseHeadersToAdd: [{ header: { key: 'x-route', value: '1' } }] } } },
          { routeAction: to('up') },
        ],
      }),
    );
    const [own, inherited] = vhost(table, 'c.test').routes;
    // The chain's CORS filter adds the allow-origin header for the origins its policy allows.
    const allows = (route: typeof own, origin: string) => {
      const cors = route!.chain!.filters.find((f) => f.name === 'cors')!;
      const request = { req: { method: 'GET', headers: { origin } }, responseHeaders: [] as string[], metadata: new Map() };
      cors.onRequest!(request as never);
      return request.responseHeaders.includes('access-control-allow-origin');
    };
    expect(allows(own, 'https://route.example')).toBe(true);
    expect(allows(own, 'https://host.example')).toBe(false);
    expect(allows(inherited, 'https://host.example')).toBe(true);
    expect(own!.responseHeaders.add.map((a) => a.name)).toEqual(['x-host', 'x-route']);
    expect(inherited!.responseHeaders.add.map((a) => a.name)).toEqual(['x-host']);
    await upstreams.close();
  });

  test('describes the effective routes for admin:/config', async () => {
    const { table, upstreams } = compile(
      upstream('up', 9005),
      authConfig('a'),
      virtualService('d', { domains: ['d.test', '*.d.test'], routes: [{ name: 'r', matchers: [{ exact: '/x' }], routeAction: to('up'), options: { timeout: '1s', extauth: { configRef: { name: 'a' } } } }, { routeAction: to('up') }] }),
    );
    expect(table.description).toEqual([
      {
        virtualService: 'default/d',
        listener: 'http',
        domains: ['d.test', '*.d.test'],
        routes: [
          { name: 'r', matchers: [{ exact: '/x' }], destination: { upstream: 'default/up', hosts: ['http://127.0.0.1:9005'] }, timeoutMs: 1000, auth: { configId: 'default.a', sourceType: 'route', sourceName: 'r' } },
          { name: 'default/d/1', matchers: [{ prefix: '/' }], destination: { upstream: 'default/up', hosts: ['http://127.0.0.1:9005'] }, timeoutMs: 15_000, auth: null },
        ],
      },
    ]);
    await upstreams.close();
  });
});

describe('a destination that cannot be built (issue 17 finding 4)', () => {
  test('only that route answers as unavailable; the table builds and the other routes keep their upstreams', () => {
    // A resolver mapping one host to an address undici's Pool refuses: its constructor throws for real.
    const upstreams = new UpstreamRegistry({ resolve: (host) => (host === 'broken.internal' ? 'bad host/with?path' : undefined) });
    const broken = { ...upstream('broken'), spec: { static: { hosts: [{ addr: 'broken.internal', port: 80 }] } } };
    const errors: unknown[] = [];
    const table = compileRouteTable(
      snapshotOf(upstream('ok'), broken, virtualService('vs', { domains: ['*'], routes: [{ matchers: [{ prefix: '/broken' }], routeAction: to('broken') }, { routeAction: to('ok') }] })),
      { upstreams, logger: { error: (fields: unknown) => errors.push(fields) } as never },
    );
    const vh = vhost(table, 'any.test');
    expect(vh.routes[0]!.destination.kind).toBe('unavailable');
    expect(vh.routes[1]!.destination.kind).toBe('upstream');
    expect(errors).toHaveLength(1);
  });
});

describe('incremental compilation', () => {
  test('a virtual host is compiled again only when it or something it references changed, also from copies of the resources (traffic workers)', async () => {
    const upstreams = new UpstreamRegistry();
    const vsA = virtualService('a', { domains: ['a.test'], routes: [{ routeAction: { single: { upstream: { name: 'ua' } } } }] });
    const vsB = virtualService('b', { domains: ['b.test'], routes: [{ routeAction: { single: { upstream: { name: 'ub' } } } }] });
    const first = compileRouteTable(snapshotOf(upstream('ua'), upstream('ub'), vsA, vsB), { upstreams });
    // The same content as new objects (as a worker receives it): both kept.
    const copy = compileRouteTable(structuredClone(snapshotOf(upstream('ua'), upstream('ub'), vsA, vsB)), { upstreams });
    expect(vhost(copy, 'a.test')).toBe(vhost(first, 'a.test'));
    expect(vhost(copy, 'b.test')).toBe(vhost(first, 'b.test'));
    // Upstream ub changes: only b is compiled again, and it dials the new host.
    const changed = compileRouteTable(snapshotOf(upstream('ua'), upstream('ub', 9999), vsA, vsB), { upstreams });
    expect(vhost(changed, 'a.test')).toBe(vhost(first, 'a.test'));
    expect(vhost(changed, 'b.test')).not.toBe(vhost(first, 'b.test'));
    const b = vhost(changed, 'b.test').routes[0]!.destination;
    expect(b.kind === 'upstream' && b.cluster.hosts[0]!.port).toBe(9999);
    await upstreams.close();
  });
});
