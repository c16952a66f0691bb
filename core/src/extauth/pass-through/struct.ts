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
