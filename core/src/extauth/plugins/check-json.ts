import type { CheckRequest, StepContext } from '../step.ts';

/**
 * A check as a plugin call takes it: `{CheckRequest, State}` in JSON (what
 * `PluginStep.authorizeJson` takes). Its own module: the plugin thread's main-thread half
 * uses it without loading the plugin host (isolated-vm).
 */
export function checkJson(request: CheckRequest, context?: StepContext): string {
  return JSON.stringify({ CheckRequest: request, State: context?.state ?? {} });
}
