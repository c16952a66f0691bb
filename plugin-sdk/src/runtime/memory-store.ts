/**
 * The `memory` backend of `ctx.store` (SPEC 5.3), shared by the host (core's step store) and the
 * test kit, so both keep the same bounds, errors, eviction and TTL rules by construction. Values
 * are JSON texts; TTLs follow `now()` (the test kit's fake clock, or `Date.now`).
 */

/** Operations of `ctx.store` as they cross from the isolate to the host. */
export type StoreOp = 'get' | 'set' | 'delete' | 'increment' | 'setIfAbsent';

/** Bounds of one step's store. */
export interface StoreLimits {
  /** Bytes of keys and values one step may keep; least recently used entries go first. Default 8 MiB. */
  maxBytes: number;
  /** Longest key, in characters. */
  maxKeyLength: number;
  /** Largest value (its JSON text), in characters. */
  maxValueLength: number;
}

export const DEFAULT_STORE_LIMITS: StoreLimits = { maxBytes: 8 * 1024 * 1024, maxKeyLength: 512, maxValueLength: 64 * 1024 };

/** What an operation answers: `get` the JSON text or null; `set` true; `delete`/`setIfAbsent` a boolean; `increment` the new number. */
export type StoreResult = string | number | boolean | null;

/** A checked operation: what {@link checkStoreOp} makes of the isolate's untrusted arguments. */
export interface StoreCall {
  op: StoreOp;
  key: string;
  /** `set`/`setIfAbsent`: the JSON text; `increment`: the addend. */
  arg?: string | number;
  ttlMs?: number;
}

const OPS: ReadonlySet<string> = new Set(['get', 'set', 'delete', 'increment', 'setIfAbsent']);

/**
 * Checks the isolate's arguments (untrusted) against `limits`; throws the TypeError/RangeError the
 * plugin gets. Every backend runs calls checked here, so a bad call fails the same way everywhere.
 */
export function checkStoreOp(op: unknown, key: unknown, arg: unknown, ttlMs: unknown, limits: StoreLimits = DEFAULT_STORE_LIMITS): StoreCall {
  if (typeof op !== 'string' || !OPS.has(op)) throw new TypeError(`ctx.store: unknown operation ${String(op).slice(0, 20)}`);
  if (typeof key !== 'string') throw new TypeError('ctx.store: keys are strings');
  if (key.length > limits.maxKeyLength) throw new RangeError(`ctx.store: keys are at most ${limits.maxKeyLength} characters`);
  const call: StoreCall = { op: op as StoreOp, key };
  if (op === 'set' || op === 'setIfAbsent') {
    if (typeof arg !== 'string') throw new TypeError(`ctx.store.${op}: the value must be JSON-serialisable`);
    if (arg.length > limits.maxValueLength) throw new RangeError(`ctx.store.${op}: values are at most ${limits.maxValueLength} characters of JSON`);
    call.arg = arg;
  } else if (op === 'increment') {
    if (typeof arg !== 'number' || !Number.isSafeInteger(arg)) throw new TypeError('ctx.store.increment: `by` must be a safe integer');
    call.arg = arg;
  }
  if (op === 'set' || op === 'setIfAbsent' || op === 'increment') {
    if (ttlMs !== undefined && ttlMs !== null) {
      if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError(`ctx.store.${op}: ttlMs must be a positive number of milliseconds`);
      call.ttlMs = Math.ceil(ttlMs);
    }
  }
  return call;
}

interface Entry {
  value: string;
  expires: number;
  size: number;
}

/**
 * One step's memory store: a Map in least-recently-used order with a byte bound, expiring
 * entries lazily on `now()`. Synchronous, so every operation is atomic in its process.
 */
export class MemoryStore {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  readonly limits: StoreLimits;
  private readonly now: () => number;

  constructor(limits: Partial<StoreLimits> = {}, now: () => number = Date.now) {
    this.limits = { ...DEFAULT_STORE_LIMITS, ...limits };
    this.now = now;
  }

  /** Entries kept now (expired ones included until touched or evicted). */
  get size(): number {
    return this.entries.size;
  }

  /** Runs a checked call. Throws a TypeError when `increment` meets a value that is not an integer. */
  run(call: StoreCall): StoreResult {
    const { op, key } = call;
    switch (op) {
      case 'get': {
        const entry = this.live(key);
        if (!entry) return null;
        // Most recently used goes last.
        this.entries.delete(key);
        this.entries.set(key, entry);
        return entry.value;
      }
      case 'delete':
        return this.live(key) !== undefined && this.drop(key);
      case 'set':
        this.put(key, call.arg as string, call.ttlMs === undefined ? Infinity : this.now() + call.ttlMs);
        return true;
      case 'setIfAbsent':
        if (this.live(key)) return false;
        this.put(key, call.arg as string, call.ttlMs === undefined ? Infinity : this.now() + call.ttlMs);
        return true;
      case 'increment': {
        const entry = this.live(key);
        const by = call.arg as number;
        if (!entry) {
          // A new counter starts at `by`; its TTL starts now (a fixed window).
          this.put(key, String(by), call.ttlMs === undefined ? Infinity : this.now() + call.ttlMs);
          return by;
        }
        const current = Number(entry.value);
        if (!/^-?\d+$/.test(entry.value) || !Number.isSafeInteger(current)) throw new TypeError(`ctx.store.increment: the value of ${JSON.stringify(key.slice(0, 64))} is not an integer`);
        const next = current + by;
        if (!Number.isSafeInteger(next)) throw new RangeError('ctx.store.increment: the result is not a safe integer');
        // The counter keeps its expiry: increments do not extend a window.
        this.put(key, String(next), entry.expires);
        return next;
      }
    }
  }

  private live(key: string): Entry | undefined {
    const entry = this.entries.get(key);
    if (entry && entry.expires <= this.now()) {
      this.drop(key);
      return undefined;
    }
    return entry;
  }

  private drop(key: string): boolean {
    const entry = this.entries.get(key);
    if (!entry) return false;
    this.entries.delete(key);
    this.bytes -= entry.size;
    return true;
  }

  private put(key: string, value: string, expires: number): void {
    this.drop(key);
    const size = 2 * (value.length + key.length) + 64;
    this.entries.set(key, { value, size, expires });
    this.bytes += size;
    for (const oldest of this.entries.keys()) {
      if (this.bytes <= this.limits.maxBytes) break;
      this.drop(oldest);
    }
  }
}
