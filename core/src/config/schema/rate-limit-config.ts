import Type, { type TSchema } from 'typebox';
import { Strict, exactlyOneOf } from './common.ts';

/*
 * Gloo's RateLimitConfig (`ratelimit.solo.io/v1alpha1`, solo-apis `api/rate-limiter/v1alpha1/ratelimit.proto`).
 * Every field is accepted under both spellings Gloo's protojson reads, the JSON name (camelCase)
 * and the proto name (snake_case), at most one of the two at a time; core/src/ratelimit/compile.ts
 * reads them through one helper.
 */

/** `{jsonName, proto_name}`: the two properties of one proto field (at most one may be set). */
function both<S extends TSchema>(jsonName: string, protoName: string, schema: S): Record<string, S> {
  return jsonName === protoName ? { [jsonName]: schema } : { [jsonName]: schema, [protoName]: schema };
}

/** Names of proto fields whose two spellings differ, for the at-most-one rule of an object. */
function pairsOf(fields: readonly (readonly [string, string])[]): Record<string, unknown> {
  const pairs = fields.filter(([a, b]) => a !== b);
  if (pairs.length === 0) return {};
  // `not anyOf [both spellings]` per pair: legal in a structural CRD schema too.
  return { not: { anyOf: pairs.map((pair) => ({ required: [...pair] })) }, 'x-gatehouse-message': `set each field once: ${pairs.map(([a, b]) => `${a} or ${b}`).join(', ')}` };
}

/** uint32 as protojson reads it: a number or a decimal string. */
const Uint32 = Type.Union([Type.Integer({ minimum: 0, maximum: 4_294_967_295 }), Type.String({ pattern: '^[0-9]{1,10}$' })]);
/** A descriptor key or value (Envoy requires non-empty entries; 1 KiB keeps counters' keys and memory bounded). */
const Text = Type.String({ minLength: 1, maxLength: 1024 });

/** RateLimit.Unit: the enum's name or number (UNKNOWN is rejected: a limit needs a window). */
export const RATE_LIMIT_UNITS = ['SECOND', 'MINUTE', 'HOUR', 'DAY'] as const;
const Unit = Type.Union([Type.Union(RATE_LIMIT_UNITS.map((u) => Type.Literal(u))), Type.Integer({ minimum: 1, maximum: 4 })], { description: 'SECOND, MINUTE, HOUR or DAY (or 1 to 4)' });

const RateLimit = Strict(
  {
    unit: Unit,
    ...both('requestsPerUnit', 'requests_per_unit', Type.Optional(Uint32)),
  },
  { ...pairsOf([['requestsPerUnit', 'requests_per_unit']]), anyOf: [{ required: ['requestsPerUnit'] }, { required: ['requests_per_unit'] }] },
);

/** Gatehouse extension (from envoyproxy/ratelimit): over-limit answers are reported, never enforced. */
const ShadowMode = Type.Boolean({ description: 'extension: count and report, but answer OK (envoyproxy/ratelimit shadow_mode)' });

/** Raw descriptor trees nest; the depth is bounded so a hostile manifest cannot build deep recursion. */
export const MAX_DESCRIPTOR_DEPTH = 8;
function descriptor(depth: number): TSchema {
  const props = {
    key: Text,
    value: Type.Optional(Text),
    ...both('rateLimit', 'rate_limit', Type.Optional(RateLimit)),
    weight: Type.Optional(Uint32),
    ...both('alwaysApply', 'always_apply', Type.Optional(Type.Boolean())),
    ...both('shadowMode', 'shadow_mode', Type.Optional(ShadowMode)),
    ...(depth < MAX_DESCRIPTOR_DEPTH ? { descriptors: Type.Optional(Type.Array(descriptor(depth + 1), { maxItems: 256 })) } : {}),
  };
  return Strict(props, pairsOf([['rateLimit', 'rate_limit'], ['alwaysApply', 'always_apply'], ['shadowMode', 'shadow_mode']]));
}

const SimpleDescriptor = Strict({ key: Text, value: Type.Optional(Text) });

const SetDescriptor = Strict(
  {
    ...both('simpleDescriptors', 'simple_descriptors', Type.Optional(Type.Array(SimpleDescriptor, { maxItems: 32 }))),
    ...both('rateLimit', 'rate_limit', Type.Optional(RateLimit)),
    ...both('alwaysApply', 'always_apply', Type.Optional(Type.Boolean())),
    ...both('shadowMode', 'shadow_mode', Type.Optional(ShadowMode)),
  },
  {
    ...pairsOf([['simpleDescriptors', 'simple_descriptors'], ['rateLimit', 'rate_limit'], ['alwaysApply', 'always_apply'], ['shadowMode', 'shadow_mode']]),
    anyOf: [{ required: ['rateLimit'] }, { required: ['rate_limit'] }],
  },
);

