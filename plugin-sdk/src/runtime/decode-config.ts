/**
 * Go `json.Unmarshal`-like decoding of a step's `config` onto the object a plugin's
 * `NewConfigInstance` returned (SPEC 5.2). Runs inside the sandbox (bundled into the host's
 * isolate runtime) and in the test kit's in-process mode, so both behave the same.
 * Self-contained on purpose: no imports.
 *
 * Rules (docs/plugins.md, "Config decoding"):
 * - an object with fields is a struct: each key sets the field of the same name, matched
 *   exactly first and then case-insensitively (as Go does); a key that matches no field is an
 *   error (Go ignores it; here a typo must not silently weaken auth);
 * - an empty object is a map: any keys, values taken as they are;
 * - a field holding a string, number or boolean accepts only that JSON type;
 * - a field holding an array is replaced by the given array (elements taken as they are);
 * - a field holding `null` or `undefined` accepts any JSON value;
 * - JSON `null` leaves a field unchanged (Go's rule for non-pointer fields).
 */
export class ConfigDecodeError extends Error {
  /** Field path, e.g. `config.AllowedValues`. */
  readonly path: string;

  constructor(path: string, message: string) {
    super(`${path}: ${message}`);
    this.name = 'ConfigDecodeError';
    this.path = path;
  }
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value}`;
}

function isPlainData(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Decodes `value` onto `target` and returns the result (`target` itself, mutated, when it is an object). */
export function decodeConfig(target: unknown, value: unknown, path = 'config'): unknown {
  if (value === undefined) return target;
  if (target === null || target === undefined) return value;
  if (value === null) return target;
  if (Array.isArray(target)) {
    if (!Array.isArray(value)) throw new ConfigDecodeError(path, `expected an array, got ${describe(value)}`);
    return value;
  }
  if (typeof target === 'object') {
    if (Array.isArray(value) && Object.keys(target as object).length === 0) {
      // A Go port's `[]string` field initialised as `{}`: say what the empty object means.
      const field = path.slice(path.lastIndexOf('.') + 1);
      throw new ConfigDecodeError(path, `expected an object, got an array (NewConfigInstance returned {} for ${field}, and an empty object decodes as a map; if ${field} is a list, initialise it as ${field}: [])`);
    }
    if (!isPlainData(value)) throw new ConfigDecodeError(path, `expected an object, got ${describe(value)}`);
    decodeObject(target as Record<string, unknown>, value, path);
    return target;
  }
  if (typeof value !== typeof target) throw new ConfigDecodeError(path, `expected ${describe(target)}, got ${describe(value)}`);
  return value;
}

function decodeObject(target: Record<string, unknown>, value: Record<string, unknown>, path: string): void {
  const fields = Object.keys(target);
  for (const key of Object.keys(value)) {
    const child = `${path}.${key}`;
    if (fields.length === 0) {
      // A map: defineProperty so that a key such as `__proto__` stays an ordinary key.
      Object.defineProperty(target, key, { value: value[key], enumerable: true, writable: true, configurable: true });
      continue;
    }
    const field = fields.includes(key) ? key : fields.find((name) => name.toLowerCase() === key.toLowerCase());
    if (field === undefined) throw new ConfigDecodeError(child, `unknown field; the plugin's config has ${fields.join(', ')}`);
    target[field] = decodeConfig(target[field], value[key], child);
  }
}
