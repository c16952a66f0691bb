import type { BenchRequest, WrkResult } from './wrk.ts';

/** What a bench row needs from the run. */
export interface BenchContext {
  /** Scratch directory of this run (git-ignored). */
  readonly workDir: string;
  /** The shared fast upstream (nginx answering `200 hello`), `http://127.0.0.1:PORT`. */
  readonly upstreamUrl: string;
  readonly upstreamPort: number;
  /**
   * Starts `gatehouse <command>` with a config dir holding `files` (name → YAML text or
   * manifest objects). Logs go to a file, as in production, not through the bench's pipes.
   */
  /** `env`: added to the process's environment (settings that have no flag, e.g. `GATEHOUSE_RATELIMIT_REDIS_URL`). */
  gatehouse(files: Record<string, string | object[]>, args?: string[], command?: 'run' | 'gateway', env?: Record<string, string>): Promise<RunningTarget>;
}

export interface RunningTarget {
  /** Base URL wrk hits. */
  readonly url: string;
  /** A Gatehouse target's HTTPS listener (`https://127.0.0.1:PORT`). */
  readonly httpsUrl?: string;
  stop(): Promise<void>;
}

/** One row of the bench table. */
export interface BenchScenario {
  /** Rows with the same group are printed together. */
  readonly group: string;
  /** Unique row name; goals refer to it. */
  readonly name: string;
  readonly request?: BenchRequest;
  start(ctx: BenchContext): Promise<RunningTarget>;
  /** The load for this row when wrk cannot make it (HTTP/2, gRPC, WebSocket); default wrk with `request`. */
  measure?(target: RunningTarget, ctx: BenchContext): Promise<WrkResult>;
}

/** A ratio between two rows of the same run, with an optional goal (numbers are ratios measured side by side). */
export interface BenchGoal {
  readonly row: string;
  readonly against: string;
  /** Required req/s ratio `row / against`. */
  readonly minThroughputRatio?: number;
  /** Allowed p99 ratio `row / against`. */
  readonly maxP99Ratio?: number;
}

/** What a module under `test/bench/scenarios/` exports. */
export interface BenchModule {
  readonly scenarios: readonly BenchScenario[];
  readonly goals?: readonly BenchGoal[];
}
