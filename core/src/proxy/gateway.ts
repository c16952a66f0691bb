import { METHODS, ServerResponse, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { metrics } from '../admin/metrics.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { ErrorCodes } from '../errors.ts';
import type { Authorizer } from '../extauth/authorizer.ts';
import { createAccessLog, type AccessLog } from '../log/access-log.ts';
import type { Logger } from '../log/logger.ts';
import type { RequestContext } from './context.ts';
import { ChainRequest, FilterCodes, isPending, runRequestFilters, sendDirectResponse, sendFilterReply, type Rematch } from './filters/chain.ts';
import type { FilterVerdict, FilterServices } from './filters/http-filter.ts';
import type { GatewayRateLimiter } from '../ratelimit/gateway-limiter.ts';
import type { GraphQLEndpoints } from './destinations.ts';
import { forward } from './request/forward.ts';
import { newRequestId } from './request/request-id.ts';
import { parseHostHeader } from './routing/host-table.ts';
import { isHttp2Request, upgradeDecision } from '../server/http2.ts';
import { servesOnConnection, tlsBindingOf } from '../server/tls-contexts.ts';
import { responseListOf, withVia, type ListenerHeaders } from './request/listener-headers.ts';
import { downstreamGone, sendConfiguredReply, sendLocalReply } from './request/local-reply.ts';
import { DEFAULT_PATH_NORMALIZATION, normalizePath, targetError, type PathNormalization } from './routing/normalize-path.ts';
import { sanitizeRequestHeaders } from './request/request-headers.ts';
import { hasRequestBody } from './request/request-body.ts';
import type { CompiledMatcher } from './routing/route-matcher.ts';
import { compileRouteTable, matchRoute, redirectLocation, type CompiledRoute, type RouteTable } from './routing/route-table.ts';
import type { UpstreamRegistry } from './upstream/upstream-registry.ts';
import { listenerTracingOf, RequestTracer } from '../tracing/tracing.ts';
import { DEFAULT_UPGRADE_LIMITS, forwardUpgrade, pendingUpgrade, UPGRADE, type PendingUpgrade, type UpgradeLimits } from './request/upgrade.ts';

export interface GatewayOptions {
  logger: Logger;
  upstreams: UpstreamRegistry;
  /** Destination for `graphqlApiRef` routes. */
  graphql?: GraphQLEndpoints;
  /** External auth; without one, routes that need auth are denied (fail closed). */
  authorizer?: Authorizer;
  kubeClusterDomain?: string;
  /** Write an access log line per request (default true). */
  accessLog?: boolean;
  /** Where access lines go (default: a batched writer on stdout). */
  accessLogger?: AccessLog;
  /** Path normalisation before routing and auth (default {@link DEFAULT_PATH_NORMALIZATION}). */
  paths?: PathNormalization;
  /** Idle and duration limits of upgraded (WebSocket) connections. */
  upgradeLimits?: Partial<UpgradeLimits>;
  /** Header fields an HTTP/1.1 request may have; more: 431 (default 100, Envoy's `max_headers_count`). */
  maxRequestHeaders?: number;
  /** Services filters use besides the authorizer and the rate limiter, by name. */
  filterServices?: FilterServices;
  /** The listener's `server` and `via` headers (`httpConnectionManagerSettings`); none by default. */
  listenerHeaders?: ListenerHeaders;
  /** The gateway's rate limiter (route and virtual-host rate-limit options); without one they do not apply (only the primary's admin view of routes is built so). */
  rateLimiter?: GatewayRateLimiter;
}

export { buildCheckRequest } from './filters/extauth.ts';

/** Methods the gateway serves: the ones Node's HTTP/1.1 parser accepts, all upper case (RFC 9110 9.1: methods are case-sensitive). */
const KNOWN_METHODS: ReadonlySet<string> = new Set(METHODS);

const EMPTY_SNAPSHOT: ConfigSnapshot = { generation: 0, resources: new Map(), statuses: [], diagnostics: [] };

/**
 * The downstream request path (SPEC 4): match the virtual host by Host, then the route;
 * run external auth if the route has an AuthConfig; hand the request to its destination.
 * Config updates swap one immutable route table; in-flight requests keep the one they started with.
 */
export class Gateway {
  private table: RouteTable;
  private readonly options: GatewayOptions;
  private readonly logger: Logger;
  private readonly accessLog: boolean;
  private readonly accessLogger: AccessLog | undefined;
  /** Access entries carry the request and response (only format strings read them). */
  private readonly logMessages: boolean;
  private readonly paths: PathNormalization;
  private readonly upgradeLimits: UpgradeLimits;
  private readonly maxRequestHeaders: number;
  /** The listener's `server`/`via` for every response (undefined: none, and no per-request work). */
  private readonly replyHeaders: readonly string[] | undefined;
  private readonly via: string | undefined;
  private readonly serverMode: 'overwrite' | 'append-if-absent' | undefined;

  constructor(options: GatewayOptions) {
    this.options = options;
    this.logger = options.logger;
    this.accessLog = options.accessLog !== false;
    this.paths = options.paths ?? DEFAULT_PATH_NORMALIZATION;
    this.upgradeLimits = { ...DEFAULT_UPGRADE_LIMITS, ...options.upgradeLimits };
    this.maxRequestHeaders = options.maxRequestHeaders ?? 100;
    const listener = options.listenerHeaders;
    this.replyHeaders = listener ? responseListOf(listener) : undefined;
    this.via = listener?.via;
    this.serverMode = listener?.server?.mode;
    this.accessLogger = this.accessLog ? (options.accessLogger ?? createAccessLog(options.logger.bindings().name ?? 'gateway')) : undefined;
    this.logMessages = this.accessLogger?.readsMessages !== false;
    this.filterServices = { ...options.filterServices, authorizer: options.authorizer, ...(options.rateLimiter ? { ratelimit: options.rateLimiter } : {}) };
    this.table = compileRouteTable(EMPTY_SNAPSHOT, this.tableOptions());
  }

  private readonly filterServices: FilterServices;
  /** This listener's tracing (core/src/tracing); undefined: nothing traced, nothing allocated. */
  private tracer: RequestTracer | undefined;

  private tableOptions(): Parameters<typeof compileRouteTable>[1] {
    return { upstreams: this.options.upstreams, logger: this.logger, filters: { services: this.filterServices, logger: this.logger }, ...(this.options.kubeClusterDomain ? { kubeClusterDomain: this.options.kubeClusterDomain } : {}) };
  }

  /** Switches to a new configuration. */
  update(snapshot: ConfigSnapshot): void {
    this.options.rateLimiter?.update(snapshot);
    const table = compileRouteTable(snapshot, this.tableOptions());
    this.options.graphql?.update(snapshot);
    this.table = table;
    const tracing = listenerTracingOf(snapshot, snapshot.listener);
    this.tracer = tracing ? new RequestTracer(tracing, this.logger) : undefined;
    const graphqlClusters = this.options.graphql?.clusters();
    this.options.upstreams.retainOnly(graphqlClusters?.size ? new Set([...table.clusters, ...graphqlClusters]) : table.clusters);
  }

  /** Releases the destinations (upstream pools, GraphQL endpoints, authorizer) after traffic has drained. */
  async close(): Promise<void> {
    await this.options.authorizer?.close();
    await this.options.rateLimiter?.close();
    await this.options.graphql?.close();
    await this.options.upstreams.close();
  }

  /** Effective routes, for `admin:/config`. */
  describeRoutes(): unknown[] {
    return this.table.description;
  }

  /**
   * The `node:http` `upgrade` listener (WebSocket, SPEC 3.2.1): the request takes the same
   * path as any other (normalisation, Host, route, CORS, auth) with a ServerResponse on the
   * client's socket for local answers (404, 401, 403…); an allowed upgrade to an upstream
   * route is then tunnelled (./upgrade.ts).
   */
  readonly handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on('error', () => socket.destroy());
    const res = new ServerResponse(req);
    res.assignSocket(socket as Socket);
    // A local answer ends the connection: the client asked to leave HTTP on it.
    res.shouldKeepAlive = false;
    res.once('finish', () => socket.end());
    // The listener only sends upgrades it tunnels or refuses here (../server/http2.ts): only the
    // route-allowed protocol goes upstream, never `h2c` or the rest of a list (issue 29 finding 12).
    const upgrade = upgradeDecision(req);
    if (upgrade.kind !== 'tunnel') {
      this.finish(req, res, performance.now(), undefined, undefined);
      return sendLocalReply(res, 403, ErrorCodes.UPGRADE_NOT_ALLOWED, `upgrade to "${upgrade.kind === 'refused' ? upgrade.protocol : ''}" is not allowed (only websocket)`, this.replyHeaders);
    }
    (req as IncomingMessage & { [UPGRADE]?: PendingUpgrade })[UPGRADE] = { socket, head, protocol: upgrade.protocol };
    this.handle(req, res);
  };

  /**
   * Why the request is refused before anything else reads it (SPEC 4.1: one owner answers every
   * malformed request), or undefined. `close`: the connection cannot be trusted for another request.
   */
  private admission(req: IncomingMessage, url: string): { status: number; message: string; close?: true } | undefined {
    if (!isHttp2Request(req)) {
      // Node's HTTP/1.1 parser takes `HTTP/2.0` (and 0.9) request lines; code further on reads
      // such a request as an HTTP/2 stream and threw (issue 29 finding 1).
      if (req.httpVersionMajor !== 1) return { status: 505, message: `HTTP/${req.httpVersion} is not supported over HTTP/1.1 (use HTTP/1.0 or 1.1, or HTTP/2 with its preface)`, close: true };
      if (req.rawHeaders.length > this.maxRequestHeaders * 2) return { status: 431, message: `more than ${this.maxRequestHeaders} request header fields`, close: true };
    }
    // Methods are case-sensitive tokens: `post` is not POST. Over HTTP/1.1 the parser refuses it;
    // over HTTP/2 it would skip a `methods: [POST]` route (and its auth) while an upstream that
    // upper-cases methods served it as POST (issue 29 finding 11). Envoy's HTTP/1.1 codec knows the same list.
    if (!KNOWN_METHODS.has(req.method ?? '')) return { status: 400, message: `bad request: unknown method "${req.method ?? ''}" (methods are case-sensitive)` };
    const target = targetError(url);
    if (target) return { status: 400, message: `bad request: ${target}` };
    return undefined;
  }

  /** The `node:http` request listener. */
  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    const start = performance.now();
    const headers = req.headers;
    if (req.method === 'CONNECT') {
      // HTTP/1.1 CONNECT never gets here (./server/listen.ts answers it); HTTP/2's does.
      this.finish(req, res, start, undefined, undefined);
      return sendLocalReply(res, 405, ErrorCodes.BAD_REQUEST, 'CONNECT is not supported', this.replyHeaders);
    }
    let url = req.url ?? '/';
    const refused = this.admission(req, url);
    if (refused) {
      this.finish(req, res, start, undefined, undefined);
      if (refused.close) res.shouldKeepAlive = false;
      return sendLocalReply(res, refused.status, ErrorCodes.BAD_REQUEST, refused.message, this.replyHeaders);
    }
    if (url.charCodeAt(0) !== SLASH) {
      // Absolute-form (RFC 9112 3.2.2): the target's authority replaces Host. Any other
      // form (`*`, a bare word) has no path to route on.
      const absolute = parseAbsoluteTarget(url);
      if (!absolute) {
        this.finish(req, res, start, undefined, undefined);
        return sendLocalReply(res, 400, ErrorCodes.BAD_REQUEST, 'bad request target: expected a path starting with "/" or an absolute http(s) URL', this.replyHeaders);
      }
      req.url = url = absolute.path;
      headers.host = absolute.host;
    } else if (hasDuplicateHost(req.rawHeaders)) {
      // Two Hosts could route here as one and upstream as the other (RFC 9112 3.2: 400).
      this.finish(req, res, start, undefined, undefined);
      return sendLocalReply(res, 400, ErrorCodes.BAD_REQUEST, 'bad request: more than one Host header', this.replyHeaders);
    }
    let q = url.indexOf('?');
    let path = q === -1 ? url : url.slice(0, q);
    const query = q === -1 ? '' : url.slice(q + 1);
    // Route, authorize and forward one normalised path (issue 17 finding 19).
    const normalized = normalizePath(path, this.paths);
    if ('error' in normalized) {
      this.finish(req, res, start, undefined, undefined);
      return sendLocalReply(res, 400, ErrorCodes.BAD_REQUEST, `bad request: ${normalized.error}`, this.replyHeaders);
    }
    if (normalized.path !== path) {
      path = normalized.path;
      req.url = url = q === -1 ? path : path + url.slice(q);
      q = url.indexOf('?');
    }
    const host = parseHostHeader(headers.host);
    if (host === undefined) {
      this.finish(req, res, start, undefined, undefined);
      return sendLocalReply(res, 400, ErrorCodes.BAD_REQUEST, 'bad request: malformed Host header', this.replyHeaders);
    }
    sanitizeRequestHeaders(headers);

    const tls = tlsBindingOf(req.socket);
    const vhost = (tls || (req.socket as { encrypted?: boolean }).encrypted ? this.table.tlsHosts : this.table.hosts).matchHost(host);
    if (!vhost) {
      this.finish(req, res, start, undefined, undefined);
      return sendLocalReply(res, 404, ErrorCodes.NO_VIRTUAL_HOST, `no virtual host for "${headers.host ?? ''}"`, this.replyHeaders);
    }
    if (tls && !servesOnConnection(tls, vhost.name)) {
      // SPEC 3.2.1: the connection's SNI chose another VirtualService's certificate and policy
      // (Envoy's per-SNI filter chains). 421 tells a coalescing client to open a new connection.
      this.finish(req, res, start, vhost.name, undefined);
      return sendLocalReply(res, 421, ErrorCodes.MISDIRECTED_REQUEST, `"${host}" is not served on a connection made for another TLS server name; connect with SNI "${host}"`, this.replyHeaders);
    }
    const matched = matchRoute(vhost, { method: req.method!, path, query, headers, scheme: (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http' });
    if (!matched) {
      this.finish(req, res, start, vhost.name, undefined);
      return sendLocalReply(res, 404, ErrorCodes.NO_ROUTE, 'no route matched', this.replyHeaders);
    }
    const { route, matcher } = matched;
    let requestId = headers['x-request-id'];
    if (typeof requestId !== 'string' || requestId === '') headers['x-request-id'] = requestId = newRequestId();
    // The listener's via goes upstream with the request; its server and via with every response (a list of the request's own: filters add to it).
    if (this.via !== undefined) headers.via = withVia(headers.via, this.via);
    // Every field set now: one set later (the upstream's) would change the object's shape and allocate.
    const ctx: RequestContext = { requestId, start, virtualHost: vhost.name, route: route.name, headers, logger: this.logger, upstream: undefined, cluster: undefined, upstreamPath: undefined, responseHeaders: this.replyHeaders ? [...this.replyHeaders] : undefined, serverHeader: this.serverMode };
    this.finish(req, res, start, vhost.name, route, ctx);
    this.tracer?.start(req, res, ctx, route);

    // A redirect's "path" is its location, built from the request as it came in.
    const upstreamPath =
      route.destination.kind === 'redirect'
        ? url
        : route.regexRewrite !== undefined
          ? path.replace(route.regexRewrite.pattern, route.regexRewrite.substitution) + (q === -1 ? '' : url.slice(q))
          : route.prefixRewrite === undefined
            ? url
            : matcher.rewrite(path, route.prefixRewrite) + (q === -1 ? '' : url.slice(q));
    const chain = route.chain;
    if (chain === undefined) return this.dispatch(req, res, ctx, route, route.destination.kind === 'redirect' ? this.location(req, route, matcher, path, q === -1 ? '' : url.slice(q + 1)) : upstreamPath);
    // An Upgrade request's body cannot be read (it is the new protocol's first bytes): refused
    // before any filter could read it or ask auth about it as empty.
    if (pendingUpgrade(req) && hasRequestBody(req)) return refuseUpgradeBody(res, ctx);
    const request = new ChainRequest(req, res, ctx, upstreamPath, chain);
    const routed = { route, matcher, path, query: q === -1 ? '' : url.slice(q + 1) };
    const rematch: Rematch = (r) => {
      const found = this.rematch(r, vhost.name);
      if (!found) return 'no-route';
      Object.assign(routed, found);
      return found.route.chain;
    };
    const verdict = runRequestFilters(request, rematch);
    if (isPending(verdict)) {
      verdict.then((v) => this.afterFilters(request, routed, v)).catch((error: unknown) => {
        // Never expected (the destination answers its own failures): the request is cut, the process keeps running.
        this.logger.error({ reqId: requestId, code: FilterCodes.FAILED, err: error }, 'request failed after its filters');
        if (!res.headersSent) sendLocalReply(res, 500, FilterCodes.FAILED, 'internal error', request.responseHeaders);
        else res.destroy();
      });
      return;
    }
    this.afterFilters(request, routed, verdict);
  };

  /** The chain's verdict: the reply it gave, or the destination (of the route matched last). */
  private afterFilters(request: ChainRequest, routed: { route: CompiledRoute; matcher: CompiledMatcher; path: string; query: string }, verdict: FilterVerdict): void {
    const { req, res, ctx } = request;
    // The client left while a filter ran: nothing to answer, and nothing to send upstream.
    if (downstreamGone(res)) return;
    if (verdict !== undefined) return sendFilterReply(req, res, verdict, request.responseHeaders);
    const { route } = routed;
    const kind = route.destination.kind;
    if (!request.commitBody((kind === 'upstream' || kind === 'weighted') && route.shadow === undefined)) return sendLocalReply(res, 500, FilterCodes.FAILED, 'internal error', request.responseHeaders);
    const path = route.destination.kind === 'redirect' ? this.location(req, route, routed.matcher, routed.path, routed.query) : request.path;
    this.dispatch(req, res, ctx, route, path, request);
  }

  /**
   * The route for a request a filter changed (`clearRouteCache`): matched again on its path and
   * headers as they are now, in the same virtual host; the new route's rewrites apply.
   */
  private rematch(request: ChainRequest, vhostName: string): { route: CompiledRoute; matcher: CompiledMatcher; path: string; query: string } | undefined {
    const vhost = this.table.virtualHosts.find((v) => v.name === vhostName);
    if (!vhost) return undefined;
    const url = request.path;
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const query = q === -1 ? '' : url.slice(q + 1);
    const found = matchRoute(vhost, { method: request.method, path, query, headers: request.ctx.headers });
    if (!found) return undefined;
    const { route, matcher } = found;
    const rest = q === -1 ? '' : url.slice(q);
    request.path = route.regexRewrite !== undefined ? path.replace(route.regexRewrite.pattern, route.regexRewrite.substitution) + rest : route.prefixRewrite === undefined ? url : matcher.rewrite(path, route.prefixRewrite) + rest;
    (request.ctx as { route: string }).route = route.name;
    return { route, matcher, path, query };
  }

  private location(req: IncomingMessage, route: CompiledRoute, matcher: CompiledMatcher, path: string, query: string): string {
    if (route.destination.kind !== 'redirect') return path;
    return redirectLocation(route.destination.redirect, { scheme: (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http', host: req.headers.host ?? '', path, query }, (prefix) => matcher.rewrite(path, prefix));
  }

  private dispatch(req: IncomingMessage, res: ServerResponse, ctx: RequestContext, route: CompiledRoute, path: string, filters?: ChainRequest): void {
    let destination = route.destination;
    if (destination.kind === 'redirect') {
      req.resume();
      return sendConfiguredReply(res, destination.redirect.status, '', [...(ctx.responseHeaders ?? []), 'location', path]);
    }
    if (destination.kind === 'direct') {
      req.resume();
      // Compression sees direct responses, as Envoy's encoder filters do (./filters/chain.ts).
      if (filters?.chain.direct?.length) return sendDirectResponse(filters, destination.status, destination.body);
      return sendConfiguredReply(res, destination.status, destination.body, ctx.responseHeaders);
    }
    if (destination.kind === 'weighted') {
      // Gloo's weighted destinations: one pick per request, in proportion to the weights.
      const roll = Math.random() * destination.total;
      const choice = destination.choices.find((c) => roll < c.upTo) ?? destination.choices[destination.choices.length - 1]!;
      destination = { kind: 'upstream', cluster: choice.cluster, latency: choice.latency };
      if (choice.headers) route = { ...route, requestHeaders: choice.headers.request, responseHeaders: choice.headers.response };
    }
    const upgrade = pendingUpgrade(req);
    if (upgrade) {
      if (hasRequestBody(req)) return refuseUpgradeBody(res, ctx);
      // GraphQL routes take graphql-ws upgrades themselves (core/src/graphql/subscriptions/ws.ts).
      if (destination.kind === 'graphql' && this.options.graphql?.upgrade) return this.options.graphql.upgrade(destination.apiKey, req, res, upgrade, ctx, () => res.emit('close'));
      if (destination.kind !== 'upstream') return sendLocalReply(res, 400, ErrorCodes.BAD_REQUEST, `the route's destination does not take a ${upgrade.protocol} upgrade`, ctx.responseHeaders);
      return forwardUpgrade(req, res, upgrade, ctx, destination.cluster, path, this.upgradeLimits, () => res.emit('close'));
    }
    if (destination.kind === 'upstream') return forward(req, res, ctx, route, destination.cluster, path, filters);
    if (destination.kind === 'unavailable') return sendLocalReply(res, 503, ErrorCodes.UPSTREAM_UNAVAILABLE, 'the route has no usable destination', ctx.responseHeaders);
    const graphql = this.options.graphql;
    if (!graphql) return sendLocalReply(res, 503, ErrorCodes.UPSTREAM_UNAVAILABLE, 'GraphQL is not available in this process', ctx.responseHeaders);
    // The GraphQL server writes its own responses: the gateway's headers go in first.
    const extra = ctx.responseHeaders;
    if (extra) for (let i = 0; i < extra.length; i += 2) res.setHeader(extra[i]!, extra[i + 1]!);
    graphql.handle(destination.apiKey, req, res, ctx).catch((error: unknown) => {
      this.logger.error({ reqId: ctx.requestId, err: error }, 'GraphQL endpoint failed');
      sendLocalReply(res, 500, 'GH_GRAPHQL_INTERNAL', 'internal error', ctx.responseHeaders);
    });
  }

  /** Access log and request metrics, once the response is done (or the client is gone). */
  private finish(req: IncomingMessage, res: ServerResponse, start: number, vhost: string | undefined, route: CompiledRoute | undefined, ctx?: RequestContext): void {
    // `on`, not `once`: a response closes once, and `once` wraps every listener in two more objects.
    res.on('close', () => {
      const status = pendingUpgrade(req)?.status ?? (res.headersSent ? res.statusCode : 0);
      const seconds = (performance.now() - start) / 1000;
      // Status classes, not statuses: the histogram's series stay bounded (routes × 6).
      const cls = status >= 100 && status < 600 ? Math.floor(status / 100) : 0;
      if (route) {
        let counter = route.counters.get(status);
        if (!counter) route.counters.set(status, (counter = metrics.requests.labels(route.virtualHost, route.name, String(status))));
        counter.inc();
        let duration = route.durations[cls];
        if (!duration) route.durations[cls] = duration = metrics.requestDuration.labels(route.virtualHost, route.name, STATUS_CLASSES[cls]!);
        duration.observe(seconds);
      } else {
        metrics.requests.labels(vhost ?? '', '', String(status)).inc();
        metrics.requestDuration.labels(vhost ?? '', '', STATUS_CLASSES[cls]!).observe(seconds);
      }
      this.accessLogger?.write({
        reqId: ctx?.requestId,
        method: req.method,
        path: req.url,
        status,
        durationMs: Math.round(seconds * 1_000_000) / 1000,
        // The usual version as a constant: a string built per request was hashed again for the log's literal cache.
        protocol: isHttp2Request(req) ? 'HTTP/2' : req.httpVersion === '1.1' ? 'HTTP/1.1' : `HTTP/${req.httpVersion}`,
        virtualHost: vhost,
        route: route?.name,
        upstream: ctx?.upstream,
        cluster: ctx?.cluster,
        upstreamPath: ctx?.upstreamPath,
        // For access-log format strings (%REQ(X)%, %RESP(X)%, addresses): read only by them.
        req: this.logMessages ? req : undefined,
        res: this.logMessages ? res : undefined,
      });
    });
  }
}

const SLASH = 0x2f;
const STATUS_CLASSES = ['none', '1xx', '2xx', '3xx', '4xx', '5xx'] as const;

/** `http://host[:port]/path?query` → host and origin-form path; undefined when not such a URL. */
export function parseAbsoluteTarget(target: string): { host: string; path: string } | undefined {
  const scheme = /^https?:\/\//i.exec(target);
  if (!scheme) return undefined;
  const rest = target.slice(scheme[0].length);
  let end = rest.search(/[/?]/);
  if (end === -1) end = rest.length;
  const host = rest.slice(0, end);
  // No empty authority, and no userinfo (RFC 9110 4.2.4: not allowed in http URIs).
  if (host === '' || host.includes('@')) return undefined;
  const path = rest.slice(end);
  return { host: host.toLowerCase(), path: path === '' ? '/' : path.startsWith('?') ? `/${path}` : path };
}

function hasDuplicateHost(raw: readonly string[]): boolean {
  let seen = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') {
      if (seen) return true;
      seen = true;
    }
  }
  return false;
}

/**
 * An Upgrade request that declares a body: Node hands everything after the header block to the
 * upgrade as the new protocol's first bytes, so the body can be neither read for auth (it was
 * checked as empty, `partial: false`) nor told apart from the tunnel's bytes. WebSocket clients
 * send none; refused (400) as unframeable.
 */
function refuseUpgradeBody(res: ServerResponse, ctx: RequestContext): void {
  sendLocalReply(res, 400, ErrorCodes.BAD_REQUEST, 'bad request: an Upgrade request cannot carry a body', ctx.responseHeaders);
}
