import { Transform, type Readable, type TransformCallback } from 'node:stream';
import type { Dispatcher } from 'undici';
import { metrics } from '../../admin/metrics.ts';
import type { Logger } from '../../log/logger.ts';
import type { UpstreamCluster, UpstreamHost } from '../upstream/upstream-cluster.ts';

/**
 * Gloo's route `shadowing` (Envoy's request_mirror_policies, issue 31 item 4): a copy of a
 * `percentage` of the route's requests goes to another Upstream, fire and forget. The copy's
 * Host gets Envoy's `-shadow` suffix; its response, latency and failure never reach the client.
 *
 * Bounds (a shadow that hangs, resets or is slow costs the gateway a known amount, never the
 * client's request): at most {@link MAX_SHADOWS_IN_FLIGHT} copies in flight per process, each cut
 * after the route timeout (or {@link SHADOW_TIMEOUT_MS} when the route has none); a request body is
 * mirrored while it stays within {@link SHADOW_BODY_LIMIT} bytes (Envoy also drops the shadow
 * of a body over its buffer limit), and all bodies held for shadows together within
 * {@link SHADOW_BUFFER_BUDGET}. Every copy is counted in `gatehouse_shadow_requests_total` by
 * result: `ok` (the shadow answered, any status), `failed` (refused, reset, timed out),
 * `body_too_large`, `overloaded` (the in-flight cap or the buffer budget) and `abandoned` (the
 * primary request ended before its body was read whole: a body copy is sent once the body is
 * whole; forward.ts destroys the copying stream when the exchange ends).
 */

/** A route's compiled `shadowing`. */
export interface CompiledShadow {
  readonly cluster: UpstreamCluster;
  /** Share of requests shadowed, 0–1. */
  readonly fraction: number;
}

/** Shadow copies in flight per process at most; beyond it a copy is not made (counted `overloaded`). */
export const MAX_SHADOWS_IN_FLIGHT = 128;
/** A request body above this many bytes is not shadowed (counted `body_too_large`). */
export const SHADOW_BODY_LIMIT = 1024 * 1024;
/** Bytes of request bodies held for shadow copies at once, all requests together. */
export const SHADOW_BUFFER_BUDGET = 32 * 1024 * 1024;
/** A shadow copy's deadline when its route has no timeout (`timeout: 0s`). */
export const SHADOW_TIMEOUT_MS = 15_000;

let inFlight = 0;
let buffered = 0;

/** Shadow copies in flight now (tests, admin). */
export function shadowsInFlight(): number {
  return inFlight;
}

type Result = 'ok' | 'failed' | 'body_too_large' | 'overloaded' | 'abandoned';

function count(cluster: UpstreamCluster, result: Result): void {
  metrics.shadowRequests.labels(cluster.name, result).inc();
}

/** Envoy's shadow Host: `-shadow` appended to the host name, before a port (`a.example:8080` → `a.example-shadow:8080`). */
export function shadowAuthority(authority: string): string {
  // "[v6]:port": the port follows the bracket; a bare name has at most one colon (more: no port to keep).
  const end = authority.startsWith('[') ? authority.indexOf(']') + 1 : 0;
  const colon = authority.indexOf(':', end);
  if (colon === -1 || (end === 0 && authority.indexOf(':', colon + 1) !== -1)) return `${authority}-shadow`;
  return `${authority.slice(0, colon)}-shadow${authority.slice(colon)}`;
}

/** What a shadow copy is built from: the request as sent upstream, for the shadow's host. */
export interface ShadowRequest {
  readonly method: string;
  readonly path: string;
  /** The upstream request headers for `host` (flat list, with the route's header changes and Host rewrites). */
  readonly headers: (host: UpstreamHost) => string[];
  readonly timeoutMs: number;
  readonly logger: Pick<Logger, 'debug'>;
  readonly requestId: string;
}

/**
 * Rolls the route's percentage and, when chosen, sends the copy: at once for a request without a
 * body; for one with a body, returns the stream the primary request must read its body from (the
 * body passes through unchanged, with backpressure, and is copied on the side while within the
 * limits). Undefined: the primary request reads `req` as usual.
 */
export function startShadow(shadow: CompiledShadow, req: Readable, hasBody: boolean, request: ShadowRequest): Transform | undefined {
  if (shadow.fraction <= 0 || (shadow.fraction < 1 && Math.random() >= shadow.fraction)) return undefined;
  if (inFlight >= MAX_SHADOWS_IN_FLIGHT) {
    count(shadow.cluster, 'overloaded');
    return undefined;
  }
  if (!hasBody) {
    send(shadow, request, null);
    return undefined;
  }
  // The slot is taken while the body is copied, so held bodies stay within the cap too.
  inFlight++;
  const tee = new ShadowTee(shadow, request);
  // Its errors are the primary's (undici listens once it sends the body); never an uncaught one before that.
  tee.on('error', noop);
  req.pipe(tee);
  // A client that goes away mid-body: the primary's body stream ends in error too (pipe does not forward errors).
  req.once('error', (error: Error) => tee.destroy(error));
  req.once('aborted', () => tee.destroy(new Error('request aborted')));
  return tee;
}

