import { CodedError } from '@gatehouse/plugin-sdk/errors';

/**
 * One error family for Gatehouse. Callers match on `code`, never on the message,
 * so codes are stable API; messages tell the user what to change.
 */
export class GatehouseError extends CodedError {
  override name = 'GatehouseError';
}

/** Error codes shared across subsystems. Subsystems may add their own `GH_<AREA>_<WHAT>` codes. */
export const ErrorCodes = {
  /** A manifest failed to parse or validate. */
  CONFIG_INVALID: 'GH_CONFIG_INVALID',
  /** A command-line flag or environment variable has a bad value. */
  BAD_ARGUMENT: 'GH_BAD_ARGUMENT',
  /** No virtual host matched the request's Host. */
  NO_VIRTUAL_HOST: 'GH_NO_VIRTUAL_HOST',
  /** A virtual host matched but none of its routes did. */
  NO_ROUTE: 'GH_NO_ROUTE',
  /** The upstream refused or reset the connection, or has no usable host. */
  UPSTREAM_UNAVAILABLE: 'GH_UPSTREAM_UNAVAILABLE',
  /** The upstream host has as many requests waiting as its pending-request limit allows. */
  UPSTREAM_OVERFLOW: 'GH_UPSTREAM_OVERFLOW',
  /** The upstream did not answer within the route timeout. */
  UPSTREAM_TIMEOUT: 'GH_UPSTREAM_TIMEOUT',
  /** The downstream request itself is malformed. */
  BAD_REQUEST: 'GH_BAD_REQUEST',
  /** A TLS request for a host another certificate's VirtualService serves (SPEC 3.2.1): 421. */
  MISDIRECTED_REQUEST: 'GH_MISDIRECTED_REQUEST',
  /** An `Upgrade` to a protocol the gateway does not tunnel (only websocket): 403. */
  UPGRADE_NOT_ALLOWED: 'GH_UPGRADE_NOT_ALLOWED',
  /** The body is larger than the route's `requestBody.maxRequestBytes` (partial bodies not allowed): 413. */
  BODY_TOO_LARGE: 'GH_BODY_TOO_LARGE',
  /** External auth denied the request (on gRPC routes, where the denial becomes a gRPC status). */
  EXTAUTH_DENIED: 'GH_EXTAUTH_DENIED',
  /** The call's `grpc-timeout` passed before the upstream finished. */
  GRPC_DEADLINE: 'GH_GRPC_DEADLINE_EXCEEDED',
} as const;
