import type { FakeClock } from './clock.ts';

/** The host's `ctx.store` bounds (core/src/extauth/plugins/step-store.ts DEFAULT_STORE_LIMITS). */
export const STORE_LIMITS = { maxBytes: 8 * 1024 * 1024, maxKeyLength: 512, maxValueLength: 64 * 1024 } as const;

/**
 * The in-process twin of the host's step store: the same dispatch protocol (JSON text in and
 * out), the same bounds, the same errors and least-recently-used eviction, with TTLs on the
 * test's clock. A differential test (testkit/parity.test.ts) holds it to the host's.
 */
export function createTestStore(clock: FakeClock): (op: unknown, key: unknown, value?: unknown, ttlMs?: unknown) => string | boolean | undefined {
  const entries = new Map<string, { value: string; expires: number; size: number }>();
  let bytes = 0;
  const drop = (key: string): boolean => {
    const entry = entries.get(key);
    if (!entry) return false;
    entries.delete(key);
    bytes -= entry.size;
    return true;
  };
  const live = (key: string) => {
    const entry = entries.get(key);
    if (entry && entry.expires <= clock.now()) {
      drop(key);
      return undefined;
    }
    return entry;
  };
  return (op, key, value, ttlMs) => {
    if (typeof key !== 'string') throw new TypeError('ctx.store: keys are strings');
    if (key.length > STORE_LIMITS.maxKeyLength) throw new RangeError(`ctx.store: keys are at most ${STORE_LIMITS.maxKeyLength} characters`);
    switch (op) {
      case 'get': {
        const entry = live(key);
        if (!entry) return undefined;
        // Most recently used goes last.
        entries.delete(key);
        entries.set(key, entry);
        return entry.value;
      }
      case 'delete':
        return live(key) !== undefined && drop(key);
      case 'set': {
        if (typeof value !== 'string') throw new TypeError('ctx.store.set: the value must be JSON-serialisable');
        if (value.length > STORE_LIMITS.maxValueLength) throw new RangeError(`ctx.store.set: values are at most ${STORE_LIMITS.maxValueLength} characters of JSON`);
        if (ttlMs !== undefined && (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs <= 0)) throw new RangeError('ctx.store.set: ttlMs must be a positive number of milliseconds');
        drop(key);
        const size = 2 * (value.length + key.length) + 64;
        entries.set(key, { value, size, expires: ttlMs === undefined ? Infinity : clock.now() + Math.ceil(ttlMs) });
        bytes += size;
        for (const oldest of entries.keys()) {
          if (bytes <= STORE_LIMITS.maxBytes) break;
          drop(oldest);
        }
        return true;
      }
      default:
        throw new TypeError(`ctx.store: unknown operation ${String(op).slice(0, 20)}`);
    }
  };
}
