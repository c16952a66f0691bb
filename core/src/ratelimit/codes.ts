/** Stable error codes of the rate-limit subsystem (docs/rate-limiting.md). Callers match on these. */
export const RateLimitCodes = {
  /** A RateLimitConfig does not compile (duplicate descriptor, reserved key, bad unit, unusable action). */
  CONFIG_INVALID: 'GH_RATELIMIT_CONFIG_INVALID',
  /** A ShouldRateLimit request is malformed or too large (no domain, empty entries, too many descriptors). */
  BAD_REQUEST: 'GH_RATELIMIT_BAD_REQUEST',
  /** The counter backend failed or did not answer within the deadline (the decision follows failOpen). */
  BACKEND_UNAVAILABLE: 'GH_RATELIMIT_BACKEND_UNAVAILABLE',
  /** The Redis client has as many commands in flight as its bound allows. */
  BACKEND_OVERLOADED: 'GH_RATELIMIT_BACKEND_OVERLOADED',
  /** Redis settings are unusable (bad URL, missing Secret or key). */
  REDIS_SETTINGS: 'GH_REDIS_SETTINGS',
} as const;
