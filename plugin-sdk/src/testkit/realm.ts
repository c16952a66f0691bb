import vm from 'node:vm';

/**
 * Values crossing between the test process and a plugin's `node:vm` context are copied, as
 * isolated-vm copies them between the host and an isolate: the plugin only ever holds objects
 * of its own realm (a host `Uint8Array` or `Promise` would fail `instanceof` there, and its
 * `constructor.constructor` would be the host's `Function`, a way out to `process`).
 */
export interface Realm {
  Object: ObjectConstructor;
  Array: ArrayConstructor;
  Uint8Array: Uint8ArrayConstructor;
  Promise: PromiseConstructor;
  errors: Record<string, ErrorConstructor>;
}

/** The context's own constructors, captured before anything (the runtime, the plugin) can replace them. */
export function realmOf(context: vm.Context): Realm {
  return vm.runInContext(
    '({ Object, Array, Uint8Array, Promise, errors: { Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError } })',
    context,
  ) as Realm;
}

/** This process's own constructors. */
export const HOST_REALM: Realm = { Object, Array, Uint8Array, Promise, errors: { Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError } };

const toString = Object.prototype.toString;
const MAX_DEPTH = 64;

/** A deep copy of plain data (primitives, arrays, plain objects, byte arrays) made of `realm`'s objects. */
export function copyInto(value: unknown, realm: Realm, depth = 0): unknown {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return value;
  if (typeof value === 'function') return undefined;
  if (depth > MAX_DEPTH) throw new realm.errors.RangeError!('value nested too deeply to copy');
  if (ArrayBuffer.isView(value)) {
    const view = value as ArrayBufferView;
    return new realm.Uint8Array(new Uint8Array(view.buffer, view.byteOffset, view.byteLength));
  }
  if (toString.call(value) === '[object ArrayBuffer]') return new realm.Uint8Array(new Uint8Array(value as ArrayBuffer)).buffer;
  if (Array.isArray(value)) {
    const out = new realm.Array();
    for (const item of value) out.push(copyInto(item, realm, depth + 1));
    return out;
  }
  const out = new realm.Object() as Record<string, unknown>;
  for (const key of Object.keys(value)) {
    Object.defineProperty(out, key, { value: copyInto((value as Record<string, unknown>)[key], realm, depth + 1), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** An error of `realm` with the same name (for the standard types) and message. */
export function errorInto(error: unknown, realm: Realm): Error {
  const name = (error as { name?: unknown } | null)?.name;
  const Type = (typeof name === 'string' && realm.errors[name]) || realm.errors.Error!;
  return new Type(String((error as { message?: unknown } | null)?.message ?? error));
}

/**
 * A host function as the plugin's realm should see it: arguments copied into this process,
 * results (and promises of results) copied into the plugin's realm, errors rethrown as the
 * plugin realm's own errors. Like an isolated-vm `Callback`.
 */
export function bridge<A extends unknown[], R>(fn: (...args: A) => R, realm: Realm): (...args: unknown[]) => unknown {
  return (...args: unknown[]) => {
    let result: unknown;
    try {
      result = fn(...(args.map((arg) => copyInto(arg, HOST_REALM)) as A));
    } catch (error) {
      throw errorInto(error, realm);
    }
    if (result instanceof Promise) {
      return new realm.Promise((resolve, reject) => {
        result.then(
          (value: unknown) => resolve(copyInto(value, realm)),
          (error: unknown) => reject(errorInto(error, realm)),
        );
      });
    }
    return copyInto(result, realm);
  };
}
