import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from './manifest.ts';
import { ConfigStore } from './store.ts';
import { flattenRoutes, routeTablesOf } from './delegation.ts';
import type { Resource } from './resource.ts';

const upstream = { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'u', namespace: 'team' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 1 }] } } };
const to = { single: { upstream: { name: 'u', namespace: 'team' } } };
const vs = (routes: object[]) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name: 'root', namespace: 'gloo' }, spec: { virtualHost: { domains: ['*'], routes } } });
const rt = (name: string, routes: object[], extra: { namespace?: string; labels?: Record<string, string>; weight?: number } = {}) => ({
  apiVersion: 'gateway.solo.io/v1',
  kind: 'RouteTable',
  metadata: { name, namespace: extra.namespace ?? 'team', ...(extra.labels ? { labels: extra.labels } : {}) },
  spec: { routes, ...(extra.weight !== undefined ? { weight: extra.weight } : {}) },
});

function load(objects: object[]) {
  const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
  const { documents } = parseManifests('a.yaml', objects.map((o) => stringify(o)).join('---\n'));
  const snapshot = store.load(documents);
  const status = (kind: string, name: string) => snapshot.statuses.find((s) => s.kind === kind && s.name === name)!;
  const flat = () => flattenRoutes(snapshot.resources.get('VirtualService/gloo/root') as Resource<'VirtualService'>, routeTablesOf(snapshot.resources)).routes.map((r) => ({ name: r.spec.name, matchers: r.spec.matchers, owner: `${r.owner.kind}/${r.owner.name}` }));
  return { snapshot, status, flat };
}

