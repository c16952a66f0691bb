import type { Egress } from '../egress.ts';
import type { StepStore } from '../store/step-store.ts';

/** The part of the pino logger the host uses (a pino `Logger` fits). */
export interface PluginHostLogger {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface SandboxLimits {
  /** Isolate heap limit (isolated-vm `memoryLimit`, minimum 8). */
  memoryLimitMb: number;
  /** Time an Authorize call may run on the isolate's thread. */
  cpuTimeoutMs: number;
  /** Safety net: wall time after which a call on the isolate's thread counts as hung. */
  callTimeoutMs: number;
  /** Wall time for loading the script, NewConfigInstance, GetAuthService and Start together. */
  startTimeoutMs: number;
  /** Per-call wall deadline (SPEC 5.2): waiting for fetch and timers included. Default 1000. */
  wallTimeoutMs?: number;
  /** Fetches in flight at once per isolate (SPEC 5.3: 16). */
  maxFetches?: number;
  /** Timers waiting at once per isolate. */
  maxTimers?: number;
}

/** What a plugin may use besides its config: where it may fetch, its secrets, its step's store. */
export interface PluginGrants {
  egress?: Egress;
  /** `ctx.secrets`: values by name. Never logged; redacted from the plugin's own log lines. */
  secrets?: Readonly<Record<string, string>>;
  store?: StepStore;
}
