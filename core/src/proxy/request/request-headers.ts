import type { IncomingHttpHeaders } from 'node:http';

/**
 * Identity headers the gateway alone sets (SPEC 5.1: `x-user-id` from Basic Auth or a plugin's
 * UserInfo). A client's own copy is removed on every route, with or without auth, so an
 * upstream can trust them.
 */
export const GATEWAY_IDENTITY_HEADERS: readonly string[] = ['x-user-id'];

/** Names a client may never make hop-by-hop through `Connection` (they route the request or carry its framing). */
const NOT_LISTABLE = new Set(['host', 'content-length', 'transfer-encoding', 'x-request-id']);

/**
 * Cleans the downstream request headers before routing and auth (issue 17 findings 20, 22):
 * - names listed in `Connection` are dropped now, before auth, so a client cannot list a header
 *   an auth step sets (`Connection: x-user-id`) and have it stripped on the way upstream;
 * - names with an underscore are dropped (Envoy's `headers_with_underscores_action: DROP_HEADER`):
 *   `x_user_id` next to `x-user-id` means the same to many upstreams (CGI, nginx, Django);
 * - the gateway's identity headers are dropped.
 * Mutates `headers` (Node builds a fresh object per request). Cheap when there is nothing to do.
 */
export function sanitizeRequestHeaders(headers: IncomingHttpHeaders): void {
  const connection = headers.connection;
  if (connection !== undefined) {
    const value = (Array.isArray(connection) ? connection.join(',') : connection).toLowerCase();
    if (value !== 'keep-alive' && value !== 'close') {
      for (const token of value.split(',')) {
        const name = token.trim();
        if (name !== '' && !NOT_LISTABLE.has(name) && headers[name] !== undefined) delete headers[name];
      }
    }
  }
  for (const name in headers) {
    if (name.includes('_')) delete headers[name];
  }
  for (const name of GATEWAY_IDENTITY_HEADERS) {
    if (headers[name] !== undefined) delete headers[name];
  }
  // Only means something to an `Upgrade: h2c`, which the gateway never forwards (RFC 7540 3.2.1: connection-specific).
  if (headers['http2-settings'] !== undefined) delete headers['http2-settings'];
}
