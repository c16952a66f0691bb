import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { ServerHttp2Stream } from 'node:http2';
import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { ErrorCodes } from '../../errors.ts';
import type { RequestContext } from '../context.ts';
import { HOP_BY_HOP, headerValue } from './header-ops.ts';
import { GrpcStatus, grpcTimeoutMs, isGrpcRequest, MAX_TIMER_MS } from './grpc.ts';
import { FilterCodes, responseBodyWanted, runResponseBodyFilters, runResponseHeaderFilters, sendFilterReply, type ChainRequest } from '../filters/chain.ts';
import type { LocalReply } from '../filters/http-filter.ts';
import { EncodedBody } from '../filters/response-encoder.ts';
import { downstreamGone, sendLocalReply } from './local-reply.ts';
import { hasRequestBody } from './request-body.ts';
import type { CompiledRoute } from '../routing/route-table.ts';
import { isConnectFailure, type UpstreamCluster, type UpstreamHost } from '../upstream/upstream-cluster.ts';
import { upstreamAuthority } from './host-rewrite.ts';
import { SHADOW_TIMEOUT_MS, startShadow } from './shadow.ts';
import { settleServer } from './listener-headers.ts';
import { metrics } from '../../admin/metrics.ts';

const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/** Headers the gateway sets itself on the upstream request. */
/** Node's codes for an upstream certificate that does not verify. */
const TLS_VERIFY = /CERT|SIGNATURE|ALTNAME|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)/;

/**
 * Headers the gateway sets itself on the upstream request, and `expect`: the listener already
 * answered `100 Continue` to the client (as Envoy does by default), so the upstream gets the
 * body without being asked (undici refuses the header outright).
 */
const REPLACED = new Set(['host', 'x-forwarded-for', 'x-forwarded-proto', 'x-request-id', 'expect']);

/** A stalled download with no route timeout (`timeout: 0s`) is still cut after this long (Envoy's stream_idle_timeout default). */
export const STALLED_DOWNLOAD_MS = 300_000;

/**
 * While requests wait for a connection to the same upstream host, a client that has read nothing
 * for this long gives its connection up (the rest of its limit no longer applies): a crowd of
 * clients that do not read would otherwise take turns holding every connection for the whole
 * route timeout. Envoy's overload manager shortens its idle timeouts under pressure the same way.
 */
export const CONTENDED_STALL_MS = 1_000;

/**
 * Proxies one request to an upstream cluster (SPEC 4 step 3): bodies stream both ways
 * with backpressure and are never buffered; hop-by-hop headers are dropped;
 * `x-forwarded-for`, `x-forwarded-proto` and `x-request-id` are set. Failures before the
 * response starts become 503 (refused/reset) or 504 (timeout); after it starts, the
 * downstream connection is cut, since a status can no longer be sent.
 */
export function forward(req: IncomingMessage, res: ServerResponse, ctx: RequestContext, route: CompiledRoute, cluster: UpstreamCluster, path: string, filters?: ChainRequest): void {
  const headers = ctx.headers;
  const hasBody = hasRequestBody(req, headers);
  // Only a request with no body can be replayed: a streamed body is consumed by the first try.
  const retries = route.retry && !hasBody && IDEMPOTENT.has(req.method!) ? route.retry.numRetries : 0;
  // A client that already left (during auth, say) gets no upstream request: its 'close' has fired.
  if (downstreamGone(res)) return;
  // options.shadowing: a copy goes to the shadow Upstream, fire and forget; a body is copied as the primary reads it.
  // The body as the destination reads it: the client's, or a filter's decoding of it (gRPC-Web text), which a shadow copies too.
  const source = filters?.requestBodyStream ?? req;
  const shadowBody = route.shadow
    ? startShadow(route.shadow, source, hasBody, { method: req.method!, path, headers: (host) => upstreamHeaders(req, headers, route, host, ctx.start, false), timeoutMs: route.timeoutMs > 0 ? Math.min(route.timeoutMs, MAX_TIMER_MS) : SHADOW_TIMEOUT_MS, logger: ctx.logger, requestId: ctx.requestId })
    : undefined;
  ctx.upstreamPath = path;
  // A body the filters hold whole goes as one buffer (./filters/chain.ts commitBody).
  const exchange: Exchange = { req, res, ctx, route, cluster, path, hasBody, body: filters?.wholeBody ?? shadowBody ?? source, current: undefined, filters };
  // gRPC's own deadline (`grpc-timeout`), over the whole call, streaming included.
  const deadlineMs = isGrpcRequest(headers) ? grpcTimeoutMs(headers) : undefined;
  const deadline = deadlineMs === undefined ? undefined : setTimeout(() => deadlineExceeded(exchange), deadlineMs);
  // `on`, not `once`: a response closes once, and `once` wraps every listener in two more objects.
  res.on('close', () => {
    if (deadline) clearTimeout(deadline);
    // The client went away before the response was complete (an HTTP/1.1 socket closed, an
    // HTTP/2 RST_STREAM or GOAWAY): the upstream request stops at once, one path for both.
    // `writableEnded`, not `writableFinished`: a reset HTTP/2 stream counts as finished.
    if (!res.writableEnded) exchange.current?.abort();
    // The exchange is over: a body copy the primary never read whole is given up (no-op once sent).
    shadowBody?.destroy();
  });
  new ProxyAttempt(exchange, retries, false).start();
}

