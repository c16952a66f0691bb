import { request as httpRequest } from 'node:http';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';
import { describeWithRedis, startRedis, type RedisServer } from '../ratelimit/redis.ts';
import { authRoute, buildReferencePlugin, deploy, type Deployment } from './support.ts';

// The RateLimit reference plugin and the plugin store end to end (SPEC 5.3 "Per-step store",
// "Client response headers"): real `gatehouse run` processes, a real redis-server. A limit of 10
// over 20 requests lets EXACTLY 10 through when two processes share one Redis, and when the
// workers of `gatehouse run --workers 2` share the primary's memory store; reloads and plugin
// rebuilds keep the counters; a Redis that goes away gets the configured fail mode, at once.

const PASSWORD = 'store-test-password';
let plugin: Awaited<ReturnType<typeof buildReferencePlugin>>;
let upstream: TestServer;
let redis: RedisServer;
let config: ConfigDir;

/** A RateLimit step counting `x-key`, 10 a day, in `store`. */
const limited = (store: object, extra: object = {}) => [{ pluginAuth: { name: 'RateLimit', config: { RequestsPerUnit: 10, Unit: 'day', Key: { Header: 'x-key' }, ...extra }, store } }];

/** Manifests of the test: Redis steps (fail closed and open), a memory step, and their routes. */
function files(redisUrl: string, memoryExtra: object = {}) {
  const redisStore = (failOpen: boolean) => ({ redis: { url: redisUrl, secretRef: { name: 'redis-auth' }, timeout: '300ms', failOpen } });
  return {
    'app.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'redis-auth', namespace: 'default' }, data: { password: Buffer.from(PASSWORD).toString('base64') } },
      manifests.authConfig('rl-redis', limited(redisStore(false))),
      manifests.authConfig('rl-redis-open', limited(redisStore(true))),
      manifests.authConfig('rl-memory', limited({ memory: {} }, memoryExtra)),
      manifests.virtualService('app', { domains: ['*'], routes: [authRoute('/redis/', 'rl-redis'), authRoute('/open/', 'rl-redis-open'), authRoute('/memory/', 'rl-memory')] }),
    ],
  };
}

/** GET on a new connection each time (so `--workers` spreads them), with a deadline: a stall fails the test. */
function get(url: string, key: string): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent: false, headers: { 'x-key': key, connection: 'close' }, signal: AbortSignal.timeout(10_000) }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** `count` requests spread round-robin over `urls`; the statuses in order. */
async function burst(urls: string[], path: string, key: string, count = 20): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) statuses.push((await get(`${urls[i % urls.length]}${path}`, key)).status);
  return statuses;
}

const allowedOf = (statuses: number[]) => statuses.filter((s) => s === 200).length;

