/** Stable error codes of the OAuth2 / OIDC steps (logged with every failure; callers match on these). */
export const OAuth2Codes = {
  /** The provider (discovery, JWKS, token, introspection, userinfo endpoint) failed, hung, or answered garbage: denied. */
  PROVIDER: 'GH_OAUTH2_PROVIDER',
  /** A callback whose `state` is unknown, forged, expired or already used: denied. */
  STATE: 'GH_OAUTH2_STATE',
  /** A token from the provider did not verify (signature, issuer, audience, nonce, expiry): denied. */
  TOKEN: 'GH_OAUTH2_TOKEN',
  /** The session store (Redis) failed. */
  SESSION_STORE: 'GH_OAUTH2_SESSION_STORE',
  /** The session does not fit in cookies: use session.redis. */
  SESSION_TOO_LARGE: 'GH_OAUTH2_SESSION_TOO_LARGE',
} as const;
