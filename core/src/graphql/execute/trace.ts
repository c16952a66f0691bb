import { randomFillSync } from 'node:crypto';
import type { RequestContext } from '../../proxy/context.ts';
import { childOf, spanOf, type SpanHandle } from '../../tracing/tracing.ts';

/**
 * Trace context for upstream calls (issue 25 item 12): every call a GraphQL operation makes
 * (REST and gRPC resolvers, the remote executor) carries the request's `x-request-id` and a W3C
 * `traceparent`. The gateway is one span of the trace: a valid incoming `traceparent` keeps its
 * trace id and flags with a new parent id; without one a new trace starts (flags `00`: not
 * sampled, as nothing records it yet). The tracing work builds spans on top of this.
 */

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** The trace headers of one operation's upstream calls. */
export interface TraceHeaders {
  readonly traceparent: string;
  readonly 'x-request-id': string;
}

/** The headers every upstream call of the request carries (computed once per request). */
export function traceHeaders(ctx: RequestContext): TraceHeaders {
  const cached = memo.get(ctx);
  if (cached) return cached;
  const span = spanOf(ctx);
  if (span) {
    // A traced request (core/src/tracing): the calls' parent is the gateway's span.
    const traced: TraceHeaders = { traceparent: span.traceparent, 'x-request-id': ctx.requestId };
    memo.set(ctx, traced);
    owners.set(traced, span);
    return traced;
  }
  const incoming = ctx.headers.traceparent;
  const match = typeof incoming === 'string' ? TRACEPARENT.exec(incoming.trim().toLowerCase()) : null;
  const valid = match !== null && match[1] !== ZERO_TRACE && match[2] !== ZERO_SPAN;
  // Ids come from a pool of random bytes (a crypto call per request, randomBytes or two
  // randomUUIDs, cost more than the rest of this function).
  const flags = valid ? match[3]! : '00';
  const out: TraceHeaders = { traceparent: `00-${valid ? match[1]! : randomHex(16, ZERO_TRACE)}-${randomHex(8, ZERO_SPAN)}-${flags}`, 'x-request-id': ctx.requestId };
  memo.set(ctx, out);
  return out;
}

const memo = new WeakMap<RequestContext, TraceHeaders>();
const owners = new WeakMap<TraceHeaders, SpanHandle>();

/**
 * A span for one resolver call of a traced, sampled request (its `traceHeaders` go on the call in
 * place of the operation's), or undefined. End it with the call's outcome.
 */
export function resolverSpan(trace: TraceHeaders | undefined, name: string, attributes?: Record<string, string | number | boolean>): SpanHandle | undefined {
  return trace === undefined ? undefined : childOf(owners.get(trace), name, attributes);
}

/**
 * Random bytes drawn ahead, a pool at a time, kept as hex (a crypto call per id cost more than
 * the id, and a Buffer-to-hex call per id about as much as a slice of one string).
 */
const POOL_BYTES = 4096;
let pool = '';
let taken = POOL_BYTES;

/** `bytes` random bytes as lowercase hex, never `zero` (W3C: an all-zero id is invalid). */
function randomHex(bytes: number, zero: string): string {
  for (;;) {
    if (taken + bytes > POOL_BYTES) {
      pool = randomFillSync(Buffer.allocUnsafe(POOL_BYTES)).toString('hex');
      taken = 0;
    }
    const id = pool.slice(taken * 2, (taken + bytes) * 2);
    taken += bytes;
    if (id !== zero) return id;
  }
}