/**
 * A gRPC call past its `grpc-timeout`: the upstream call is cancelled and the client gets
 * DEADLINE_EXCEEDED, as a trailers-only answer or, once the response has started, as trailers.
 */
function deadlineExceeded(x: Exchange): void {
  x.current?.abort();
  const { res, ctx } = x;
  if (res.writableEnded || downstreamGone(res)) return;
  ctx.logger.info({ reqId: ctx.requestId, upstream: ctx.upstream }, 'gRPC deadline exceeded');
  if (!res.headersSent) return sendLocalReply(res, 504, ErrorCodes.GRPC_DEADLINE, 'deadline exceeded (grpc-timeout)', ctx.responseHeaders);
  res.addTrailers({ 'grpc-status': String(GrpcStatus.DEADLINE_EXCEEDED), 'grpc-message': 'deadline exceeded (grpc-timeout)' });
  res.end();
}

/** An upstream response held for `onResponseBody` filters. */
interface HeldResponse {
  readonly status: number;
  readonly headers: string[];
  readonly chunks: Buffer[];
  size: number;
  readonly max: number;
}

/** One downstream request and its (possibly retried) trip upstream. */
interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly ctx: RequestContext;
  readonly route: CompiledRoute;
  readonly cluster: UpstreamCluster;
  readonly path: string;
  readonly hasBody: boolean;
  /** What the request body is read from: `req`, a filter's decoded stream (gRPC-Web text), the shadow's copying stream (shadow.ts), or the whole body a filter holds. */
  readonly body: Readable | Buffer;
  /** The attempt that owns the response now. */
  current: ProxyAttempt | undefined;
  /** The request as the route's filters saw it, for their response hooks (absent: the route has none). */
  readonly filters: ChainRequest | undefined;
}

