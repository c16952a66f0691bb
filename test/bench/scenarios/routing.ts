// Route-matching cost: the same proxy with the matching route first, or last behind 49
// routes that each test a regex path and a header, and with route options doing work
// on every request (header manipulation and CORS). Rows are compared to each other.
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

const ROUTE_OPTIONS = {
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
    name: 'routing: route 1 + headers + CORS',
    request: { headers: { origin: 'https://app.example', cookie: 'a=1' } },
    start: (ctx) => ctx.gatehouse(config(ctx, { matchLast: false, routeOptions: ROUTE_OPTIONS }), ['--access-log', 'false']),
  },
];

export const goals: BenchModule['goals'] = [
  // Matchers are compiled at load time: 49 failed matches must stay cheap next to the proxying.
  { row: 'routing: match on route 50 of 50', against: 'routing: match on route 1 of 50', minThroughputRatio: 0.9 },
  { row: 'routing: route 1 + headers + CORS', against: 'routing: match on route 1 of 50', minThroughputRatio: 0.9 },
];