function noop(): void {}

/** The primary request's body: passed through untouched, copied for the shadow while within the limits. */
class ShadowTee extends Transform {
  private chunks: Buffer[] | undefined = [];
  /** Bytes seen so far. */
  private size = 0;
  /** Bytes held in `chunks` (counted in the process's buffer budget). */
  private held = 0;

  private readonly shadow: CompiledShadow;
  private readonly request: ShadowRequest;

  constructor(shadow: CompiledShadow, request: ShadowRequest) {
    super();
    this.shadow = shadow;
    this.request = request;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.chunks) {
      this.size += chunk.length;
      if (this.size > SHADOW_BODY_LIMIT) this.giveUp('body_too_large');
      else if (buffered + chunk.length > SHADOW_BUFFER_BUDGET) this.giveUp('overloaded');
      else {
        buffered += chunk.length;
        this.held += chunk.length;
        this.chunks.push(chunk);
      }
    }
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    const chunks = this.release();
    if (chunks) {
      inFlight--;
      send(this.shadow, this.request, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    }
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // The primary stopped reading (failed, client gone) before the body was whole: no copy.
    this.giveUp('abandoned');
    callback(error);
  }

  /** No copy after all: the slot and the held bytes are given back once. */
  private giveUp(result: Result): void {
    if (!this.release()) return;
    inFlight--;
    count(this.shadow.cluster, result);
  }

  /** The held chunks, taken once (undefined afterwards), their bytes out of the budget. */
  private release(): Buffer[] | undefined {
    const chunks = this.chunks;
    this.chunks = undefined;
    if (chunks) buffered -= this.held;
    this.held = 0;
    return chunks;
  }
}

/** Sends one shadow copy; its answer is read and dropped. */
function send(shadow: CompiledShadow, request: ShadowRequest, body: Buffer | null): void {
  let host: UpstreamHost;
  try {
    host = shadow.cluster.pick();
  } catch {
    // A cluster with no usable host (closed by a reload meanwhile).
    count(shadow.cluster, 'failed');
    return;
  }
  inFlight++;
  const handler = new ShadowHandler(shadow, request);
  try {
    host.dispatcher.dispatch(
      {
        path: request.path,
        method: request.method as Dispatcher.HttpMethod,
        headers: shadowHeaders(request.headers(host)),
        body,
        ...(host.servername !== undefined ? { servername: host.servername } : {}),
        headersTimeout: request.timeoutMs,
        bodyTimeout: request.timeoutMs,
      },
      handler,
    );
  } catch (error) {
    handler.onResponseError(undefined, error as Error);
  }
}

/** The upstream headers with Envoy's `-shadow` Host. */
function shadowHeaders(flat: string[]): string[] {
  for (let i = 0; i < flat.length; i += 2) {
    if (flat[i] === 'host') flat[i + 1] = shadowAuthority(flat[i + 1]!);
  }
  return flat;
}

/** Reads a shadow's answer to the end and drops it; a deadline covers the whole exchange. */
class ShadowHandler implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private done = false;
  private readonly timer: NodeJS.Timeout;
  private readonly shadow: CompiledShadow;
  private readonly request: ShadowRequest;

  constructor(shadow: CompiledShadow, request: ShadowRequest) {
    this.shadow = shadow;
    this.request = request;
    this.timer = setTimeout(() => this.cut(), request.timeoutMs);
    // A pending shadow never keeps the process alive on its own.
    this.timer.unref();
  }

  private cut(): void {
    if (this.done) return;
    const controller = this.controller;
    this.finish('failed', 'shadow request timed out');
    controller?.abort(new Error('shadow request timed out'));
  }

  private finish(result: Result, why?: string): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    inFlight--;
    count(this.shadow.cluster, result);
    if (why) this.request.logger.debug({ reqId: this.request.requestId, upstream: this.shadow.cluster.name, cause: why }, 'shadow request failed');
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    // Timed out while queued for a connection: not sent now.
    if (this.done) controller.abort(new Error('shadow request timed out'));
  }

  onResponseStart(controller: Dispatcher.DispatchController): void {
    if (this.done) controller.abort(new Error('shadow request timed out'));
  }

  onResponseData(): void {
    // Dropped: read so the connection can be reused.
  }

  onResponseEnd(): void {
    this.finish('ok');
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.finish('failed', (error as { code?: string }).code ?? error.message);
  }
}