/** One try against one upstream host: an undici dispatch handler writing straight into the response. */
class ProxyAttempt implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private host!: UpstreamHost;
  private sentAt = 0;
  /** Set when this attempt was abandoned for a retry: its remaining callbacks are ignored. */
  private abandoned = false;
  /** Counted in `host.inFlight` until the response starts or fails. */
  private counted = false;
  /** Armed only while the request waits in the pool's queue (all connections busy). */
  private queueTimer: NodeJS.Timeout | undefined;
  /** Connection config `maxStreamDuration`: cuts this try, response body included. */
  private durationTimer: NodeJS.Timeout | undefined;
  /** Counted in the cluster's active requests (and, for a retry, its active retries) until it ends. */
  private active = false;
  /** Armed while the client is not reading (the upstream paused): cuts the response if it stays so. */
  private stallTimer: NodeJS.Timeout | undefined;
  /** When the client last stopped reading (performance.now()). */
  private stalledSince = 0;
  private onDrain: (() => void) | undefined;
  /** The upstream's answer was trailers-only (one HTTP/2 header block that ended its stream). */
  private trailersOnly = false;
  /** The response held whole for a filter that rewrites bodies (absent: streamed). */
  private held: HeldResponse | undefined;
  /** The body's way through the encoders filters asked for (compression, gRPC-Web); absent: written as it comes. */
  private encoded: EncodedBody | undefined;
  private readonly x: Exchange;
  private readonly retriesLeft: number;
  /** This try is a retry: it holds one of the cluster's `maxRetries` slots. */
  private readonly isRetry: boolean;

  constructor(exchange: Exchange, retriesLeft: number, isRetry: boolean) {
    this.x = exchange;
    this.retriesLeft = retriesLeft;
    this.isRetry = isRetry;
  }

  start(): void {
    const { req, res, ctx, route, cluster } = this.x;
    this.x.current = this;
    if (cluster.activeRequests >= cluster.maxRequests) {
      // Envoy's max_requests circuit breaker (per cluster): every try counts.
      if (this.isRetry) cluster.activeRetries--;
      ctx.logger.warn({ reqId: ctx.requestId, upstream: cluster.name, active: cluster.activeRequests }, 'upstream request limit reached (circuitBreakers.maxRequests)');
      return sendLocalReply(res, 503, ErrorCodes.UPSTREAM_OVERFLOW, 'upstream overloaded: too many requests in flight', ['x-envoy-overloaded', 'true', ...(ctx.responseHeaders ?? [])]);
    }
    // The route's hash key (options.lbHash) for ring hash / Maglev Upstreams; other policies ignore it.
    this.host = cluster.pick(undefined, cluster.hashing ? route.hashKey?.(req, ctx.headers, (cookie) => addSetCookie(ctx, cookie)) : undefined);
    ctx.upstream = this.host.origin;
    ctx.cluster = cluster.name;
    const host = this.host;
    if (host.inFlight >= host.maxInFlight) {
      if (this.isRetry) cluster.activeRetries--;
      // Envoy's max_pending_requests circuit breaker: fail fast instead of queueing without bound.
      ctx.logger.warn({ reqId: ctx.requestId, upstream: host.origin, inFlight: host.inFlight }, 'upstream pending-request limit reached');
      return sendLocalReply(res, 503, ErrorCodes.UPSTREAM_OVERFLOW, 'upstream overloaded: too many pending requests', ['x-envoy-overloaded', 'true', ...(ctx.responseHeaders ?? [])]);
    }
    cluster.activeRequests++;
    this.active = true;
    if (cluster.maxStreamDurationMs !== undefined) this.durationTimer = setTimeout(() => this.streamDurationReached(), cluster.maxStreamDurationMs);
    host.inFlight++;
    this.counted = true;
    // Every connection is busy (slow clients can pin them all): a request waiting in the queue
    // gets the route timeout as a deadline, where undici's own timers only start on a connection.
    if (host.inFlight > host.connections) this.queueTimer = setTimeout(() => this.queueTimedOut(), route.retry?.perTryTimeoutMs ?? route.timeoutMs);
    this.sentAt = performance.now();
    // undici reads `servername` from the options (its type does not list it; the spread did not need to).
    const options: Dispatcher.DispatchOptions & { servername?: string } = {
      path: this.x.path,
      method: req.method as Dispatcher.HttpMethod,
      headers: upstreamHeaders(req, ctx.headers, route, host, ctx.start),
      body: this.x.hasBody ? this.x.body : null,
      headersTimeout: route.retry?.perTryTimeoutMs ?? route.timeoutMs,
      bodyTimeout: route.timeoutMs,
    };
    // Set only for TLS hosts: a spread of an empty object made one more object per request.
    if (host.servername !== undefined) options.servername = host.servername;
    host.dispatcher.dispatch(options, this);
  }

  abort(): void {
    this.settle();
    this.finish();
    this.clearStall();
    // Its remaining callbacks (the abort's own error among them) no longer answer the client.
    this.abandoned = true;
    this.controller?.abort(new Error('downstream closed'));
  }

  /** The request left the host's in-flight count (response started, failed or abandoned). */
  private settle(): void {
    if (this.queueTimer) clearTimeout(this.queueTimer);
    this.queueTimer = undefined;
    if (this.counted) {
      this.counted = false;
      this.host.inFlight--;
    }
  }

  /**
   * This try left the cluster's active requests (and retries): it ended, failed, was abandoned
   * or cut. Idempotent.
   */
  private finish(): void {
    if (!this.active) return;
    this.active = false;
    if (this.durationTimer) clearTimeout(this.durationTimer);
    this.durationTimer = undefined;
    const cluster = this.x.cluster;
    cluster.activeRequests--;
    if (this.isRetry) cluster.activeRetries--;
  }

  private clearStall(): void {
    if (this.stallTimer) clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
  }

  /**
   * Whether another try may be made: tries left on the route, and a free slot among the
   * cluster's `maxRetries` (Envoy's max_retries; this try's own slot is about to be freed).
   */
  private mayRetry(): boolean {
    if (this.retriesLeft <= 0) return false;
    const cluster = this.x.cluster;
    if (cluster.activeRetries - (this.isRetry && this.active ? 1 : 0) < cluster.maxRetries) return true;
    this.x.ctx.logger.warn({ reqId: this.x.ctx.requestId, upstream: cluster.name, retries: cluster.activeRetries }, 'retry not attempted: upstream retry limit reached (circuitBreakers.maxRetries)');
    return false;
  }

  /**
   * Connection config `maxStreamDuration` reached (Envoy): the try is reset; before the response
   * started the client gets 504 (408 while its request body is still arriving), after it the
   * downstream stream is reset too.
   */
  private streamDurationReached(): void {
    this.durationTimer = undefined;
    if (!this.cut('max stream duration reached', 'upstream max stream duration reached')) return;
    const { req, res, ctx } = this.x;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (req.complete || !this.x.hasBody) sendLocalReply(res, 504, ErrorCodes.UPSTREAM_TIMEOUT, 'upstream max stream duration reached', ctx.responseHeaders);
    else sendLocalReply(res, 408, ErrorCodes.UPSTREAM_TIMEOUT, 'upstream max stream duration reached', ctx.responseHeaders);
  }

  /**
   * Gives this try up on the gateway's own timer: its later callbacks no longer answer the client,
   * its slots are freed and the upstream request is aborted. False when it was already given up.
   */
  private cut(reason: string, message: string): boolean {
    if (this.abandoned) return false;
    this.abandoned = true;
    this.settle();
    this.finish();
    this.clearStall();
    this.controller?.abort(new Error(reason));
    this.x.ctx.logger.warn({ reqId: this.x.ctx.requestId, upstream: this.host.origin }, message);
    return true;
  }

  private queueTimedOut(): void {
    this.queueTimer = undefined;
    if (!this.cut('queued too long', 'upstream request timed out waiting for a connection')) return;
    const { res, ctx } = this.x;
    sendLocalReply(res, 504, ErrorCodes.UPSTREAM_TIMEOUT, 'upstream request timeout (no connection became free)', ctx.responseHeaders);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // Given up while still queued (timed out, client gone): do not send it now. (It used to be
    // sent when the client had its 504 already, and then held its connection for good.)
    if (this.abandoned) controller.abort(new Error('abandoned while queued'));
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200) return this.informational(statusCode, headers);
    this.settle();
    // An abandoned try never holds an upstream connection, whatever state it was given up in.
    if (this.abandoned) return controller.abort(new Error('abandoned'));
    const { route, res, cluster } = this.x;
    if (downstreamGone(res)) {
      // The client left while the upstream answered: nothing to write to, and the upstream stops.
      this.abandoned = true;
      this.finish();
      controller.abort(new Error('downstream closed'));
      return;
    }
    if (cluster.maxHeadersCount !== undefined && headerFields(headers) > cluster.maxHeadersCount) {
      // Envoy's codec refuses such a response (max_headers_count): a protocol error, reset before headers.
      this.abandoned = true;
      this.finish();
      controller.abort(new Error('too many response headers'));
      this.x.ctx.logger.warn({ reqId: this.x.ctx.requestId, upstream: this.host.origin }, 'upstream response has more headers than maxHeadersCount');
      return sendLocalReply(res, 503, ErrorCodes.UPSTREAM_UNAVAILABLE, `upstream response has more than ${cluster.maxHeadersCount} headers (maxHeadersCount)`, this.x.ctx.responseHeaders);
    }
    cluster.observe(this.host, statusCode);
    if (route.retry?.onStatus(statusCode) && this.mayRetry()) {
      this.abandoned = true;
      this.finish();
      controller.abort(new Error('retrying'));
      this.retry();
      return;
    }
    if (route.destination.kind === 'upstream') route.destination.latency.observe((performance.now() - this.sentAt) / 1000);
    const flat = responseHeaders(headers, route, this.x.req, this.x.ctx);
    const filters = this.x.filters;
    if (filters) {
      const max = filters.chain.responseBody.length > 0 ? responseBodyWanted(filters, statusCode, flat) : undefined;
      const status = runResponseHeaderFilters(filters, statusCode, flat);
      if (typeof status !== 'number') return this.replaceResponse(controller, status);
      statusCode = status;
      if (max !== undefined) {
        // A filter rewrites the body: it is held (bounded) and the head goes out with it.
        this.held = { status: statusCode, headers: flat, chunks: [], size: 0, max };
        return;
      }
    }
    const extra = this.x.ctx.responseHeaders;
    if (extra) for (let i = 0; i < extra.length; i++) flat.push(extra[i]!);
    const server = this.x.ctx.serverHeader;
    if (server) settleServer(flat, server);
    const encoders = filters?.encoders;
    if (encoders) {
      // Re-encoded (./filters/response-encoder.ts): never a header block that ends the stream, as the encoders have bytes to send.
      if (this.sendHead(controller, statusCode, flat, false)) this.encoded = new EncodedBody(encoders, res, (error) => this.encoderFailed(error));
      return;
    }
    // Trailers can follow only an HTTP/2 upstream's body or a chunked HTTP/1.1 one: otherwise the
    // HTTP/2 stream ends with its last DATA frame instead of waiting for trailers that cannot come
    // (Node then sends one more, empty, DATA frame from a 'wantTrailers' round trip through
    // JavaScript). Measured with test/bench/h2c-cpu.ts: 70-77 µs of the gateway's CPU per h2c
    // request before, 52-63 µs after (HTTP/1.1 in the same runs: 44-53 µs).
    const trailers = this.host.http2 || headers['transfer-encoding'] !== undefined;
    this.sendHead(controller, statusCode, flat, (controller as Dispatcher.DispatchController & { endStream?: boolean }).endStream === true, trailers);
  }

  /** An encoder of the body failed (the response was cut): the upstream request stops. */
  private encoderFailed(error: Error): void {
    this.x.ctx.logger.warn({ reqId: this.x.ctx.requestId, upstream: this.host.origin, err: { message: error.message } }, 'response body encoding failed; response cut');
    this.abort();
  }

  /**
   * The response's status line and headers, to the client; false when they could not be sent (the
   * client then got 502 or a reset). `trailers`: whether an HTTP/2 stream waits for a trailer block
   * after the body (false only when the upstream's response cannot have one).
   */
  private sendHead(controller: Dispatcher.DispatchController, statusCode: number, flat: string[], endStream: boolean, trailers = true): boolean {
    const { res } = this.x;
    const stream = (res as ServerResponse & { stream?: ServerHttp2Stream }).stream;
    try {
      if (stream) {
        // HTTP/2: the header block goes straight to the stream. Node's compatibility writeHead
        // validates and copies each header twice (a bare server answered ~30% more responses per
        // second without it; here the gateway's CPU per request fell ~5%); body, trailers and
        // the end stay with the compat response, whose trailer handler `waitForTrailers` feeds.
        // A trailers-only answer (gRPC's errors and empty OKs) stays one header block that ends
        // the stream: gRPC clients read a status that comes in headers followed by more frames
        // as INTERNAL.
        res.statusCode = statusCode;
        this.trailersOnly = endStream;
        stream.respond(h2Headers(statusCode, flat), this.trailersOnly ? { endStream: true } : trailers ? { waitForTrailers: true } : undefined);
      } else res.writeHead(statusCode, flat);
      return true;
    } catch (error) {
      // A header the client's protocol cannot carry, or a stream that closed meanwhile: the
      // response cannot start; the client gets 502 if it still can, else its stream is reset.
      this.abandoned = true;
      this.finish();
      controller.abort(error as Error);
      this.x.ctx.logger.warn({ reqId: this.x.ctx.requestId, upstream: this.host.origin, err: { code: (error as { code?: string }).code, message: (error as Error).message } }, 'upstream response headers could not be forwarded');
      if (!res.headersSent) sendLocalReply(res, 502, ErrorCodes.UPSTREAM_UNAVAILABLE, 'upstream response headers could not be forwarded', this.x.ctx.responseHeaders);
      else res.destroy();
      return false;
    }
  }

  /** A filter answered in place of the upstream's response: the upstream request stops. */
  private replaceResponse(controller: Dispatcher.DispatchController, reply: LocalReply): void {
    this.abandoned = true;
    this.finish();
    this.clearStall();
    controller.abort(new Error('response replaced by a filter'));
    sendFilterReply(this.x.req, this.x.res, reply, this.x.ctx.responseHeaders ?? []);
  }

  /** The held response is complete: the filters rewrite it and it goes out whole. */
  private releaseHeld(controller: Dispatcher.DispatchController, held: HeldResponse, trailers: IncomingHttpHeaders): void {
    const filters = this.x.filters!;
    const response = { status: held.status, headers: held.headers, body: held.chunks.length === 1 ? held.chunks[0]! : Buffer.concat(held.chunks, held.size) };
    const reply = runResponseBodyFilters(filters, response);
    if (reply) return sendFilterReply(this.x.req, this.x.res, reply, this.x.ctx.responseHeaders ?? []);
    const flat = response.headers;
    for (let i = flat.length - 2; i >= 0; i -= 2) {
      const name = flat[i]!.toLowerCase();
      if (name === 'content-length' || name === 'transfer-encoding') flat.splice(i, 2);
    }
    const encoders = filters.encoders;
    // Re-encoded bodies have no length known in advance (chunked, or HTTP/2 frames).
    if (!encoders) flat.push('content-length', String(response.body.length));
    const extra = this.x.ctx.responseHeaders;
    if (extra) for (let i = 0; i < extra.length; i++) flat.push(extra[i]!);
    const server = this.x.ctx.serverHeader;
    if (server) settleServer(flat, server);
    if (!this.sendHead(controller, response.status, flat, false)) return;
    if (encoders) {
      const encoded = (this.encoded = new EncodedBody(encoders, this.x.res, (error) => this.encoderFailed(error)));
      encoded.write(response.body);
      encoded.end(responseTrailers(trailers));
      return;
    }
    const forwarded = responseTrailers(trailers);
    if (forwarded) this.x.res.addTrailers(forwarded);
    this.x.res.end(response.body);
  }

  /**
   * A 1xx before the final answer: `103 Early Hints` goes on to the client (not to an HTTP/1.0
   * one); any other (a `100 Continue` the listener already answered itself, a `102`) is dropped.
   */
  private informational(statusCode: number, headers: IncomingHttpHeaders): void {
    const { req, res } = this.x;
    if (statusCode !== 103 || this.abandoned || res.headersSent || downstreamGone(res) || (req.httpVersionMajor === 1 && req.httpVersionMinor === 0)) return;
    const hints: Record<string, string | string[]> = {};
    for (const name in headers) {
      const value = headers[name];
      if (value !== undefined && !HOP_BY_HOP.has(name) && name.charCodeAt(0) !== 0x3a) hints[name] = value;
    }
    try {
      res.writeEarlyHints(hints);
    } catch {
      // Hints Node will not write (no or a malformed Link): they are only hints, and dropped.
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.abandoned) return controller.abort(new Error('abandoned'));
    const held = this.held;
    if (held) {
      held.size += chunk.length;
      if (held.size > held.max) {
        // Envoy answers a response over a filter's buffer limit with 500 too.
        this.x.ctx.logger.warn({ reqId: this.x.ctx.requestId, upstream: this.host.origin, limit: held.max }, 'upstream response body larger than a filter buffers');
        this.held = undefined;
        return this.replaceResponse(controller, { status: 500, code: FilterCodes.RESPONSE_TOO_LARGE, body: 'response payload too large' });
      }
      held.chunks.push(chunk);
      return;
    }
    const res = this.x.res;
    const out = this.encoded ?? res;
    if (out.write(chunk)) return;
    // A destroyed response never drains: stop the upstream request instead of pausing it forever.
    if (downstreamGone(res)) return this.abort();
    // The client reads slower than the upstream sends: pause the upstream (backpressure, never
    // buffering), but not for ever: a client that stops reading would hold the upstream
    // connection (and with enough of them, the whole pool) as long as it liked.
    controller.pause();
    // Made on the first pause only: requests whose clients keep up allocate nothing for this.
    out.once('drain', (this.onDrain ??= () => this.drained()));
    this.clearStall();
    this.stalledSince = performance.now();
    this.stallTimer = setTimeout(stallTimedOut, Math.min(this.stallLimit(), CONTENDED_STALL_MS), this);
  }

  private stallLimit(): number {
    return this.x.route.timeoutMs > 0 ? Math.min(this.x.route.timeoutMs, MAX_TIMER_MS) : STALLED_DOWNLOAD_MS;
  }

  /** The client read again: the upstream resumes. */
  private drained(): void {
    this.clearStall();
    if (!this.abandoned) this.controller?.resume();
  }

  /**
   * The client read nothing for the route's timeout while the upstream waited: the upstream
   * request is cancelled (its connection goes back to the pool) and the client's connection
   * (HTTP/1.1) or stream (HTTP/2) reset, as a status can no longer be sent.
   */
  stalled(): void {
    this.stallTimer = undefined;
    const limit = this.stallLimit();
    const waited = performance.now() - this.stalledSince;
    if (waited < limit && queuedFor(this.host) === 0) {
      // Nobody waits for this host's connections: the client may take its whole limit.
      this.stallTimer = setTimeout(stallTimedOut, Math.min(limit - waited, CONTENDED_STALL_MS), this);
      return;
    }
    if (!this.cut('downstream stopped reading', 'client stopped reading the response: upstream request cancelled, client connection reset')) return;
    this.x.res.destroy();
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    this.finish();
    this.clearStall();
    if (this.abandoned) return;
    const held = this.held;
    if (held) {
      this.held = undefined;
      return this.releaseHeld(controller, held, trailers);
    }
    if (this.encoded) return this.encoded.end(responseTrailers(trailers));
    if (this.trailersOnly) {
      // The header block already ended the stream: only the compat response's state is left to close.
      this.x.res.end();
      return;
    }
    // gRPC's status travels in trailers; HTTP/2 (and chunked HTTP/1.1) clients get them as sent.
    const forwarded = responseTrailers(trailers);
    if (forwarded) this.x.res.addTrailers(forwarded);
    this.x.res.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.settle();
    this.clearStall();
    if (this.abandoned) return this.finish();
    const { res, ctx, route, cluster } = this.x;
    const code = (error as { code?: string }).code ?? '';
    const connectFailure = isConnectFailure(error);
    if (connectFailure) cluster.eject(this.host);
    if (res.headersSent || downstreamGone(res)) {
      this.finish();
      res.destroy();
      return;
    }
    const retry = route.retry;
    const timedOut = TIMEOUT_CODES.has(code);
    const retriable =
      retry !== undefined &&
      ((connectFailure && retry.onConnectFailure) || (!connectFailure && !timedOut && retry.onReset) || (timedOut && retry.onTimeout && retry.perTryTimeoutMs !== undefined)) &&
      this.mayRetry();
    this.finish();
    if (retriable) {
      this.abandoned = true;
      this.retry();
      return;
    }
    ctx.logger.warn({ reqId: ctx.requestId, upstream: this.host.origin, err: { code, message: error.message } }, 'upstream request failed');
    if (timedOut) sendLocalReply(res, 504, ErrorCodes.UPSTREAM_TIMEOUT, 'upstream request timeout', ctx.responseHeaders);
    else if (TLS_VERIFY.test(code ?? '')) sendLocalReply(res, 503, ErrorCodes.UPSTREAM_UNAVAILABLE, `upstream TLS certificate verification failed (${code}): check the Upstream's sslConfig rootCa and sni`, ctx.responseHeaders);
    else sendLocalReply(res, 503, ErrorCodes.UPSTREAM_UNAVAILABLE, `upstream connect error or disconnect/reset before headers (${code || error.message})`, ctx.responseHeaders);
  }

  private retry(): void {
    // Envoy's back-off: a random wait up to base * 2^(tries so far), capped at max.
    const { baseMs, maxMs } = this.x.route.retry!.backoff;
    const tries = this.x.route.retry!.numRetries - this.retriesLeft;
    const wait = Math.random() * Math.min(maxMs, baseMs * 2 ** tries);
    // The retry holds a maxRetries slot from now (its back-off included) until it ends.
    const cluster = this.x.cluster;
    cluster.activeRetries++;
    setTimeout(() => {
      if (downstreamGone(this.x.res)) {
        cluster.activeRetries--;
        return;
      }
      new ProxyAttempt(this.x, this.retriesLeft - 1, true).start();
    }, wait);
  }
}

