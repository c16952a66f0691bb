/**
 * Which Authorize call the code running in the isolate belongs to, so that a plugin's `fetch`
 * carries that call's W3C trace context (docs/tracing.md, "Plugin fetch"). Runs inside the
 * isolate, in the runtime (./sandbox-runtime.ts); the plugin cannot reach it.
 *
 * The rule:
 * - While a call's synchronous part runs (the runtime invoked its Authorize), the code is that
 *   call's: exact, whatever else is in flight.
 * - Code after an await runs in a microtask checkpoint: after a call's synchronous part, or
 *   after the runtime delivered the answer of a host operation (fetch, timer, store, verify)
 *   started by some call. It is attributed to that call only when that call is still running
 *   AND it is the only call in flight in the isolate. With two calls in flight a promise may be
 *   shared (a cache one fills and both await) and the continuation may be the other call's:
 *   nothing is attributed, so a fetch carries no trace context rather than another request's.
 * - A crossing that delivers the answers of several calls at once attributes nothing either.
 */

/** One traced call's context: what its fetches carry, and whether the call still runs. */
export interface CallTrace {
  readonly traceparent: string;
  readonly tracestate: string | undefined;
  live: boolean;
}

/** The attribution state of one isolate. */
export interface CallTracking {
  /** Whether any call carried trace context yet (until then nothing is tagged: no cost). */
  readonly traced: boolean;
  /** A call's synchronous part starts: its code is exact until {@link afterSync}. */
  begin(trace: CallTrace | undefined): void;
  /** The call answered (its Authorize returned or its promise settled). */
  end(trace: CallTrace | undefined): void;
  /** The synchronous part returned: the microtasks that follow are the call's only if it runs alone. */
  afterSync(trace: CallTrace | undefined): void;
  /** A host operation's answer is being delivered: the code it wakes is `trace`'s call's, by the rule. */
  enter(trace: CallTrace | undefined): void;
  /** The call the running code belongs to (undefined: none known), to tag an operation started now. */
  capture(): CallTrace | undefined;
}

// Captured when the runtime loads, before the plugin runs (it may replace builtins).
const isArray = Array.isArray;
const toLowerCase = String.prototype.toLowerCase;
/** The egress's bound on a fetch's request headers (core/src/extauth/plugins/egress.ts). */
const MAX_HEADERS = 256;

/** The trace context of a request as the host sends it (`Trace` beside `CheckRequest`), or undefined. */
export function callTraceOf(value: unknown): CallTrace | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { traceparent, tracestate } = value as { traceparent?: unknown; tracestate?: unknown };
  if (typeof traceparent !== 'string' || traceparent.length > 512) return undefined;
  return { traceparent, tracestate: typeof tracestate === 'string' && tracestate.length <= 512 ? tracestate : undefined, live: true };
}

/** A fresh attribution state. */
export function createCallTracking(): CallTracking {
  /** Calls started and not answered. */
  let live = 0;
  let traced = false;
  let current: CallTrace | undefined;
  /** Whether `current` is a synchronous part's (exact) or a checkpoint's (checked by the rule). */
  let exact = false;
  const alone = (trace: CallTrace | undefined): CallTrace | undefined => (trace !== undefined && trace.live && live === 1 ? trace : undefined);
  return {
    get traced() {
      return traced;
    },
    begin(trace) {
      live++;
      if (trace !== undefined) traced = true;
      current = trace;
      exact = true;
    },
    end(trace) {
      live--;
      if (trace !== undefined) trace.live = false;
    },
    afterSync(trace) {
      exact = false;
      current = alone(trace);
    },
    enter(trace) {
      exact = false;
      current = alone(trace);
    },
    capture() {
      return exact ? current : alone(current);
    },
  };
}

/** Fetch parts with the call's `traceparent` (and `tracestate`) added, unless the plugin set its own. */
export function withTraceHeaders<T extends { headers?: unknown }>(parts: T, trace: CallTrace): T {
  const headers = parts.headers;
  // The host takes at most 256 request headers: a plugin at the limit keeps its fetch working, untraced.
  if (!isArray(headers) || headers.length > MAX_HEADERS - 2) return parts;
  let state = false;
  const out: unknown[] = [];
  for (let i = 0; i < headers.length; i++) {
    const pair = headers[i] as unknown;
    const name = isArray(pair) && typeof pair[0] === 'string' ? (toLowerCase.call(pair[0]) as string) : '';
    if (name === 'traceparent') return parts;
    if (name === 'tracestate') state = true;
    out[i] = pair;
  }
  out[out.length] = ['traceparent', trace.traceparent];
  if (!state && trace.tracestate !== undefined) out[out.length] = ['tracestate', trace.tracestate];
  return { ...parts, headers: out };
}
