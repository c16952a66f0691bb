import type { Redis, RedisOptions } from 'ioredis';
import type { Resource } from '../config/resource.ts';
import { GatehouseError } from '../errors.ts';
import type { Logger } from '../log/logger.ts';

/**
 * The one Redis client factory of Gatehouse: rate-limit counters use it now, the plugin store
 * and OIDC sessions will (SPEC 5.3, issue 28). One place decides how Gatehouse connects
 * (URL, credentials from a Secret, TLS), how much it may queue, and how long a call may wait.
 */

let driver: { Redis: typeof import('ioredis').Redis } | undefined;

/**
 * Loads the Redis driver (ioredis, ~10 MB resident) once: a process whose configuration uses no
 * Redis never holds it. Await it before {@link createRedisClient}.
 */
export async function loadRedisDriver(): Promise<void> {
  driver ??= { Redis: (await import('ioredis')).Redis };
}

/** Stable error codes of Redis calls. */
export const RedisCodes = {
  /** Redis failed, is not connected, or did not answer within the call's deadline. */
  UNAVAILABLE: 'GH_REDIS_UNAVAILABLE',
  /** As many commands are in flight as `maxInFlight` allows: refused at once instead of queued. */
  OVERLOADED: 'GH_REDIS_OVERLOADED',
  /** The settings are unusable (bad URL, missing Secret key). */
  SETTINGS: 'GH_REDIS_SETTINGS',
} as const;

/** How to reach one Redis. */
export interface RedisSettings {
  /** `redis://[user:pass@]host:port[/db]`, or `rediss://` for TLS. */
  url: string;
  /** Override the URL's credentials (usually from a Secret: {@link redisCredentialsFromSecret}). */
  username?: string | undefined;
  password?: string | undefined;
  /** TLS options beyond `rediss://` (a CA in PEM, the name to verify); `true` turns TLS on with defaults. */
  tls?: boolean | { ca?: string | undefined; servername?: string | undefined; rejectUnauthorized?: boolean | undefined } | undefined;
  /** Connections, each pipelining the commands of one event-loop tick into one write (default 1, at most 16). */
  poolSize?: number | undefined;
  /** Commands waiting for an answer at most, over the pool (default 10,000); beyond, calls fail at once. */
  maxInFlight?: number | undefined;
  /** Longest wait of one call when the caller gives no deadline (default 250 ms). */
  commandTimeoutMs?: number | undefined;
  /** TCP + TLS + AUTH (default 2 s). */
  connectTimeoutMs?: number | undefined;
}

/** A pooled, bounded Redis client. */
export interface RedisClient {
  /**
   * Runs `command` on one pooled connection; rejects with GH_REDIS_OVERLOADED at once when
   * `maxInFlight` commands wait, and with GH_REDIS_UNAVAILABLE when Redis is not connected, fails,
   * or `deadline` (epoch ms; default now + commandTimeoutMs) passes first.
   */
  call<T>(command: (redis: Redis) => Promise<T>, deadline?: number): Promise<T>;
  /** Resolves when every connection is ready (tests, readiness); rejects after `timeoutMs`. */
  ready(timeoutMs?: number): Promise<void>;
  /** The connections (to define scripts on each). */
  readonly connections: readonly Redis[];
  close(): Promise<void>;
}

