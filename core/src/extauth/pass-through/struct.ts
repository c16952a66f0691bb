/**
 * JSON values as `google.protobuf.Struct` messages in @grpc/proto-loader's object form, for
 * `metadata_context.filter_metadata`: the loader has no JSON mapping for well-known types, so
 * a Struct is spelled out field by field. protobufjs defines the well-known types itself, with
 * camelCase field names (`stringValue`), which `keepCase` keeps.
 */
export type ValueMessage =
  | { nullValue: 0 }
  | { numberValue: number }
  | { stringValue: string }
  | { boolValue: boolean }
  | { structValue: StructMessage }
  | { listValue: { values: ValueMessage[] } };

export interface StructMessage {
  fields: Record<string, ValueMessage>;
}

/** `object` as a Struct; values that JSON cannot hold (undefined, functions) are left out, as JSON.stringify does. */
export function toStruct(object: Readonly<Record<string, unknown>>): StructMessage {
  const fields: Record<string, ValueMessage> = {};
  for (const [key, value] of Object.entries(object)) {
    const converted = toValue(value);
    if (converted) fields[key] = converted;
  }
  return { fields };
}

function toValue(value: unknown): ValueMessage | undefined {
  if (value === null) return { nullValue: 0 };
  switch (typeof value) {
    case 'number':
      return Number.isFinite(value) ? { numberValue: value } : { nullValue: 0 };
    case 'string':
      return { stringValue: value };
    case 'boolean':
      return { boolValue: value };
    case 'object':
      if (Array.isArray(value)) return { listValue: { values: value.map((item) => toValue(item) ?? { nullValue: 0 }) } };
      return { structValue: toStruct(value as Record<string, unknown>) };
    default:
      return undefined;
  }
}

/** A Struct as decoded by @grpc/proto-loader (`oneofs: true` adds a `kind` naming the set field) back to JSON. */
export function fromStruct(struct: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const fields = (struct as { fields?: Record<string, unknown> } | undefined)?.fields;
  if (fields && typeof fields === 'object') for (const [key, value] of Object.entries(fields)) out[key] = fromValue(value);
  return out;
}

function fromValue(value: unknown): unknown {
  if (!value || typeof value !== 'object') return null;
  const v = value as Record<string, unknown>;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.numberValue !== undefined) return v.numberValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.structValue !== undefined) return fromStruct(v.structValue);
  if (v.listValue !== undefined) return ((v.listValue as { values?: unknown[] }).values ?? []).map(fromValue);
  return null;
}
