import type { AuthorizationResponse, CheckRequest, HeaderValueOption, SocketAddressJson } from './types.ts';

/** gRPC status codes used in `CheckResponse.status` (google.rpc.Code). */
export const GrpcCode = { OK: 0, PERMISSION_DENIED: 7, UNAUTHENTICATED: 16 } as const;

function toOptions(headers: Record<string, string> | undefined): HeaderValueOption[] {
  return headers ? Object.entries(headers).map(([key, value]) => ({ header: { key, value } })) : [];
}

/**
 * Allows the request; `headers` are set on the upstream request (overwriting), `responseHeaders`
 * on the client's response (Envoy `response_headers_to_add`, e.g. `X-RateLimit-Remaining`).
 */
export function AuthorizedResponse(headers?: Record<string, string>, responseHeaders?: Record<string, string>): AuthorizationResponse {
  const ok: NonNullable<AuthorizationResponse['CheckResponse']['ok_response']> = { headers: toOptions(headers), headers_to_remove: [] };
  if (responseHeaders && Object.keys(responseHeaders).length > 0) ok.response_headers_to_add = toOptions(responseHeaders);
  return { CheckResponse: { status: { code: GrpcCode.OK }, ok_response: ok } };
}

/** Denies with `status` (e.g. 302, 429), optional response headers and body. */
export function DeniedResponse(status: number, headers?: Record<string, string>, body = ''): AuthorizationResponse {
  return {
    CheckResponse: {
      status: { code: status === 401 ? GrpcCode.UNAUTHENTICATED : GrpcCode.PERMISSION_DENIED },
      denied_response: { status: { code: status }, headers: toOptions(headers), body },
    },
  };
}

/** Denies with 403 Forbidden and an empty body. */
export function UnauthorizedResponse(): AuthorizationResponse {
  return DeniedResponse(403);
}

/** Denies with 401 Unauthorized and an empty body. */
export function UnauthenticatedResponse(): AuthorizationResponse {
  return DeniedResponse(401);
}

/**
 * The downstream peer's IP address (`attributes.source.address.socket_address.address`, set by
 * the gateway): the client, or the last proxy in front of the gateway. Undefined when absent.
 */
export function ClientAddress(request: CheckRequest): string | undefined {
  const address = (request.attributes.source?.address as SocketAddressJson | undefined)?.socket_address?.address;
  return typeof address === 'string' && address !== '' ? address : undefined;
}
