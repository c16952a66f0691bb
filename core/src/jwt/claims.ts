/** A claim by name: the top-level member of that name, else (with a delimiter) the nested path it spells. */
export function claimValue(payload: Readonly<Record<string, unknown>>, name: string, delimiter: string | undefined): unknown {
  if (Object.hasOwn(payload, name)) return payload[name];
  if (!delimiter || !name.includes(delimiter)) return undefined;
  let value: unknown = payload;
  for (const part of name.split(delimiter)) {
    if (!value || typeof value !== 'object' || Array.isArray(value) || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** Characters Node refuses in a header value (it would throw when the request goes upstream). */
const BAD_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const MAX_HEADER_VALUE = 8192;

/**
 * A claim as a header value, as Envoy's claim_to_headers writes it: strings as they are,
 * numbers and booleans in JSON, arrays of those joined with `,`. Anything else, or a value that
 * cannot be a header (control characters, over 8 KiB), is left out (undefined).
 */
export function claimHeaderValue(value: unknown): string | undefined {
  let text: string | undefined;
  if (typeof value === 'string') text = value;
  else if (typeof value === 'number' || typeof value === 'boolean') text = String(value);
  else if (Array.isArray(value) && value.every((v) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean')) text = value.join(',');
  if (text === undefined || text.length > MAX_HEADER_VALUE || BAD_HEADER_VALUE.test(text)) return undefined;
  return text;
}
