import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ServerHttp2Stream } from 'node:http2';
import { GRPC_WEB_REPLY_TYPE, grpcReplyHeaders, isGrpcRequest } from './grpc.ts';

/**
 * A response the gateway makes itself (404, 503, 504…): short plain text and the stable
 * error code in `x-gatehouse-error` (SPEC 4 step 4), so clients and tests can tell a
 * gateway error from an upstream's own response. `extraHeaders` (a flat list) are the
 * request's gateway-added headers, such as CORS. A gRPC call gets the same answer as a gRPC
 * status (./grpc.ts), since gRPC clients do not read HTTP statuses.
 */
export function sendLocalReply(res: ServerResponse, status: number, code: string, message: string, extraHeaders: readonly string[] = []): void {
  if (res.headersSent || downstreamGone(res)) {
    res.destroy();
    return;
  }
  if (isGrpcCall(res)) return sendTrailersOnly(res, [...grpcReplyHeaders(status, code, message), ...extraHeaders]);
  const body = `${message}\n`;
  res.writeHead(status, ['content-type', 'text/plain; charset=utf-8', 'content-length', String(Buffer.byteLength(body)), 'x-gatehouse-error', code, ...extraHeaders]);
  res.end(body);
}

/**
 * A response the configuration asks for (`directResponseAction`, `redirectAction`): not a
 * gateway error, so no `x-gatehouse-error`; the body as configured, as text (Envoy's default).
 */
export function sendConfiguredReply(res: ServerResponse, status: number, body: string, extraHeaders: readonly string[] = []): void {
  if (res.headersSent || downstreamGone(res)) {
    res.destroy();
    return;
  }
  const head = ['content-length', String(Buffer.byteLength(body)), ...(body ? ['content-type', 'text/plain; charset=utf-8'] : []), ...extraHeaders];
  res.writeHead(status, head);
  res.end(body);
}

/** Whether the response answers a gRPC call (Node's responses know their request). */
export function isGrpcCall(res: ServerResponse): boolean {
  const req = (res as ServerResponse & { req?: IncomingMessage }).req;
  return req !== undefined && isGrpcRequest(req.headers);
}

/**
 * A gRPC "trailers-only" answer: one header block that ends the stream, with the status in it.
 * Headers are set and the response ended without `writeHead`, which would send the header block
 * at once, ahead of an empty end-of-stream frame that gRPC clients read as a missing status.
 */
export function sendTrailersOnly(res: ServerResponse, flat: readonly string[]): void {
  res.statusCode = 200;
  const grouped = new Map<string, string[]>();
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!.toLowerCase();
    const values = grouped.get(name);
    if (values) values.push(flat[i + 1]!);
    else grouped.set(name, [flat[i + 1]!]);
  }
  const web = (res as ServerResponse & { req?: { [GRPC_WEB_REPLY_TYPE]?: string } }).req?.[GRPC_WEB_REPLY_TYPE];
  if (web !== undefined && grouped.has('content-type')) grouped.set('content-type', [web]);
  for (const [name, values] of grouped) res.setHeader(name, values.length === 1 ? values[0]! : values);
  res.end();
}

/**
 * Whether the client is gone: an HTTP/1.1 response whose socket closed, or an HTTP/2 one whose
 * stream was reset or closed. Node's HTTP/2 compatibility response has no `destroyed` of its
 * own (it is always undefined there), so every "did the client leave?" check goes through here.
 */
export function downstreamGone(res: ServerResponse): boolean {
  if (res.destroyed) return true;
  const stream = (res as ServerResponse & { stream?: ServerHttp2Stream }).stream;
  return stream !== undefined && (stream.destroyed || stream.closed);
}
