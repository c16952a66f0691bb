// The per-route filter chain's cost (core/src/proxy/filters/): the same POST of a 1 KB JSON body
// through a route without filters, a route with a header + body transformation (issue 31: goal
// ≥ 0.7×), and routes with rate limits that are never reached (issue 28: in memory ≥ 0.8×; the
// local token bucket reported). A Redis row needs a redis-server: test/ratelimit measures
// exactness there; its cost is left to a run with Redis at hand.
import type { BenchContext, BenchModule, BenchScenario } from '../scenario.ts';

const GROUP = 'filters';
const BODY = JSON.stringify({ user: { name: 'Ada', id: 42 }, items: Array.from({ length: 20 }, (_, i) => ({ sku: `sku-${i}`, qty: i })), note: 'x'.repeat(300) });
const REQUEST = { method: 'POST', body: BODY, headers: { 'content-type': 'application/json', 'x-account': 'bench' } };

function config(ctx: BenchContext, routeOptions?: object) {
  return {
    'filters.yaml': [
      { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'fast' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: ctx.upstreamPort }] } } },
      {
        apiVersion: 'ratelimit.gatehouse.dev/v1alpha1',
        kind: 'RateLimitConfig',
        metadata: { name: 'never-reached' },
        spec: { raw: { descriptors: [{ key: 'account', rateLimit: { requestsPerUnit: 4_000_000_000, unit: 'DAY' } }], rateLimits: [{ actions: [{ requestHeaders: { headerName: 'x-account', descriptorKey: 'account' } }] }] } },
      },
      {
        apiVersion: 'gateway.gatehouse.dev/v1',
        kind: 'VirtualService',
        metadata: { name: 'bench' },
        spec: { virtualHost: { domains: ['*'], routes: [{ name: 'hit', matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'fast' } } }, ...(routeOptions ? { options: routeOptions } : {}) }] } },
      },
    ],
  };
}

const TRANSFORMATION = {
  transformations: {
    requestTransformation: {
      transformationTemplate: {
        headers: { 'x-user': { text: '{{ user.name }}' }, 'x-items': { text: '{{ length(items) }}' } },
        body: { text: '{"id": {{ user.id }}, "first": "{{ items.0.sku }}"}' },
      },
    },
  },
};

export const scenarios: BenchScenario[] = [
  { group: GROUP, name: 'filters: route without filters (POST 1 KB JSON)', request: REQUEST, start: (ctx) => ctx.gatehouse(config(ctx), ['--access-log', 'false']) },
  { group: GROUP, name: 'filters: header + body transformation (POST 1 KB JSON)', request: REQUEST, start: (ctx) => ctx.gatehouse(config(ctx, TRANSFORMATION), ['--access-log', 'false']) },
  { group: GROUP, name: 'filters: rate limit in memory, not reached (POST 1 KB JSON)', request: REQUEST, start: (ctx) => ctx.gatehouse(config(ctx, { rateLimitConfigs: { refs: [{ name: 'never-reached' }] } }), ['--access-log', 'false']) },
  { group: GROUP, name: 'filters: local token bucket, not reached (POST 1 KB JSON)', request: REQUEST, start: (ctx) => ctx.gatehouse(config(ctx, { localRatelimit: { maxTokens: 4_000_000_000, tokensPerFill: 4_000_000_000, fillInterval: '1s' } }), ['--access-log', 'false']) },
];

export const goals: BenchModule['goals'] = [
  { row: 'filters: header + body transformation (POST 1 KB JSON)', against: 'filters: route without filters (POST 1 KB JSON)', minThroughputRatio: 0.7 },
  { row: 'filters: rate limit in memory, not reached (POST 1 KB JSON)', against: 'filters: route without filters (POST 1 KB JSON)', minThroughputRatio: 0.8 },
  { row: 'filters: local token bucket, not reached (POST 1 KB JSON)', against: 'filters: route without filters (POST 1 KB JSON)' },
];
