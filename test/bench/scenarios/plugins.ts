// Plugin auth rows (issue 5): a route behind the sandboxed RequiredHeader plugin, against
// the extauth group's "gatehouse run, route without auth" row of the same run.
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import type { BenchContext, BenchModule, BenchScenario, RunningTarget } from '../scenario.ts';
import { benchManifests, startNginx } from '../tools.ts';
import { BENCH_JWKS, benchJwt } from '../bench-jwt.ts';
import { findRedis, startRedis } from '../../ratelimit/redis.ts';

const REQUIRED_HEADER = fileURLToPath(new URL('../../../plugins/required-header/src/index.ts', import.meta.url));
const JWT = fileURLToPath(new URL('../../../plugins/jwt/src/index.ts', import.meta.url));
const API_KEY = fileURLToPath(new URL('../../../plugins/api-key/src/index.ts', import.meta.url));
const RATE_LIMIT = fileURLToPath(new URL('../../../plugins/rate-limit/src/index.ts', import.meta.url));

/** RateLimit counting `x-api-key` with a limit the bench never reaches: one ctx.store.increment and three client response headers per request. */
const rateLimitStep = (store: object) => ({ config: { RequestsPerUnit: 1_000_000_000_000, Unit: 'day', Key: { Header: 'x-api-key' } }, store });

// JWT rows: tokens and keys from ../bench-jwt.ts; the plugin verifies every request with crypto.subtle (no verification cache), as the goal asks.
/** A plugin row: builds `entry` as `name` into a fresh plugin dir and serves it on the bench route. */
async function pluginRow(ctx: BenchContext, entry: string, name: string, step: Record<string, unknown>, request: { headers: Record<string, string> }, extra: object[] = []): Promise<RunningTarget> {
  const pluginDir = await mkdtemp(join(ctx.workDir, 'auth-plugins-'));
  await buildPlugin({ entry, name, outDir: pluginDir });
  const files = { 'bench.yaml': [...benchManifests(ctx.upstreamPort, { name: 'plugin', configs: [{ pluginAuth: { name, ...step } }] }), ...extra] };
  return expectAllowed(await ctx.gatehouse(files, ['--access-log', 'false', '--plugin-dir', pluginDir]), request);
}
const request = { headers: { 'x-api-key': 'bench' } };

function config(ctx: BenchContext) {
  const plugin = { name: 'plugin', configs: [{ pluginAuth: { name: 'RequiredHeader', config: { RequiredHeader: 'x-api-key', AllowedValues: ['bench'] } } }] };
  return { 'bench.yaml': benchManifests(ctx.upstreamPort, plugin) };
}

