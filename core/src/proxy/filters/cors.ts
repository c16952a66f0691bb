import type { CorsPolicySpec } from '../../config/schema/virtual-service.ts';
import { compileCors, isPreflight, type CompiledCors } from './cors-policy.ts';
import { FilterStage, type FilterRequest, type HttpFilter, type HttpFilterFactory, type LocalReply } from './http-filter.ts';

/**
 * Envoy's CORS filter (Gloo's `cors` on virtual hosts and routes; a route's policy replaces the
 * host's, `disableForRoute` turns it off): preflights are answered here, before auth; an allowed
 * origin's actual request gets the CORS headers on whatever response it gets, replacing an
 * upstream's own.
 */
export const corsFilter: HttpFilterFactory = {
  name: 'cors',
  create({ routeOptions, virtualHostOptions }) {
    const own = routeOptions?.cors as CorsPolicySpec | undefined;
    if (own?.disableForRoute) return undefined;
    const cors = compileCors(own ?? (virtualHostOptions?.cors as CorsPolicySpec | undefined));
    return cors ? corsOf(cors) : undefined;
  },
};

/** Marks requests that got CORS headers (their upstream's own are replaced). */
const ALLOWED = 'cors';

function corsOf(cors: CompiledCors): HttpFilter {
  return {
    name: 'cors',
    stage: FilterStage.cors,
    onRequest(request: FilterRequest): LocalReply | undefined {
      const { req } = request;
      const origin = req.headers.origin;
      if (isPreflight(req)) {
        // A disallowed origin gets no CORS headers, so the browser blocks it.
        const headers = cors.allows(origin as string) ? Object.entries(cors.preflightHeaders(origin as string)).flat() : [];
        return { status: 200, code: 'GH_CORS_PREFLIGHT', verbatim: true, headers };
      }
      if (typeof origin === 'string' && cors.allows(origin)) {
        cors.responseHeaders(origin, request.responseHeaders);
        request.metadata.set(ALLOWED, true);
      }
      return undefined;
    },
    onResponseHeaders(request, _status, headers) {
      if (request.metadata.get(ALLOWED) !== true) return;
      for (let i = headers.length - 2; i >= 0; i -= 2) {
        if (cors.replaces.has(headers[i]!.toLowerCase())) headers.splice(i, 2);
      }
    },
  };
}
