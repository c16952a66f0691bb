/**
 * Rate limits on the gateway's own request path (issue 28 item 3, docs/rate-limiting.md "On
 * routes and virtual hosts"): the route and virtual-host options of Gloo's guides, through real
 * `gatehouse run` processes, counted in a real Redis (Debian's redis-server) or in memory.
 * Exactness: 20 requests against a limit of 10 give exactly 10 answers 200, across two processes
 * sharing one Redis and across `--workers 2`.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send, type Reply } from '../support/http.ts';
import { refusedPort, startEcho, type TestServer } from '../support/upstream.ts';
import { describeWithRedis, startRedis, type RedisServer } from './redis.ts';

const ns = 'gloo-system';
const vs = (routes: object[], options: object = {}) => ({ ...manifests.virtualService('limited', { domains: ['*'], routes, options }), metadata: { name: 'limited', namespace: ns } });
const to = { single: { upstream: { name: 'echo', namespace: ns } } };

/** Gloo's set-style guide shape: setDescriptors + setActions. */
const setStyle = {
  apiVersion: 'ratelimit.solo.io/v1alpha1',
  kind: 'RateLimitConfig',
  metadata: { name: 'per-type', namespace: ns },
  spec: { raw: { setDescriptors: [{ simpleDescriptors: [{ key: 'type', value: 'Messenger' }, { key: 'number' }], rateLimit: { requestsPerUnit: 10, unit: 'DAY' } }], rateLimits: [{ setActions: [{ requestHeaders: { headerName: 'x-type', descriptorKey: 'type' } }, { requestHeaders: { headerName: 'x-number', descriptorKey: 'number' } }] }] } },
};

/** Gloo's Envoy-style (raw) guide shape: a descriptor tree and ordered actions. */
const envoyStyle = {
  apiVersion: 'ratelimit.solo.io/v1alpha1',
  kind: 'RateLimitConfig',
  metadata: { name: 'per-account', namespace: ns },
  spec: { raw: { descriptors: [{ key: 'account', rateLimit: { requestsPerUnit: 10, unit: 'DAY' }, descriptors: [{ key: 'plan', value: 'free', rateLimit: { requestsPerUnit: 3, unit: 'DAY' } }] }], rateLimits: [{ actions: [{ requestHeaders: { headerName: 'x-account', descriptorKey: 'account' } }, { requestHeaders: { headerName: 'x-plan', descriptorKey: 'plan' } }] }, { actions: [{ requestHeaders: { headerName: 'x-account', descriptorKey: 'account' } }] }] } },
};

const routes = [
  { matchers: [{ prefix: '/set' }], routeAction: to, options: { rateLimitConfigs: { refs: [{ name: 'per-type', namespace: ns }] } } },
  { matchers: [{ prefix: '/envoy' }], routeAction: to, options: { rateLimitEarlyConfigs: { refs: [{ name: 'per-account' }] } } },
  { matchers: [{ prefix: '/basic' }], routeAction: to, options: { ratelimitBasic: { anonymousLimits: { requestsPerUnit: 4, unit: 'DAY' } } } },
  { matchers: [{ prefix: '/local' }], routeAction: to, options: { localRatelimit: { maxTokens: 2, tokensPerFill: 1, fillInterval: '1h' } } },
  { matchers: [{ prefix: '/' }], routeAction: to },
];

let echo: TestServer;
let config: ConfigDir;

beforeAll(async () => {
  echo = await startEcho('echo');
  config = await makeConfigDir({ 'limits.yaml': [{ ...manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]), metadata: { name: 'echo', namespace: ns } }, setStyle, envoyStyle, vs(routes)] });
});

afterAll(async () => {
  await echo?.close();
  await config?.cleanup();
});

/** `n` requests at once (each on its own connection), spread over `urls` in turn. */
async function burst(urls: readonly string[], n: number, path: string, headers: Record<string, string>): Promise<Reply[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => send(urls[i % urls.length]!, { path, headers })));
}

function statuses(replies: readonly Reply[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const r of replies) out[r.status] = (out[r.status] ?? 0) + 1;
  return out;
}

/**
 * For the tests that count exact decisions: Redis gets 10 s per call instead of the default 500 ms.
 * Limits fail open by default, so one call slower than the deadline on a loaded machine (a worker's
 * first, while its connection opens) was one more request allowed: 11 of 20 in a fresh-clone CI
 * run. The count is what these tests check; the deadline and fail-open have tests of their own.
 * (11 of 20 came back once more with this deadline, in fresh-clone run X of 2026-11-30: a call made
 * while the worker's first connection was still opening failed at once, not at its deadline. The
 * client now waits for that first attempt: redis-client.test.ts.)
 */
const UNHURRIED = { GATEHOUSE_RATELIMIT_TIMEOUT_MS: '10000' };

/** Waits until the current DAY window has more than 30 s left, so a burst stays in one window. */
async function awayFromDayEnd(): Promise<void> {
  const left = 86_400_000 - (Date.now() % 86_400_000);
  if (left < 30_000) await new Promise((r) => setTimeout(r, left + 1000));
}

