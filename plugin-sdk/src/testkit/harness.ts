import type { PluginDecision } from '../runtime/to-decision.ts';
import type { CheckRequest } from '../contract/types.ts';
import type { CheckRequestInit } from './check-request.ts';

/** A line the plugin logged through `ctx.logger` (or `console`). */
export interface TestLogLine {
  level: 'debug' | 'info' | 'warn' | 'error';
  message: string;
  fields?: unknown;
}

/** A failure the host turned into a denial (throw, timeout, garbage…), with its GH_PLUGIN_* code. */
export interface TestFailure {
  code: string;
  message: string;
}

/** A started plugin, in-process or sandboxed; both answer the same way. */
export interface PluginHarness {
  /** `in-process` or `sandbox`. */
  readonly mode: TestMode;
  /** The decision the auth chain would get: allow with headers, or a denial. */
  authorize(request?: CheckRequest | CheckRequestInit): Promise<PluginDecision>;
  /** What the plugin logged, oldest first. */
  readonly logs: TestLogLine[];
  /** Failures that became denials, oldest first. */
  readonly failures: TestFailure[];
  close(): Promise<void>;
}

export type TestMode = 'in-process' | 'sandbox';
