import Type, { type TSchema } from 'typebox';
import { Strict, exactlyOneOf } from './common.ts';

/*
 * Gloo's RateLimitConfig (`ratelimit.solo.io/v1alpha1`, solo-apis `api/rate-limiter/v1alpha1/ratelimit.proto`).
 * Fields are declared by their JSON names (camelCase); a manifest's proto names (snake_case), which
 * Gloo's protojson also reads, are renamed to them before validation (../proto-names.ts), which
 * rejects a field given in both spellings.
 */

/** uint32 as protojson reads it: a number or a decimal string. */
const Uint32 = Type.Union([Type.Integer({ minimum: 0, maximum: 4_294_967_295 }), Type.String({ pattern: '^[0-9]{1,10}$' })]);
/** A descriptor key or value (Envoy requires non-empty entries; 1 KiB keeps counters' keys and memory bounded). */
const Text = Type.String({ minLength: 1, maxLength: 1024 });

/** RateLimit.Unit: the enum's name or number (UNKNOWN is rejected: a limit needs a window). */
export const RATE_LIMIT_UNITS = ['SECOND', 'MINUTE', 'HOUR', 'DAY'] as const;
const Unit = Type.Union([Type.Union(RATE_LIMIT_UNITS.map((u) => Type.Literal(u))), Type.Integer({ minimum: 1, maximum: 4 })], { description: 'SECOND, MINUTE, HOUR or DAY (or 1 to 4)' });

const RateLimit = Strict({ unit: Unit, requestsPerUnit: Uint32 });

/** Gatehouse extension (from envoyproxy/ratelimit): over-limit answers are reported, never enforced. */
const ShadowMode = Type.Boolean({ description: 'extension: count and report, but answer OK (envoyproxy/ratelimit shadow_mode)' });

/** Raw descriptor trees nest; the depth is bounded so a hostile manifest cannot build deep recursion. */
export const MAX_DESCRIPTOR_DEPTH = 8;
function descriptor(depth: number): TSchema {
  const props = {
    key: Text,
    value: Type.Optional(Text),
    rateLimit: Type.Optional(RateLimit),
    weight: Type.Optional(Uint32),
    alwaysApply: Type.Optional(Type.Boolean()),
    shadowMode: Type.Optional(ShadowMode),
    ...(depth < MAX_DESCRIPTOR_DEPTH ? { descriptors: Type.Optional(Type.Array(descriptor(depth + 1), { maxItems: 256 })) } : {}),
  };
  return Strict(props);
}

const SimpleDescriptor = Strict({ key: Text, value: Type.Optional(Text) });

const SetDescriptor = Strict(
  {
    simpleDescriptors: Type.Optional(Type.Array(SimpleDescriptor, { maxItems: 32 })),
    rateLimit: RateLimit,
    alwaysApply: Type.Optional(Type.Boolean()),
    shadowMode: Type.Optional(ShadowMode),
  },
);

/** Envoy's (and Gloo's) HeaderMatcher as the header_value_match action takes it. */
const HeaderMatcher = Strict(
  {
    name: Text,
    exactMatch: Type.Optional(Type.String({ maxLength: 1024 })),
    regexMatch: Type.Optional(Type.String({ maxLength: 1024 })),
    rangeMatch: Type.Optional(Strict({ start: Type.Optional(Type.Union([Type.Integer(), Type.String({ pattern: '^-?[0-9]{1,19}$' })])), end: Type.Optional(Type.Union([Type.Integer(), Type.String({ pattern: '^-?[0-9]{1,19}$' })])) })),
    presentMatch: Type.Optional(Type.Boolean()),
    prefixMatch: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    suffixMatch: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    invertMatch: Type.Optional(Type.Boolean()),
  },
);

const MetadataKey = Strict({ key: Text, path: Type.Array(Strict({ key: Text }), { minItems: 1, maxItems: 16 }) });

/**
 * One rate-limit action (Gloo's `Action`, copied from Envoy's): which part of the request
 * becomes a descriptor entry. The proxy side evaluates them (next); the server only needs
 * them validated so that a RateLimitConfig is accepted or rejected as a whole.
 */
export const RateLimitAction = Strict(
  {
    sourceCluster: Type.Optional(Strict({})),
    destinationCluster: Type.Optional(Strict({})),
    requestHeaders: Type.Optional(Strict({ headerName: Type.Optional(Text), descriptorKey: Type.Optional(Text) })),
    remoteAddress: Type.Optional(Strict({})),
    genericKey: Type.Optional(Strict({ descriptorValue: Type.Optional(Text) })),
    headerValueMatch: Type.Optional(
      Strict({
        descriptorValue: Type.Optional(Text),
        expectMatch: Type.Optional(Type.Boolean()),
        headers: Type.Optional(Type.Array(HeaderMatcher, { maxItems: 32 })),
      }),
    ),
    metadata: Type.Optional(
      Strict(
        {
          descriptorKey: Type.Optional(Text),
          metadataKey: Type.Optional(MetadataKey),
          defaultValue: Type.Optional(Type.String({ maxLength: 1024 })),
          source: Type.Optional(Type.Union([Type.Literal('DYNAMIC'), Type.Literal('ROUTE_ENTRY'), Type.Integer({ minimum: 0, maximum: 1 })])),
        },
      ),
    ),
  },
);

export const RateLimitActions = Strict(
  {
    actions: Type.Optional(Type.Array(RateLimitAction, { maxItems: 32 })),
    setActions: Type.Optional(Type.Array(RateLimitAction, { maxItems: 32 })),
    limit: Type.Optional(Strict({ dynamicMetadata: Type.Optional(Strict({ metadataKey: Type.Optional(MetadataKey) })) })),
  },
);

const Raw = Strict(
  {
    descriptors: Type.Optional(Type.Array(descriptor(1), { maxItems: 1024 })),
    rateLimits: Type.Optional(Type.Array(RateLimitActions, { maxItems: 256 })),
    setDescriptors: Type.Optional(Type.Array(SetDescriptor, { maxItems: 1024 })),
  },
);

/** `spec` of a RateLimitConfig: one configuration type, `raw` (the only one Gloo defines). */
export const RateLimitConfigSpec = Strict({ raw: Raw }, exactlyOneOf(['raw']));
export type RateLimitConfigSpec = Type.Static<typeof RateLimitConfigSpec>;
