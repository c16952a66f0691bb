import type { ServerResponse } from 'node:http';

/**
 * A response the gateway makes itself (404, 503, 504…): short plain text and the stable
 * error code in `x-gatehouse-error` (SPEC 4 step 4), so clients and tests can tell a
 * gateway error from an upstream's own response. `extraHeaders` (a flat list) are the
 * request's gateway-added headers, such as CORS.
 */
export function sendLocalReply(res: ServerResponse, status: number, code: string, message: string, extraHeaders: readonly string[] = []): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = `${message}\n`;
  res.writeHead(status, ['content-type', 'text/plain; charset=utf-8', 'content-length', String(Buffer.byteLength(body)), 'x-gatehouse-error', code, ...extraHeaders]);
  res.end(body);
}

/**
 * A response the configuration asks for (`directResponseAction`, `redirectAction`): not a
 * gateway error, so no `x-gatehouse-error`; the body as configured, as text (Envoy's default).
 */
export function sendConfiguredReply(res: ServerResponse, status: number, body: string, extraHeaders: readonly string[] = []): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const head = ['content-length', String(Buffer.byteLength(body)), ...(body ? ['content-type', 'text/plain; charset=utf-8'] : []), ...extraHeaders];
  res.writeHead(status, head);
  res.end(body);
}