/** A generated hash cookie (lbHash cookie with ttl) goes on the response, once (a retry generates the same one). */
function addSetCookie(ctx: RequestContext, cookie: string): void {
  const extra = ctx.responseHeaders ?? [];
  for (let i = 0; i < extra.length; i += 2) if (extra[i] === 'set-cookie' && extra[i + 1] === cookie) return;
  ctx.responseHeaders = [...extra, 'set-cookie', cookie];
}

function stallTimedOut(attempt: ProxyAttempt): void {
  attempt.stalled();
}

/** Requests waiting for a connection to `host` (undici's pool queue, or the HTTP/2 dispatcher's). */
function queuedFor(host: UpstreamHost): number {
  const dispatcher = host.dispatcher as Dispatcher & { stats?: { queued: number }; queued?: number };
  return dispatcher.queued ?? dispatcher.stats?.queued ?? 0;
}

/**
 * Writes an upstream body chunk to the downstream response, pausing the upstream while the
 * client is slower (backpressure, never buffering).
 */
export function writeThrough(controller: Dispatcher.DispatchController, res: ServerResponse, chunk: Buffer): void {
  if (!res.write(chunk)) {
    // A destroyed response never drains: stop the upstream request instead of pausing it forever.
    if (downstreamGone(res)) return controller.abort(new Error('downstream closed'));
    controller.pause();
    res.once('drain', () => controller.resume());
  }
}

