/** One counter to add to: its key (already namespaced and windowed) and how long its window lives. */
export interface CounterIncrement {
  readonly key: string;
  readonly ttlSeconds: number;
}

/**
 * Where fixed-window counters live. `increment` adds `addend` to every counter, each atomically
 * (concurrent callers, in this process or others sharing the store, never lose an addition), and
 * resolves with the values after the addition, in order; it rejects when the store fails or
 * `deadline` (epoch ms) passes first.
 */
export interface CounterBackend {
  readonly kind: 'memory' | 'redis';
  increment(counters: readonly CounterIncrement[], addend: number, deadline: number): Promise<number[]>;
  /** {@link increment} answered at once, for a store in this process (memory): no promise. */
  incrementNow?(counters: readonly CounterIncrement[], addend: number): number[];
  close(): Promise<void>;
}
