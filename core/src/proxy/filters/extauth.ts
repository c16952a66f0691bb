import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { ExtAuthOptionsSpec } from '../../config/schema/virtual-service.ts';
import { ErrorCodes } from '../../errors.ts';
import type { Authorizer } from '../../extauth/authorizer.ts';
import { forbidden, type AuthDecision, type CheckRequest } from '../../extauth/step.ts';
import { JWT_FILTER_METADATA } from '../../extauth/jwt/jwt-step.ts';
import { graphqlDenial } from '../../graphql/execute/denial.ts';
import { JWT_METADATA } from '../../jwt/jwt-filter.ts';
import { isHttp2Request } from '../../server/http2.ts';
import type { RequestContext } from '../context.ts';
import { hasRequestBody } from '../request/request-body.ts';
import { childSpan } from '../../tracing/tracing.ts';
import type { RouteAuth } from '../routing/route-table.ts';
import { GONE } from './chain.ts';
import { FilterStage, type FilterBuildContext, type FilterRequest, type FilterVerdict, type HttpFilter, type HttpFilterFactory, type LocalReply } from './http-filter.ts';

/**
 * External auth (SPEC 4 step 2, Envoy's ext_authz filter): the route's AuthConfig is checked by
 * the auth server; an allowed request goes on with the headers the decision sets, a denied one
 * gets the denial as the server wrote it. With `requestBody`, the body (up to
 * `maxRequestBytes`) goes with the check. Fails closed: no auth server, or one that fails, is 403.
 */
export const extauthFilter: HttpFilterFactory = {
  name: 'extauth',
  create(context) {
    const auth = routeAuthOf(context);
    return auth ? extauthOf(auth, context) : undefined;
  },
};

/**
 * The AuthConfig a route uses after inheritance (SPEC 3.2): the route's `configRef` overrides
 * the virtual host's; the route's `disable` turns auth off; otherwise inherit. `requestBody`
 * likewise: the route's when it sets one, else the virtual host's.
 */
export function routeAuthOf(context: Pick<FilterBuildContext, 'routeOptions' | 'virtualHostOptions' | 'namespace' | 'virtualHost' | 'route'>): RouteAuth | undefined {
  const routeAuth = context.routeOptions?.extauth as ExtAuthOptionsSpec | undefined;
  if (routeAuth?.disable) return undefined;
  const hostAuth = context.virtualHostOptions?.extauth as ExtAuthOptionsSpec | undefined;
  const bodySpec = routeAuth?.requestBody ?? hostAuth?.requestBody;
  const body = bodySpec ? { body: { maxBytes: bodySpec.maxRequestBytes, allowPartial: bodySpec.allowPartialMessage === true, packAsBytes: bodySpec.packAsBytes === true } } : {};
  if (routeAuth?.configRef) {
    return { configId: `${routeAuth.configRef.namespace ?? context.namespace}.${routeAuth.configRef.name}`, sourceType: 'route', sourceName: context.route, ...body };
  }
  const hostRef = hostAuth?.configRef;
  if (!hostRef) return undefined;
  const slash = context.virtualHost.indexOf('/');
  const vsNamespace = context.virtualHost.slice(0, slash);
  return { configId: `${hostRef.namespace ?? vsNamespace}.${hostRef.name}`, sourceType: 'virtual_host', sourceName: `${vsNamespace}.${context.virtualHost.slice(slash + 1)}`, ...body };
}

/** `FilterRequest.metadata` key: names of the auth decision's client headers that replace the upstream's. */
const REPLACED_RESPONSE_HEADERS = 'extauth.replacedResponseHeaders';

const AUTH_FAILED: LocalReply = { status: 403, code: 'GH_EXTAUTH_ERROR', body: 'forbidden' };

