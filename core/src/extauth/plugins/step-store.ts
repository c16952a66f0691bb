import { LRUCache } from 'lru-cache';

/** Bounds of a step's `ctx.store` (SPEC 5.3); configurable per auth server. */
export interface StepStoreLimits {
  /** Bytes of keys and values one step may keep; least recently used entries go first. Default 8 MiB. */
  maxBytes: number;
  /** Longest key, in characters. */
  maxKeyLength: number;
  /** Largest value (its JSON text), in characters. */
  maxValueLength: number;
}

export const DEFAULT_STORE_LIMITS: StepStoreLimits = { maxBytes: 8 * 1024 * 1024, maxKeyLength: 512, maxValueLength: 64 * 1024 };

/**
 * A plugin step's `ctx.store` (SPEC 5.3): a bounded key/value map shared by the isolates of
 * one step in one auth-server process, kept across isolate rebuilds (a rate limit or replay
 * cache survives a plugin failure). Values cross as JSON text, so the isolate only ever holds
 * copies. Per process, not per cluster: replicas each have their own.
 */
export class StepStore {
  private readonly cache: LRUCache<string, string>;
  private readonly limits: StepStoreLimits;

  constructor(limits: Partial<StepStoreLimits> = {}) {
    this.limits = { ...DEFAULT_STORE_LIMITS, ...limits };
    this.cache = new LRUCache<string, string>({
      maxSize: this.limits.maxBytes,
      sizeCalculation: (value, key) => 2 * (value.length + key.length) + 64,
      ttlAutopurge: false,
      allowStale: false,
    });
  }

  /** Entries kept now. */
  get size(): number {
    return this.cache.size;
  }

  /**
   * The sandbox's synchronous callback: `get` answers the JSON text (or undefined), `set` and
   * `delete` answer booleans. Arguments are untrusted; a bad one throws a TypeError/RangeError
   * that reaches the plugin as such.
   */
  readonly dispatch = (op: unknown, key: unknown, value?: unknown, ttlMs?: unknown): string | boolean | undefined => {
    if (typeof key !== 'string') throw new TypeError('ctx.store: keys are strings');
    if (key.length > this.limits.maxKeyLength) throw new RangeError(`ctx.store: keys are at most ${this.limits.maxKeyLength} characters`);
    switch (op) {
      case 'get':
        return this.cache.get(key);
      case 'delete':
        return this.cache.delete(key);
      case 'set': {
        if (typeof value !== 'string') throw new TypeError('ctx.store.set: the value must be JSON-serialisable');
        if (value.length > this.limits.maxValueLength) throw new RangeError(`ctx.store.set: values are at most ${this.limits.maxValueLength} characters of JSON`);
        if (ttlMs !== undefined && (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs <= 0)) throw new RangeError('ctx.store.set: ttlMs must be a positive number of milliseconds');
        this.cache.set(key, value, ttlMs === undefined ? {} : { ttl: Math.ceil(ttlMs) });
        return true;
      }
      default:
        throw new TypeError(`ctx.store: unknown operation ${String(op).slice(0, 20)}`);
    }
  };
}
