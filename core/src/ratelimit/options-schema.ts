import Type from 'typebox';
import { Duration, ResourceRef, Strict } from '../config/schema/common.ts';
import { RATE_LIMIT_UNITS, RateLimitActions } from '../config/schema/rate-limit-config.ts';

/*
 * The rate-limit options of virtual hosts and routes (Gloo's `ratelimit.options.gloo.solo.io`
 * and `ratelimit.solo.io` protos), run by the gateway's rate-limit filters (./filter.ts,
 * docs/rate-limiting.md "On routes and virtual hosts").
 */

const Unit = Type.Union([Type.Union(RATE_LIMIT_UNITS.map((u) => Type.Literal(u))), Type.Integer({ minimum: 1, maximum: 4 })], { description: 'SECOND, MINUTE, HOUR or DAY (or 1 to 4)' });
const Limit = Strict({ requestsPerUnit: Type.Integer({ minimum: 0, maximum: 4_294_967_295 }), unit: Unit });

/** Gloo's IngressRateLimit (`ratelimitBasic`): per client address, or per authenticated user. */
export const RateLimitBasic = Strict({
  anonymousLimits: Type.Optional(Limit),
  authorizedLimits: Type.Optional(Limit),
});

/** `rateLimitConfigs` / `rateLimitEarlyConfigs` / `rateLimitRegularConfigs`: RateLimitConfig resources. */
export const RateLimitConfigRefs = Strict({ refs: Type.Array(ResourceRef, { minItems: 1, maxItems: 64 }) });

/** `ratelimit` / `rateLimitEarly` / `rateLimitRegular`: Envoy's rate-limit actions (RateLimitRouteExtension / RateLimitVhostExtension). */
export const RateLimitExtension = Strict({
  includeVhRateLimits: Type.Optional(Type.Boolean({ description: 'on a route: the virtual host\'s actions apply too' })),
  rateLimits: Type.Optional(Type.Array(RateLimitActions, { maxItems: 256 })),
});

/** `localRatelimit`: Envoy's local token bucket (per process). */
export const LocalRateLimit = Strict({
  maxTokens: Type.Integer({ minimum: 1, maximum: 4_294_967_295 }),
  tokensPerFill: Type.Optional(Type.Integer({ minimum: 1, maximum: 4_294_967_295 })),
  fillInterval: Type.Optional(Duration),
});

/** Every rate-limit option, spread into the route and virtual-host options schemas. */
export const RateLimitOptions = {
  ratelimitBasic: Type.Optional(RateLimitBasic),
  rateLimitConfigs: Type.Optional(RateLimitConfigRefs),
  rateLimitEarlyConfigs: Type.Optional(RateLimitConfigRefs),
  rateLimitRegularConfigs: Type.Optional(RateLimitConfigRefs),
  ratelimit: Type.Optional(RateLimitExtension),
  rateLimitEarly: Type.Optional(RateLimitExtension),
  rateLimitRegular: Type.Optional(RateLimitExtension),
  localRatelimit: Type.Optional(LocalRateLimit),
};

export type RateLimitBasicSpec = Type.Static<typeof RateLimitBasic>;
export type RateLimitConfigRefsSpec = Type.Static<typeof RateLimitConfigRefs>;
export type RateLimitExtensionSpec = Type.Static<typeof RateLimitExtension>;
export type LocalRateLimitSpec = Type.Static<typeof LocalRateLimit>;