describe('delegateAction and RouteTable (Gloo)', () => {
  test('by ref (and the deprecated name/namespace form): the tables\' routes replace the delegating route, in order', () => {
    const { status, flat } = load([
      upstream,
      rt('a', [{ name: 'a1', matchers: [{ prefix: '/a/1' }], routeAction: to }, { name: 'a-all', routeAction: to }]),
      rt('b', [{ name: 'b1', matchers: [{ exact: '/b/x' }], routeAction: to }]),
      vs([
        { matchers: [{ prefix: '/a' }], delegateAction: { ref: { name: 'a', namespace: 'team' } } },
        { matchers: [{ prefix: '/b/' }], delegateAction: { name: 'b', namespace: 'team' } },
        { name: 'last', routeAction: to },
      ]),
    ]);
    expect(status('VirtualService', 'root')).toMatchObject({ state: 'Accepted' });
    // A delegated route without matchers takes the delegating prefix.
    expect(flat()).toEqual([
      { name: 'a1', matchers: [{ prefix: '/a/1' }], owner: 'RouteTable/a' },
      { name: 'a-all', matchers: [{ prefix: '/a' }], owner: 'RouteTable/a' },
      { name: 'b1', matchers: [{ exact: '/b/x' }], owner: 'RouteTable/b' },
      { name: 'last', matchers: undefined, owner: 'VirtualService/root' },
    ]);
  });

  test('by selector: labels and namespaces (default: the selector\'s own), tables in ascending weight; equal weights warn', () => {
    const { status, flat } = load([
      upstream,
      rt('heavy', [{ name: 'heavy', matchers: [{ prefix: '/s/heavy' }], routeAction: to }], { labels: { team: 'x' }, weight: 10 }),
      rt('light', [{ name: 'light', matchers: [{ prefix: '/s/light' }], routeAction: to }], { labels: { team: 'x' }, weight: -1 }),
      rt('other-label', [{ name: 'other', matchers: [{ prefix: '/s/o' }], routeAction: to }], { labels: { team: 'y' } }),
      rt('elsewhere', [{ name: 'elsewhere', matchers: [{ prefix: '/s/e' }], routeAction: to }], { labels: { team: 'x' }, namespace: 'far' }),
      rt('same-1', [{ name: 'same-1', matchers: [{ prefix: '/t/1' }], routeAction: to }], { labels: { tie: 'yes' } }),
      rt('same-2', [{ name: 'same-2', matchers: [{ prefix: '/t/2' }], routeAction: to }], { labels: { tie: 'yes' } }),
      vs([
        { matchers: [{ prefix: '/s/' }], delegateAction: { selector: { labels: { team: 'x' }, namespaces: ['team'] } } },
        { matchers: [{ prefix: '/t/' }], delegateAction: { selector: { namespaces: ['*'], expressions: [{ key: 'tie', operator: 'In', values: ['yes'] }] } } },
        { matchers: [{ prefix: '/none/' }], delegateAction: { selector: { labels: { team: 'x' } } } },
      ]),
    ]);
    expect(flat().map((r) => r.name)).toEqual(['light', 'heavy', 'same-1', 'same-2']);
    const reasons = status('VirtualService', 'root').reasons;
    expect(status('VirtualService', 'root').state).toBe('Warning');
    expect(reasons).toContainEqual(expect.objectContaining({ code: 'GH_CONFIG_IGNORED', path: 'spec.virtualHost.routes[1].delegateAction.selector', message: expect.stringContaining('team/same-1 and team/same-2 have the same weight') }));
    // No namespaces: the VirtualService's own (gloo), where there is no table.
    expect(reasons).toContainEqual(expect.objectContaining({ code: 'GH_CONFIG_MISSING_REF', severity: 'warning', path: 'spec.virtualHost.routes[2].delegateAction', message: expect.stringContaining('matches no accepted RouteTable') }));
  });

  test('prefix rules: a delegating route must match on a prefix; a delegated route outside it is not served (warning naming it)', () => {
    const { status, flat } = load([
      upstream,
      rt('a', [
        { name: 'inside', matchers: [{ prefix: '/a/in' }], routeAction: to },
        { name: 'outside', matchers: [{ prefix: '/b' }], routeAction: to },
        { name: 'regex-outside', matchers: [{ regex: '/.*' }], routeAction: to },
      ]),
      vs([{ matchers: [{ prefix: '/a' }], delegateAction: { ref: { name: 'a', namespace: 'team' } } }]),
    ]);
    expect(flat().map((r) => r.name)).toEqual(['inside']);
    expect(status('VirtualService', 'root').reasons).toEqual([
      expect.objectContaining({ code: 'GH_CONFIG_DELEGATION', severity: 'warning', path: 'spec.virtualHost.routes[0].delegateAction', message: expect.stringContaining('RouteTable team/a routes[1]: matchers[0] "/b" does not start with the delegating prefix "/a"') }),
      expect.objectContaining({ code: 'GH_CONFIG_DELEGATION', path: 'spec.virtualHost.routes[0].delegateAction', message: expect.stringContaining('RouteTable team/a routes[2]') }),
    ]);
    const exact = load([upstream, rt('a', []), vs([{ matchers: [{ exact: '/a' }], delegateAction: { ref: { name: 'a', namespace: 'team' } } }])]);
    expect(exact.status('VirtualService', 'root')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ code: 'GH_CONFIG_DELEGATION', path: 'spec.virtualHost.routes[0].matchers[0].exact', message: 'a route with delegateAction must match on a prefix, not exact (Gloo)' })] });
  });

  test('inheritableMatchers adds the parent\'s headers, methods and query parameters; options are inherited field by field', () => {
    const { flat, snapshot } = load([
      upstream,
      rt('a', [
        { name: 'child', matchers: [{ prefix: '/a/x', headers: [{ name: 'x-child' }] }], routeAction: to, options: { timeout: '2s' } },
        { name: 'plain', matchers: [{ prefix: '/a/y' }], routeAction: to },
      ]),
      vs([{ matchers: [{ prefix: '/a', headers: [{ name: 'x-tenant', value: 't1' }], methods: ['GET'] }], inheritableMatchers: true, options: { timeout: '9s', prefixRewrite: '/' }, delegateAction: { ref: { name: 'a', namespace: 'team' } } }]),
    ]);
    expect(flat()[0]!.matchers).toEqual([{ prefix: '/a/x', headers: [{ name: 'x-tenant', value: 't1' }, { name: 'x-child' }], methods: ['GET'] }]);
    const routes = flattenRoutes(snapshot.resources.get('VirtualService/gloo/root') as Resource<'VirtualService'>, routeTablesOf(snapshot.resources)).routes;
    expect(routes[0]!.spec.options).toEqual({ timeout: '2s', prefixRewrite: '/' });
    expect(routes[1]!.spec.options).toEqual({ timeout: '9s', prefixRewrite: '/' });
  });

  test('headers on a delegating route without inheritableMatchers are refused (they would be ignored)', () => {
    const { status } = load([upstream, rt('a', []), vs([{ matchers: [{ prefix: '/a', headers: [{ name: 'x' }] }], delegateAction: { ref: { name: 'a', namespace: 'team' } } }])]);
    expect(status('VirtualService', 'root')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ path: 'spec.virtualHost.routes[0].matchers[0].headers', message: expect.stringContaining('inheritableMatchers: true') })] });
  });

  test('nested tables; a cycle is rejected on the table that closes it, naming the loop; the rest serves', () => {
    const { status, flat } = load([
      upstream,
      rt('outer', [
        { name: 'o1', matchers: [{ prefix: '/a/o' }], routeAction: to },
        { matchers: [{ prefix: '/a/n/' }], delegateAction: { ref: { name: 'inner', namespace: 'team' } } },
      ]),
      rt('inner', [{ name: 'n1', matchers: [{ prefix: '/a/n/1' }], routeAction: to }]),
      rt('loop-1', [{ matchers: [{ prefix: '/l/' }], delegateAction: { ref: { name: 'loop-2', namespace: 'team' } } }]),
      rt('loop-2', [{ matchers: [{ prefix: '/l/' }], delegateAction: { ref: { name: 'loop-1', namespace: 'team' } } }]),
      rt('self', [{ matchers: [{ prefix: '/s/' }], delegateAction: { ref: { name: 'self', namespace: 'team' } } }]),
      vs([
        { matchers: [{ prefix: '/a' }], delegateAction: { ref: { name: 'outer', namespace: 'team' } } },
        { matchers: [{ prefix: '/l/' }], delegateAction: { ref: { name: 'loop-1', namespace: 'team' } } },
      ]),
    ]);
    expect(flat().map((r) => r.name)).toEqual(['o1', 'n1']);
    expect(status('RouteTable', 'self')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ code: 'GH_CONFIG_DELEGATION_CYCLE', path: 'spec.routes[0].delegateAction', message: 'delegation cycle: RouteTable team/self → RouteTable team/self' })] });
    expect(status('RouteTable', 'loop-2')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ code: 'GH_CONFIG_DELEGATION_CYCLE', message: expect.stringContaining('RouteTable team/loop-2 → RouteTable team/loop-1 → RouteTable team/loop-2') })] });
    expect(status('RouteTable', 'loop-1').state).toBe('Warning');
    expect(status('VirtualService', 'root').state).toBe('Warning');
  });

  test('a cycle reached from a VirtualService is an error on it', () => {
    const a = rt('a', [{ matchers: [{ prefix: '/a/' }], delegateAction: { ref: { name: 'b', namespace: 'team' } } }]);
    const b = rt('b', [{ matchers: [{ prefix: '/a/' }], delegateAction: { ref: { name: 'a', namespace: 'team' } } }]);
    const tables = new Map<string, Resource<'RouteTable'>>();
    for (const t of [a, b]) tables.set(`RouteTable/team/${t.metadata.name}`, { kind: 'RouteTable', key: `RouteTable/team/${t.metadata.name}`, namespace: 'team', name: t.metadata.name, labels: {}, spec: t.spec } as never);
    const root = { kind: 'VirtualService', key: 'VirtualService/gloo/root', namespace: 'gloo', name: 'root', labels: {}, spec: vs([{ matchers: [{ prefix: '/a/' }], delegateAction: { ref: { name: 'a', namespace: 'team' } } }]).spec } as never;
    const { problems } = flattenRoutes(root, { get: (k) => tables.get(k), all: () => tables.values() });
    expect(problems).toEqual([{ path: ['spec', 'virtualHost', 'routes', 0, 'delegateAction'], code: 'GH_CONFIG_DELEGATION_CYCLE', severity: 'error', message: 'RouteTable team/b routes[0]: delegation cycle: VirtualService gloo/root → RouteTable team/a → RouteTable team/b → RouteTable team/a' }]);
  });
});
