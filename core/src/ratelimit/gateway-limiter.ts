import type { ConfigSnapshot } from '../config/store.ts';
import type { Resource } from '../config/resource.ts';
import { GatehouseError } from '../errors.ts';
import type { Logger } from '../log/logger.ts';
import { createRedisClient, redisCredentialsFromSecret, RedisCodes } from '../redis/client.ts';
import type { CounterBackend } from './backend.ts';
import { rateLimitTablesOf } from './checks.ts';
import { RateLimitCodes } from './codes.ts';
import { RateLimitEngine } from './engine.ts';
import type { RateLimitServiceOptions } from './grpc-service.ts';
import { MemoryCounters } from './memory-backend.ts';
import { RedisCounters } from './redis-backend.ts';

/**
 * The gateway's own rate limiter (docs/rate-limiting.md "On routes and virtual hosts"): one
 * decision engine per traffic process, its tables the served RateLimitConfigs, its counters in
 * memory (this process only) or in Redis (shared by every worker, process and replica using it:
 * the same settings as the rate-limit server, `GATEHOUSE_RATELIMIT_*`).
 */
export class GatewayRateLimiter {
  readonly engine: RateLimitEngine;
  readonly #settings: NonNullable<RateLimitServiceOptions['backend']>;
  readonly #logger: Logger | undefined;
  #secretVersion: string | undefined;

  constructor(options: RateLimitServiceOptions = {}) {
    this.#settings = options.backend ?? { type: 'memory' };
    this.#logger = options.logger;
    const settings = this.#settings;
    const initial: CounterBackend =
      settings.type === 'memory'
        ? new MemoryCounters(settings.maxKeys !== undefined ? { maxKeys: settings.maxKeys } : {})
        : settings.secret
          ? unavailable(`the Redis Secret ${settings.secret.namespace}/${settings.secret.name} is not loaded yet`)
          : this.#redis();
    this.engine = new RateLimitEngine({ backend: initial, ...(options.failOpen !== undefined ? { failOpen: options.failOpen } : {}), ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}), ...(options.logger ? { logger: options.logger } : {}) });
  }

  #redis(password?: { username?: string; password: string }): CounterBackend {
    const settings = this.#settings;
    if (settings.type !== 'redis') throw new Error('not a Redis limiter');
    return new RedisCounters(createRedisClient({ ...settings.redis, ...(password ?? {}) }, { ...(this.#logger ? { logger: this.#logger } : {}), name: 'gatehouse-gateway-ratelimit' }));
  }

  /** A new configuration: the RateLimitConfigs' tables, and a new Redis client when its Secret changed. */
  update(snapshot: ConfigSnapshot): void {
    this.engine.update(rateLimitTablesOf(snapshot));
    const settings = this.#settings;
    if (settings.type !== 'redis' || !settings.secret) return;
    const secret = snapshot.resources.get(`Secret/${settings.secret.namespace}/${settings.secret.name}`) as Resource<'Secret'> | undefined;
    const version = secret?.version ?? 'missing';
    if (version === this.#secretVersion) return;
    this.#secretVersion = version;
    const previous = this.engine.backend;
    try {
      this.engine.backend = secret ? this.#redis(redisCredentialsFromSecret(secret)) : unavailable(`the Redis Secret ${settings.secret.namespace}/${settings.secret.name} does not exist`);
    } catch (error) {
      this.#logger?.error({ err: (error as Error).message, code: RedisCodes.SETTINGS }, 'gateway rate-limit Redis settings unusable');
      this.engine.backend = unavailable((error as Error).message);
    }
    void previous.close().catch(() => undefined);
  }

  close(): Promise<void> {
    return this.engine.backend.close();
  }
}

/** A backend that is not usable yet (the Redis Secret is missing): every call fails, so failOpen decides. */
function unavailable(reason: string): CounterBackend {
  return { kind: 'redis', increment: () => Promise.reject(new GatehouseError(RateLimitCodes.BACKEND_UNAVAILABLE, reason)), close: () => Promise.resolve() };
}
