/**
 * HTML's `structuredClone` for the sandbox (SPEC 5.3), in plain JavaScript: primitives, plain
 * objects and arrays (own enumerable string keys), Boolean/Number/String/BigInt wrappers, Date,
 * RegExp, Map, Set, ArrayBuffer, typed arrays, DataView and the built-in Errors, with shared and
 * cyclic references preserved, and `transfer` of ArrayBuffers. What a value is comes from brand
 * checks (a built-in getter or method that throws on any other receiver), as V8's serializer
 * reads internal slots, never from `Symbol.toStringTag`, which a plugin can spoof: a class
 * instance that calls itself a Map clones as a plain object, as in Node. Functions, symbols,
 * Proxies, Promises, WeakMaps and other objects with internal slots throw a `DataCloneError`.
 * Runs inside the isolate; ./structured-clone.test.ts holds it to Node's own.
 */

import { isTrackedProxy } from '../proxy-registry.ts';

/** Nesting deeper than this throws instead of overflowing the stack uncatchably. */
const MAX_DEPTH = 2048;
const toTag = Object.prototype.toString;
const { keys, getPrototypeOf, getOwnPropertyDescriptor } = Object;
const uncurry =
  <T extends (...args: never[]) => unknown>(f: T) =>
  (self: unknown, ...args: Parameters<T>): ReturnType<T> =>
    Reflect.apply(f, self, args) as ReturnType<T>;
const getter = (proto: object, name: PropertyKey) => uncurry(getOwnPropertyDescriptor(proto, name)!.get!);

// Brand checks, captured before any plugin code runs: each throws for a receiver of another kind.
const booleanValue = uncurry(Boolean.prototype.valueOf);
const numberValue = uncurry(Number.prototype.valueOf);
const stringValue = uncurry(String.prototype.valueOf);
const bigintValue = uncurry(BigInt.prototype.valueOf);
const symbolValue = uncurry(Symbol.prototype.valueOf);
const dateValue = uncurry(Date.prototype.getTime);
const regexpSource = getter(RegExp.prototype, 'source');
const regexpFlags = getter(RegExp.prototype, 'flags');
const bufferLength = getter(ArrayBuffer.prototype, 'byteLength');
const bufferSlice = uncurry(ArrayBuffer.prototype.slice);
const bufferTransfer = uncurry((ArrayBuffer.prototype as unknown as { transfer: () => ArrayBuffer }).transfer);
const bufferDetached = getter(ArrayBuffer.prototype, 'detached') as (b: unknown) => boolean;
const sharedLength = typeof SharedArrayBuffer === 'function' ? getter(SharedArrayBuffer.prototype, 'byteLength') : undefined;
const viewLength = getter(DataView.prototype, 'byteLength');
const viewOffset = getter(DataView.prototype, 'byteOffset');
const viewBuffer = getter(DataView.prototype, 'buffer');
const TypedArrayPrototype = getPrototypeOf(Uint8Array.prototype) as object;
const typedName = getter(TypedArrayPrototype, Symbol.toStringTag) as (v: unknown) => string | undefined;
const typedLength = getter(TypedArrayPrototype, 'length');
const typedOffset = getter(TypedArrayPrototype, 'byteOffset');
const typedBuffer = getter(TypedArrayPrototype, 'buffer');
const mapSize = getter(Map.prototype, 'size');
const setSize = getter(Set.prototype, 'size');
const mapEntries = uncurry(Map.prototype.entries);
const setValues = uncurry(Set.prototype.values);
const weakMapHas = uncurry(WeakMap.prototype.has);
const weakSetHas = uncurry(WeakSet.prototype.has);
const weakRefDeref = typeof WeakRef === 'function' ? uncurry(WeakRef.prototype.deref) : undefined;
const registryUnregister = typeof FinalizationRegistry === 'function' ? uncurry(FinalizationRegistry.prototype.unregister) : undefined;
const promiseThen = uncurry(Promise.prototype.then);
const isError = (Error as { isError?: (v: unknown) => boolean }).isError ?? ((v: unknown) => toTag.call(v) === '[object Error]');
const isArray = Array.isArray;
const noop = (): void => {};
// Objects whose prototype chain holds one of these have internal slots V8 will not serialise.
const UNCLONEABLE_PROTOTYPES: object[] = [
  getPrototypeOf(getPrototypeOf([][Symbol.iterator]())) as object, // %IteratorPrototype%: array, map, set, string, regexp iterators, generators
  getPrototypeOf(async function* () {}.prototype) as object, // %AsyncGeneratorPrototype%
];

