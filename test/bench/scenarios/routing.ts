// Route-matching cost: the same proxy with the matching route first, or last behind 49
// routes that each test a regex path and a header, or last of 1,000 routes of mixed matchers,
// and with route options doing work on every request (header manipulation and CORS). Rows are
// compared to each other.
import type { BenchContext, BenchModule, BenchScenario } from '../scenario.ts';

const GROUP = 'routing';

function config(ctx: BenchContext, options: { matchLast: boolean; routeOptions?: object }) {
  const target = { single: { upstream: { name: 'fast' } } };
  const decoys = Array.from({ length: 49 }, (_, i) => ({
    name: `decoy-${i}`,
    matchers: [{ regex: `/tenant-${i}/[0-9]+`, headers: [{ name: 'x-tenant', value: `t${i}` }] }],
    routeAction: target,
  }));
  const hit = { name: 'hit', matchers: [{ prefix: '/' }], routeAction: target, ...(options.routeOptions ? { options: options.routeOptions } : {}) };
  return {
    'routing.yaml': [
      { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'fast' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: ctx.upstreamPort }] } } },
      {
        apiVersion: 'gateway.gatehouse.dev/v1',
        kind: 'VirtualService',
        metadata: { name: 'bench' },
        spec: { virtualHost: { domains: ['*'], routes: options.matchLast ? [...decoys, hit] : [hit, ...decoys] } },
      },
    ],
  };
}

/** Services the 1,000 routes are spread over (their literal first path segment). */
const SERVICES = 25;

/**
 * route 1 (the shape of the last), 998 routes of mixed matchers (prefix, exact, RE2 regex, headers, methods, query parameters)
 * spread over 25 first path segments, every 50th a regex whose first segment varies (so it sits
 * in every bucket of the route index), then the route the request matches: the last one.
 */
function thousandRoutes(ctx: BenchContext) {
  // A fresh object per route: a shared one would be written as YAML aliases (the loader caps them at 100).
  const target = () => ({ single: { upstream: { name: 'fast' } } });
  // Route 1: the same shape as the last one, so the two rows differ only in where the match is.
  const routes: object[] = [
    { name: 'first', matchers: [{ prefix: '/svc-7/first/', methods: ['GET'], headers: [{ name: 'x-tenant', value: 'gold' }], queryParameters: [{ name: 'version', value: '[0-9]+', regex: true }] }], routeAction: target() },
  ];
  for (let i = 0; i < 998; i++) {
    const svc = `/svc-${i % SERVICES}`;
    const matcher =
      i % 50 === 49
        ? { regex: `/[a-z]+-${i}/[0-9]+` }
        : [
            { prefix: `${svc}/v${i}/` },
            { exact: `${svc}/items/${i}` },
            { regex: `${svc}/orders/${i}/[0-9]+` },
            { prefix: `${svc}/`, headers: [{ name: 'x-tenant', value: `t${i}` }] },
            { prefix: `${svc}/`, methods: ['POST', 'PUT'] },
            { prefix: `${svc}/`, queryParameters: [{ name: 'version', value: String(i) }] },
            { prefix: `${svc}/`, headers: [{ name: 'x-plan', value: `p${i}-[a-z]+`, regex: true }] },
          ][i % 7]!;
    routes.push({ name: `r-${i}`, matchers: [matcher], routeAction: target() });
  }
  // The request's service is svc-7: its bucket holds its 40 routes, the 20 any-segment regexes and this one.
  routes.push({
    name: 'hit',
    matchers: [{ prefix: '/svc-7/target/', methods: ['GET'], headers: [{ name: 'x-tenant', value: 'gold' }], queryParameters: [{ name: 'version', value: '[0-9]+', regex: true }] }],
    routeAction: target(),
  });
  return {
    'routing.yaml': [
      { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'fast' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: ctx.upstreamPort }] } } },
      { apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name: 'bench' }, spec: { virtualHost: { domains: ['*'], routes } } },
    ],
  };
}

export const ROUTE_OPTIONS = {
  headerManipulation: {
    requestHeadersToAdd: [{ header: { key: 'x-gateway', value: 'gatehouse' } }],
    requestHeadersToRemove: ['cookie'],
    responseHeadersToAdd: [{ header: { key: 'x-frame-options', value: 'DENY' }, append: false }],
    responseHeadersToRemove: ['server'],
  },
  cors: { allowOrigin: ['https://app.example'], allowMethods: ['GET'], exposeHeaders: ['x-gateway'] },
};

export const scenarios: BenchScenario[] = [
  { group: GROUP, name: 'routing: match on route 1 of 50', start: (ctx) => ctx.gatehouse(config(ctx, { matchLast: false }), ['--access-log', 'false']) },
  { group: GROUP, name: 'routing: match on route 50 of 50', start: (ctx) => ctx.gatehouse(config(ctx, { matchLast: true }), ['--access-log', 'false']) },
  {
    group: GROUP,
    name: 'routing: match on route 1 of 1,000 (mixed matchers)',
    request: { path: '/svc-7/first/1?version=3', headers: { 'x-tenant': 'gold' } },
    start: (ctx) => ctx.gatehouse(thousandRoutes(ctx), ['--access-log', 'false']),
  },
  {
    group: GROUP,
    name: 'routing: match on route 1,000 of 1,000 (mixed matchers)',
    request: { path: '/svc-7/target/1?version=3', headers: { 'x-tenant': 'gold' } },
    start: (ctx) => ctx.gatehouse(thousandRoutes(ctx), ['--access-log', 'false']),
  },
  {
    group: GROUP,
    name: 'routing: route 1 + headers + CORS',
    request: { headers: { origin: 'https://app.example', cookie: 'a=1' } },
    start: (ctx) => ctx.gatehouse(config(ctx, { matchLast: false, routeOptions: ROUTE_OPTIONS }), ['--access-log', 'false']),
  },
];

export const goals: BenchModule['goals'] = [
  // Matchers are compiled at load time: 49 failed matches must stay cheap next to the proxying.
  { row: 'routing: match on route 50 of 50', against: 'routing: match on route 1 of 50', minThroughputRatio: 0.9 },
  { row: 'routing: route 1 + headers + CORS', against: 'routing: match on route 1 of 50', minThroughputRatio: 0.9 },
  // The route index (route-table.ts) looks only at the request's first-segment bucket. Against
  // route 1 of the same table with a request of the same shape (header, query string), so the
  // ratio is the cost of matching alone; against route 1 of 50 it also counts the request's shape.
  { row: 'routing: match on route 1,000 of 1,000 (mixed matchers)', against: 'routing: match on route 1 of 1,000 (mixed matchers)', minThroughputRatio: 0.8 },
  { row: 'routing: match on route 1,000 of 1,000 (mixed matchers)', against: 'routing: match on route 1 of 50' },
];
