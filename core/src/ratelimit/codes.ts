/** Stable error codes of the rate-limit subsystem (docs/rate-limiting.md). Callers match on these. */
export const RateLimitCodes = {
  /** A RateLimitConfig does not compile (duplicate descriptor, reserved key, bad unit, unusable action). */
  CONFIG_INVALID: 'GH_RATELIMIT_CONFIG_INVALID',
  /** A ShouldRateLimit request is malformed or too large (no domain, empty entries, too many descriptors). */
  BAD_REQUEST: 'GH_RATELIMIT_BAD_REQUEST',
  /** The counters failed, were refused or did not answer within the deadline (the decision follows failOpen; the cause's own code, e.g. GH_REDIS_OVERLOADED, is in the message). */
  BACKEND_UNAVAILABLE: 'GH_RATELIMIT_BACKEND_UNAVAILABLE',
  /** The gateway answered 429: a rate limit (RateLimitConfig, ratelimitBasic, Envoy actions) is exceeded. */
  LIMITED: 'GH_RATELIMITED',
  /** The gateway answered 429: the route's or virtual host's localRatelimit bucket is empty. */
  LOCAL_LIMITED: 'GH_RATELIMITED_LOCAL',
} as const;