const TYPED: Record<string, new (buffer: ArrayBuffer, offset: number, length: number) => ArrayBufferView> = {
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
  ...((typeof (globalThis as { Float16Array?: unknown }).Float16Array === 'function' ? { Float16Array: (globalThis as unknown as { Float16Array: never }).Float16Array } : {}) as Record<string, never>),
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

/** Whether `brand(v)` accepts `v` (does not throw). */
function is(brand: ((v: unknown, ...rest: never[]) => unknown) | undefined, v: unknown, ...rest: unknown[]): boolean {
  if (!brand) return false;
  try {
    (brand as (v: unknown, ...rest: unknown[]) => unknown)(v, ...rest);
    return true;
  } catch {
    return false;
  }
}

/** Whether `v` is an object V8's serializer refuses: a Promise, WeakMap, WeakSet, WeakRef, FinalizationRegistry, iterator, generator or arguments object. */
function hasUncloneableSlots(v: object): boolean {
  if (is(weakMapHas, v, v) || is(weakSetHas, v, v) || is(weakRefDeref, v) || is(registryUnregister, v, v)) return true;
  // Promise.prototype.then brand-checks first; on a real promise it only adds a reaction that does nothing.
  if (is(promiseThen, v, noop, noop)) return true;
  for (let proto = getPrototypeOf(v); proto !== null; proto = getPrototypeOf(proto)) {
    if (UNCLONEABLE_PROTOTYPES.includes(proto)) return true;
  }
  // Arguments objects have no brand check; their built-in tag is "Arguments" when nothing overrides it.
  return toTag.call(v) === '[object Arguments]' && !(Symbol.toStringTag in v);
}

/** `structuredClone`'s options: ArrayBuffers in `transfer` are moved (detached here) rather than copied. */
export interface StructuredSerializeOptions {
  transfer?: readonly unknown[];
}

/**
 * A deep copy of `value` by HTML's structured clone rules. ArrayBuffers in `transfer` are
 * detached once the whole value has cloned (a failed clone leaves them as they were); the copy
 * holds their bytes, which is all a plugin can observe of a move.
 */
export function structuredClone<T>(value: T, options?: StructuredSerializeOptions): T {
  const transfer = options?.transfer;
  const buffers: unknown[] = [];
  if (transfer !== undefined && transfer !== null) {
    let i = 0;
    for (const item of transfer as Iterable<unknown>) {
      if ((typeof item !== 'object' && typeof item !== 'function') || item === null) throw new TypeError(`Failed to execute 'structuredClone': transfer in Options[${i}] is not an object.`);
      if (!is(bufferLength, item)) throw dataCloneError(`${describe(item)} could not be transferred.`);
      if (buffers.includes(item)) throw dataCloneError('Transfer list contains duplicate ArrayBuffer');
      if (bufferDetached(item)) throw dataCloneError('An ArrayBuffer is detached and could not be cloned.');
      buffers.push(item);
      i++;
    }
  }
  const result = cloneValue(value);
  for (const buffer of buffers) bufferTransfer(buffer);
  return result as T;
}

function cloneValue(value: unknown): unknown {
  const memory = new Map<object, unknown>();
  const clone = (v: unknown, depth: number): unknown => {
    if (typeof v === 'symbol' || typeof v === 'function') throw dataCloneError(`${describe(v)} could not be cloned.`);
    if (typeof v !== 'object' || v === null) return v;
    const seen = memory.get(v);
    if (seen !== undefined || memory.has(v)) return seen;
    if (depth > MAX_DEPTH) throw dataCloneError(`the value is nested deeper than ${MAX_DEPTH} levels`);
    if (isTrackedProxy(v)) throw dataCloneError('#<Object> could not be cloned.');
    const remember = <R>(out: R): R => {
      memory.set(v, out);
      return out;
    };
    if (isArray(v)) {
      const array = v as unknown[];
      const out = remember(new Array<unknown>(array.length));
      for (const key of keys(array)) (out as unknown as Record<string, unknown>)[key] = clone((array as unknown as Record<string, unknown>)[key], depth + 1);
      return out;
    }
    const typed = typedName(v);
    if (typed !== undefined) {
      const Typed = TYPED[typed];
      if (!Typed) throw dataCloneError(`#<${typed}> could not be cloned.`);
      return remember(new Typed(clone(typedBuffer(v), depth + 1) as ArrayBuffer, typedOffset(v) as number, typedLength(v) as number));
    }
    if (is(bufferLength, v)) {
      if (bufferDetached(v)) throw dataCloneError('An ArrayBuffer is detached and could not be cloned.');
      return remember(bufferSlice(v, 0));
    }
    if (is(viewLength, v)) return remember(new DataView(clone(viewBuffer(v), depth + 1) as ArrayBuffer, viewOffset(v) as number, viewLength(v) as number));
    if (is(booleanValue, v)) return remember(new Boolean(booleanValue(v)));
    if (is(numberValue, v)) return remember(new Number(numberValue(v)));
    if (is(stringValue, v)) return remember(new String(stringValue(v)));
    if (is(bigintValue, v)) return remember(Object(bigintValue(v)));
    if (is(dateValue, v)) return remember(new Date(dateValue(v)));
    // RegExp.prototype answers `source` without being a RegExp; V8 clones it as a plain object.
    if (v !== RegExp.prototype && is(regexpSource, v)) return remember(new RegExp(regexpSource(v) as string, regexpFlags(v) as string));
    if (is(mapSize, v)) {
      const out = remember(new Map());
      for (const [k, x] of mapEntries(v) as Iterable<[unknown, unknown]>) out.set(clone(k, depth + 1), clone(x, depth + 1));
      return out;
    }
    if (is(setSize, v)) {
      const out = remember(new Set());
      for (const x of setValues(v) as Iterable<unknown>) out.add(clone(x, depth + 1));
      return out;
    }
    if (isError(v)) {
      const error = v as Error;
      const name = String(error.name);
      const Type = ERRORS[name] ?? Error;
      const out = remember(new Type(String(error.message)));
      if (typeof error.stack === 'string') Object.defineProperty(out, 'stack', { value: error.stack, writable: true, configurable: true });
      if (Object.hasOwn(error, 'cause')) Object.defineProperty(out, 'cause', { value: clone(error.cause, depth + 1), writable: true, configurable: true });
      return out;
    }
    if (is(symbolValue, v) || is(sharedLength, v) || hasUncloneableSlots(v)) {
      const tag = toTag.call(v);
      throw dataCloneError(tag === '[object Object]' || tag === '[object Arguments]' ? '#<Object> could not be cloned.' : `${tag} could not be cloned.`);
    }
    // Any other object is an ordinary one (a class instance included): its own enumerable string keys, as V8 writes them.
    const out = remember({} as Record<string, unknown>);
    for (const key of keys(v)) out[key] = clone((v as Record<string, unknown>)[key], depth + 1);
    return out;
  };
  return clone(value, 0);
}
