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

/** This process's CPU time in ms: the work a check does, whatever else the machine runs. */
const cpuMs = (): number => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

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

  test('headers, query parameters and methods on a delegating route without inheritableMatchers: delegated routes that repeat them are served, the others dropped with a warning (Gloo)', () => {
    const parent = { prefix: '/a', headers: [{ name: 'x-team', value: 'a' }], queryParameters: [{ name: 'v', value: '1' }], methods: ['GET'] };
    const { status, flat } = load([
      upstream,
      rt('a', [
        { name: 'repeats', matchers: [{ prefix: '/a/1', headers: [{ name: 'x-other' }, { name: 'x-team', value: 'a', regex: false }], queryParameters: [{ name: 'v', value: '1' }], methods: ['get', 'POST'] }], routeAction: to },
        { name: 'other-value', matchers: [{ prefix: '/a/2', headers: [{ name: 'x-team', value: 'b' }], queryParameters: [{ name: 'v', value: '1' }], methods: ['GET'] }], routeAction: to },
        { name: 'no-method', matchers: [{ prefix: '/a/3', headers: [{ name: 'x-team', value: 'a' }], queryParameters: [{ name: 'v', value: '1' }] }], routeAction: to },
        { name: 'no-matchers', routeAction: to },
      ]),
      vs([{ matchers: [parent], delegateAction: { ref: { name: 'a', namespace: 'team' } } }]),
    ]);
    const root = status('VirtualService', 'root');
    expect(root.state).toBe('Warning');
    expect(flat().map((r) => r.name)).toEqual(['repeats']);
    // The served route's matchers are its own: nothing is added (that is inheritableMatchers).
    expect(flat()[0]!.matchers).toEqual([{ prefix: '/a/1', headers: [{ name: 'x-other' }, { name: 'x-team', value: 'a', regex: false }], queryParameters: [{ name: 'v', value: '1' }], methods: ['get', 'POST'] }]);
    const messages = root.reasons.map((r) => r.message);
    expect(messages).toContainEqual(expect.stringContaining('RouteTable team/a routes[1]: matchers[0] lacks the delegating route\'s header "x-team"'));
    expect(messages).toContainEqual(expect.stringContaining('RouteTable team/a routes[2]: matchers[0] lacks the delegating route\'s method GET'));
    expect(messages).toContainEqual(expect.stringContaining('RouteTable team/a routes[3]: matchers[0] lacks the delegating route\'s header "x-team", query parameter "v", method GET'));
    expect(root.reasons.every((r) => r.path === 'spec.virtualHost.routes[0].delegateAction' && r.severity === 'warning')).toBe(true);
  });

  test('inherited methods are the parent\'s followed by the child\'s (Gloo\'s :method regex GET|PUT)', () => {
    const { flat } = load([
      upstream,
      rt('a', [{ name: 'put', matchers: [{ prefix: '/a/x', methods: ['PUT', 'GET'] }], routeAction: to }]),
      vs([{ matchers: [{ prefix: '/a', methods: ['GET'] }], inheritableMatchers: true, delegateAction: { ref: { name: 'a', namespace: 'team' } } }]),
    ]);
    expect(flat()[0]!.matchers).toEqual([{ prefix: '/a/x', methods: ['GET', 'PUT'] }]);
  });

  test('nested tables; every table on a cycle is rejected, naming the loop; the rest serves', () => {
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
    // Tables are checked against every RouteTable of the load, so the verdict does not depend on which was checked first.
    expect(status('RouteTable', 'loop-1')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ code: 'GH_CONFIG_DELEGATION_CYCLE', message: 'RouteTable team/loop-2 routes[0]: delegation cycle: RouteTable team/loop-1 → RouteTable team/loop-2 → RouteTable team/loop-1' })] });
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

  // Issue 24 finding 11: chains and fan-outs that stalled or overflowed the stack.
  const chainOf = (n: number) => Array.from({ length: n }, (_, i) => rt(`t${i}`, [i < n - 1 ? { matchers: [{ prefix: '/' }], delegateAction: { ref: { name: `t${i + 1}` } } } : { name: 'leaf', routeAction: to }]));
  /** `levels` levels of `width` tables; every table of a level selects every table of the next: width^levels routes. */
  const fanOut = (levels: number, width: number) =>
    Array.from({ length: levels * width }, (_, i) => {
      const level = Math.floor(i / width);
      const route = level < levels - 1 ? { matchers: [{ prefix: '/' }], delegateAction: { selector: { labels: { level: String(level + 1) } } } } : { name: 'leaf', routeAction: to };
      return rt(`f${level}-${i % width}`, [route], { labels: { level: String(level) }, weight: i % width });
    });

  test('a chain deeper than the limit rejects the tables whose chain is too deep, naming it; the shorter rest is served', () => {
    const { status, flat } = load([upstream, ...chainOf(500), vs([{ matchers: [{ prefix: '/' }], delegateAction: { ref: { name: 't0', namespace: 'team' } } }])]);
    expect(status('RouteTable', 't0')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ code: 'GH_CONFIG_DELEGATION_LIMIT', path: 'spec.routes[0].delegateAction', message: expect.stringMatching(/^the delegation is deeper than 16 RouteTables \(limit GATEHOUSE_MAX_DELEGATION_DEPTH\): RouteTable team\/t0 → RouteTable team\/t1 → .* → RouteTable team\/t16 → …$/) })] });
    expect(status('RouteTable', 't483').state).toBe('Rejected');
    expect(status('RouteTable', 't484').state).toBe('Accepted');
    // The VirtualService itself stays (its delegation serves nothing while t0 is rejected).
    expect(status('VirtualService', 'root')).toMatchObject({ state: 'Warning', reasons: [expect.objectContaining({ code: 'GH_CONFIG_MISSING_REF', message: expect.stringContaining('RouteTable team/t0') })] });
    expect(flat()).toEqual([]);
    // 16 levels are allowed.
    const ok = load([upstream, ...chainOf(16), vs([{ matchers: [{ prefix: '/' }], delegateAction: { ref: { name: 't0', namespace: 'team' } } }])]);
    expect(ok.status('VirtualService', 'root').state).toBe('Accepted');
    expect(ok.flat().map((r) => r.name)).toEqual(['leaf']);
  });

  test('a selector fan-out past the route limit is rejected on the tables that expand too far, in time linear in the tables', () => {
    const roots = Array.from({ length: 1_000 }, (_, i) => rt(`root${i}`, [{ matchers: [{ prefix: '/' }], delegateAction: { selector: { labels: { level: '0' } } } }]));
    const started = cpuMs();
    // 2^15 = 32,768 routes under each of 1,002 tables: walking each (as before) took minutes.
    const { status, snapshot } = load([upstream, ...fanOut(15, 2), ...roots, vs([{ matchers: [{ prefix: '/' }], delegateAction: { selector: { labels: { level: '1' }, namespaces: ['team'] } } }])]);
    const elapsed = cpuMs() - started;
    expect(status('RouteTable', 'root7')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ code: 'GH_CONFIG_DELEGATION_LIMIT', message: expect.stringContaining('more than 20000 routes') })] });
    // Level l expands to 2^(15-l) - 1 routes (delegating routes count): level 0 is over 20,000, level 1 under.
    expect(status('RouteTable', 'f0-0').state).toBe('Rejected');
    expect(status('RouteTable', 'f1-0').state).toBe('Accepted');
    // Two level-1 tables together are over: the VirtualService's walk stops at the limit.
    expect(status('VirtualService', 'root')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ code: 'GH_CONFIG_DELEGATION_LIMIT', path: 'spec.virtualHost.routes[0].delegateAction', message: expect.stringContaining('VirtualService gloo/root → RouteTable team/f1-1 → RouteTable team/f2-0') })] });
    expect(snapshot.statuses.filter((s) => s.state === 'Rejected')).toHaveLength(1_003);
    // CPU time, not wall time (a loaded machine stretched the wall time past 8 s); generous: the old walk needed ~17 ms per table here, this is one pass.
    expect(elapsed).toBeLessThan(8_000);
  });

  test('a VirtualService whose own walk passes the limit (its tables each under it) is rejected, naming the chain', () => {
    const wide = (name: string, weight: number) => rt(name, Array.from({ length: 600 }, (_, i) => ({ name: `${name}-${i}`, matchers: [{ prefix: `/w/${i}` }], routeAction: structuredClone(to) })), { labels: { wide: 'yes' }, weight });
    const { status, snapshot } = load([upstream, wide('w0', 0), wide('w1', 1), vs([{ matchers: [{ prefix: '/w/' }], delegateAction: { selector: { labels: { wide: 'yes' }, namespaces: ['team'] } } }])]);
    expect(status('RouteTable', 'w0').state).toBe('Accepted');
    const root = snapshot.resources.get('VirtualService/gloo/root') as Resource<'VirtualService'>;
    expect(flattenRoutes(root, routeTablesOf(snapshot.resources)).routes).toHaveLength(1_200);
    // The same walk the check and the route table make, with a limit of 1,000.
    const limited = flattenRoutes(root, routeTablesOf(snapshot.resources), { maxDepth: 16, maxRoutes: 1_000 });
    expect(limited.problems).toEqual([{ path: ['spec', 'virtualHost', 'routes', 0, 'delegateAction'], code: 'GH_CONFIG_DELEGATION_LIMIT', severity: 'error', message: expect.stringMatching(/more than 1000 routes .* at RouteTable team\/w1 routes\[399\]: VirtualService gloo\/root → RouteTable team\/w1$/) }]);
  });

  test('inherited matchers multiply at every level and count against the limit before they are built', () => {
    // 8 tables of 20 matchers each, all inheritable: 20^8 matchers on the last route.
    const tables = Array.from({ length: 8 }, (_, i) =>
      rt(`m${i}`, [i < 7 ? { matchers: Array.from({ length: 20 }, (_, j) => ({ prefix: '/m/', headers: [{ name: `x-${i}-${j}` }] })), inheritableMatchers: true, delegateAction: { ref: { name: `m${i + 1}` } } } : { name: 'leaf', routeAction: to }]),
    );
    const started = cpuMs();
    const { status } = load([upstream, ...tables, vs([{ matchers: [{ prefix: '/m/' }], inheritableMatchers: true, delegateAction: { ref: { name: 'm0', namespace: 'team' } } }])]);
    expect(status('VirtualService', 'root')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ code: 'GH_CONFIG_DELEGATION_LIMIT', path: 'spec.virtualHost.routes[0].delegateAction', message: expect.stringContaining('VirtualService gloo/root → RouteTable team/m0 → RouteTable team/m1') })] });
    expect(cpuMs() - started).toBeLessThan(8_000);
  });

  test('every table of a loop of 5,000 is rejected, the loop named by its size, in one pass', () => {
    const loop = Array.from({ length: 5_000 }, (_, i) => rt(`l${i}`, [{ matchers: [{ prefix: '/' }], delegateAction: { ref: { name: `l${(i + 1) % 5_000}` } } }]));
    const started = cpuMs();
    const { status, snapshot } = load([upstream, ...loop]);
    expect(snapshot.statuses.filter((s) => s.state === 'Rejected')).toHaveLength(5_000);
    expect(status('RouteTable', 'l42').reasons).toEqual([expect.objectContaining({ code: 'GH_CONFIG_DELEGATION_CYCLE', message: 'delegation cycle: RouteTable team/l42 → … (a loop through 5000 RouteTables) … → RouteTable team/l42' })]);
    // CPU time, not wall time (a loaded machine stretched the wall time past 8 s); generous: a search around the loop from each table took 9 s here.
    expect(cpuMs() - started).toBeLessThan(8_000);
  });

  test('2,000 tables that each select all 2,000 are checked in one pass, each with a bounded list of reasons', () => {
    const all = Array.from({ length: 2_000 }, (_, i) => rt(`a${i}`, [{ matchers: [{ prefix: '/' }], delegateAction: { selector: { labels: { all: 'yes' } } } }], { labels: { all: 'yes' } }));
    const started = cpuMs();
    const { status, snapshot } = load([upstream, ...all]);
    expect(snapshot.statuses.filter((s) => s.state === 'Rejected')).toHaveLength(2_000);
    const reasons = status('RouteTable', 'a7').reasons;
    expect(reasons[0]).toMatchObject({ code: 'GH_CONFIG_DELEGATION_CYCLE' });
    // One cycle, three equal-weight pairs and the count of the others: not 2,000 warnings per table.
    expect(reasons.map((r) => r.code)).toEqual(['GH_CONFIG_DELEGATION_CYCLE', 'GH_CONFIG_IGNORED', 'GH_CONFIG_IGNORED', 'GH_CONFIG_IGNORED', 'GH_CONFIG_IGNORED']);
    expect(reasons[4]!.message).toContain('(1996 more pairs)');
    // CPU time, not wall time (a loaded machine stretched the wall time past 8 s); generous: 2,000 x 2,000 selections took 12 s here.
    expect(cpuMs() - started).toBeLessThan(8_000);
  });

  test('all virtual hosts together expand to at most 100,000 routes: 300 sharing a 16,383-route tree cost one budget, not 300 walks', () => {
    const shared = fanOut(14, 2);
    const hosts = Array.from({ length: 300 }, (_, i) => ({ ...vs([{ matchers: [{ prefix: '/' }], delegateAction: { selector: { labels: { level: '1' }, namespaces: ['team'] } } }]), metadata: { name: `host-${i}`, namespace: 'gloo' } }));
    hosts.forEach((h, i) => (h.spec.virtualHost.domains = [`h${i}.test`]));
    const started = cpuMs();
    const { status, snapshot } = load([upstream, ...shared, ...hosts]);
    const accepted = snapshot.statuses.filter((s) => s.kind === 'VirtualService' && s.state === 'Accepted');
    // 16,383 routes each (with the delegating routes): 6 fit in 100,000.
    expect(accepted).toHaveLength(6);
    expect(status('VirtualService', 'host-299')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ code: 'GH_CONFIG_DELEGATION_LIMIT', message: expect.stringContaining('GATEHOUSE_MAX_ROUTES_TOTAL, 100000 for all virtual hosts together') })] });
    expect(cpuMs() - started).toBeLessThan(8_000);
  });
});
