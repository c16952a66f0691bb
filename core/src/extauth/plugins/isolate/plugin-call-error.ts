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
  /** The plugin's stack where it threw, in its own sources (source-mapped). */
  pluginStack: string | undefined;
}
