import type { HttpFilter, HttpFilterFactory, LocalReply } from './http-filter.ts';
import { FilterStage } from './http-filter.ts';

/**
 * Envoy's buffer filter, as Gloo configures it: the Gateway's `httpGateway.options.buffer` for
 * every route of its listener, `bufferPerRoute` on a virtual host or route to set the limit there
 * or turn it off (`disabled`); the route's setting wins over the virtual host's, which wins over
 * the listener's. The request body is read whole (at most `maxRequestBytes`) before the
 * destination gets it: a body over the limit is answered 413 and never reaches the upstream.
 */

/** Stable code of the filter's 413. */
export const BUFFER_TOO_LARGE = 'GH_BUFFER_TOO_LARGE';

const TOO_LARGE: LocalReply = Object.freeze({ status: 413, code: BUFFER_TOO_LARGE, body: 'payload too large' });

type BufferPerRoute = { disabled?: boolean; buffer?: { maxRequestBytes: number } } | undefined;

/** The limit for a route (undefined: no buffering), from the route's, the virtual host's and the listener's settings. */
export function bufferLimit(route: BufferPerRoute, host: BufferPerRoute, listener: { maxRequestBytes?: number } | undefined): number | undefined {
  for (const setting of [route, host]) {
    if (setting === undefined) continue;
    if (setting.disabled === true) return undefined;
    if (setting.buffer !== undefined) return setting.buffer.maxRequestBytes;
  }
  return listener?.maxRequestBytes;
}

/** The buffer filter of one route with limit `maxBytes`. */
export function bufferHttpFilter(maxBytes: number): HttpFilter {
  return {
    name: 'buffer',
    stage: FilterStage.buffer,
    onRequest(request) {
      const length = request.ctx.headers['content-length'];
      // A declared length over the limit is refused before a byte is read (Envoy).
      if (typeof length === 'string' && Number(length) > maxBytes) return TOO_LARGE;
      return request.readBody(maxBytes).then((body) => {
        if (body === 'too-large') return TOO_LARGE;
        // 'aborted': the client left; the runner sends nothing for a request nobody waits on.
        if (body === 'aborted') return undefined;
        // Envoy's buffer filter sets the length of a body that came chunked (not of one a filter decodes on the way: gRPC-Web text).
        if (request.ctx.headers['content-length'] === undefined && body.length > 0 && request.requestBodyStream === undefined) request.ctx.headers['content-length'] = String(body.length);
        return undefined;
      });
    },
  };
}

/** `bufferPerRoute` on routes and virtual hosts, and the Gateway's `buffer`. */
export const bufferFilter: HttpFilterFactory = {
  name: 'buffer',
  create(context) {
    const limit = bufferLimit(context.routeOptions?.bufferPerRoute as BufferPerRoute, context.virtualHostOptions?.bufferPerRoute as BufferPerRoute, context.listenerOptions?.buffer as { maxRequestBytes?: number } | undefined);
    return limit === undefined ? undefined : bufferHttpFilter(limit);
  },
};