describeWithRedis('gateway rate limits through Redis', 'test/ratelimit/gateway-limits.test.ts', (binary) => {
  let redis: RedisServer;
  const gatehouses: GatehouseProcess[] = [];
  const start = async (args: string[] = [], env: NodeJS.ProcessEnv = {}) => {
    const g = await startGatehouse('run', ['--config-dir', config.path, ...args], { env: { GATEHOUSE_RATELIMIT_REDIS_URL: redis.url, ...env }, timeoutMs: 60_000 });
    gatehouses.push(g);
    return g;
  };

  beforeAll(async () => {
    redis = await startRedis(binary);
  }, 30_000);

  afterAll(async () => {
    await Promise.all(gatehouses.map((g) => g.stop()));
    await redis?.stop();
  });

  it('set style across two gatehouse run processes sharing one Redis: 20 requests, limit 10, exactly 10 allowed; the 429s as Envoy sends them', async () => {
    const [a, b] = await Promise.all([start([], UNHURRIED), start([], UNHURRIED)]);
    await awayFromDayEnd();
    const number = randomUUID();
    const replies = await burst([a!.url, b!.url], 20, '/set/x', { 'x-type': 'Messenger', 'x-number': number });
    expect(statuses(replies)).toEqual({ 200: 10, 429: 10 });
    const limited = replies.find((r) => r.status === 429)!;
    expect(limited.headers['x-envoy-ratelimited']).toBe('true');
    expect(limited.headers['x-gatehouse-error']).toBe('GH_RATELIMITED');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(limited.headers['x-ratelimit-remaining']).toBe('0');
    expect(String(limited.headers['x-ratelimit-limit'])).toMatch(/^10, 10;w=86400/);
    // A request the set does not match (another type) is not limited.
    expect((await send(a!.url, { path: '/set/x', headers: { 'x-type': 'Whatsapp', 'x-number': number } })).status).toBe(200);
  }, 120_000);

  it('--workers 2 sharing one Redis: 20 requests, limit 10, exactly 10 allowed', async () => {
    const g = await start(['--workers', '2'], UNHURRIED);
    await awayFromDayEnd();
    const replies = await burst([g.url], 20, '/set/y', { 'x-type': 'Messenger', 'x-number': randomUUID() });
    expect(statuses(replies)).toEqual({ 200: 10, 429: 10 });
  }, 120_000);

  it('Envoy style (raw descriptors, ordered actions): the most specific limit of the tree applies (3 for the free plan), 10 otherwise', async () => {
    const g = gatehouses[0] ?? (await start());
    await awayFromDayEnd();
    const free = await burst([g.url], 6, '/envoy/x', { 'x-account': randomUUID(), 'x-plan': 'free' });
    expect(statuses(free)).toEqual({ 200: 3, 429: 3 });
    const paid = await burst([g.url], 12, '/envoy/x', { 'x-account': randomUUID() });
    expect(statuses(paid)).toEqual({ 200: 10, 429: 2 });
    // Without the header no descriptor is built: not limited.
    expect(statuses(await burst([g.url], 12, '/envoy/x', {}))).toEqual({ 200: 12 });
  }, 120_000);

  it('Redis unreachable: fail open by default (allowed), fail closed with GATEHOUSE_RATELIMIT_FAIL_OPEN=false (429)', async () => {
    const dead = `redis://127.0.0.1:${await refusedPort()}`;
    const open = await start([], { GATEHOUSE_RATELIMIT_REDIS_URL: dead, GATEHOUSE_RATELIMIT_TIMEOUT_MS: '200' });
    expect(statuses(await burst([open.url], 12, '/set/z', { 'x-type': 'Messenger', 'x-number': 'n' }))).toEqual({ 200: 12 });
    const closed = await start([], { GATEHOUSE_RATELIMIT_REDIS_URL: dead, GATEHOUSE_RATELIMIT_TIMEOUT_MS: '200', GATEHOUSE_RATELIMIT_FAIL_OPEN: 'false' });
    const denied = await send(closed.url, { path: '/set/z', headers: { 'x-type': 'Messenger', 'x-number': 'n' } });
    expect(denied.status).toBe(429);
    expect(denied.headers['x-envoy-ratelimited']).toBe('true');
    // Routes without limits never need the counters.
    expect((await send(closed.url, { path: '/other' })).status).toBe(200);
  }, 120_000);
});

it('in memory (no Redis): ratelimitBasic per client address, localRatelimit token bucket', async () => {
  const g = await startGatehouse('run', ['--config-dir', config.path], { timeoutMs: 60_000 });
  try {
    await awayFromDayEnd();
    expect(statuses(await burst([g.url], 6, '/basic/x', {}))).toEqual({ 200: 4, 429: 2 });
    const local = await burst([g.url], 3, '/local/x', {});
    expect(statuses(local)).toEqual({ 200: 2, 429: 1 });
    expect(local.find((r) => r.status === 429)!.headers['x-gatehouse-error']).toBe('GH_RATELIMITED_LOCAL');
  } finally {
    await g.stop();
  }
}, 120_000);
