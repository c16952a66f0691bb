/**
 * The input document of Gloo's OPA steps (Gloo's OPA guide, "OPA input"): `check_request` (the
 * Envoy CheckRequest), `http_request` (its `attributes.request.http`), and `state` (what earlier
 * steps left, e.g. `state.jwt`), and Gloo's decision rule: the query's value is `true`, or an
 * array whose first element is `true`.
 */
import type { CheckRequest } from '../step.ts';

/** What Gloo's OPA steps pass as `input`. */
export function opaInput(request: CheckRequest, state: Record<string, unknown>, fastInputConversion: boolean): Record<string, unknown> {
  const http = request.attributes.request.http as unknown as Record<string, unknown>;
  if (!fastInputConversion) return { check_request: request, http_request: http, state };
  // Gloo's fastInputConversion: only scalars, maps and string arrays of http_request and state.
  return { check_request: request, http_request: keepSimple(http), state: keepSimple(state) };
}

function keepSimple(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') out[key] = v;
    else if (Array.isArray(v)) {
      if (v.every((item) => typeof item === 'string')) out[key] = v;
    } else if (typeof v === 'object' && !(v instanceof Uint8Array)) out[key] = keepSimple(v as Record<string, unknown>);
  }
  return out;
}

/** Gloo's rule: allowed when the value is `true`, or an array whose first element is `true`. */
export function isAllowedValue(value: unknown): boolean {
  return value === true || (Array.isArray(value) && value[0] === true);
}
