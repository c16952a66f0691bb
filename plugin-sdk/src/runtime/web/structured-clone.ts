/**
 * HTML's `structuredClone` (without transfer) for the sandbox (SPEC 5.3), in plain JavaScript:
 * primitives, plain objects and arrays (own enumerable string keys), Boolean/Number/String/BigInt
 * wrappers, Date, RegExp, Map, Set, ArrayBuffer, typed arrays, DataView and the built-in Errors,
 * with shared and cyclic references preserved. Functions, symbols, Promises, WeakMaps and other
 * uncloneable values throw a `DataCloneError`. Runs inside the isolate; ./structured-clone.test.ts
 * holds it to Node's own.
 */

/** Nesting deeper than this throws instead of overflowing the stack uncatchably. */
const MAX_DEPTH = 2048;
const toTag = Object.prototype.toString;
const { keys } = Object;
const TYPED: Record<string, new (buffer: ArrayBuffer, offset: number, length: number) => ArrayBufferView> = {
  '[object Int8Array]': Int8Array,
  '[object Uint8Array]': Uint8Array,
  '[object Uint8ClampedArray]': Uint8ClampedArray,
  '[object Int16Array]': Int16Array,
  '[object Uint16Array]': Uint16Array,
  '[object Int32Array]': Int32Array,
  '[object Uint32Array]': Uint32Array,
  '[object Float32Array]': Float32Array,
  '[object Float64Array]': Float64Array,
  '[object BigInt64Array]': BigInt64Array,
  '[object BigUint64Array]': BigUint64Array,
};
const ERRORS: Record<string, ErrorConstructor> = { Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError };

function dataCloneError(message: string): Error {
  const error = new Error(message);
  error.name = 'DataCloneError';
  return error;
}

function describe(value: unknown): string {
  try {
    return typeof value === 'symbol' ? value.toString() : typeof value === 'function' ? String(value) : toTag.call(value);
  } catch {
    return 'value';
  }
}

/** A deep copy of `value` by HTML's structured clone rules. */
export function structuredClone<T>(value: T, _options?: unknown): T {
  const memory = new Map<object, unknown>();
  const clone = (v: unknown, depth: number): unknown => {
    if (typeof v === 'symbol' || typeof v === 'function') throw dataCloneError(`${describe(v)} could not be cloned.`);
    if (typeof v !== 'object' || v === null) return v;
    const seen = memory.get(v);
    if (seen !== undefined || memory.has(v)) return seen;
    if (depth > MAX_DEPTH) throw dataCloneError(`the value is nested deeper than ${MAX_DEPTH} levels`);
    const tag = toTag.call(v);
    const remember = <R>(out: R): R => {
      memory.set(v, out);
      return out;
    };
    switch (tag) {
      case '[object Boolean]':
        return remember(new Boolean((v as Boolean).valueOf()));
      case '[object Number]':
        return remember(new Number((v as Number).valueOf()));
      case '[object String]':
        return remember(new String((v as String).valueOf()));
      case '[object BigInt]':
        return remember(Object((v as unknown as bigint).valueOf()));
      case '[object Date]':
        return remember(new Date((v as Date).getTime()));
      case '[object RegExp]':
        return remember(new RegExp((v as RegExp).source, (v as RegExp).flags));
      case '[object ArrayBuffer]':
        return remember((v as ArrayBuffer).slice(0));
      case '[object DataView]': {
        const view = v as DataView;
        return remember(new DataView(clone(view.buffer, depth + 1) as ArrayBuffer, view.byteOffset, view.byteLength));
      }
      case '[object Map]': {
        const out = remember(new Map());
        for (const [k, x] of v as Map<unknown, unknown>) out.set(clone(k, depth + 1), clone(x, depth + 1));
        return out;
      }
      case '[object Set]': {
        const out = remember(new Set());
        for (const x of v as Set<unknown>) out.add(clone(x, depth + 1));
        return out;
      }
      case '[object Error]': {
        const error = v as Error;
        const name = String(error.name);
        const Type = ERRORS[name] ?? Error;
        const out = remember(new Type(String(error.message)));
        if (typeof error.stack === 'string') Object.defineProperty(out, 'stack', { value: error.stack, writable: true, configurable: true });
        if (Object.hasOwn(error, 'cause')) Object.defineProperty(out, 'cause', { value: clone(error.cause, depth + 1), writable: true, configurable: true });
        return out;
      }
      case '[object Array]': {
        const array = v as unknown[];
        const out = remember(new Array<unknown>(array.length));
        for (const key of keys(array)) (out as unknown as Record<string, unknown>)[key] = clone((array as unknown as Record<string, unknown>)[key], depth + 1);
        return out;
      }
      case '[object Object]': {
        const out = remember({} as Record<string, unknown>);
        for (const key of keys(v)) out[key] = clone((v as Record<string, unknown>)[key], depth + 1);
        return out;
      }
      default: {
        const Typed = TYPED[tag];
        if (Typed) {
          const view = v as ArrayBufferView & { length: number };
          return remember(new Typed(clone(view.buffer, depth + 1) as ArrayBuffer, view.byteOffset, view.length));
        }
        throw dataCloneError(`${tag === '[object Object]' ? '#<Object>' : `#<${tag.slice(8, -1)}>`} could not be cloned.`);
      }
    }
  };
  return clone(value, 0) as T;
}
