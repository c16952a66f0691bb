import type { IncomingHttpHeaders } from 'node:http';
import { LIMITS_OFF, type OperationBudget } from '../limits/limits.ts';
import type { TraceHeaders } from '../execute/trace.ts';

/** Per-operation state handed to every resolver as the GraphQL context value. */
export interface OperationContext {
  /** The effective request headers (after auth), lowercase names: the `{$headers.x}` source. */
  readonly headers: IncomingHttpHeaders;
  /** Upstream calls made by this operation, by call identity: identical calls are made once (SPEC 3.3). */
  readonly calls: Map<string, Promise<unknown>>;
  /** Resolvers bound to this endpoint's upstreams, by resolution key. */
  readonly resolvers: Readonly<Record<string, FieldResolver>>;
  /** A stitched API's subschemas' resolvers, in subschema order (their executors read them). */
  readonly subschemas?: readonly Readonly<Record<string, FieldResolver>>[];
  /** The operation's runtime limits: upstream calls, bytes held, event-loop time (SPEC 3.3.1). */
  readonly budget: OperationBudget;
  /** `traceparent` and `x-request-id` for every upstream call (../trace.ts). */
  readonly trace?: TraceHeaders;
}

/** A resolution bound to its upstream: what a `@resolve` field calls. */
export type FieldResolver = (parent: unknown, args: Record<string, unknown>, ctx: OperationContext) => unknown;

/** Counts resolver outcomes (prebound metric children, so the hot path only increments). */
export interface ResolverMetrics {
  ok(): void;
  error(): void;
}

/**
 * Runs `call` once per operation for `key`: later identical calls share its promise. Each new
 * call is counted against the operation's `maxUpstreamCalls` (throws a field error past it).
 */
export function dedupe<T>(ctx: OperationContext, key: string, call: () => Promise<T>): Promise<T> {
  let pending = ctx.calls.get(key) as Promise<T> | undefined;
  if (!pending) {
    if (!LIMITS_OFF) ctx.budget.call();
    pending = call();
    ctx.calls.set(key, pending);
  }
  return pending;
}
