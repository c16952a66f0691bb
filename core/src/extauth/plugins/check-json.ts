import type { CheckRequest, StepContext } from '../step.ts';

/**
 * A check as a plugin call takes it: `{CheckRequest, State}` (and `Trace` when traced) in JSON (what
 * `PluginStep.authorizeJson` takes). Its own module: the plugin thread's main-thread half
 * uses it without loading the plugin host (isolated-vm).
 */
export function checkJson(request: CheckRequest, context?: StepContext): string {
  const trace = context?.trace;
  // `Trace`: the auth step span's context, for the runtime to put on the call's fetches (never shown to the plugin).
  return JSON.stringify(trace === undefined ? { CheckRequest: request, State: context?.state ?? {} } : { CheckRequest: request, State: context?.state ?? {}, Trace: trace });
}
