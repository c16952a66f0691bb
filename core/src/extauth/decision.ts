import type { AuthDecision, CheckRequest, HeaderToSet } from './step.ts';

export type Allowed = Extract<AuthDecision, { allowed: true }>;
export type Denied = Extract<AuthDecision, { allowed: false }>;

const NONE: readonly never[] = Object.freeze([]);

/** An allowing decision that adds `headersToSet` (overwrite unless `append`) and removes `headersToRemove`. */
export function allow(headersToSet: HeaderToSet[] = NONE as never, headersToRemove: string[] = NONE as never): Allowed {
  return { allowed: true, headersToSet, headersToRemove };
}

/** A denial sent to the client as-is. */
export function deny(status: number, headers: HeaderToSet[] = [], body = ''): Denied {
  return { allowed: false, status, headers, body };
}

/** The fail-closed answer (SPEC 7): 403, no headers, empty body. A fresh object each call: callers may mutate it. */
export function forbidden(): Denied {
  return deny(403);
}

/**
 * Applies an allowing decision to lowercase request headers, in Envoy's order
 * (ext_authz filter `onComplete`): set or append first, then remove. Appending joins with
 * a comma as Envoy's `appendCopy` does. Returns a new object; `headers` is not changed.
 */
export function applyAllowed(headers: Readonly<Record<string, string>>, decision: Allowed): Record<string, string> {
  const out: Record<string, string> = { ...headers };
  for (const { key, value, append } of decision.headersToSet) {
    const name = key.toLowerCase();
    const existing = out[name];
    out[name] = append && existing !== undefined && existing !== '' ? `${existing},${value}` : value;
  }
  for (const key of decision.headersToRemove) delete out[key.toLowerCase()];
  return out;
}

/** The same CheckRequest with other HTTP headers (what the next step of a chain sees). */
export function withHeaders(request: CheckRequest, headers: Record<string, string>): CheckRequest {
  const { attributes } = request;
  return {
    attributes: {
      ...attributes,
      request: { ...attributes.request, http: { ...attributes.request.http, headers } },
    },
  };
}
