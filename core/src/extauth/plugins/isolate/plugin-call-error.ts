import type { PluginDecision } from '@gatehouse/plugin-sdk/runtime';
import { GatehouseError } from '../../../errors.ts';

/** A call of a batch that did not run to an answer through no fault of its own: run it again, alone. */
export const RETRY = Symbol('retry');

/** One call's result in `PluginInstance.authorizeBatchInline`. */
export type BatchResult = PluginDecision | Promise<PluginDecision> | PluginCallError | typeof RETRY;

/** Why one Authorize call failed; the step logs it and rebuilds the isolate unless {@link keepsIsolate}. */
export class PluginCallError extends GatehouseError {
  /** The isolate is sound (a missed wall deadline with the isolate idle): keep it. */
  keepsIsolate = false;
  /**
   * The wall-clock limit stopped the call while it had used less CPU than its limit (the machine,
   * a CPU quota or a busy core, was slow, not the plugin), or the call was lost with an isolate
   * dropped for such a call. The call runs again on a fresh isolate instead of being denied.
   */
  descheduled = false;
  /** For a call the CPU limit stopped: the CPU time it had used by the judge's measure, in ms (below a quarter of the limit: {@link descheduled}). */
  cpuMs: number | undefined;
  /** The plugin's stack where it threw, in its own sources (source-mapped). */
  pluginStack: string | undefined;
}
