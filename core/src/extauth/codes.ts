/** Stable error codes of the external auth subsystem (SPEC 5). Callers match on these. */
export const ExtAuthCodes = {
  /** A step of an AuthConfig could not be built (bad hash, missing plugin file, version mismatch). */
  STEP_BUILD: 'GH_EXTAUTH_STEP_BUILD',
  /** The step type has no implementation in this build (e.g. the plugin host is not installed). */
  STEP_UNAVAILABLE: 'GH_EXTAUTH_STEP_UNAVAILABLE',
  /** A step threw while authorizing a request (a bug or an unreachable dependency). */
  STEP_FAILED: 'GH_EXTAUTH_STEP_FAILED',
  /** The CheckRequest names no AuthConfig, or one that is not served. */
  UNKNOWN_CONFIG: 'GH_EXTAUTH_UNKNOWN_CONFIG',
  /** The AuthConfig is served but one of its steps failed to build: requests are denied. */
  CONFIG_UNAVAILABLE: 'GH_EXTAUTH_CONFIG_UNAVAILABLE',
  /** The ext_authz server could not be reached or answered with a gRPC error. */
  UNAVAILABLE: 'GH_EXTAUTH_UNAVAILABLE',
  /** The auth server (or its admin API) cannot listen on its address: the port is taken or the address is not local. */
  LISTEN: 'GH_EXTAUTH_LISTEN',
  /** A step's decision had headers or a status that cannot be sent; it was sanitised (SPEC 5). */
  BAD_DECISION: 'GH_EXTAUTH_BAD_DECISION',
  /** A Check call without the caller token the server requires (or: the server requires none on a public address). */
  UNAUTHENTICATED: 'GH_EXTAUTH_UNAUTHENTICATED',
  /** The ext_authz server did not answer within the timeout. */
  TIMEOUT: 'GH_EXTAUTH_TIMEOUT',
} as const;
