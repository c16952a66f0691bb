import type { IncomingMessage } from 'node:http';
import type { ConfigSnapshot } from '../../config/store.ts';
import type { Authorizer } from '../../extauth/authorizer.ts';
import type { Diagnostic, PathSegment } from '../../config/diagnostic.ts';
import type { Logger } from '../../log/logger.ts';
import type { RequestContext } from '../context.ts';

/**
 * The per-route filter chain (Envoy's HTTP filters, as Gloo configures them): every feature on
 * the request path between route matching and the destination is one {@link HttpFilter},
 * compiled once per route at load from the route's effective options, run in {@link FilterStage}
 * order. A filter never throws on the request path: it answers with a {@link LocalReply} or lets
 * the request continue; the chain runner (./chain.ts) owns containment around each filter.
 */

/**
 * Where a filter runs, lowest first. The numbers follow Gloo's filter stages (FaultStage,
 * CorsStage, AuthNStage, AuthZStage, RateLimitStage, RouteStage); gaps leave room.
 */
export const FilterStage = {
  /** Gateway `gzip`: first on the request, so its response encoding is the outermost (Envoy's compressor sits early in Gloo's chain). */
  compression: 50,
  /** `faults`: abort or delay before anything else (Gloo's FaultStage). */
  fault: 100,
  /** Gateway `grpcWeb`: gRPC-Web requests become gRPC before CORS and auth see them. */
  grpcWeb: 150,
  /** CORS preflight answers and response headers. */
  cors: 200,
  /** `stagedTransformations.early`. */
  transformationEarly: 250,
  /** `rateLimitEarly` / `rateLimitEarlyConfigs`: before auth. */
  rateLimitEarly: 300,
  /** `jwtStaged.beforeExtAuth`. */
  jwtBeforeExtAuth: 400,
  /** External auth (AuthConfig). */
  extauth: 500,
  /** `jwt` / `jwtStaged.afterExtAuth` / `jwtProvidersStaged`. */
  jwtAfterExtAuth: 600,
  /** `rbac` on JWT claims. */
  rbac: 650,
  /** `ratelimitBasic`, `rateLimitConfigs`, `ratelimit`/`rateLimitRegular`, `localRatelimit`: after auth, so limits can key on the user. */
  rateLimit: 700,
  /** `transformations` / `stagedTransformations.regular`. */
  transformation: 800,
  /** `bufferPerRoute` / Gateway `buffer`: the body is read whole just before the destination (Envoy's buffer filter). */
  buffer: 900,
} as const;
export type FilterStageName = keyof typeof FilterStage;

/** A local answer a filter gives instead of letting the request go on (Envoy's `sendLocalReply`). */
export interface LocalReply {
  readonly status: number;
  /** Stable error code, sent in `x-gatehouse-error` and counted (e.g. `GH_JWT_INVALID`). */
  readonly code: string;
  /** Response body (plain text); default empty. */
  readonly body?: string;
  /** Extra response headers, flat `[name, value, …]` (`www-authenticate`, `retry-after`, …). */
  readonly headers?: readonly string[];
  /**
   * Send status, headers and body exactly as given (an auth server's denial, a CORS preflight
   * answer): no `x-gatehouse-error`, no added content-type or newline. A gRPC call still gets a
   * gRPC status (401 → UNAUTHENTICATED, 403 → PERMISSION_DENIED, Envoy's mapping) with `code`.
   */
  readonly verbatim?: boolean;
}

/** What a request filter decides: `undefined` lets the next filter run; a {@link LocalReply} answers and ends the chain. */
export type FilterVerdict = LocalReply | undefined;

/** One request as the filters see it. Filters change it in place; later filters and the destination see the changes. */
export interface FilterRequest {
  readonly req: IncomingMessage;
  /** Request id, timing, names, and the header map sent upstream (`ctx.headers`, lowercase names, mutable). */
  readonly ctx: RequestContext;
  /** The request method (a transformation may change it: the destination reads it from `req.method`). */
  readonly method: string;
  /** Path and query as they go upstream (after rewrites); a filter may replace it. */
  path: string;
  /** The client's address as the socket reports it (never `x-forwarded-for`). */
  readonly remoteAddress: string;
  /**
   * Data one filter hands to later ones (Envoy's dynamic metadata), by filter name: for example
   * `jwt` → the verified claims by provider name, which RBAC, rate-limit actions and the
   * AuthConfig `jwt` step read.
   */
  readonly metadata: Map<string, unknown>;
  /**
   * The buffered request body, once a filter asked for it with {@link FilterRequest.readBody};
   * a filter that replaces the body assigns here and the destination sends this instead.
   */
  body: Buffer | undefined;
  /**
   * Buffers the request body (at most `maxBytes`; `'too-large'` beyond); later calls return the
   * same buffer. With `allowPartial`, a larger body resolves with its first `maxBytes` bytes and
   * {@link FilterRequest.bodyPartial} is set (ext_authz's `allowPartialMessage`); the rest stays
   * in the socket until the destination reads it.
   */
  readBody(maxBytes: number, options?: { readonly allowPartial?: boolean }): Promise<Buffer | 'too-large' | 'aborted'>;
  /** After `readBody(…, {allowPartial})`: true when the buffer is only the start of a larger body. */
  readonly bodyPartial: boolean;
  /**
   * Asks for the route to be matched again once this filter returns (Envoy's `clearRouteCache`,
   * after a transformation changed the path or headers): later filters and the destination are
   * the new route's; a request that no route matches any more gets 404.
   */
  clearRouteCache(): void;
  /** Aborted when the client goes away before its response is complete (a filter that waits stops waiting). */
  readonly signal: AbortSignal;
  /** Headers added to whatever response the client gets (flat list); filters push onto it. */
  readonly responseHeaders: string[];
  /**
   * From `onResponseHeaders` of an upstream response that streams: re-encodes its body on the
   * way to the client (compression, gRPC-Web framing). Encoders added later wrap earlier ones
   * (the lowest stage's is the outermost). Optional only for hand-made requests in unit tests.
   */
  encodeResponseBody?(encoder: ResponseBodyEncoder): void;
  /**
   * From `onRequest`: the request body the destination reads instead of the client's (a
   * streaming decoder fed from `req`; an `upstream` destination sends it as it comes).
   */
  requestBodyStream?: import('node:stream').Readable | undefined;
}

