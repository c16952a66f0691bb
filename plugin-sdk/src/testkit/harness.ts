import type { PluginDecision } from '../runtime/to-decision.ts';
import type { CheckRequest } from '../contract/types.ts';
import type { CheckRequestInit } from './check-request.ts';
import type { FakeClock } from './clock.ts';

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
  /** Where the plugin threw: its stack in its own sources (source-mapped), when it threw an Error. */
  stack?: string;
}

/** A started plugin, in-process or sandboxed; both answer the same way. */
export interface PluginHarness {
  /** `in-process` or `sandbox`. */
  readonly mode: TestMode;
  /** The decision the auth chain would get: allow with headers, or a denial. */
  authorize(request?: CheckRequest | CheckRequestInit): Promise<PluginDecision>;
  /** What the plugin logged, oldest first; complete when `authorize()` resolves. */
  readonly logs: TestLogLine[];
  /** The clock the plugin sees (the one passed to `startPlugin`, or the real one). */
  readonly clock?: FakeClock;
  /** Failures that became denials, oldest first. */
  readonly failures: TestFailure[];
  close(): Promise<void>;
}

export type TestMode = 'in-process' | 'sandbox';

/** Where a decision records the failure it came from (non-enumerable: `toEqual` ignores it). */
const FAILURE = Symbol.for('gatehouse.testkit.failure');

/** Marks `decision` as the denial the host made of `failure` (a throw, a timeout…), not the plugin's own. */
export function withFailure(decision: PluginDecision, failure: TestFailure | undefined): PluginDecision {
  if (failure) Object.defineProperty(decision, FAILURE, { value: failure, enumerable: false });
  return decision;
}

/** The failure a decision came from, when the host denied because the plugin failed. */
export function failureOf(decision: unknown): TestFailure | undefined {
  return typeof decision === 'object' && decision !== null ? ((decision as Record<symbol, TestFailure | undefined>)[FAILURE] ?? undefined) : undefined;
}
