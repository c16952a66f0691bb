import type { Outcome } from '@gatehouse/plugin-sdk/runtime';

/** An {@link Outcome} from untrusted JSON, or undefined when it is not one. */
export function parseOutcome(json: unknown): Outcome | undefined {
  if (typeof json !== 'string') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return undefined;
  }
  return outcomeOfValue(value);
}

/** An {@link Outcome} from an untrusted parsed value, or undefined when it is not one. */
export function outcomeOfValue(value: unknown): Outcome | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const outcome = value as Record<string, unknown>;
  if (outcome.ok === true) return { ok: true, response: outcome.response };
  if (typeof outcome.pending === 'number' && Number.isSafeInteger(outcome.pending)) return { pending: outcome.pending };
  if (outcome.ok === false && typeof outcome.stage === 'string' && typeof outcome.error === 'string') {
    const stack = typeof outcome.stack === 'string' ? { stack: outcome.stack.slice(0, 4096) } : {};
    return { ok: false, stage: outcome.stage as Extract<Outcome, { ok: false }>['stage'], error: outcome.error.slice(0, 2048), ...stack, ...(outcome.storeUnavailable === true ? { storeUnavailable: true } : {}) };
  }
  return undefined;
}