/** Header fields in a parsed header object (a repeated name counts once per value). */
function headerFields(headers: IncomingHttpHeaders): number {
  let n = 0;
  for (const name in headers) {
    const value = headers[name];
    n += Array.isArray(value) ? value.length : 1;
  }
  return n;
}

/** A flat header list as an HTTP/2 header block (repeated names become arrays; names already lower case). */
function h2Headers(status: number, flat: readonly string[]): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { ':status': status };
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!.toLowerCase();
    const value = flat[i + 1]!;
    const existing = out[name];
    if (existing === undefined) out[name] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else out[name] = [String(existing), value];
  }
  return out;
}

/** Trailers to pass on: all but hop-by-hop ones; undefined when there are none. */
function responseTrailers(trailers: IncomingHttpHeaders | undefined): Record<string, string | string[]> | undefined {
  if (!trailers) return undefined;
  let out: Record<string, string | string[]> | undefined;
  for (const name in trailers) {
    const value = trailers[name];
    if (value === undefined || HOP_BY_HOP.has(name) || name.charCodeAt(0) === 0x3a) continue;
    (out ??= {})[name] = value;
  }
  return out;
}

/** The request headers sent upstream, as a flat `[name, value, …]` list (undici's cheapest form); `count`: an invalid Host rewrite is counted (not again for a shadow copy). */
function upstreamHeaders(req: IncomingMessage, headers: IncomingHttpHeaders, route: CompiledRoute, host: UpstreamHost, start: number, count = true): string[] {
  const out: string[] = [];
  // Names listed in the request's Connection were dropped before auth (sanitizeRequestHeaders):
  // dropping them here again would let a client strip headers an auth step set.
  const remove = route.requestHeaders.remove;
  for (const name in headers) {
    if (HOP_BY_HOP.has(name) || REPLACED.has(name) || remove.has(name)) continue;
    const value = headers[name];
    if (value === undefined) continue;
    if (typeof value === 'string') out.push(name, value);
    else for (const v of value) out.push(name, v);
  }
  const rewriter = route.hostRewriter;
  if (rewriter === undefined) {
    if (headers.host) out.push('host', headers.host);
  } else {
    // Host rewrites (host-rewrite.ts); a path regex sees the request's own path, before path rewrites (Envoy).
    const url = rewriter.pathRegex ? (req.url ?? '/') : '';
    const q = url.indexOf('?');
    const rewritten = upstreamAuthority(rewriter, headers, q === -1 ? url : url.slice(0, q), host.addr);
    if (rewritten.invalid && count) metrics.hostRewriteInvalid.labels(route.name).inc();
    if (rewritten.authority) out.push('host', rewritten.authority);
    if (rewritten.forwardedHost !== undefined) {
      removeAll(out, 'x-forwarded-host');
      out.push('x-forwarded-host', rewritten.forwardedHost);
    }
  }
  const client = req.socket.remoteAddress ?? '';
  const xff = headers['x-forwarded-for'];
  const proto = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
  out.push('x-forwarded-for', xff ? `${xff}, ${client}` : client, 'x-forwarded-proto', proto, 'x-request-id', headers['x-request-id'] as string);
  // `te: trailers` is the one TE an HTTP/2 request may carry, and gRPC servers ask for it.
  if (host.http2 && typeof headers.te === 'string' && /(^|,)\s*trailers\s*(,|$)/i.test(headers.te)) out.push('te', 'trailers');
  for (const add of route.requestHeaders.add) {
    if (!add.append) removeAll(out, add.name);
    out.push(add.name, add.render ? headerValue(add, { req, headers, start }) : add.value);
  }
  return out;
}

