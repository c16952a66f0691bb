/**
 * Runs inside the isolate, before the plugin. Some V8 builtins cannot be interrupted: a plugin
 * calling `new Array(6e7).fill(1)` or `new Float64Array(8e6).sort()` ran past the CPU limit
 * (475 ms on the event loop against 50 ms) and past the memory limit (1.1 GB against 64 MB),
 * after which isolated-vm could not terminate the script ("Script failed to terminate"): the
 * process crashed (SIGSEGV) or hung on exit (issue 17 findings 5, 12, 16). Termination cannot
 * reach inside those builtins, so the sizes they work on are bounded before they start.
 *
 * Limits (docs/plugins.md): arrays of at most {@link MAX_ARRAY_LENGTH} elements for array
 * builtins, typed arrays and ArrayBuffers of at most {@link MAX_BUFFER_BYTES} bytes.
 */

/** Longest array an array builtin may work on, and the largest `Array(n)`. */
export const MAX_ARRAY_LENGTH = 1_000_000;
/** Largest ArrayBuffer (and so typed array) a plugin may create. */
export const MAX_BUFFER_BYTES = 8 * 1024 * 1024;

/** `native`, refusing receivers longer than `max` before it starts. */
function boundedMethod(native: (...args: unknown[]) => unknown, what: string, max: number, refuse: (what: string, n: number) => never): (...args: unknown[]) => unknown {
  const apply = Reflect.apply;
  return function (this: { length?: unknown } | null | undefined) {
    // eslint-disable-next-line prefer-rest-params
    if (this != null && (this.length as number) > max) refuse(what, this.length as number);
    // eslint-disable-next-line prefer-rest-params
    return apply(native, this, arguments);
  };
}