function extauthOf(auth: RouteAuth, context: FilterBuildContext): HttpFilter {
  const auth_ = auth;
  const authorizer = context.services.authorizer;
  const graphql = context.destinationKind === 'graphql';
  const logger = context.logger;

  /** The one place a decision is applied: allowed → the request goes on with its headers; denied → the denial. */
  const decide = (request: FilterRequest, decision: AuthDecision): FilterVerdict => {
    if (decision.allowed) {
      applyAllowed(request.ctx.headers, decision);
      // Envoy's `response_headers_to_add` (SPEC 5.3 "Client response headers"): on whatever
      // response the client gets; without `append` they replace the upstream's same-named ones.
      const toClient = decision.responseHeaders;
      if (toClient?.length) {
        let replaced: Set<string> | undefined;
        for (const { key, value, append } of toClient) {
          const name = key.toLowerCase();
          request.responseHeaders.push(name, value);
          if (!append) (replaced ??= new Set()).add(name);
        }
        if (replaced) request.metadata.set(REPLACED_RESPONSE_HEADERS, replaced);
      }
      return undefined;
    }
    const denial = graphql ? graphqlDenial(request.req.headers.accept, decision) : decision;
    const headers: string[] = [];
    for (const { key, value } of denial.headers) headers.push(key, value);
    return { status: denial.status, code: ErrorCodes.EXTAUTH_DENIED, body: denial.body, headers, verbatim: true };
  };
  const failed = (request: FilterRequest, error: unknown): LocalReply => {
    // Authorizers never throw by contract; if one does, fail closed.
    logger.error({ reqId: request.ctx.requestId, err: error }, 'external auth failed');
    return AUTH_FAILED;
  };
  const check = (request: FilterRequest, checkRequest: CheckRequest, auth: Authorizer): Promise<FilterVerdict> => {
    // A traced request: the check is a span of its own, the auth server's steps its children.
    const span = childSpan(request.ctx, 'ext_authz', { 'ext_authz.config_id': auth_.configId });
    if (span === undefined)
      return auth.check(checkRequest).then(
        (decision) => decide(request, decision),
        (error: unknown) => failed(request, error),
      );
    Object.assign(checkRequest.attributes.request.http.headers, span.traceHeaders);
    return auth.check(checkRequest).then(
      (decision) => {
        span.setAttribute('ext_authz.allowed', decision.allowed);
        if (!decision.allowed) span.setAttribute('http.status_code', decision.status);
        span.end();
        return decide(request, decision);
      },
      (error: unknown) => {
        span.end((error as Error)?.message ?? 'failed');
        return failed(request, error);
      },
    );
  };

  return {
    name: 'extauth',
    stage: FilterStage.extauth,
    onResponseHeaders(request, _status, headers) {
      const replaced = request.metadata.get(REPLACED_RESPONSE_HEADERS) as Set<string> | undefined;
      if (!replaced) return;
      for (let i = headers.length - 2; i >= 0; i -= 2) if (replaced.has(headers[i]!.toLowerCase())) headers.splice(i, 2);
    },
    onRequest(request) {
      if (!authorizer) {
        logger.error({ reqId: request.ctx.requestId, configId: auth.configId }, 'route requires external auth but no auth server is configured; denying');
        return decide(request, forbidden());
      }
      const settings = auth.body;
      if (!settings || !hasRequestBody(request.req, request.ctx.headers)) return check(request, buildCheckRequest(request.req, request.ctx, auth, request.metadata), authorizer);
      // SPEC 5.3 "Request body" (Envoy's `with_request_body`): the body goes with the check.
      return request.readBody(settings.maxBytes, { allowPartial: settings.allowPartial }).then((body) => {
        if (body === 'aborted') return GONE;
        if (body === 'too-large') return { status: 413, code: ErrorCodes.BODY_TOO_LARGE, body: `request body larger than ${settings.maxBytes} bytes (the route sends the body to auth: requestBody.maxRequestBytes)` };
        const checkRequest = buildCheckRequest(request.req, request.ctx, auth, request.metadata);
        const http = checkRequest.attributes.request.http;
        if (settings.packAsBytes) http.raw_body = body.toString('base64');
        else http.body = body.toString('utf8');
        const size = declaredSize(request.req) ?? (request.bodyPartial ? undefined : body.length);
        // int64 in proto3 JSON is a decimal string.
        if (size !== undefined) http.size = String(size);
        // As Envoy: always set on a check with a body, so a client cannot send its own.
        http.headers['x-envoy-auth-partial-body'] = request.bodyPartial ? 'true' : 'false';
        return check(request, checkRequest, authorizer);
      });
    },
  };
}

function declaredSize(req: IncomingMessage): number | undefined {
  const value = req.headers['content-length'];
  if (value === undefined) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/**
 * The ext_authz CheckRequest for a downstream request (SPEC 4 step 2). `metadata`: what earlier
 * filters left (`FilterRequest.metadata`); the JWT filter's claims go in as Envoy sends them,
 * `metadata_context.filter_metadata["envoy.filters.http.jwt_authn"]` (read by the AuthConfig `jwt` step).
 */
export function buildCheckRequest(req: IncomingMessage, ctx: RequestContext, auth: RouteAuth, metadata?: ReadonlyMap<string, unknown>): CheckRequest {
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
      ...jwtMetadataContext(metadata),
    },
  };
}

/** `metadata_context` with the JWT filter's verified claims, or nothing. */
function jwtMetadataContext(metadata: ReadonlyMap<string, unknown> | undefined): Pick<CheckRequest['attributes'], 'metadata_context'> {
  const claims = metadata?.get(JWT_METADATA) as Record<string, Record<string, unknown>> | undefined;
  return claims ? { metadata_context: { filter_metadata: { [JWT_FILTER_METADATA]: claims } } } : {};
}

/**
 * Applies an allowing decision to the request headers, in place: `headers_to_remove` first,
 * then the OK headers. In place because the headers object is this request's own (the check
 * took a copy), and the request context that holds it is the one the access log reads.
 */
function applyAllowed(headers: IncomingHttpHeaders, decision: Extract<AuthDecision, { allowed: true }>): void {
  for (const name of decision.headersToRemove) delete headers[name.toLowerCase()];
  for (const { key, value, append } of decision.headersToSet) {
    const name = key.toLowerCase();
    const existing = headers[name];
    headers[name] = append && existing !== undefined ? `${Array.isArray(existing) ? existing.join(',') : existing},${value}` : value;
  }
}