/** Fails the row (instead of measuring 403s) unless the plugin lets the bench request through. */
async function expectAllowed(target: RunningTarget, probe: { headers: Record<string, string> } = request): Promise<RunningTarget> {
  // The plugin step is built asynchronously after the first config load: give it a moment.
  for (let attempt = 0; attempt < 50; attempt++) {
    const response = await fetch(target.url, probe);
    await response.arrayBuffer();
    if (response.status === 200) return target;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await target.stop();
  throw new Error('the plugin route never answered 200: the plugin did not load (see the gatehouse log in the bench work dir)');
}

export const scenarios: BenchScenario[] = [
  {
    group: 'extauth',
    name: 'gatehouse run, plugin route (RequiredHeader)',
    request,
    start: async (ctx) => {
      const pluginDir = await mkdtemp(join(ctx.workDir, 'auth-plugins-'));
      await buildPlugin({ entry: REQUIRED_HEADER, name: 'RequiredHeader', outDir: pluginDir });
      return expectAllowed(await ctx.gatehouse(config(ctx), ['--access-log', 'false', '--plugin-dir', pluginDir]));
    },
  },
  ...(['RS256', 'ES256'] as const).map(
    (alg): BenchScenario => ({
      group: 'extauth',
      name: `gatehouse run, JWT ${alg} route (crypto.subtle, no cache)`,
      request: { headers: { authorization: `Bearer ${benchJwt(alg)}` } },
      start: (ctx) => pluginRow(ctx, JWT, 'Jwt', { config: { Jwks: BENCH_JWKS, Algorithms: [alg] } }, { headers: { authorization: `Bearer ${benchJwt(alg)}` } }),
    }),
  ),
  {
    group: 'extauth',
    name: 'gatehouse run, API key route (fetch + ctx.store)',
    request: { headers: { 'x-api-key': 'bench-key' } },
    start: async (ctx) => {
      // The key service: nginx answering every key (the plugin caches the answer in ctx.store).
      const keys = await startNginx(ctx.workDir, 'keys', (port) => `server { listen 127.0.0.1:${port}; location /keys/ { default_type application/json; return 200 '{"user":"bench"}'; } }`);
      const upstream = { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'keys' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: keys.port }] } } };
      try {
        const target = await pluginRow(
          ctx,
          API_KEY,
          'ApiKey',
          { egress: [{ upstreamRef: { name: 'keys' } }], config: { KeyServiceUrl: 'http://keys.default.upstream/keys/', CacheSeconds: 3600 } },
          { headers: { 'x-api-key': 'bench-key' } },
          [upstream],
        );
        return {
          ...target,
          stop: async () => {
            await target.stop();
            await keys.stop();
          },
        };
      } catch (error) {
        await keys.stop();
        throw error;
      }
    },
  },
  {
    group: 'extauth',
    name: 'gatehouse run, memory-store route (RateLimit, ctx.store.increment)',
    request,
    start: (ctx) => pluginRow(ctx, RATE_LIMIT, 'RateLimit', rateLimitStep({ memory: {} }), request),
  },
  {
    group: 'extauth',
    name: 'gatehouse run, Redis rate-limit route (RateLimit on redis-server)',
    request,
    start: async (ctx) => {
      // Debian's redis-server (test/ratelimit/install-redis.sh), on a free port, no persistence.
      const binary = findRedis();
      if (!binary) throw new Error('redis-server not found: run test/ratelimit/install-redis.sh (or set GATEHOUSE_REDIS_SERVER)');
      const redis = await startRedis(binary);
      try {
        const target = await pluginRow(ctx, RATE_LIMIT, 'RateLimit', rateLimitStep({ redis: { url: redis.url, timeout: '250ms' } }), request);
        return {
          ...target,
          stop: async () => {
            await target.stop();
            await redis.stop();
          },
        };
      } catch (error) {
        await redis.stop();
        throw error;
      }
    },
  },
];

// Issue 10's goals: RequiredHeader ≥ 0.8×, JWT ≥ 0.6×, API key ≥ 0.7× (where they stand: docs/plugins.md "Cost").
export const goals: BenchModule['goals'] = [
  { row: 'gatehouse run, plugin route (RequiredHeader)', against: 'gatehouse run, route without auth', minThroughputRatio: 0.8 },
  { row: 'gatehouse run, JWT RS256 route (crypto.subtle, no cache)', against: 'gatehouse run, route without auth', minThroughputRatio: 0.6 },
  { row: 'gatehouse run, JWT ES256 route (crypto.subtle, no cache)', against: 'gatehouse run, route without auth', minThroughputRatio: 0.6 },
  { row: 'gatehouse run, API key route (fetch + ctx.store)', against: 'gatehouse run, route without auth', minThroughputRatio: 0.7 },
  // Issue 30's goals: the memory store ≥ 0.7×, Redis ≥ 0.5×.
  { row: 'gatehouse run, memory-store route (RateLimit, ctx.store.increment)', against: 'gatehouse run, route without auth', minThroughputRatio: 0.7 },
  { row: 'gatehouse run, Redis rate-limit route (RateLimit on redis-server)', against: 'gatehouse run, route without auth', minThroughputRatio: 0.5 },
];