/**
 * The upstream's response headers minus hop-by-hop ones, with the route's manipulation applied.
 * The route's filters see them next; the gateway's own (CORS) are appended last.
 */
function responseHeaders(headers: IncomingHttpHeaders, route: CompiledRoute, req: IncomingMessage, ctx: RequestContext): string[] {
  const out: string[] = [];
  const listed = connectionListed(headers);
  const remove = route.responseHeaders.remove;
  for (const name in headers) {
    if (HOP_BY_HOP.has(name) || remove.has(name) || listed?.has(name)) continue;
    const value = headers[name];
    if (value === undefined) continue;
    if (typeof value === 'string') out.push(name, value);
    else for (const v of value) out.push(name, v);
  }
  for (const add of route.responseHeaders.add) {
    if (!add.append) removeAll(out, add.name);
    out.push(add.name, add.render ? headerValue(add, { req, headers: ctx.headers, start: ctx.start }) : add.value);
  }
  return out;
}

/** Header names listed in `Connection`: hop-by-hop too, in both directions (RFC 9110 7.6.1). */
function connectionListed(headers: IncomingHttpHeaders): ReadonlySet<string> | undefined {
  const connection = headers.connection;
  if (connection === undefined) return undefined;
  const value = (Array.isArray(connection) ? connection.join(',') : connection).toLowerCase();
  // What nearly every upstream sends, answered without a new set per response (a set, a split
  // and a map: ~500 bytes a response). `keep-alive` is hop-by-hop anyway.
  if (value === 'keep-alive') return undefined;
  if (value === 'close') return LISTED_CLOSE;
  return new Set(value.split(',').map((s) => s.trim()));
}

const LISTED_CLOSE: ReadonlySet<string> = new Set(['close']);

function removeAll(flat: string[], name: string): void {
  for (let i = flat.length - 2; i >= 0; i -= 2) {
    if (flat[i] === name) flat.splice(i, 2);
  }
}

