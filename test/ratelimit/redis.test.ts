/**
 * Rate limits shared through a real Redis (Debian's redis-server): two real Gatehouse processes
 * (`gatehouse run`, whose embedded auth server serves ShouldRateLimit, and `gatehouse extauth`)
 * answer Envoy's RateLimitService over gRPC, with the Redis password from a Secret.
 */
import { randomUUID } from 'node:crypto';
import { credentials, loadPackageDefinition, Metadata, type Client, type ServiceError } from '@grpc/grpc-js';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { rateLimitPackage } from '../../core/src/ratelimit/grpc-service.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { refusedPort } from '../support/upstream.ts';
import { describeWithRedis, startRedis, type RedisServer } from './redis.ts';

const PASSWORD = 'redis password from a Secret';

interface Status {
  code: string;
  current_limit?: { requests_per_unit: number; unit: number; name: string };
  limit_remaining: number;
  duration_until_reset?: { seconds: string };
}
interface Answer {
  overall_code: string;
  statuses: Status[];
}
type RlsClient = Client & { ShouldRateLimit(request: object, metadata: Metadata, options: { deadline: number }, callback: (error: ServiceError | null, answer: Answer) => void): void };

/** A gRPC client of Envoy's RateLimitService (enum names in answers, for readable assertions). */
function rlsClient(port: number): RlsClient {
  const pkg = loadPackageDefinition(rateLimitPackage()) as unknown as { envoy: { service: { ratelimit: { v3: { RateLimitService: new (address: string, creds: ReturnType<typeof credentials.createInsecure>) => RlsClient } } } } };
  return new pkg.envoy.service.ratelimit.v3.RateLimitService(`127.0.0.1:${port}`, credentials.createInsecure());
}

const CODES = ['UNKNOWN', 'OK', 'OVER_LIMIT'];
function ask(client: RlsClient, request: object, timeoutMs = 10_000): Promise<Answer> {
  return new Promise((resolve, reject) =>
    client.ShouldRateLimit(request, new Metadata(), { deadline: Date.now() + timeoutMs }, (error, answer) =>
      error ? reject(error) : resolve({ overall_code: CODES[answer.overall_code as unknown as number]!, statuses: (answer.statuses ?? []).map((s) => ({ ...s, code: CODES[s.code as unknown as number]!, limit_remaining: s.limit_remaining ?? 0 })) }),
    ),
  );
}

/** A descriptor of the `tenants` RateLimitConfig (Gloo's CRD convention: generic_key <namespace>.<name> first). */
const tenant = (id: string) => ({ domain: 'crd', descriptors: [{ entries: [{ key: 'generic_key', value: 'gloo-system.tenants' }, { key: 'tenant', value: id }] }] });

const files = (secretPassword: string) => ({
  'secret.yaml': { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'redis-auth', namespace: 'gloo-system' }, type: 'Opaque', stringData: { password: secretPassword } },
  'rlc.yaml': {
    apiVersion: 'ratelimit.solo.io/v1alpha1',
    kind: 'RateLimitConfig',
    metadata: { name: 'tenants', namespace: 'gloo-system' },
    spec: { raw: { descriptors: [{ key: 'tenant', rateLimit: { requestsPerUnit: 10, unit: 'DAY' } }], rateLimits: [{ actions: [{ requestHeaders: { headerName: 'x-tenant', descriptorKey: 'tenant' } }] }] } },
  },
});

/** Waits until the current DAY window has more than `marginMs` left, so a burst stays in one window. */
async function awayFromWindowEnd(marginMs = 10_000): Promise<void> {
  for (;;) {
    const left = 86_400_000 - (Date.now() % 86_400_000);
    if (left > marginMs) return;
    await new Promise((r) => setTimeout(r, Math.min(left + 50, 1000)));
  }
}

