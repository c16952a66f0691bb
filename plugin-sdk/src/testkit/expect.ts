import { AssertionError } from 'node:assert';
import type { PluginDecision } from '../runtime/to-decision.ts';
import { failureOf } from './harness.ts';

type Denied = Extract<PluginDecision, { allowed: false }>;
type Allowed = Extract<PluginDecision, { allowed: true }>;

function fail(message: string, actual: unknown, expected: unknown): never {
  throw new AssertionError({ message, actual, expected, operator: 'gatehouse' });
}

function show(decision: unknown): string {
  return JSON.stringify(decision);
}

/**
 * Asserts the plugin itself denied the request (optionally with `status`): fails when the denial
 * is the host's answer to a failure (the plugin threw, timed out, answered garbage), which is a
 * 403 too and would otherwise pass a denial test for the wrong reason.
 */
export function expectDenied(decision: PluginDecision, status?: number): asserts decision is Denied {
  if (decision.allowed) fail(`expected the plugin to deny, but it allowed: ${show(decision)}`, decision, { allowed: false, status });
  const failure = failureOf(decision);
  if (failure) fail(`expected the plugin's own denial, but the host denied because the plugin failed: ${failure.code}: ${failure.message}`, failure, { allowed: false, status });
  if (status !== undefined && decision.status !== status) fail(`expected the plugin to deny with ${status}, got ${decision.status}: ${show(decision)}`, decision.status, status);
}

/** Asserts the plugin allowed the request (and, when given, set these upstream headers). */
export function expectAllowed(decision: PluginDecision, headers?: Record<string, string>): asserts decision is Allowed {
  if (!decision.allowed) {
    const failure = failureOf(decision);
    fail(
      failure ? `expected the plugin to allow, but it failed: ${failure.code}: ${failure.message}` : `expected the plugin to allow, but it denied with ${decision.status}: ${show(decision)}`,
      decision,
      { allowed: true },
    );
  }
  for (const [key, value] of Object.entries(headers ?? {})) {
    const set = decision.headersToSet.find((header) => header.key.toLowerCase() === key.toLowerCase());
    if (set?.value !== value) fail(`expected upstream header ${key}: ${value}, got ${set ? set.value : 'none'}: ${show(decision)}`, set?.value, value);
  }
}

/** Asserts the host denied because the plugin failed, with the GH_PLUGIN_* `code` when given. */
export function expectFailure(decision: PluginDecision, code?: string): void {
  const failure = failureOf(decision);
  if (!failure) fail(`expected a plugin failure${code ? ` (${code})` : ''}, but the plugin answered on its own: ${show(decision)}`, decision, code);
  if (code !== undefined && failure.code !== code) fail(`expected failure ${code}, got ${failure.code}: ${failure.message}`, failure.code, code);
}