/** Envoy's (and Gloo's) HeaderMatcher as the header_value_match action takes it. */
const HeaderMatcher = Strict(
  {
    name: Text,
    ...both('exactMatch', 'exact_match', Type.Optional(Type.String({ maxLength: 1024 }))),
    ...both('regexMatch', 'regex_match', Type.Optional(Type.String({ maxLength: 1024 }))),
    ...both('rangeMatch', 'range_match', Type.Optional(Strict({ start: Type.Optional(Type.Union([Type.Integer(), Type.String({ pattern: '^-?[0-9]{1,19}$' })])), end: Type.Optional(Type.Union([Type.Integer(), Type.String({ pattern: '^-?[0-9]{1,19}$' })])) }))),
    ...both('presentMatch', 'present_match', Type.Optional(Type.Boolean())),
    ...both('prefixMatch', 'prefix_match', Type.Optional(Type.String({ minLength: 1, maxLength: 1024 }))),
    ...both('suffixMatch', 'suffix_match', Type.Optional(Type.String({ minLength: 1, maxLength: 1024 }))),
    ...both('invertMatch', 'invert_match', Type.Optional(Type.Boolean())),
  },
  pairsOf([['exactMatch', 'exact_match'], ['regexMatch', 'regex_match'], ['rangeMatch', 'range_match'], ['presentMatch', 'present_match'], ['prefixMatch', 'prefix_match'], ['suffixMatch', 'suffix_match'], ['invertMatch', 'invert_match']]),
);

const MetadataKey = Strict({ key: Text, path: Type.Array(Strict({ key: Text }), { minItems: 1, maxItems: 16 }) });

/**
 * One rate-limit action (Gloo's `Action`, copied from Envoy's): which part of the request
 * becomes a descriptor entry. The proxy side evaluates them (next); the server only needs
 * them validated so that a RateLimitConfig is accepted or rejected as a whole.
 */
export const RateLimitAction = Strict(
  {
    ...both('sourceCluster', 'source_cluster', Type.Optional(Strict({}))),
    ...both('destinationCluster', 'destination_cluster', Type.Optional(Strict({}))),
    ...both('requestHeaders', 'request_headers', Type.Optional(Strict({ ...both('headerName', 'header_name', Type.Optional(Text)), ...both('descriptorKey', 'descriptor_key', Type.Optional(Text)) }, pairsOf([['headerName', 'header_name'], ['descriptorKey', 'descriptor_key']])))),
    ...both('remoteAddress', 'remote_address', Type.Optional(Strict({}))),
    ...both('genericKey', 'generic_key', Type.Optional(Strict({ ...both('descriptorValue', 'descriptor_value', Type.Optional(Text)) }, pairsOf([['descriptorValue', 'descriptor_value']])))),
    ...both(
      'headerValueMatch',
      'header_value_match',
      Type.Optional(
        Strict(
          {
            ...both('descriptorValue', 'descriptor_value', Type.Optional(Text)),
            ...both('expectMatch', 'expect_match', Type.Optional(Type.Boolean())),
            headers: Type.Optional(Type.Array(HeaderMatcher, { maxItems: 32 })),
          },
          pairsOf([['descriptorValue', 'descriptor_value'], ['expectMatch', 'expect_match']]),
        ),
      ),
    ),
    metadata: Type.Optional(
      Strict(
        {
          ...both('descriptorKey', 'descriptor_key', Type.Optional(Text)),
          ...both('metadataKey', 'metadata_key', Type.Optional(MetadataKey)),
          ...both('defaultValue', 'default_value', Type.Optional(Type.String({ maxLength: 1024 }))),
          source: Type.Optional(Type.Union([Type.Literal('DYNAMIC'), Type.Literal('ROUTE_ENTRY'), Type.Integer({ minimum: 0, maximum: 1 })])),
        },
        pairsOf([['descriptorKey', 'descriptor_key'], ['metadataKey', 'metadata_key'], ['defaultValue', 'default_value']]),
      ),
    ),
  },
  pairsOf([['sourceCluster', 'source_cluster'], ['destinationCluster', 'destination_cluster'], ['requestHeaders', 'request_headers'], ['remoteAddress', 'remote_address'], ['genericKey', 'generic_key'], ['headerValueMatch', 'header_value_match']]),
);

export const RateLimitActions = Strict(
  {
    actions: Type.Optional(Type.Array(RateLimitAction, { maxItems: 32 })),
    ...both('setActions', 'set_actions', Type.Optional(Type.Array(RateLimitAction, { maxItems: 32 }))),
    limit: Type.Optional(Strict({ ...both('dynamicMetadata', 'dynamic_metadata', Type.Optional(Strict({ ...both('metadataKey', 'metadata_key', Type.Optional(MetadataKey)) }, pairsOf([['metadataKey', 'metadata_key']])))) }, pairsOf([['dynamicMetadata', 'dynamic_metadata']]))),
  },
  pairsOf([['setActions', 'set_actions']]),
);

const Raw = Strict(
  {
    descriptors: Type.Optional(Type.Array(descriptor(1), { maxItems: 1024 })),
    ...both('rateLimits', 'rate_limits', Type.Optional(Type.Array(RateLimitActions, { maxItems: 256 }))),
    ...both('setDescriptors', 'set_descriptors', Type.Optional(Type.Array(SetDescriptor, { maxItems: 1024 }))),
  },
  pairsOf([['rateLimits', 'rate_limits'], ['setDescriptors', 'set_descriptors']]),
);

/** `spec` of a RateLimitConfig: one configuration type, `raw` (the only one Gloo defines). */
export const RateLimitConfigSpec = Strict({ raw: Raw }, exactlyOneOf(['raw']));
export type RateLimitConfigSpec = Type.Static<typeof RateLimitConfigSpec>;
