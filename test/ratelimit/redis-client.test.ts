/**
 * The shared Redis client factory (core/src/redis/client.ts) against a real redis-server:
 * settings errors, credentials from a Secret, the in-flight bound and the per-call deadline.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createRedisClient, loadRedisDriver, redisCredentialsFromSecret, redisOptions, RedisCodes, type RedisClient } from '../../core/src/redis/client.ts';
import { RedisCounters } from '../../core/src/ratelimit/redis-backend.ts';
import { refusedPort } from '../support/upstream.ts';
import { describeWithRedis, startRedis, type RedisServer } from './redis.ts';

// The driver loads on demand (processes without Redis never hold it); these tests use the client directly.
await loadRedisDriver();

const secret = (data: Record<string, string>) => ({ namespace: 'ops', name: 'redis', spec: { type: 'Opaque', data } });
const codeOf = (fn: () => unknown) => {
  try {
    fn();
    return 'no error';
  } catch (error) {
    return (error as { code?: string }).code;
  }
};

test('settings: bad URLs and databases are refused with GH_REDIS_SETTINGS, passwords never echoed', () => {
  expect(codeOf(() => redisOptions({ url: 'http://127.0.0.1:6379' }))).toBe(RedisCodes.SETTINGS);
  expect(codeOf(() => redisOptions({ url: 'not a url' }))).toBe(RedisCodes.SETTINGS);
  expect(codeOf(() => redisOptions({ url: 'redis://127.0.0.1:6379/99' }))).toBe(RedisCodes.SETTINGS);
  try {
    redisOptions({ url: 'http://user:s3cret@127.0.0.1' });
  } catch (error) {
    expect((error as Error).message).not.toContain('s3cret');
  }
  expect(redisOptions({ url: 'rediss://u:p%40ss@[::1]:6380/2' })).toMatchObject({ host: '::1', port: 6380, db: 2, username: 'u', password: 'p@ss', tls: {} });
  expect(redisOptions({ url: 'redis://h', password: 'from-secret' })).toMatchObject({ host: 'h', port: 6379, db: 0, password: 'from-secret' });
  expect(redisOptions({ url: 'redis://h' }).tls).toBeUndefined();
});

test('credentials from a Secret: password required, username optional, a missing key names the Secret and its keys', () => {
  expect(redisCredentialsFromSecret(secret({ password: 'p' }))).toEqual({ password: 'p' });
  expect(redisCredentialsFromSecret(secret({ password: 'p', username: 'u' }))).toEqual({ username: 'u', password: 'p' });
  expect(() => redisCredentialsFromSecret(secret({ pass: 'p' }))).toThrow(/Secret ops\/redis has no key "password" for the Redis password \(it has: pass\)/);
});

describeWithRedis('the Redis client against redis-server', 'test/ratelimit/redis-client.test.ts', (binary) => {
  let redis: RedisServer;
  const clients: RedisClient[] = [];
  const client = (extra: Partial<Parameters<typeof createRedisClient>[0]> = {}) => {
    const c = createRedisClient({ url: redis.url, password: 'pw', ...extra });
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    redis = await startRedis(binary, { password: 'pw' });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    if (redis) {
      redis.child.kill('SIGCONT');
      await redis.stop();
    }
  });

  test('a pool of connections pipelines concurrent increments without losing one', async () => {
    const c = client({ poolSize: 4 });
    await c.ready();
    const counters = new RedisCounters(c, { ownsClient: false });
    const results = await Promise.all(Array.from({ length: 400 }, () => counters.increment([{ key: 'gatehouse:test:pool', ttlSeconds: 60 }, { key: 'gatehouse:test:pool2', ttlSeconds: 60 }], 1, Date.now() + 10_000)));
    expect(results.map((r) => r[0]).sort((a, b) => a! - b!)).toEqual(Array.from({ length: 400 }, (_, i) => i + 1));
    expect(Math.max(...results.map((r) => r[1]!))).toBe(400);
  });

  test('a call made before the first connection is ready waits for it (within its deadline) instead of failing', async () => {
    const c = client();
    // Connections open asynchronously: none is ready yet when the client is returned.
    expect(c.connections.map((r) => r.status)).not.toContain('ready');
    // Before, this failed at once (GH_REDIS_UNAVAILABLE "not connected (connecting)"): a fresh
    // process's first requests failed open past their limit.
    expect(await c.call((r) => r.incr('gatehouse:test:first'), Date.now() + 10_000)).toBe(1);
    // A refused address ends the first attempt: its calls fail at once, not at their deadline.
    const refused = client({ url: `redis://127.0.0.1:${await refusedPort()}` });
    const started = Date.now();
    await expect(refused.call((r) => r.ping(), Date.now() + 10_000)).rejects.toMatchObject({ code: RedisCodes.UNAVAILABLE });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  test('a wrong password never becomes ready; calls fail at once with GH_REDIS_UNAVAILABLE', async () => {
    const c = client({ password: 'wrong' });
    await expect(c.ready(1_000)).rejects.toMatchObject({ code: RedisCodes.UNAVAILABLE });
    const started = Date.now();
    await expect(c.call((r) => r.ping())).rejects.toMatchObject({ code: RedisCodes.UNAVAILABLE });
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  test('a frozen Redis: calls time out at their deadline, and beyond maxInFlight they are refused at once', async () => {
    const c = client({ maxInFlight: 5, commandTimeoutMs: 200 });
    await c.ready();
    redis.child.kill('SIGSTOP');
    try {
      const waiting = Array.from({ length: 5 }, () => c.call((r) => r.incr('gatehouse:test:frozen')).catch((e: { code?: string }) => e.code));
      await expect(c.call((r) => r.ping())).rejects.toMatchObject({ code: RedisCodes.OVERLOADED });
      expect(await Promise.all(waiting)).toEqual(Array(5).fill(RedisCodes.UNAVAILABLE));
      // Timed out, but still waiting on the socket: the bound holds until Redis answers.
      await expect(c.call((r) => r.ping())).rejects.toMatchObject({ code: RedisCodes.OVERLOADED });
    } finally {
      redis.child.kill('SIGCONT');
    }
    // Redis answers the queued commands once resumed: the slots free up.
    const until = Date.now() + 10_000;
    for (;;) {
      const answer = await c.call((r) => r.ping()).catch((e: { code?: string }) => e.code);
      if (answer === 'PONG') break;
      if (Date.now() > until) throw new Error(`still ${answer}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  });
});

describeWithRedis('the Redis client over TLS (rediss://)', 'test/ratelimit/redis-client.test.ts', (binary) => {
  let redis: RedisServer;
  let dir: string;
  let ca: string;
  const clients: RedisClient[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gatehouse-redis-tls-'));
    // A self-signed certificate for the name redis.test (its own CA).
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=redis.test', '-addext', 'subjectAltName=DNS:redis.test', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    ca = await readFile(join(dir, 'cert.pem'), 'utf8');
    redis = await startRedis(binary, { password: 'pw', tls: { cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem') } });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await redis?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('verified against the given CA and name, counters work; an unknown CA or a wrong name never connects', async () => {
    const good = createRedisClient({ url: redis.url, password: 'pw', tls: { ca, servername: 'redis.test' } });
    clients.push(good);
    await good.ready();
    const counters = new RedisCounters(good, { ownsClient: false });
    expect(await counters.increment([{ key: 'gatehouse:test:tls', ttlSeconds: 60 }], 3, Date.now() + 5_000)).toEqual([3]);
    const untrusted = createRedisClient({ url: redis.url, password: 'pw', tls: { servername: 'redis.test' } });
    const wrongName = createRedisClient({ url: redis.url, password: 'pw', tls: { ca, servername: 'other.test' } });
    const plain = createRedisClient({ url: redis.url.replace('rediss:', 'redis:'), password: 'pw', connectTimeoutMs: 500 });
    clients.push(untrusted, wrongName, plain);
    for (const c of [untrusted, wrongName, plain]) await expect(c.ready(1_500)).rejects.toMatchObject({ code: RedisCodes.UNAVAILABLE });
  });
});
