/** Stable error codes of the JWT filter and RBAC (sent in `x-gatehouse-error`, logged, counted). */
export const JwtCodes = {
  /** No token where the route's providers look (Envoy's `Jwt is missing`): 401. */
  MISSING: 'GH_JWT_MISSING',
  /** A token that does not verify: bad form, signature, issuer, expiry, no matching key (401). */
  INVALID: 'GH_JWT_INVALID',
  /** A verified token whose `aud` is not one of the provider's audiences (Envoy answers 403). */
  AUDIENCE: 'GH_JWT_AUDIENCE',
  /** The provider's remote JWKS could not be fetched and no earlier copy is cached (401). */
  JWKS_UNAVAILABLE: 'GH_JWT_JWKS_UNAVAILABLE',
  /** A JWT or RBAC option that cannot be compiled (bad JWKS, PEM, URL, regex): the resource is rejected. */
  CONFIG: 'GH_JWT_CONFIG',
  /** No RBAC policy allows the request (Envoy's `RBAC: access denied`): 403. */
  RBAC_DENIED: 'GH_RBAC_DENIED',
} as const;
