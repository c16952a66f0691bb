import type { Redis } from 'ioredis';
import type { RedisClient } from '../redis/client.ts';
import type { CounterBackend, CounterIncrement } from './backend.ts';

/**
 * INCRBY + EXPIRE for every counter of one decision, atomically, in one round trip: a Lua script
 * runs alone on the Redis server, so no other client's addition interleaves, and a counter never
 * exists without its expiry (a crash between two separate commands could leave one forever).
 * KEYS: the counters; ARGV[1]: the addend; ARGV[1 + i]: counter i's window in seconds.
 */
const SCRIPT = `
local out = {}
local addend = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  local value = redis.call('INCRBY', key, addend)
  if redis.call('PTTL', key) < 0 then redis.call('EXPIRE', key, ARGV[i + 1]) end
  out[i] = value
end
return out
`;

type WithScript = Redis & { ghRateLimitIncr(numKeys: number, ...args: (string | number)[]): Promise<number[]> };

/**
 * Counters in Redis, shared by every process and replica that uses the same Redis and key
 * prefix. Keys are the engine's (`<prefix><hash>:<window seconds>:<window start>`), so they are
 * bounded in size and expire with their window. (Redis Cluster is not supported: the keys of one
 * decision may live in different slots.)
 */
export class RedisCounters implements CounterBackend {
  readonly kind = 'redis' as const;
  readonly #client: RedisClient;
  readonly #ownsClient: boolean;

  constructor(client: RedisClient, options: { ownsClient?: boolean } = {}) {
    this.#client = client;
    this.#ownsClient = options.ownsClient ?? true;
    // EVALSHA, falling back to EVAL once per connection when the script is not cached yet.
    for (const redis of client.connections) if (!(redis as unknown as Partial<WithScript>).ghRateLimitIncr) redis.defineCommand('ghRateLimitIncr', { lua: SCRIPT });
  }

  increment(counters: readonly CounterIncrement[], addend: number, deadline: number): Promise<number[]> {
    const keys = counters.map((c) => c.key);
    const ttls = counters.map((c) => c.ttlSeconds);
    return this.#client.call((redis) => (redis as unknown as WithScript).ghRateLimitIncr(keys.length, ...keys, addend, ...ttls), deadline);
  }

  close(): Promise<void> {
    return this.#ownsClient ? this.#client.close() : Promise.resolve();
  }
}