describeWithRedis('RateLimit and the plugin store through gatehouse run', 'test/plugin-kit/rate-limit.test.ts', (binary) => {
  beforeAll(async () => {
    plugin = await buildReferencePlugin('rate-limit', 'RateLimit');
    upstream = await startServer((_req, res) => res.end('ok'));
    redis = await startRedis(binary, { password: PASSWORD });
    config = await makeConfigDir(files(redis.url));
  }, 120_000);

  afterAll(async () => {
    await config?.cleanup();
    await redis?.stop();
    await upstream?.close();
    await plugin?.cleanup();
  });

  describe('two gatehouse run processes sharing one Redis', () => {
    let a: GatehouseProcess;
    let b: GatehouseProcess;
    beforeAll(async () => {
      [a, b] = await Promise.all([0, 1].map(() => startGatehouse('run', ['--config-dir', config.path, '--plugin-dir', plugin.dir, '--extauth-timeout', '3s'])));
      await Promise.all([a, b].map((p) => p.waitForLog((line) => line.msg === 'received new auth configuration', 60_000)));
    }, 120_000);
    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
    });

    it('lets exactly 10 of 20 requests through, alternating between the processes, with X-RateLimit-* on the allowed responses', async () => {
      const first = await get(`${a.url}/redis/x`, 'two-processes');
      expect(first.status).toBe(200);
      expect(first.headers['x-ratelimit-limit']).toBe('10');
      expect(first.headers['x-ratelimit-remaining']).toBe('9');
      expect(Number(first.headers['x-ratelimit-reset'])).toBeGreaterThan(0);
      const rest = await burst([b.url, a.url], '/redis/x', 'two-processes', 19);
      expect(allowedOf([first.status, ...rest])).toBe(10);
      expect(rest.slice(0, 9)).toEqual(Array(9).fill(200));
      expect(rest.slice(9)).toEqual(Array(10).fill(429));
      const denied = await get(`${b.url}/redis/x`, 'two-processes');
      expect(denied.status).toBe(429);
      expect(denied.headers['x-ratelimit-remaining']).toBe('0');
      expect(denied.headers['retry-after']).toBe(denied.headers['x-ratelimit-reset']);
    });

    it('keeps each process\'s memory store to itself (what Redis is for)', async () => {
      const statuses = await burst([a.url, b.url], '/memory/x', 'per-process');
      expect(allowedOf(statuses)).toBe(20);
    });
  });

  describe('gatehouse gateway + gatehouse extauth (checks over gRPC)', () => {
    let gatehouse: Deployment;
    beforeAll(async () => {
      gatehouse = await deploy('gateway + extauth', config.path, plugin.dir);
    }, 120_000);
    afterAll(async () => {
      await gatehouse?.stop();
    });

    it('the client response headers cross gRPC as response_headers_to_add; the limit holds', async () => {
      const statuses: number[] = [];
      for (let i = 1; i <= 12; i++) {
        const reply = await get(`${gatehouse.url}/redis/x`, 'over-grpc');
        statuses.push(reply.status);
        if (i <= 10) expect(reply.headers['x-ratelimit-remaining']).toBe(String(10 - i));
      }
      expect(statuses).toEqual([...Array(10).fill(200), 429, 429]);
    });
  });

  describe('gatehouse run --workers 2', () => {
    let run: GatehouseProcess;
    beforeAll(async () => {
      run = await startGatehouse('run', ['--config-dir', config.path, '--plugin-dir', plugin.dir, '--extauth-timeout', '3s', '--workers', '2']);
      // Both workers have their auth configuration (and so listen): a burst right after one was
      // ready could land on it alone (SO_REUSEPORT spreads connections over the bound sockets).
      const first = await run.waitForLog((line) => line.msg === 'received new auth configuration' && line.pid !== run.child.pid, 150_000);
      await run.waitForLog((line) => line.msg === 'received new auth configuration' && line.pid !== run.child.pid && line.pid !== first.pid, 150_000);
    }, 200_000);
    afterAll(async () => {
      await run?.stop();
    });

    it('shares one memory store between the workers (the primary\'s): exactly 10 of 20', async () => {
      const statuses = await burst([run.url], '/memory/x', 'workers-memory');
      expect(allowedOf(statuses)).toBe(10);
      expect(statuses.slice(10)).toEqual(Array(10).fill(429));
      // Both workers served (new connections, spread by the kernel), so the count was shared. The
      // access log is written in batches: wait until all 20 lines are out before reading their pids.
      const lines = await vi.waitFor(() => {
        const found = run.logs.filter((line) => line.msg === 'access' && line.path === '/memory/x');
        if (found.length < 20) throw new Error(`${found.length} of 20 access lines written`);
        return found;
      }, { timeout: 10_000, interval: 50 });
      expect(new Set(lines.map((line) => line.pid)).size).toBe(2);
    });

    it('shares one Redis between the workers too: exactly 10 of 20', async () => {
      expect(allowedOf(await burst([run.url], '/redis/x', 'workers-redis'))).toBe(10);
    });
  });

  describe('one gatehouse run: reloads, plugin rebuilds, Redis going away', () => {
    let gatehouse: Deployment;
    beforeAll(async () => {
      gatehouse = await deploy('run', config.path, plugin.dir);
    }, 120_000);
    afterAll(async () => {
      await gatehouse?.stop();
    });

    it('a reload of the AuthConfig and a rebuild of the plugin keep the memory counters', async () => {
      expect(allowedOf(await burst([gatehouse.url], '/memory/x', 'kept', 4))).toBe(4);
      // A changed AuthConfig (same step identity): the step is rebuilt, its store is found again.
      const reloads = gatehouse.auth.logs.filter((line) => line.msg === 'received new auth configuration').length;
      await config.write('app.yaml', files(redis.url, { HeadersOnAllowed: false })['app.yaml']);
      await gatehouse.auth.waitForLog(() => gatehouse.auth.logs.filter((line) => line.msg === 'received new auth configuration').length > reloads, 20_000);
      const afterReload = await get(`${gatehouse.url}/memory/x`, 'kept');
      expect(afterReload.status).toBe(200);
      expect(afterReload.headers['x-ratelimit-limit']).toBeUndefined();
      // The plugin file rebuilt (a new build, same name): the step is rebuilt, the counters stay.
      const rebuilt = gatehouse.auth.logs.length;
      await buildAgain(plugin.dir);
      await gatehouse.auth.waitForLog((line) => line.msg === 'auth plugins changed: rebuilt the AuthConfigs that use them' && gatehouse.auth.logs.indexOf(line) >= rebuilt, 20_000);
      const statuses = await burst([gatehouse.url], '/memory/x', 'kept', 7);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    });

    it('Redis down: failOpen false denies (403), failOpen true allows, each at once; back up, counting resumes', async () => {
      expect((await get(`${gatehouse.url}/redis/x`, 'down')).status).toBe(200);
      await redis.stop();
      expect((await get(`${gatehouse.url}/redis/x`, 'down')).status).toBe(403);
      expect((await get(`${gatehouse.url}/open/x`, 'down')).status).toBe(200);
      const failures = gatehouse.auth.logs.filter((line) => line.code === 'GH_PLUGIN_STORE_UNAVAILABLE');
      expect(failures.length).toBeGreaterThanOrEqual(2);
      expect(gatehouse.output()).not.toContain(PASSWORD);
      // The same port again: the client reconnects by itself.
      redis = await startRedis(binary, { password: PASSWORD, port: redis.port });
      let status = 0;
      for (let i = 0; i < 100 && status !== 200; i++) {
        status = (await get(`${gatehouse.url}/redis/x`, 'after-restart')).status;
        if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(status).toBe(200);
    });
  });
});

/** Builds the RateLimit plugin into `dir` again: a new file the plugin-dir watcher sees. */
async function buildAgain(dir: string): Promise<void> {
  const { buildPlugin } = await import('@gatehouse/plugin-sdk/build');
  const { fileURLToPath } = await import('node:url');
  const { mkdtemp, readFile, rm } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const scratch = await mkdtemp(join(tmpdir(), 'gatehouse-rebuild-'));
  await buildPlugin({ entry: fileURLToPath(new URL('../../plugins/rate-limit/src/index.ts', import.meta.url)), name: 'RateLimit', outDir: scratch, minify: true });
  await writeFile(join(dir, 'RateLimit.js'), await readFile(join(scratch, 'RateLimit.js')));
  await rm(scratch, { recursive: true, force: true });
}
