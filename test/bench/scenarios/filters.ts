// The per-route filter chain's cost (core/src/proxy/filters/): the same POST of a 1 KB JSON body
// through a route without filters, a route with a header + body transformation (issue 31: goal
// ≥ 0.7×), and routes with rate limits that are never reached (issue 28: in memory ≥ 0.8×, on a
// real Redis ≥ 0.5×; the local token bucket reported).
import { findRedis, startRedis } from '../../ratelimit/redis.ts';
import type { BenchContext, BenchModule, BenchScenario, RunningTarget } from '../scenario.ts';

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

/** The rate-limited route with the limits counted on a real Redis (Debian's redis-server on a free port, no persistence). */
async function onRedis(ctx: BenchContext): Promise<RunningTarget> {
  const binary = findRedis();
  if (!binary) throw new Error('redis-server not found: run test/ratelimit/install-redis.sh (or set GATEHOUSE_REDIS_SERVER)');
  const redis = await startRedis(binary);
  try {
    const target = await ctx.gatehouse(config(ctx, { rateLimitConfigs: { refs: [{ name: 'never-reached' }] } }), ['--access-log', 'false'], 'run', { GATEHOUSE_RATELIMIT_REDIS_URL: redis.url });
    return { ...target, stop: async () => (await target.stop(), await redis.stop()) };
  } catch (error) {
    await redis.stop();
    throw error;
  }
}

scenarios.push({ group: GROUP, name: 'filters: rate limit on Redis, not reached (POST 1 KB JSON)', request: REQUEST, start: onRedis });

export const goals: BenchModule['goals'] = [
  { row: 'filters: rate limit on Redis, not reached (POST 1 KB JSON)', against: 'filters: route without filters (POST 1 KB JSON)', minThroughputRatio: 0.5 },
  { row: 'filters: header + body transformation (POST 1 KB JSON)', against: 'filters: route without filters (POST 1 KB JSON)', minThroughputRatio: 0.7 },
  { row: 'filters: rate limit in memory, not reached (POST 1 KB JSON)', against: 'filters: route without filters (POST 1 KB JSON)', minThroughputRatio: 0.8 },
  { row: 'filters: local token bucket, not reached (POST 1 KB JSON)', against: 'filters: route without filters (POST 1 KB JSON)' },
];
