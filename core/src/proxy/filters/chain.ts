import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter } from 'prom-client';
import { registry } from '../../admin/metrics.ts';
import { ErrorCodes } from '../../errors.ts';
import type { RequestContext } from '../context.ts';
import { grpcReplyHeaders } from '../request/grpc.ts';
import { downstreamGone, isGrpcCall, sendLocalReply, sendTrailersOnly } from '../request/local-reply.ts';
import { bufferRequestBody, declaredLength, drainAfterAnswer, hasRequestBody, refuseTooLarge } from '../request/request-body.ts';
import { EncodedBody } from './response-encoder.ts';
import type { Readable } from 'node:stream';
import type { FilterRequest, FilterResponse, FilterVerdict, HttpFilter, LocalReply, ResponseBodyEncoder } from './http-filter.ts';

/**
 * The chain runner: runs a route's compiled filters over one request (./http-filter.ts), and
 * owns containment: a filter that throws or rejects is answered for with a 500 local reply
 * (`GH_FILTER_FAILED`), a log line naming it and a count, never an unhandled error. Routes
 * without filters never get here (the gateway dispatches them directly, allocating nothing).
 */

/** Stable codes of the chain itself. */
export const FilterCodes = {
  /** A filter threw or rejected: a bug in it; the request gets 500. */
  FAILED: 'GH_FILTER_FAILED',
  /** A filter answered with a reply that cannot be sent (bad status, bad header): 500. */
  BAD_REPLY: 'GH_FILTER_BAD_REPLY',
  /** An upstream response a filter holds whole (to rewrite its body) is larger than the filter buffers: 500, as Envoy. */
  RESPONSE_TOO_LARGE: 'GH_FILTER_RESPONSE_TOO_LARGE',
} as const;

const failures = new Counter({
  name: 'gatehouse_filter_failures_total',
  help: 'Filter calls that threw or rejected (answered 500), by filter and hook.',
  labelNames: ['filter', 'hook'],
  registers: [registry],
});

/** A route's filters, compiled once at load: the hooks each list holds, in the order they run. */
export interface FilterChain {
  /** Every filter, in stage order (for descriptions). */
  readonly filters: readonly HttpFilter[];
  /** Filters with `onRequest`, in stage order. */
  readonly request: readonly HttpFilter[];
  /** Filters with `onResponseHeaders`, in reverse stage order. */
  readonly responseHeaders: readonly HttpFilter[];
  /** Filters with `wantsResponseBody` and `onResponseBody`, in reverse stage order. */
  readonly responseBody: readonly HttpFilter[];
  /** Filters with `onDirectResponse`, in reverse stage order (absent: none). */
  readonly direct?: readonly HttpFilter[];
}

/** The chain of `filters` (sorted by stage, stable), or undefined when there are none: such routes skip the runner entirely. */
export function compileChain(filters: readonly HttpFilter[]): FilterChain | undefined {
  if (filters.length === 0) return undefined;
  const sorted = filters.map((f, i) => ({ f, i })).sort((a, b) => a.f.stage - b.f.stage || a.i - b.i).map(({ f }) => f);
  const reversed = [...sorted].reverse();
  return {
    filters: sorted,
    request: sorted.filter((f) => f.onRequest !== undefined),
    responseHeaders: reversed.filter((f) => f.onResponseHeaders !== undefined),
    responseBody: reversed.filter((f) => f.wantsResponseBody !== undefined && f.onResponseBody !== undefined),
    direct: reversed.filter((f) => f.onDirectResponse !== undefined),
  };
}

/** How the gateway re-matches a route after `clearRouteCache` (undefined: no route matches now). */
export type Rematch = (request: ChainRequest) => FilterChain | undefined | 'no-route';