/** Parses and checks settings; throws GH_REDIS_SETTINGS with what to change. */
export function redisOptions(settings: RedisSettings): RedisOptions {
  const url = URL.parse(settings.url);
  if (!url || (url.protocol !== 'redis:' && url.protocol !== 'rediss:')) throw new GatehouseError(RedisCodes.SETTINGS, `Redis URL ${JSON.stringify(redact(settings.url))} must be redis://host:port or rediss://host:port`);
  const port = url.port === '' ? 6379 : Number(url.port);
  const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0;
  if (!Number.isInteger(db) || db < 0 || db > 15) throw new GatehouseError(RedisCodes.SETTINGS, `Redis URL database ${JSON.stringify(url.pathname.slice(1))} must be 0 to 15`);
  const tlsWanted = url.protocol === 'rediss:' || settings.tls === true || typeof settings.tls === 'object';
  const tls = typeof settings.tls === 'object' ? settings.tls : {};
  const username = settings.username ?? (url.username ? decodeURIComponent(url.username) : undefined);
  const password = settings.password ?? (url.password ? decodeURIComponent(url.password) : undefined);
  return {
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port,
    db,
    ...(username ? { username } : {}),
    ...(password ? { password } : {}),
    ...(tlsWanted
      ? { tls: { ...(tls.ca ? { ca: tls.ca } : {}), ...(tls.servername ? { servername: tls.servername } : {}), ...(tls.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}) } }
      : {}),
    connectTimeout: settings.connectTimeoutMs ?? 2_000,
    // Fail fast while disconnected: the caller's fail-open/closed rule decides, nothing piles up.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    enableAutoPipelining: true,
    // Reconnect forever, backing off to 2 s.
    retryStrategy: (times: number) => Math.min(times * 100, 2_000),
    lazyConnect: false,
  };
}

/** Resolves when `attempt` ends, or rejects at `until` (epoch ms) with GH_REDIS_UNAVAILABLE. */
function afterFirstAttempt(attempt: Promise<void>, until: number): Promise<void> {
  const wait = until - Date.now();
  if (wait <= 0) return Promise.reject(new GatehouseError(RedisCodes.UNAVAILABLE, 'no time left for the Redis call (the first connection is still opening)'));
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new GatehouseError(RedisCodes.UNAVAILABLE, `Redis did not connect within ${wait} ms (the first connection is still opening)`)), wait);
    void attempt.then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Hides a URL's password for messages and logs. */
function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}