/** Installs the bounds on the isolate's globals. Call once, before any plugin code runs. */
export function boundBuiltins(): void {
  const { defineProperty, getOwnPropertyDescriptor, getPrototypeOf } = Object;
  const apply = Reflect.apply;
  const construct = Reflect.construct;
  const Range = RangeError;
  const NativeArray = Array;
  const NativeArrayBuffer = ArrayBuffer;

  const tooLong = (what: string, n: number): never => {
    throw new Range(`${what}: ${n} elements is over the sandbox limit of ${MAX_ARRAY_LENGTH}`);
  };
  const tooBig = (what: string, n: number): never => {
    throw new Range(`${what}: ${n} bytes is over the sandbox limit of ${MAX_BUFFER_BYTES}`);
  };
  const lengthOf = (value: unknown): number => {
    // `length` of an array-like; a getter that throws or lies is the caller's problem only up to the bound.
    const n = value !== null && (typeof value === 'object' || typeof value === 'function') ? Number((value as { length?: unknown }).length) : 0;
    return n === n ? n : 0;
  };
  // `X.from(arrayLike)` and `X.of(...items)` build an array of the input's length inside V8.
  const boundFromAndOf = (target: Record<string, unknown>, label: string): void => {
    for (const name of ['from', 'of'] as const) {
      const native = target[name] as (...args: unknown[]) => unknown;
      defineProperty(target, name, {
        value: {
          [name](this: unknown, ...args: unknown[]) {
            const n = name === 'of' ? args.length : lengthOf(args[0]);
            if (n > MAX_ARRAY_LENGTH) tooLong(`${label}.${name}`, n);
            return apply(native, this, args);
          },
        }[name],
        writable: true,
        configurable: true,
      });
    }
  };

  // Array(n) / new Array(n): the length alone makes later builtins slow.
  const BoundedArray: ArrayConstructor = new Proxy(NativeArray, {
    apply(target, self, args: unknown[]) {
      if (args.length === 1 && typeof args[0] === 'number' && args[0] > MAX_ARRAY_LENGTH) tooLong('Array(n)', args[0]);
      return apply(target, self, args);
    },
    construct(target, args: unknown[], newTarget): object {
      if (args.length === 1 && typeof args[0] === 'number' && args[0] > MAX_ARRAY_LENGTH) tooLong('new Array(n)', args[0]);
      return construct(target, args, newTarget === BoundedArray ? target : newTarget);
    },
  });
  // Only the global: replacing `Array.prototype.constructor` would invalidate V8's array species
  // protector and slow every array builtin in the isolate. `[].constructor(6e7)` still gives a
  // sparse array, which is harmless until a method walks it, and the methods are bounded below.
  defineProperty(globalThis, 'Array', { value: BoundedArray, writable: true, configurable: true });

  // Methods that walk the whole length inside V8 (holes included) or build an array of it.
  // Bounded through a cheap wrapper (`arguments` forwarding keeps V8's fast path).
  const proto = NativeArray.prototype as unknown as Record<string, unknown>;
  const walkers = ['fill', 'copyWithin', 'sort', 'reverse', 'join', 'toString', 'toLocaleString', 'toSorted', 'toReversed', 'toSpliced', 'with', 'flat', 'flatMap', 'map', 'filter', 'forEach', 'reduce', 'reduceRight', 'every', 'some', 'find', 'findIndex', 'findLast', 'findLastIndex', 'slice', 'splice', 'concat', 'indexOf', 'lastIndexOf', 'includes', 'unshift'];
  for (const name of walkers) {
    const descriptor = getOwnPropertyDescriptor(proto, name);
    if (!descriptor || typeof descriptor.value !== 'function') continue;
    defineProperty(proto, name, { ...descriptor, value: boundedMethod(descriptor.value as (...args: unknown[]) => unknown, `Array.prototype.${name}`, MAX_ARRAY_LENGTH, tooLong) });
  }
  // %TypedArray%.prototype: the same walks, bounded in elements of the view.
  const typedProto = (getPrototypeOf(Uint8Array) as { prototype: Record<string, unknown> }).prototype;
  for (const name of ['sort', 'fill', 'copyWithin', 'reverse', 'join', 'toSorted', 'toReversed', 'map', 'filter', 'slice', 'indexOf', 'lastIndexOf', 'includes']) {
    const descriptor = getOwnPropertyDescriptor(typedProto, name);
    if (!descriptor || typeof descriptor.value !== 'function') continue;
    defineProperty(typedProto, name, { ...descriptor, value: boundedMethod(descriptor.value as (...args: unknown[]) => unknown, `TypedArray.prototype.${name}`, MAX_ARRAY_LENGTH, tooLong) });
  }

  boundFromAndOf(NativeArray as unknown as Record<string, unknown>, 'Array');

  // ArrayBuffer: the one place typed-array memory comes from (SharedArrayBuffer is removed).
  const BoundedArrayBuffer: ArrayBufferConstructor = new Proxy(NativeArrayBuffer, {
    construct(target, args: unknown[], newTarget): object {
      const bytes = Number(args[0]);
      if (bytes > MAX_BUFFER_BYTES) tooBig('new ArrayBuffer(n)', bytes);
      const options = args[1] as { maxByteLength?: unknown } | undefined;
      if (options && typeof options === 'object' && Number(options.maxByteLength) > MAX_BUFFER_BYTES) tooBig('ArrayBuffer maxByteLength', Number(options.maxByteLength));
      return construct(target, args, newTarget === BoundedArrayBuffer ? target : newTarget);
    },
  });
  defineProperty(globalThis, 'ArrayBuffer', { value: BoundedArrayBuffer, writable: true, configurable: true });

  // Typed arrays allocate their own buffer from a length or an array-like: bounded in bytes.
  const TypedArray = getPrototypeOf(Uint8Array) as new (...args: unknown[]) => ArrayBufferView;
  const typedNames = ['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array', 'Float16Array'];
  for (const name of typedNames) {
    const Native = (globalThis as Record<string, unknown>)[name] as (new (...args: unknown[]) => ArrayBufferView) & { BYTES_PER_ELEMENT: number } | undefined;
    if (typeof Native !== 'function') continue;
    const size = Native.BYTES_PER_ELEMENT;
    const Bounded: object = new Proxy(Native, {
      construct(target, args: unknown[], newTarget): object {
        const first = args[0];
        const n = typeof first === 'number' ? first : first instanceof NativeArrayBuffer ? 0 : lengthOf(first);
        if (n * size > MAX_BUFFER_BYTES) tooBig(`new ${name}(n)`, n * size);
        return construct(target, args, newTarget === Bounded ? target : newTarget);
      },
    });
    defineProperty(globalThis, name, { value: Bounded, writable: true, configurable: true });
  }
  // TypedArray.from / of build from array-likes too.
  boundFromAndOf(TypedArray as unknown as Record<string, unknown>, 'TypedArray');

  // String.prototype.repeat / padStart / padEnd build one string of the asked size at once.
  const stringProto = String.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const MAX_STRING = 16 * 1024 * 1024;
  for (const name of ['repeat', 'padStart', 'padEnd'] as const) {
    const native = stringProto[name]!;
    defineProperty(stringProto, name, {
      value: {
        [name](this: unknown, ...args: unknown[]) {
          const size = name === 'repeat' ? String(this).length * Number(args[0]) : Number(args[0]);
          if (size > MAX_STRING) throw new Range(`String.prototype.${name}: ${size} characters is over the sandbox limit of ${MAX_STRING}`);
          return apply(native, this, args);
        },
      }[name],
      writable: true,
      configurable: true,
    });
  }
}
