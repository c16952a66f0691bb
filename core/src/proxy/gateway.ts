import { randomUUID } from 'node:crypto';
import { METHODS, ServerResponse, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { metrics } from '../admin/metrics.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { ErrorCodes } from '../errors.ts';
import type { Authorizer } from '../extauth/authorizer.ts';
import { forbidden, type AuthDecision, type CheckRequest } from '../extauth/step.ts';
import { graphqlDenial } from '../graphql/denial.ts';
import { createAccessLog, type AccessLog } from '../log/access-log.ts';
import type { Logger } from '../log/logger.ts';
import type { RequestContext } from './context.ts';
import { answerPreflight, isPreflight } from './cors.ts';
import type { GraphQLEndpoints } from './destinations.ts';
import { forward } from './forward.ts';
import { parseHostHeader } from './host-table.ts';
import { isHttp2Request, upgradeDecision } from '../server/http2.ts';
import { servesOnConnection, tlsBindingOf } from '../server/tls-contexts.ts';
import { grpcReplyHeaders } from './grpc.ts';
import { downstreamGone, isGrpcCall, sendConfiguredReply, sendLocalReply, sendTrailersOnly } from './local-reply.ts';
import { DEFAULT_PATH_NORMALIZATION, normalizePath, targetError, type PathNormalization } from './normalize-path.ts';
import { sanitizeRequestHeaders } from './request-headers.ts';
import { bufferRequestBody, drainAfterAnswer, hasRequestBody, refuseTooLarge } from './request-body.ts';
import { compileRouteTable, matchRoute, redirectLocation, type CompiledRoute, type RouteAuth, type RouteTable } from './route-table.ts';
import type { UpstreamRegistry } from './upstream-cluster.ts';
import { DEFAULT_UPGRADE_LIMITS, forwardUpgrade, pendingUpgrade, UPGRADE, type PendingUpgrade, type UpgradeLimits } from './upgrade.ts';

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
}

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
  private readonly paths: PathNormalization;
  private readonly upgradeLimits: UpgradeLimits;
  private readonly maxRequestHeaders: number;

  constructor(options: GatewayOptions) {
    this.options = options;
    this.logger = options.logger;
    this.accessLog = options.accessLog !== false;
    this.paths = options.paths ?? DEFAULT_PATH_NORMALIZATION;
    this.upgradeLimits = { ...DEFAULT_UPGRADE_LIMITS, ...options.upgradeLimits };
    this.maxRequestHeaders = options.maxRequestHeaders ?? 100;
    this.accessLogger = this.accessLog ? (options.accessLogger ?? createAccessLog(options.logger.bindings().name ?? 'gateway')) : undefined;
    this.table = compileRouteTable(EMPTY_SNAPSHOT, options);
  }

  /** Switches to a new configuration. */
  update(snapshot: ConfigSnapshot): void {
    const table = compileRouteTable(snapshot, { upstreams: this.options.upstreams, logger: this.logger, ...(this.options.kubeClusterDomain ? { kubeClusterDomain: this.options.kubeClusterDomain } : {}) });
    this.options.graphql?.update(snapshot);
    this.table = table;
    const graphqlClusters = this.options.graphql?.clusters();
    this.options.upstreams.retainOnly(graphqlClusters?.size ? new Set([...table.clusters, ...graphqlClusters]) : table.clusters);
  }

  /** Releases the destinations (upstream pools, GraphQL endpoints, authorizer) after traffic has drained. */
  async close(): Promise<void> {
    await this.options.authorizer?.close();
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
      return sendLocalReply(res, 403, ErrorCodes.UPGRADE_NOT_ALLOWED, `upgrade to "${upgrade.kind === 'refused' ? upgrade.protocol : ''}" is not allowed (only websocket)`);
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
      return sendLocalReply(res, 405, ErrorCodes.BAD_REQUEST, 'CONNECT is not supported');
    }
    let url = req.url ?? '/';
    const refused = this.admission(req, url);
    if (refused) {
      this.finish(req, res, start, undefined, undefined);
      if (refused.close) res.shouldKeepAlive = false;
      return sendLocalReply(res, refused.status, ErrorCodes.BAD_REQUEST, refused.message);
    }
    if (url.charCodeAt(0) !== SLASH) {
      // Absolute-form (RFC 9112 3.2.2): the target's authority replaces Host. Any other
      // form (`*`, a bare word) has no path to route on.
      const absolute = parseAbsoluteTarget(url);
      if (!absolute) {
        this.finish(req, res, start, undefined, undefined);
        return sendLocalReply(res, 400, ErrorCodes.BAD_REQUEST, 'bad request target: expected a path starting with "/" or an absolute http(s) URL');
      }
      req.url = url = absolute.path;
      headers.host = absolute.host;
    } else if (hasDuplicateHost(req.rawHeaders)) {
      // Two Hosts could route here as one and upstream as the other (RFC 9112 3.2: 400).
      this.finish(req, res, start, undefined, undefined);
      return sendLocalReply(res, 400, ErrorCodes.BAD_REQUEST, 'bad request: more than one Host header');
    }
    let q = url.indexOf('?');
    let path = q === -1 ? url : url.slice(0, q);
    const query = q === -1 ? '' : url.slice(q + 1);
    // Route, authorize and forward one normalised path (issue 17 finding 19).
    const normalized = normalizePath(path, this.paths);
    if ('error' in normalized) {
      this.finish(req, res, start, undefined, undefined);
      return sendLocalReply(res, 400, ErrorCodes.BAD_REQUEST, `bad request: ${normalized.error}`);
    }
    if (normalized.path !== path) {
      path = normalized.path;
      req.url = url = q === -1 ? path : path + url.slice(q);
      q = url.indexOf('?');
    }
    const host = parseHostHeader(headers.host);
    if (host === undefined) {
      this.finish(req, res, start, undefined, undefined);
      return sendLocalReply(res, 400, ErrorCodes.BAD_REQUEST, 'bad request: malformed Host header');
    }
    sanitizeRequestHeaders(headers);

    const tls = tlsBindingOf(req.socket);
    const vhost = (tls || (req.socket as { encrypted?: boolean }).encrypted ? this.table.tlsHosts : this.table.hosts).matchHost(host);
    if (!vhost) {
      this.finish(req, res, start, undefined, undefined);
      return sendLocalReply(res, 404, ErrorCodes.NO_VIRTUAL_HOST, `no virtual host for "${headers.host ?? ''}"`);
    }
    if (tls && !servesOnConnection(tls, vhost.name)) {
      // SPEC 3.2.1: the connection's SNI chose another VirtualService's certificate and policy
      // (Envoy's per-SNI filter chains). 421 tells a coalescing client to open a new connection.
      this.finish(req, res, start, vhost.name, undefined);
      return sendLocalReply(res, 421, ErrorCodes.MISDIRECTED_REQUEST, `"${host}" is not served on a connection made for another TLS server name; connect with SNI "${host}"`);
    }
    const matched = matchRoute(vhost, { method: req.method!, path, query, headers });
    if (!matched) {
      this.finish(req, res, start, vhost.name, undefined);
      return sendLocalReply(res, 404, ErrorCodes.NO_ROUTE, 'no route matched');
    }
    const { route, matcher } = matched;
    let requestId = headers['x-request-id'];
    if (typeof requestId !== 'string' || requestId === '') headers['x-request-id'] = requestId = randomUUID();
    const ctx: RequestContext = { requestId, start, virtualHost: vhost.name, route: route.name, headers, logger: this.logger, upstream: undefined, responseHeaders: undefined };
    this.finish(req, res, start, vhost.name, route, ctx);

    if (route.cors) {
      const origin = headers.origin;
      if (isPreflight(req)) return answerPreflight(route.cors, req, res);
      if (typeof origin === 'string' && route.cors.allows(origin)) {
        ctx.responseHeaders = route.cors.responseHeaders(origin);
      }
    }

    // A redirect's "path" is its location, built from the request as it came in.
    const upstreamPath =
      route.destination.kind === 'redirect'
        ? redirectLocation(route.destination.redirect, { scheme: (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http', host: headers.host ?? '', path, query: q === -1 ? '' : url.slice(q + 1) }, (prefix) => matcher.rewrite(path, prefix))
        : route.regexRewrite !== undefined
          ? path.replace(route.regexRewrite.pattern, route.regexRewrite.substitution) + (q === -1 ? '' : url.slice(q))
          : route.prefixRewrite === undefined
            ? url
            : matcher.rewrite(path, route.prefixRewrite) + (q === -1 ? '' : url.slice(q));
    if (!route.auth) return this.dispatch(req, res, ctx, route, upstreamPath);
    if (route.auth.body && hasRequestBody(req)) return this.authorizeWithBody(req, res, ctx, route, route.auth, upstreamPath);
    this.authorize(req, ctx, route.auth).then(
      (decision) => {
        // The client left while auth ran: nothing to answer, and nothing to send upstream.
        if (downstreamGone(res)) return;
        if (!decision.allowed) return sendDenial(res, route.destination.kind === 'graphql' ? graphqlDenial(req.headers.accept, decision) : decision, ctx.responseHeaders);
        applyAllowed(headers, decision);
        this.dispatch(req, res, ctx, route, upstreamPath);
      },
      (error: unknown) => {
        // Authorizers never throw by contract; if one does, fail closed.
        this.logger.error({ reqId: requestId, err: error }, 'external auth failed');
        sendLocalReply(res, 403, 'GH_EXTAUTH_ERROR', 'forbidden', ctx.responseHeaders);
      },
    );
  };

  /**
   * A route that sends the body to auth (SPEC 5.3 "Request body", Envoy's `with_request_body`):
   * buffer up to maxRequestBytes (413 when larger and partial bodies are not allowed), check
   * with the body, then hand the destination the request, whose stream still holds every byte.
   */
  private authorizeWithBody(req: IncomingMessage, res: ServerResponse, ctx: RequestContext, route: CompiledRoute, auth: RouteAuth, upstreamPath: string): void {
    const settings = auth.body!;
    if (pendingUpgrade(req)) return refuseUpgradeBody(res, ctx);
    drainAfterAnswer(req, res);
    bufferRequestBody(req, settings.maxBytes, settings.allowPartial).then((body) => {
      if (body === 'aborted' || downstreamGone(res)) return;
      if (body === 'too-large') {
        return refuseTooLarge(req, res, `request body larger than ${settings.maxBytes} bytes (the route sends the body to auth: requestBody.maxRequestBytes)`, ctx.responseHeaders);
      }
      const check = buildCheckRequest(req, ctx, auth);
      const http = check.attributes.request.http;
      if (settings.packAsBytes) http.raw_body = body.forAuth.toString('base64');
      else http.body = body.forAuth.toString('utf8');
      // int64 in proto3 JSON is a decimal string.
      if (body.size !== undefined) http.size = String(body.size);
      // As Envoy: always set on a check with a body, so a client cannot send its own.
      http.headers['x-envoy-auth-partial-body'] = body.partial ? 'true' : 'false';
      const authorizer = this.options.authorizer;
      const decided = authorizer ? authorizer.check(check) : this.authorize(req, ctx, auth);
      decided.then(
        (decision) => {
          if (downstreamGone(res)) return;
          if (!decision.allowed) return sendDenial(res, route.destination.kind === 'graphql' ? graphqlDenial(req.headers.accept, decision) : decision, ctx.responseHeaders);
          applyAllowed(ctx.headers, decision);
          this.dispatch(req, res, ctx, route, upstreamPath);
        },
        (error: unknown) => {
          this.logger.error({ reqId: ctx.requestId, err: error }, 'external auth failed');
          sendLocalReply(res, 403, 'GH_EXTAUTH_ERROR', 'forbidden', ctx.responseHeaders);
        },
      );
    });
  }

  private dispatch(req: IncomingMessage, res: ServerResponse, ctx: RequestContext, route: CompiledRoute, path: string): void {
    let destination = route.destination;
    if (destination.kind === 'redirect') {
      req.resume();
      return sendConfiguredReply(res, destination.redirect.status, '', [...(ctx.responseHeaders ?? []), 'location', path]);
    }
    if (destination.kind === 'direct') {
      req.resume();
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
    if (destination.kind === 'upstream') return forward(req, res, ctx, route, destination.cluster, path);
    if (destination.kind === 'unavailable') return sendLocalReply(res, 503, ErrorCodes.UPSTREAM_UNAVAILABLE, 'the route has no usable destination', ctx.responseHeaders);
    const graphql = this.options.graphql;
    if (!graphql) return sendLocalReply(res, 503, ErrorCodes.UPSTREAM_UNAVAILABLE, 'GraphQL is not available in this process', ctx.responseHeaders);
    // The GraphQL server writes its own responses: the gateway's headers go in first.
    const extra = ctx.responseHeaders;
    if (extra) for (let i = 0; i < extra.length; i += 2) res.setHeader(extra[i]!, extra[i + 1]!);
    graphql.handle(destination.apiKey, req, res, ctx).catch((error: unknown) => {
      this.logger.error({ reqId: ctx.requestId, err: error }, 'GraphQL endpoint failed');
      sendLocalReply(res, 500, 'GH_GRAPHQL_INTERNAL', 'internal error');
    });
  }

  private authorize(req: IncomingMessage, ctx: RequestContext, auth: RouteAuth): Promise<AuthDecision> {
    const authorizer = this.options.authorizer;
    if (!authorizer) {
      this.logger.error({ reqId: ctx.requestId, configId: auth.configId }, 'route requires external auth but no auth server is configured; denying');
      return Promise.resolve(forbidden());
    }
    return authorizer.check(buildCheckRequest(req, ctx, auth));
  }

  /** Access log and request metrics, once the response is done (or the client is gone). */
  private finish(req: IncomingMessage, res: ServerResponse, start: number, vhost: string | undefined, route: CompiledRoute | undefined, ctx?: RequestContext): void {
    res.once('close', () => {
      const status = pendingUpgrade(req)?.status ?? (res.headersSent ? res.statusCode : 0);
      if (route) {
        let counter = route.counters.get(status);
        if (!counter) route.counters.set(status, (counter = metrics.requests.labels(route.virtualHost, route.name, String(status))));
        counter.inc();
      } else {
        metrics.requests.labels(vhost ?? '', '', String(status)).inc();
      }
      this.accessLogger?.write({
        reqId: ctx?.requestId,
        method: req.method,
        path: req.url,
        status,
        durationMs: Math.round((performance.now() - start) * 1000) / 1000,
        protocol: isHttp2Request(req) ? 'HTTP/2' : `HTTP/${req.httpVersion}`,
        virtualHost: vhost,
        route: route?.name,
        upstream: ctx?.upstream,
        // For access-log format strings (%REQ(X)%, %RESP(X)%, addresses): read only by them.
        req,
        res,
      });
    });
  }
}

const SLASH = 0x2f;

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

/** The ext_authz CheckRequest for a downstream request (SPEC 4 step 2). */
export function buildCheckRequest(req: IncomingMessage, ctx: RequestContext, auth: RouteAuth): CheckRequest {
  const headers: Record<string, string> = {};
  const from = ctx.headers;
  // for…in, not Object.entries: no pair arrays per header on every check.
  for (const name in from) {
    const value = from[name];
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(',') : value;
  }
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return {
    attributes: {
      source: { address: { socket_address: { address: req.socket.remoteAddress ?? '', port_value: req.socket.remotePort ?? 0 } } },
      request: {
        http: {
          id: ctx.requestId,
          method: req.method ?? 'GET',
          path: url,
          host: ctx.headers.host ?? '',
          scheme: (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http',
          headers,
          query: q === -1 ? '' : url.slice(q + 1),
          // Envoy's names: HTTP/1.0, HTTP/1.1, HTTP/2.
          protocol: isHttp2Request(req) ? 'HTTP/2' : `HTTP/${req.httpVersion}`,
        },
      },
      context_extensions: { config_id: auth.configId, source_type: auth.sourceType, source_name: auth.sourceName },
    },
  };
}


/**
 * Applies an allowing decision to the request headers, in place: `headers_to_remove` first,
 * then the OK headers. In place because the headers object is this request's own (the check
 * took a copy), and the request context that holds it is the one the access log reads (a
 * copied context lost the upstream the forward recorded on it).
 */
function applyAllowed(headers: IncomingHttpHeaders, decision: Extract<AuthDecision, { allowed: true }>): void {
  for (const name of decision.headersToRemove) delete headers[name.toLowerCase()];
  for (const { key, value, append } of decision.headersToSet) {
    const name = key.toLowerCase();
    const existing = headers[name];
    headers[name] = append && existing !== undefined ? `${Array.isArray(existing) ? existing.join(',') : existing},${value}` : value;
  }
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

/** The denial's status, headers and body, as the client sees them (SPEC 4 step 2), plus the gateway's own headers (CORS). */
function sendDenial(res: ServerResponse, decision: Extract<AuthDecision, { allowed: false }>, extraHeaders: readonly string[] = []): void {
  if (isGrpcCall(res)) return sendGrpcDenial(res, decision, extraHeaders);
  const flat: string[] = [];
  for (const { key, value } of decision.headers) {
    if (key.toLowerCase() !== 'content-length') flat.push(key, value);
  }
  flat.push('content-length', String(Buffer.byteLength(decision.body)), ...extraHeaders);
  try {
    res.writeHead(decision.status, flat);
  } catch {
    // Authorizers hand out sanitised decisions, so this is unreachable; if it ever is not, fail closed instead of crashing.
    return sendLocalReply(res, 403, 'GH_EXTAUTH_BAD_DECISION', 'forbidden');
  }
  res.end(decision.body);
}

/** A denial of a gRPC call: UNAUTHENTICATED for 401, PERMISSION_DENIED for 403 (Envoy's mapping), the denial's headers kept, its body as the message. */
function sendGrpcDenial(res: ServerResponse, decision: Extract<AuthDecision, { allowed: false }>, extraHeaders: readonly string[]): void {
  const flat: string[] = [];
  for (const { key, value } of decision.headers) {
    const name = key.toLowerCase();
    if (name !== 'content-length' && name !== 'content-type') flat.push(key, value);
  }
  const message = decision.body.trim() || (decision.status === 401 ? 'unauthenticated' : 'permission denied');
  try {
    sendTrailersOnly(res, [...grpcReplyHeaders(decision.status, ErrorCodes.EXTAUTH_DENIED, message), ...flat, ...extraHeaders]);
  } catch {
    return sendLocalReply(res, 403, 'GH_EXTAUTH_BAD_DECISION', 'forbidden');
  }
}
