import type { Redis } from 'ioredis';
import type { StoreCall, StoreResult } from '@gatehouse/plugin-sdk/runtime';
import { createRedisClient, type RedisClient, type RedisSettings } from '../../../redis/client.ts';
import type { StoreBackend, StoreSettings } from './step-store.ts';
import { StoreOpError } from './store-error.ts';

/**
 * The `redis` backend of `ctx.store` (SPEC 5.3): one Redis shared by every process and replica
 * configured with it, keys under the step's prefix. `increment` and `setIfAbsent` are single
 * atomic commands on the server (a Lua script; SET NX), so concurrent callers anywhere count
 * exactly. Clients are shared per process by settings (a bounded pool, ./../../redis/client.ts)
 * and closed with their last step.
 */

/**
 * INCRBY with the TTL set only when the key is new (a fixed window: later increments keep its
 * expiry, as the memory backend does). KEYS[1]: the key; ARGV[1]: the addend; ARGV[2]: TTL in ms or ''.
 */
const INCREMENT = `
local existed = redis.call('EXISTS', KEYS[1])
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
if existed == 0 and ARGV[2] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return value
`;

/** `SET` with options as plain strings (ioredis's overloads list each combination). */
type StringSet = { set(...args: string[]): Promise<unknown> };

type WithScript = Redis & { ghStoreIncr(key: string, by: number, ttl: string): Promise<number> };

const clients = new Map<string, { client: RedisClient; users: number }>();

/** The process's client for `settings`, shared by every step that uses the same Redis. */
function acquire(settings: RedisSettings): { client: RedisClient; release: () => Promise<void> } {
  const key = JSON.stringify(settings);
  let entry = clients.get(key);
  if (!entry) {
    const client = createRedisClient(settings, { name: 'gatehouse-plugin-store' });
    for (const redis of client.connections) redis.defineCommand('ghStoreIncr', { numberOfKeys: 1, lua: INCREMENT });
    entry = { client, users: 0 };
    clients.set(key, entry);
  }
  entry.users++;
  const held = entry;
  let released = false;
  return {
    client: held.client,
    release: async () => {
      if (released) return;
      released = true;
      if (--held.users > 0) return;
      clients.delete(key);
      await held.client.close();
    },
  };
}

/** A Redis error the plugin caused (a non-integer under increment) becomes its TypeError/RangeError; the rest: unavailable. */
function storeError(error: unknown): StoreOpError {
  const message = (error as Error).message ?? String(error);
  const cause = (error as { cause?: { name?: string; message?: string } }).cause;
  if (cause?.name === 'ReplyError') {
    if (/not an integer/i.test(cause.message ?? '')) return new StoreOpError('TypeError', 'ctx.store.increment: the value is not an integer');
    if (/overflow/i.test(cause.message ?? '')) return new StoreOpError('RangeError', 'ctx.store.increment: the result is out of range');
  }
  return new StoreOpError('StoreUnavailableError', `ctx.store: Redis is unavailable (${message})`);
}

/** A step's Redis backend from its settings. */
export function redisStoreBackend(settings: Extract<StoreSettings, { kind: 'redis' }>): StoreBackend {
  const { client, release } = acquire(settings.redis);
  const prefix = settings.keyPrefix;
  const ttlArgs = (ttlMs: number | undefined): string[] => (ttlMs === undefined ? [] : ['PX', String(ttlMs)]);
  const run = (call: StoreCall, deadline: number): Promise<StoreResult> => {
    const key = prefix + call.key;
    return client
      .call<StoreResult>(async (redis) => {
        switch (call.op) {
          case 'get':
            return await redis.get(key);
          case 'delete':
            return (await redis.del(key)) > 0;
          case 'set':
            await (redis as unknown as StringSet).set(key, call.arg as string, ...ttlArgs(call.ttlMs));
            return true;
          case 'setIfAbsent':
            return (await (redis as unknown as StringSet).set(key, call.arg as string, ...ttlArgs(call.ttlMs), 'NX')) === 'OK';
          case 'increment':
            return Number(await (redis as WithScript).ghStoreIncr(key, call.arg as number, call.ttlMs === undefined ? '' : String(call.ttlMs)));
        }
      }, deadline)
      .catch((error: unknown) => {
        throw storeError(error);
      });
  };
  return { kind: 'redis', run, close: release };
}