/**
 * A streaming re-encoding of a response body (./response-encoder.ts runs it): the upstream's
 * chunks are written into `stream` with backpressure, its output goes to the client.
 */
export interface ResponseBodyEncoder {
  readonly stream: import('node:stream').Duplex;
  /**
   * Called once the input before it is complete, with the trailers so far: may write last bytes
   * into `stream` (it is ended after) and returns the trailers to pass on (undefined: none).
   */
  finish?(trailers: Record<string, string | string[]> | undefined): Record<string, string | string[]> | undefined;
}

/** A filter compiled for one route. Either hook is optional. */
export interface HttpFilter {
  /** Names it in logs and metrics (`jwt`, `ratelimit`, `transformation`, …). */
  readonly name: string;
  readonly stage: number;
  /** Runs on the request; synchronous results avoid a promise per request on the hot path. */
  onRequest?(request: FilterRequest): FilterVerdict | Promise<FilterVerdict>;
  /**
   * Runs on the upstream response's status and headers (flat `[name, value, …]`, editable in
   * place) before they go to the client, in reverse stage order. Local replies do not pass here.
   * A number returned replaces the status; a {@link LocalReply} replaces the response. Runs
   * after `wantsResponseBody` was asked.
   */
  onResponseHeaders?(request: FilterRequest, status: number, headers: string[]): void | number | LocalReply;
  /**
   * Runs on a `directResponseAction` answer's status and headers (flat, editable in place) before
   * it is sent; only filters that define it (compression: Envoy's encoder filters see direct
   * responses). Other response hooks stay upstream-only.
   */
  onDirectResponse?(request: FilterRequest, status: number, headers: string[]): void;
  /**
   * Whether this filter needs the whole upstream response body for this response (decided from
   * the status and headers): the gateway then buffers it (bounded by `maxBytes`) and calls
   * {@link HttpFilter.onResponseBody} before anything goes to the client. Undefined: streamed.
   */
  wantsResponseBody?(request: FilterRequest, status: number, headers: readonly string[]): { readonly maxBytes: number } | undefined;
  /**
   * With the response buffered (see `wantsResponseBody`): may change `response.status`,
   * `response.headers` (flat, in place) and `response.body`; a {@link LocalReply} replaces the
   * response. Runs after every `onResponseHeaders`, in reverse stage order.
   */
  onResponseBody?(request: FilterRequest, response: FilterResponse): LocalReply | undefined;
}

/** An upstream response held whole for {@link HttpFilter.onResponseBody}. */
export interface FilterResponse {
  status: number;
  /** Flat `[name, value, …]`; `content-length` is set from `body` when the response is sent. */
  readonly headers: string[];
  body: Buffer;
}

/** The process's services filters call at request time (absent: not available in this process). */
export interface FilterServices {
  /** The ext_authz client (`gatehouse run`: the auth server of this process). */
  readonly authorizer?: Authorizer | undefined;
  /** Anything a filter module registers for itself, by name (e.g. `ratelimit`: the gateway's limiter). */
  readonly [name: string]: unknown;
}

/** What a factory gets when it compiles a filter for one route. */
export interface FilterBuildContext {
  /** The route's own `options` (already merged with the options resources that apply to it). */
  readonly routeOptions: Readonly<Record<string, unknown>> | undefined;
  /** The virtual host's `options`. */
  readonly virtualHostOptions: Readonly<Record<string, unknown>> | undefined;
  /** Namespace of the resource holding the route (references without a namespace resolve here). */
  readonly namespace: string;
  /** `namespace/name` of the VirtualService, and the route's name. */
  readonly virtualHost: string;
  readonly route: string;
  /** Every resource of this configuration, for references (Secrets, Upstreams, RateLimitConfigs). */
  readonly snapshot: ConfigSnapshot;
  readonly logger: Logger;
  /** What the route's destination is (`upstream`, `graphql`, `redirect`, `direct`, …): GraphQL routes answer denials in GraphQL's form. */
  readonly destinationKind: string;
  /** Whether every upstream of the route's destination speaks HTTP/2 (`useHttp2`): gRPC can reach it. */
  readonly upstreamHttp2?: boolean;
  /**
   * The `httpGateway.options` of the Gateway whose listener serves the route (gzip, grpcWeb,
   * buffer); undefined on the `--port` listeners (Gloo's defaults apply).
   */
  readonly listenerOptions?: Readonly<Record<string, unknown>> | undefined;
  readonly services: FilterServices;
}

/**
 * Compiles one kind of filter. `check` runs at validation (its diagnostics become the
 * VirtualService's status, with the field path); `create` runs when the route table is built
 * and only sees options that passed `check`.
 */
export interface HttpFilterFactory {
  readonly name: string;
  /** Load-time problems in the options this factory reads, at `path` (the options object's path). */
  check?(options: Readonly<Record<string, unknown>>, at: (path: PathSegment[], code: string, message: string, severity?: 'error' | 'warning') => Diagnostic, path: PathSegment[]): Diagnostic[];
  /** The route's filter(s), or none when the route does not use this feature. */
  create(context: FilterBuildContext): HttpFilter | readonly HttpFilter[] | undefined;
}
