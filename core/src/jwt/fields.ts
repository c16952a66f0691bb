/**
 * Gloo's protojson accepts a field by its camelCase name or its proto snake_case name: the
 * value under either (camelCase first). Map keys (provider, policy and claim names) are data
 * and never renamed.
 */
export function field<T = unknown>(object: unknown, camel: string): T | undefined {
  if (!object || typeof object !== 'object') return undefined;
  const o = object as Record<string, unknown>;
  if (o[camel] !== undefined) return o[camel] as T;
  const snake = camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  return o[snake] as T | undefined;
}

/** The name `camel` is written under in `object` (for field paths in diagnostics). */
export function fieldName(object: unknown, camel: string): string {
  if (object && typeof object === 'object' && (object as Record<string, unknown>)[camel] === undefined) {
    const snake = camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    if ((object as Record<string, unknown>)[snake] !== undefined) return snake;
  }
  return camel;
}
