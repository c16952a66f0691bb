import type { IncomingHttpHeaders } from 'node:http';
import { ErrorCodes } from '../../errors.ts';

/** gRPC status codes the gateway itself answers with (grpc/doc/statuscodes.md). */
export const GrpcStatus = {
  UNKNOWN: 2,
  DEADLINE_EXCEEDED: 4,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/** A gRPC call (any `application/grpc*` content type: proto, json, web). */
export function isGrpcRequest(headers: IncomingHttpHeaders): boolean {
  const type = headers['content-type'];
  return typeof type === 'string' && type.startsWith('application/grpc');
}

/**
 * The gRPC status of a response the gateway makes itself: Envoy's mapping
 * (`Grpc::Utility::httpToGrpcStatus`, after grpc/doc/http-grpc-status-mapping.md), except that
 * an upstream timeout, the gateway's own deadline, is DEADLINE_EXCEEDED rather than UNAVAILABLE,
 * and a body over the limit is RESOURCE_EXHAUSTED.
 */
export function grpcStatusOf(httpStatus: number, code?: string): number {
  if (code === ErrorCodes.UPSTREAM_TIMEOUT || code === ErrorCodes.GRPC_DEADLINE) return GrpcStatus.DEADLINE_EXCEEDED;
  if (code === ErrorCodes.BODY_TOO_LARGE) return GrpcStatus.RESOURCE_EXHAUSTED;
  switch (httpStatus) {
    case 400:
      return GrpcStatus.INTERNAL;
    case 401:
      return GrpcStatus.UNAUTHENTICATED;
    case 403:
      return GrpcStatus.PERMISSION_DENIED;
    case 404:
      return GrpcStatus.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return GrpcStatus.UNAVAILABLE;
    default:
      return GrpcStatus.UNKNOWN;
  }
}

/** `grpc-message` is percent-encoded (gRPC over HTTP/2: "Percent-Encoded"), printable ASCII except `%` kept. */
export function encodeGrpcMessage(message: string): string {
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

const UNITS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 0.001, n: 0.000_001 };

/** The longest a Node timer can wait (2^31 - 1 ms, ~24.8 days); a longer delay fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * `grpc-timeout` (1–8 digits and a unit: H, M, S, m, u, n) in milliseconds, at most
 * {@link MAX_TIMER_MS} (99999999H is valid and would overflow the timer); undefined when
 * absent or malformed.
 */
export function grpcTimeoutMs(headers: IncomingHttpHeaders): number | undefined {
  const value = headers['grpc-timeout'];
  if (typeof value !== 'string') return undefined;
  const match = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (!match) return undefined;
  return Math.min(Number(match[1]) * UNITS[match[2]!]!, MAX_TIMER_MS);
}

/**
 * Set on a request the gRPC-Web filter translated (./filters/grpc-web.ts), to the content type of
 * its answer: a gRPC answer the gateway makes itself carries it (./local-reply.ts), so a gRPC-Web
 * client reads the status instead of refusing a content type it did not ask for.
 */
export const GRPC_WEB_REPLY_TYPE: unique symbol = Symbol('gatehouse.grpcWebReplyType');

/**
 * The headers of a trailers-only gRPC response (HTTP 200, the status in the header block, which
 * ends the stream): how Envoy answers a gRPC call it does not forward.
 */
export function grpcReplyHeaders(httpStatus: number, code: string, message: string): string[] {
  return ['content-type', 'application/grpc', 'grpc-status', String(grpcStatusOf(httpStatus, code)), 'grpc-message', encodeGrpcMessage(message), 'x-gatehouse-error', code];
}