/** One request going through a chain: the {@link FilterRequest} filters see. */
export class ChainRequest implements FilterRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly ctx: RequestContext;
  path: string;
  body: Buffer | undefined = undefined;
  bodyPartial = false;
  readonly responseHeaders: string[];
  /** The chain running now (another route's after a re-match). */
  chain: FilterChain;
  /** Set by `clearRouteCache()`, read by the runner after the filter returns. */
  routeCleared = false;
  /** What `onResponseHeaders` hooks asked to re-encode the response body with, innermost first (./response-encoder.ts). */
  encoders: ResponseBodyEncoder[] | undefined = undefined;
  requestBodyStream: Readable | undefined = undefined;
  #metadata: Map<string, unknown> | undefined;
  /** The whole body as read from the client (a filter's replacement differs from it). */
  #read: Buffer | undefined;
  #drainArmed = false;

  constructor(req: IncomingMessage, res: ServerResponse, ctx: RequestContext, path: string, chain: FilterChain) {
    this.req = req;
    this.res = res;
    this.ctx = ctx;
    this.path = path;
    this.chain = chain;
    // Local replies anywhere on the path (denials, 503s) carry what filters add here (CORS), after
    // the listener's own (server, via), which the context holds in a list of this request's.
    this.responseHeaders = (ctx.responseHeaders as string[] | undefined) ?? [];
    ctx.responseHeaders = this.responseHeaders;
  }

  get method(): string {
    return this.req.method!;
  }

  get remoteAddress(): string {
    return this.req.socket.remoteAddress ?? '';
  }

  // Made on first use: most requests pass no metadata.
  get metadata(): Map<string, unknown> {
    return (this.#metadata ??= new Map());
  }

  #signal: AbortSignal | undefined;
  get signal(): AbortSignal {
    if (this.#signal) return this.#signal;
    const controller = new AbortController();
    this.#signal = controller.signal;
    const res = this.res;
    if (downstreamGone(res)) controller.abort();
    else res.once('close', () => {
      if (!res.writableEnded) controller.abort();
    });
    return this.#signal;
  }

  clearRouteCache(): void {
    this.routeCleared = true;
  }

  encodeResponseBody(encoder: ResponseBodyEncoder): void {
    (this.encoders ??= []).push(encoder);
  }

  async readBody(maxBytes: number, options?: { readonly allowPartial?: boolean }): Promise<Buffer | 'too-large' | 'aborted'> {
    const partial = options?.allowPartial === true;
    if (this.#read !== undefined) {
      const whole = this.body ?? this.#read;
      if (whole.length <= maxBytes) {
        this.bodyPartial = false;
        return whole;
      }
      if (!partial) return 'too-large';
      this.bodyPartial = true;
      return whole.subarray(0, maxBytes);
    }
    if (!hasRequestBody(this.req, this.ctx.headers)) {
      this.#read = this.body = Buffer.alloc(0);
      return this.#read;
    }
    if (!this.#drainArmed) {
      this.#drainArmed = true;
      drainAfterAnswer(this.req, this.res);
    }
    const req = this.req;
    // A body that came in the same read as the head is in the request stream by the next
    // microtask (the parser pushes it before its end): when all the declared bytes are there
    // (HTTP/1.1; never more, the parser stops at the length), they are taken at once, without
    // listening for them.
    const declared = this.ctx.headers['transfer-encoding'] === undefined ? declaredLength(req) : undefined;
    if (declared !== undefined && declared <= maxBytes && (req as { stream?: unknown }).stream === undefined) {
      await undefined;
      if (req.readableLength === declared && req.readableFlowing !== true) {
        const all = req.read() as Buffer;
        // Put back at once (an end is only emitted on a later tick): a destination reads the body as sent.
        req.unshift(all);
        this.bodyPartial = false;
        this.#read = this.body = all;
        return all;
      }
    }
    // The bytes read go back to the front of the request stream: a destination reads the body as sent.
    const read = await bufferRequestBody(req, maxBytes, partial);
    if (typeof read === 'string') return read;
    this.bodyPartial = read.partial;
    if (!read.partial) this.#read = this.body = read.forAuth;
    return read.forAuth;
  }

  /**
   * Set by {@link ChainRequest.commitBody} for an upstream destination: the body the chain holds
   * whole, which forward.ts sends as one buffer with the head (one write, no stream); the request
   * stream's copy of it was dropped.
   */
  wholeBody: Buffer | undefined = undefined;

  /**
   * Before the destination reads the request: a body a filter replaced takes the place of the
   * client's in the request stream (every destination reads it from there), whose bytes were all
   * read, so the replacement is all that is left of it. With `toUpstream` (a proxied request
   * without a shadow copy), a body held whole whose `content-length` says its size goes as
   * {@link ChainRequest.wholeBody} instead.
   */
  commitBody(toUpstream = false): boolean {
    const body = this.body;
    if (body === undefined) return true;
    if (toUpstream && body.length > 0 && !this.bodyPartial && this.requestBodyStream === undefined && this.ctx.headers['content-length'] === String(body.length)) {
      // Every byte of the client's body was read (`#read` is set only for a complete body): the stream holds nothing else.
      while (this.req.read() !== null);
      this.wholeBody = body;
      return true;
    }
    if (body === this.#read) return true;
    while (this.req.read() !== null);
    try {
      if (body.length > 0) this.req.unshift(body);
    } catch (error) {
      // The stream already ended for good (a filter replaced a body it never read): a filter bug.
      this.ctx.logger.error({ reqId: this.ctx.requestId, code: FilterCodes.FAILED, err: error }, 'the request body a filter set cannot be sent');
      return false;
    }
    return true;
  }
}

/** Whether a verdict is still to come. */
export function isPending(verdict: FilterVerdict | Promise<FilterVerdict>): verdict is Promise<FilterVerdict> {
  return verdict !== undefined && typeof (verdict as Promise<FilterVerdict>).then === 'function';
}

/**
 * Runs the request filters from `from` on: `undefined` when every filter let the request go on,
 * a reply when one answered. Synchronous filters give a synchronous result; the promise of an
 * asynchronous one never rejects (a rejection is the filter's 500).
 */
export function runRequestFilters(request: ChainRequest, rematch: Rematch, from = 0): FilterVerdict | Promise<FilterVerdict> {
  const list = request.chain.request;
  for (let i = from; i < list.length; i++) {
    const filter = list[i]!;
    let out: FilterVerdict | Promise<FilterVerdict>;
    try {
      out = filter.onRequest!(request);
    } catch (error) {
      return failed(filter, 'onRequest', request, error);
    }
    if (isPending(out)) return out.then((verdict) => next(request, rematch, filter, i + 1, verdict), (error: unknown) => failed(filter, 'onRequest', request, error));
    if (out !== undefined) return out;
    if (request.routeCleared) return rerouted(request, rematch, filter);
  }
  return undefined;
}

function next(request: ChainRequest, rematch: Rematch, filter: HttpFilter, following: number, verdict: FilterVerdict): FilterVerdict | Promise<FilterVerdict> {
  if (verdict !== undefined) return verdict;
  // The client left while the filter waited: the rest of the chain has nobody to answer.
  if (downstreamGone(request.res)) return GONE;
  if (request.routeCleared) return rerouted(request, rematch, filter);
  return runRequestFilters(request, rematch, following);
}

/** After `clearRouteCache`: the new route's filters of later stages run (Envoy: later filters read the new route's configuration). */
function rerouted(request: ChainRequest, rematch: Rematch, after: HttpFilter): FilterVerdict | Promise<FilterVerdict> {
  request.routeCleared = false;
  const chain = rematch(request);
  if (chain === 'no-route') return { status: 404, code: ErrorCodes.NO_ROUTE, body: 'no route matched' };
  if (chain === undefined) {
    request.chain = EMPTY_CHAIN;
    return undefined;
  }
  request.chain = chain;
  const from = chain.request.findIndex((f) => f.stage > after.stage);
  return from === -1 ? undefined : runRequestFilters(request, rematch, from);
}

const EMPTY_CHAIN: FilterChain = { filters: [], request: [], responseHeaders: [], responseBody: [] };

/** A verdict nobody will read (the client is gone): the gateway sends nothing for it. */
export const GONE: LocalReply = Object.freeze({ status: 499, code: 'GH_CLIENT_GONE' });

function failed(filter: HttpFilter, hook: string, request: FilterRequest, error: unknown): LocalReply {
  failures.inc({ filter: filter.name, hook });
  request.ctx.logger.error({ reqId: request.ctx.requestId, code: FilterCodes.FAILED, filter: filter.name, hook, route: request.ctx.route, err: error }, 'filter failed; the request gets 500');
  return { status: 500, code: FilterCodes.FAILED, body: 'internal error' };
}

/**
 * Runs `onResponseHeaders` of the chain on an upstream response's headers (in place): the status
 * to send (a filter may change it), or, when a filter throws, the reply to send instead (the
 * same containment as on the request side).
 */
export function runResponseHeaderFilters(request: ChainRequest, status: number, headers: string[]): number | LocalReply {
  for (const filter of request.chain.responseHeaders) {
    try {
      const changed = filter.onResponseHeaders!(request, status, headers);
      if (typeof changed === 'number') status = changed;
      else if (changed !== undefined) return changed;
    } catch (error) {
      return failed(filter, 'onResponseHeaders', request, error);
    }
  }
  return status;
}

/** The largest body any filter wants buffered for this response, or undefined: stream it. */
export function responseBodyWanted(request: ChainRequest, status: number, headers: readonly string[]): number | undefined {
  let max: number | undefined;
  for (const filter of request.chain.responseBody) {
    let wanted: { readonly maxBytes: number } | undefined;
    try {
      wanted = filter.wantsResponseBody!(request, status, headers);
    } catch (error) {
      failed(filter, 'wantsResponseBody', request, error);
      continue;
    }
    if (wanted) max = Math.max(max ?? 0, wanted.maxBytes);
  }
  return max;
}

/** Runs `onResponseBody` of the chain over a buffered response; a reply replaces it. */
export function runResponseBodyFilters(request: ChainRequest, response: FilterResponse): LocalReply | undefined {
  for (const filter of request.chain.responseBody) {
    try {
      const reply = filter.onResponseBody!(request, response);
      if (reply !== undefined) return reply;
    } catch (error) {
      return failed(filter, 'onResponseBody', request, error);
    }
  }
  return undefined;
}

/**
 * Sends a `directResponseAction` answer through the filters that see direct responses
 * (`onDirectResponse`: compression), re-encoded when one asked for it.
 */
export function sendDirectResponse(request: ChainRequest, status: number, body: string): void {
  const res = request.res;
  if (res.headersSent || downstreamGone(res)) {
    res.destroy();
    return;
  }
  const headers = ['content-length', String(Buffer.byteLength(body)), ...(body ? ['content-type', 'text/plain; charset=utf-8'] : [])];
  for (const filter of request.chain.direct ?? []) {
    try {
      filter.onDirectResponse!(request, status, headers);
    } catch (error) {
      return sendFilterReply(request.req, res, failed(filter, 'onDirectResponse', request, error), request.responseHeaders);
    }
  }
  for (const h of request.responseHeaders) headers.push(h);
  res.writeHead(status, headers);
  const encoders = request.encoders;
  if (encoders === undefined) return void res.end(body);
  const encoded = new EncodedBody(encoders, res, (error) => request.ctx.logger.warn({ reqId: request.ctx.requestId, err: { message: error.message } }, 'response body encoding failed; response cut'));
  encoded.write(Buffer.from(body));
  encoded.end(undefined);
}

/**
 * Sends a filter's {@link LocalReply} (with the request's gateway-added headers). A 413 is
 * sent so the client, still sending its body, can read it (./request-body.ts refuseTooLarge).
 */
export function sendFilterReply(req: IncomingMessage, res: ServerResponse, reply: LocalReply, extraHeaders: readonly string[]): void {
  if (reply === GONE || downstreamGone(res)) return;
  const status = reply.status;
  if (!Number.isInteger(status) || status < 200 || status > 599) {
    return sendLocalReply(res, 500, FilterCodes.BAD_REPLY, 'internal error', extraHeaders);
  }
  const headers = reply.headers ?? [];
  if (reply.verbatim) return sendVerbatim(res, reply, headers, extraHeaders);
  const extra = headers.length === 0 ? extraHeaders : [...headers, ...extraHeaders];
  if (status === 413) return refuseTooLarge(req, res, reply.body ?? 'payload too large', extra, undefined, reply.code);
  try {
    sendLocalReply(res, status, reply.code, reply.body ?? '', extra);
  } catch {
    // A header the filter made up that HTTP cannot carry.
    if (!res.headersSent) sendLocalReply(res, 500, FilterCodes.BAD_REPLY, 'internal error', extraHeaders);
    else res.destroy();
  }
}

/** A reply as given (an auth server's denial): gRPC calls get its status as a gRPC status, with its headers. */
function sendVerbatim(res: ServerResponse, reply: LocalReply, headers: readonly string[], extraHeaders: readonly string[]): void {
  const body = reply.body ?? '';
  const flat: string[] = [];
  const grpc = isGrpcCall(res);
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!.toLowerCase();
    if (name !== 'content-length' && !(grpc && name === 'content-type')) flat.push(headers[i]!, headers[i + 1]!);
  }
  try {
    if (grpc) {
      const message = body.trim() || (reply.status === 401 ? 'unauthenticated' : 'permission denied');
      return sendTrailersOnly(res, [...grpcReplyHeaders(reply.status, reply.code, message), ...flat, ...extraHeaders]);
    }
    flat.push('content-length', String(Buffer.byteLength(body)), ...extraHeaders);
    res.writeHead(reply.status, flat);
  } catch {
    // Replies are sanitised where they are made (authorizers), so this is unreachable; if it is not, fail closed instead of crashing.
    return sendLocalReply(res, 403, 'GH_EXTAUTH_BAD_DECISION', 'forbidden');
  }
  res.end(body);
}