/** Creates the client (connections start at once, reconnect on their own). */
export function createRedisClient(settings: RedisSettings, options: { logger?: Logger | undefined; name?: string } = {}): RedisClient {
  if (!driver) throw new GatehouseError(RedisCodes.SETTINGS, 'internal: the Redis driver is not loaded (await loadRedisDriver() first)');
  const { Redis } = driver;
  const base = redisOptions(settings);
  const poolSize = settings.poolSize ?? 1;
  if (!Number.isInteger(poolSize) || poolSize < 1 || poolSize > 16) throw new GatehouseError(RedisCodes.SETTINGS, `poolSize must be 1 to 16, not ${settings.poolSize}`);
  const maxInFlight = settings.maxInFlight ?? 10_000;
  const commandTimeoutMs = settings.commandTimeoutMs ?? 250;
  const logger = options.logger;
  let lastErrorLog = 0;
  const connections = Array.from({ length: poolSize }, () => {
    const redis = new Redis({ ...base, connectionName: options.name ?? 'gatehouse' });
    // Without a listener ioredis prints every error; one log line per 10 s is enough.
    redis.on('error', (error: Error) => {
      const now = Date.now();
      if (now - lastErrorLog < 10_000) return;
      lastErrorLog = now;
      logger?.warn({ err: error.message, code: RedisCodes.UNAVAILABLE, redis: `${base.host}:${base.port}` }, 'redis connection error');
    });
    return redis;
  });
  // A connection's first attempt, until it is ready or has failed once: a call then waits for it
  // (within its deadline) instead of failing at once. Without this, the first requests of a fresh
  // process went ahead of its connection and their limits failed open (a fresh-clone CI run:
  // 11 of 20 allowed against a limit of 10, with two workers each opening its own connection).
  const firstAttempts = new Map<Redis, Promise<void>>();
  for (const redis of connections) {
    const attempt = new Promise<void>((resolve) => {
      const done = () => {
        firstAttempts.delete(redis);
        redis.off('ready', done).off('close', done).off('error', done).off('end', done);
        resolve();
      };
      // Ready, or failed in any way (refused, closed, a wrong password): then calls fail fast again.
      redis.on('ready', done).on('close', done).on('error', done).on('end', done);
    });
    firstAttempts.set(redis, attempt);
  }
  let next = 0;
  let inFlight = 0;
  let closed = false;

  const client: RedisClient = {
    connections,
    call<T>(command: (redis: Redis) => Promise<T>, deadline?: number): Promise<T> {
      if (closed) return Promise.reject(new GatehouseError(RedisCodes.UNAVAILABLE, 'the Redis client is closed'));
      if (inFlight >= maxInFlight) return Promise.reject(new GatehouseError(RedisCodes.OVERLOADED, `${inFlight} Redis commands are in flight (maxInFlight ${maxInFlight})`));
      const until = deadline ?? Date.now() + commandTimeoutMs;
      // Prefer a ready connection: a reconnecting one would fail the call at once.
      let redis = connections[next++ % poolSize]!;
      if (redis.status !== 'ready') redis = connections.find((c) => c.status === 'ready') ?? redis;
      if (redis.status !== 'ready') {
        const attempt = firstAttempts.get(redis);
        if (attempt) {
          // Counted in flight while it waits: a burst at start-up stays bounded too.
          inFlight++;
          return afterFirstAttempt(attempt, until)
            .finally(() => inFlight--)
            .then(() => client.call(command, until));
        }
        return Promise.reject(new GatehouseError(RedisCodes.UNAVAILABLE, `Redis at ${base.host}:${base.port} is not connected (${redis.status})`));
      }
      const wait = until - Date.now();
      if (wait <= 0) return Promise.reject(new GatehouseError(RedisCodes.UNAVAILABLE, 'no time left for the Redis call'));
      inFlight++;
      // The in-flight count drops when Redis answers, not at our timeout: a slow Redis cannot
      // make us stack up unbounded commands behind it.
      const running = command(redis).finally(() => inFlight--);
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => reject(new GatehouseError(RedisCodes.UNAVAILABLE, `Redis did not answer within ${wait} ms`)), wait);
        running.then(
          (value) => {
            clearTimeout(timer);
            resolve(value);
          },
          (error: Error) => {
            clearTimeout(timer);
            reject(error instanceof GatehouseError ? error : new GatehouseError(RedisCodes.UNAVAILABLE, `Redis failed: ${error.message}`, { cause: error }));
          },
        );
      });
    },
    async ready(timeoutMs = 10_000) {
      const until = Date.now() + timeoutMs;
      for (const redis of connections) {
        while (redis.status !== 'ready') {
          if (Date.now() > until) throw new GatehouseError(RedisCodes.UNAVAILABLE, `Redis at ${base.host}:${base.port} not ready within ${timeoutMs} ms (${redis.status})`);
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      }
    },
    async close() {
      closed = true;
      // ioredis drops its listeners from a socket it closes: a TLS alert that still arrives on it
      // (a handshake failing as it is closed) must not reach the process as an uncaught error
      // (fresh-clone CI run R: "tlsv1 alert decode error" after the TLS test closed its clients).
      for (const redis of connections) (redis as { stream?: { on(event: 'error', listener: () => void): unknown } }).stream?.on('error', () => {});
      await Promise.all(connections.map((redis) => redis.quit().catch(() => redis.disconnect())));
    },
  };
  return client;
}

/**
 * Credentials from a Kubernetes Secret (`username`, `password` keys by default): a missing key
 * is an error naming the Secret and its keys, never a silent unauthenticated connection.
 */
export function redisCredentialsFromSecret(secret: Pick<Resource<'Secret'>, 'namespace' | 'name' | 'spec'>, keys: { username?: string; password?: string } = {}): { username?: string; password: string } {
  const passwordKey = keys.password ?? 'password';
  const usernameKey = keys.username ?? 'username';
  const data = secret.spec.data;
  const password = data[passwordKey];
  if (password === undefined) throw new GatehouseError(RedisCodes.SETTINGS, `Secret ${secret.namespace}/${secret.name} has no key "${passwordKey}" for the Redis password (it has: ${Object.keys(data).sort().join(', ') || 'none'})`);
  const username = data[usernameKey];
  return username === undefined ? { password } : { username, password };
}
