import Type, { type TProperties, type TSchemaOptions } from 'typebox';

/** A closed object: unknown fields are validation errors (SPEC 2.4). */
export function Strict<P extends TProperties>(properties: P, options: TSchemaOptions = {}) {
  return Type.Object(properties, { ...options, additionalProperties: false });
}

/**
 * Exactly one of `keys` must be set. Kept as plain JSON Schema (`oneOf` of `required`)
 * because that form is also legal in a Kubernetes structural CRD schema.
 */
export function exactlyOneOf(keys: readonly string[]): TSchemaOptions {
  return { oneOf: keys.map((key) => ({ required: [key] })), 'x-gatehouse-one-of': keys };
}

/** At most one of `keys` may be set. */
export function atMostOneOf(keys: readonly string[]): TSchemaOptions {
  return { not: { anyOf: pairs(keys).map((pair) => ({ required: pair })) }, 'x-gatehouse-at-most-one-of': keys };
}

function pairs(keys: readonly string[]): string[][] {
  const out: string[][] = [];
  for (let i = 0; i < keys.length; i++) for (let j = i + 1; j < keys.length; j++) out.push([keys[i]!, keys[j]!]);
  return out;
}

/**
 * A Gloo field accepted but not applied: loading a resource that sets it gives a warning naming
 * the field with `reason` (config/checks/ignored-fields.ts), never silence (SPEC 2.4).
 */
export function Ignored<S extends object>(schema: S, reason: string): S {
  return { ...schema, 'x-gatehouse-ignored': reason };
}

/** Any JSON value (a Gloo message Gatehouse only accepts, never reads). */
export const AnyValue = Type.Unknown();

export const Name = Type.String({ minLength: 1, maxLength: 253, pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' });

/** `{name, namespace}`; a missing namespace means the referring resource's namespace (SPEC 2.3). */
export const ResourceRef = Strict(
  {
    name: Name,
    namespace: Type.Optional(Name),
  },
  // Marks references for schema-guided walks (config/options-refs.ts qualifies them with a namespace).
  { 'x-gatehouse-ref': true },
);
export type ResourceRef = Type.Static<typeof ResourceRef>;

/**
 * Durations as Envoy/Gloo users write them: `15s`, `1.5s`, `250ms`, `1m`, and Go's compound form
 * (`1m2s`, `1h30m`) that Gloo's protobuf JSON reader (golang/protobuf jsonpb, `time.ParseDuration`)
 * takes and its HTTP connection manager guide prints.
 */
export const Duration = Type.String({ pattern: '^(?:[0-9]+(?:\\.[0-9]+)?(?:ms|s|m|h)){1,4}$', description: 'a duration such as 15s, 1.5s or 250ms' });

/** Milliseconds in a duration string already checked against {@link Duration} (the parts add up). */
export function durationMs(value: string): number {
  if (!/^(?:[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h)){1,4}$/.test(value)) throw new TypeError(`not a duration: ${value}`);
  let ms = 0;
  for (const [, amount, unit] of value.matchAll(/([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)/g)) ms += Number(amount) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit as 'ms' | 's' | 'm' | 'h'];
  return Math.round(ms);
}

/**
 * Kubernetes object metadata. Fields the API server fills in are allowed (and ignored)
 * so that `kubectl get -o yaml` output loads unchanged.
 */
export const Metadata = Strict({
  name: Name,
  namespace: Type.Optional(Name),
  labels: Type.Optional(Type.Record(Type.String(), Type.String())),
  // `annotations:` with nothing under it (null), as Gloo's session-affinity guide prints a discovered Upstream.
  annotations: Type.Optional(Type.Union([Type.Record(Type.String(), Type.String()), Type.Null()])),
  uid: Type.Optional(Type.String()),
  resourceVersion: Type.Optional(Type.String()),
  generation: Type.Optional(Type.Integer()),
  creationTimestamp: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  managedFields: Type.Optional(Type.Array(Type.Unknown())),
  ownerReferences: Type.Optional(Type.Array(Type.Unknown())),
  finalizers: Type.Optional(Type.Array(Type.String())),
  selfLink: Type.Optional(Type.String()),
  deletionTimestamp: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  deletionGracePeriodSeconds: Type.Optional(Type.Integer()),
  generateName: Type.Optional(Type.String()),
});