describeWithRedis('rate limits shared through Redis by two Gatehouse processes', 'test/ratelimit/redis.test.ts', (binary) => {
  let redis: RedisServer;
  let config: ConfigDir;
  let run: GatehouseProcess;
  let extauth: GatehouseProcess;
  let clients: RlsClient[] = [];
  const env = () => ({ GATEHOUSE_RATELIMIT_REDIS_URL: redis.url, GATEHOUSE_RATELIMIT_REDIS_SECRET: 'gloo-system/redis-auth' });

  beforeAll(async () => {
    redis = await startRedis(binary, { password: PASSWORD });
    config = await makeConfigDir(files(PASSWORD));
    [run, extauth] = await Promise.all([
      startGatehouse('run', ['--config-dir', config.path], { env: env(), httpsPort: false }),
      startGatehouse('extauth', ['--config-dir', config.path, '--host', '127.0.0.1'], { env: env() }),
    ]);
    clients = [rlsClient(run.extauthPort!), rlsClient(extauth.port)];
    // Both processes loaded the config and reached Redis: a limit is reported (fail-open answers carry none).
    for (const client of clients) {
      const until = Date.now() + 30_000;
      for (;;) {
        const answer = await ask(client, tenant(`probe-${randomUUID()}`)).catch(() => undefined);
        if (answer?.statuses[0]?.current_limit) break;
        if (Date.now() > until) throw new Error(`no Redis-backed answer: ${JSON.stringify(answer)}\n${run.stderr()}${extauth.stderr()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }, 90_000);

  afterAll(async () => {
    for (const client of clients) client.close();
    await Promise.all([run?.stop(), extauth?.stop()]);
    await redis?.stop();
    await config?.cleanup();
  });

  test('20 concurrent requests over two processes, limit 10: exactly 10 allowed, then every one refused', async () => {
    await awayFromWindowEnd();
    const id = `t-${randomUUID()}`;
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => ask(clients[i % 2]!, tenant(id))));
    const codes = answers.map((a) => a.overall_code);
    expect(codes.filter((c) => c === 'OK')).toHaveLength(10);
    expect(codes.filter((c) => c === 'OVER_LIMIT')).toHaveLength(10);
    // Each allowed request saw a distinct remaining count: 9 … 0.
    const remaining = answers.filter((a) => a.overall_code === 'OK').map((a) => a.statuses[0]!.limit_remaining).sort((a, b) => a - b);
    expect(remaining).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const over = answers.find((a) => a.overall_code === 'OVER_LIMIT')!.statuses[0]!;
    expect(over).toMatchObject({ code: 'OVER_LIMIT', limit_remaining: 0, current_limit: { requests_per_unit: 10, unit: 4 /* DAY */, name: 'crd|generic_key^gloo-system.tenants|tenant' } });
    expect(Number(over.duration_until_reset!.seconds)).toBeGreaterThan(0);
    expect(Number(over.duration_until_reset!.seconds)).toBeLessThanOrEqual(86_400);
    // Both processes keep refusing: the counter is shared.
    for (const client of clients) expect((await ask(client, tenant(id))).overall_code).toBe('OVER_LIMIT');
    // Another tenant has its own counter.
    expect((await ask(clients[1]!, tenant(`t-${randomUUID()}`))).overall_code).toBe('OK');
  });

  test('counters are namespaced, bounded in size, and expire with their window', async () => {
    const direct = new Redis({ port: redis.port, host: '127.0.0.1', password: PASSWORD, lazyConnect: true });
    try {
      await direct.connect();
      const keys = await direct.keys('*');
      expect(keys.length).toBeGreaterThan(0);
      for (const key of keys) {
        expect(key).toMatch(/^gatehouse:rl:[A-Za-z0-9_-]{27}:86400:[0-9]+$/);
        const ttl = await direct.pttl(key);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(86_400_000);
      }
    } finally {
      direct.disconnect();
    }
  });

  test('malformed requests get INVALID_ARGUMENT; the process keeps serving', async () => {
    const refused = (request: object) => ask(clients[0]!, request).then(() => 'answered', (e: ServiceError) => e.code);
    const INVALID_ARGUMENT = 3;
    expect(await refused({ domain: '', descriptors: tenant('x').descriptors })).toBe(INVALID_ARGUMENT);
    expect(await refused({ domain: 'crd', descriptors: [] })).toBe(INVALID_ARGUMENT);
    expect(await refused({ domain: 'crd', descriptors: [{ entries: [] }] })).toBe(INVALID_ARGUMENT);
    expect(await refused({ domain: 'crd', descriptors: [{ entries: [{ key: 'tenant', value: 'v'.repeat(100_000) }] }] })).toBe(INVALID_ARGUMENT);
    expect(await refused({ domain: 'crd', descriptors: Array.from({ length: 1000 }, () => tenant('x').descriptors[0]) })).toBe(INVALID_ARGUMENT);
    // Unknown domains and descriptors no rule matches are not errors: OK without a limit (Envoy's reference service).
    expect(await ask(clients[0]!, { domain: 'elsewhere', descriptors: [{ entries: [{ key: 'a', value: 'b' }] }] })).toEqual({ overall_code: 'OK', statuses: [{ code: 'OK', limit_remaining: 0 }] });
    expect((await ask(clients[0]!, tenant(`t-${randomUUID()}`))).overall_code).toBe('OK');
  });
});

describeWithRedis('when Redis cannot be used, the decision follows GATEHOUSE_RATELIMIT_FAIL_OPEN', 'test/ratelimit/redis.test.ts', (binary) => {
  let redis: RedisServer;
  let wrongPassword: ConfigDir;
  const started: GatehouseProcess[] = [];
  const clients: RlsClient[] = [];

  beforeAll(async () => {
    redis = await startRedis(binary, { password: PASSWORD });
    wrongPassword = await makeConfigDir(files('not the password'));
  }, 30_000);
  afterAll(async () => {
    for (const client of clients) client.close();
    await Promise.all(started.map((p) => p.stop()));
    await redis?.stop();
    await wrongPassword?.cleanup();
  });

  const start = async (env: Record<string, string>) => {
    const p = await startGatehouse('extauth', ['--config-dir', wrongPassword.path, '--host', '127.0.0.1'], { env });
    started.push(p);
    const client = rlsClient(p.port);
    clients.push(client);
    return client;
  };

  test('a wrong password from the Secret, fail open (the default): allowed, no limit reported, quickly', async () => {
    const client = await start({ GATEHOUSE_RATELIMIT_REDIS_URL: redis.url, GATEHOUSE_RATELIMIT_REDIS_SECRET: 'gloo-system/redis-auth' });
    for (let i = 0; i < 12; i++) {
      const answer = await ask(client, tenant('same'), 10_000);
      expect(answer).toEqual({ overall_code: 'OK', statuses: [{ code: 'OK', limit_remaining: 0 }] });
    }
  });

  test('Redis unreachable, fail closed: refused', async () => {
    const client = await start({ GATEHOUSE_RATELIMIT_REDIS_URL: `redis://127.0.0.1:${await refusedPort()}`, GATEHOUSE_RATELIMIT_FAIL_OPEN: 'false' });
    const answer = await ask(client, tenant('any'), 10_000);
    expect(answer).toEqual({ overall_code: 'OVER_LIMIT', statuses: [{ code: 'OVER_LIMIT', limit_remaining: 0 }] });
    // Descriptors no rule limits never need Redis.
    expect((await ask(client, { domain: 'crd', descriptors: [{ entries: [{ key: 'generic_key', value: 'gloo-system.tenants' }, { key: 'other', value: 'x' }] }] })).overall_code).toBe('OK');
  });

  test('a Redis that stops answering mid-way: every call still answers within its deadline', async () => {
    const stalled = await startRedis(binary);
    const client = await start({ GATEHOUSE_RATELIMIT_REDIS_URL: stalled.url, GATEHOUSE_RATELIMIT_FAIL_OPEN: 'false', GATEHOUSE_RATELIMIT_TIMEOUT_MS: '300' });
    // Wait until it is connected (a limit is reported), then freeze Redis without closing its sockets.
    const until = Date.now() + 30_000;
    while (!(await ask(client, tenant(`p-${randomUUID()}`)).catch(() => undefined))?.statuses[0]?.current_limit) {
      if (Date.now() > until) throw new Error('never connected');
      await new Promise((r) => setTimeout(r, 100));
    }
    stalled.child.kill('SIGSTOP');
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, () => ask(client, tenant('frozen'), 15_000)));
      for (const answer of answers) expect(answer.overall_code).toBe('OVER_LIMIT');
    } finally {
      stalled.child.kill('SIGCONT');
      await stalled.stop();
    }
  });
});
