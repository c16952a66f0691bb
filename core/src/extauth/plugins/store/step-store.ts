import { checkStoreOp, DEFAULT_STORE_LIMITS, type StoreCall, type StoreLimits, type StoreResult } from '@gatehouse/plugin-sdk/runtime';
import type { RedisSettings } from '../../../redis/client.ts';
import { memoryRoute, type MemoryRoute } from './store-hub.ts';
import { redisStoreBackend } from './redis-store.ts';
export { StoreOpError } from './store-error.ts';

/** Bounds of a step's `ctx.store` (SPEC 5.3); configurable per auth server. */
export type StepStoreLimits = StoreLimits;
export const DEFAULT_STEP_STORE_LIMITS: StepStoreLimits = DEFAULT_STORE_LIMITS;

/**
 * Where one step's store lives, resolved from `pluginAuth.store` or the auth server's default
 * (`--plugin-store-*`) before the step is built: plain data, so it crosses to the plugin thread
 * or process. `identity` names the step across reloads and rebuilds (`<namespace>/<AuthConfig>/<step index>/<plugin>`).
 */
export type StoreSettings =
  | { kind: 'memory'; identity: string }
  | {
      kind: 'redis';
      identity: string;
      redis: RedisSettings;
      /** Prepended to every key (default `gatehouse:plugin:<identity>:`). */
      keyPrefix: string;
      /** Longest wait of one operation (default 100 ms), within the call's wall deadline. */
      timeoutMs: number;
      /** Allow a request whose plugin failed on an unreachable Redis (default false: deny). */
      failOpen: boolean;
    };

/** A backend answers checked calls, at once or later; a failure to reach it rejects with a StoreUnavailable error. */
export interface StoreBackend {
  readonly kind: 'memory' | 'redis';
  run(call: StoreCall, deadline: number): StoreResult | Promise<StoreResult>;
  /** Releases what the step holds (a Redis client reference). */
  close?(): Promise<void>;
}

/**
 * A plugin step's `ctx.store` (SPEC 5.3): checks the isolate's untrusted arguments, then runs them
 * on the step's backend. One per step, kept by the step, so it outlives every isolate rebuild;
 * the memory backend's data lives in the process's hub (./store-hub.ts) under the step's identity,
 * so it also outlives reloads and plugin rebuilds.
 */
export class StepStore {
  readonly limits: StepStoreLimits;
  readonly backend: StoreBackend;
  /** Longest wait of one operation when it does not answer at once. */
  private readonly timeoutMs: number;

  constructor(backend: StoreBackend, limits: Partial<StepStoreLimits> = {}, timeoutMs = 1000) {
    this.backend = backend;
    this.limits = { ...DEFAULT_STEP_STORE_LIMITS, ...limits };
    this.timeoutMs = timeoutMs;
  }

  /** Runs one operation; throws TypeError/RangeError for bad arguments (the plugin gets them as such). */
  readonly dispatch = (op: unknown, key: unknown, arg?: unknown, ttlMs?: unknown): StoreResult | Promise<StoreResult> => {
    const call = checkStoreOp(op, key, arg, ttlMs, this.limits);
    return this.backend.run(call, Date.now() + this.timeoutMs);
  };

  close(): Promise<void> {
    return this.backend.close?.() ?? Promise.resolve();
  }
}

/** A memory backend: the step's store in the process's hub, or wherever the hub's route leads. */
export function memoryStoreBackend(identity: string, limits: Partial<StepStoreLimits> = {}, route: MemoryRoute = memoryRoute()): StoreBackend {
  const bounds = { ...DEFAULT_STEP_STORE_LIMITS, ...limits };
  return { kind: 'memory', run: (call, deadline) => route.run(identity, bounds, call, deadline) };
}

/** The step's store from its settings (`wallTimeoutMs`: the call's deadline caps a Redis wait). */
export function createStepStore(settings: StoreSettings, options: { limits?: Partial<StepStoreLimits> | undefined; wallTimeoutMs: number; route?: MemoryRoute | undefined }): StepStore {
  // A hub in another process answers within a turn or two; one that does not within half the
  // call's deadline fails the operation, leaving the plugin time to decide.
  if (settings.kind === 'memory') return new StepStore(memoryStoreBackend(settings.identity, options.limits, options.route), options.limits, Math.max(1, Math.floor(options.wallTimeoutMs / 2)));
  return new StepStore(redisStoreBackend(settings), options.limits, Math.min(settings.timeoutMs, options.wallTimeoutMs));
}
