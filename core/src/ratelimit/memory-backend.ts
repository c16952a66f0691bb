import type { CounterBackend, CounterIncrement } from './backend.ts';

/** Options of {@link MemoryCounters}. */
export interface MemoryCountersOptions {
  /** Counters kept at most (default 100,000, ~100 bytes each): memory stays bounded whatever the keys. */
  maxKeys?: number;
  /** The clock (tests). */
  now?: () => number;
}

/**
 * Counters in this process's memory: exact for one process (JavaScript runs one increment at a
 * time, so no addition is lost), not shared with other processes or replicas (use Redis for that).
 * When `maxKeys` counters exist, expired ones are swept, and if none has expired the oldest
 * tenth is dropped: a dropped counter restarts at zero, so under a flood of distinct keys the
 * limit errs towards allowing, never towards unbounded memory.
 */
export class MemoryCounters implements CounterBackend {
  readonly kind = 'memory' as const;
  readonly #counters = new Map<string, { count: number; expiresAt: number }>();
  readonly #maxKeys: number;
  readonly #now: () => number;

  constructor(options: MemoryCountersOptions = {}) {
    this.#maxKeys = options.maxKeys ?? 100_000;
    if (!Number.isInteger(this.#maxKeys) || this.#maxKeys < 1) throw new RangeError(`maxKeys must be a positive integer, not ${options.maxKeys}`);
    this.#now = options.now ?? Date.now;
  }

  /** Counters held now (tests, metrics). */
  get size(): number {
    return this.#counters.size;
  }

  increment(counters: readonly CounterIncrement[], addend: number): Promise<number[]> {
    return Promise.resolve(this.incrementNow(counters, addend));
  }

  incrementNow(counters: readonly CounterIncrement[], addend: number): number[] {
    const now = this.#now();
    const out: number[] = [];
    for (const { key, ttlSeconds } of counters) {
      let entry = this.#counters.get(key);
      if (entry && entry.expiresAt <= now) {
        this.#counters.delete(key);
        entry = undefined;
      }
      if (!entry) {
        if (this.#counters.size >= this.#maxKeys) this.#evict(now);
        entry = { count: 0, expiresAt: now + ttlSeconds * 1000 };
        this.#counters.set(key, entry);
      }
      entry.count += addend;
      out.push(entry.count);
    }
    return out;
  }

  #evict(now: number): void {
    for (const [key, entry] of this.#counters) if (entry.expiresAt <= now) this.#counters.delete(key);
    if (this.#counters.size < this.#maxKeys) return;
    // Map order is insertion order: the first keys are the oldest windows.
    let drop = Math.max(1, Math.floor(this.#maxKeys / 10));
    for (const key of this.#counters.keys()) {
      this.#counters.delete(key);
      if (--drop === 0) break;
    }
  }

  close(): Promise<void> {
    this.#counters.clear();
    return Promise.resolve();
  }
}
