import { checkStoreOp, DEFAULT_STORE_LIMITS, MemoryStore } from '../runtime/memory-store.ts';
import type { HostStore } from '../runtime/host-api.ts';
import type { FakeClock } from './clock.ts';

/** The host's `ctx.store` bounds (the `memory` backend's defaults). */
export const STORE_LIMITS = DEFAULT_STORE_LIMITS;

/**
 * The in-process twin of the host's step store: the same memory backend (bounds, errors,
 * least-recently-used eviction, atomic increment and setIfAbsent), with TTLs on the test's
 * clock, answered at once as the host's memory store answers. A differential test
 * (testkit/parity.test.ts) holds it to the host's.
 */
export function createTestStore(clock: FakeClock): HostStore {
  const store = new MemoryStore({}, () => clock.now());
  return (op, key, arg, ttlMs) => ({ v: store.run(checkStoreOp(op, key, arg, ttlMs, store.limits)) });
}
