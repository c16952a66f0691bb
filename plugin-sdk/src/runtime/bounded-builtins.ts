import { isTrackedProxy, trackProxies } from './proxy-registry.ts';

/**
 * Runs inside the isolate, before the plugin. Some V8 builtins cannot be interrupted: a plugin
 * calling `new Array(6e7).fill(1)` or `new Float64Array(8e6).sort()` ran past the CPU limit
 * (475 ms on the event loop against 50 ms) and past the memory limit (1.1 GB against 64 MB),
 * after which isolated-vm could not terminate the script ("Script failed to terminate"): the
 * process crashed (SIGSEGV) or hung on exit (issue 17 findings 5, 12, 16). Termination cannot
 * reach inside those builtins, so the sizes they work on are bounded before they start.
 *
 * The bound must see exactly what the builtin will see (issue 24 finding 1): a `length` getter
 * answered 0 to the check and 1.2e8 to `fill`, which then ran for seconds and took the process
 * down. So every value a check reads is read once, through a path the plugin cannot answer
 * twice, and the builtin gets that value or an object that cannot change it:
 * - a receiver's `length` is trusted only when it is an own data property of a genuine array,
 *   a string, or a data property found on a prototype chain without proxies; an accessor
 *   (other than the typed arrays' own native getter) or a proxy anywhere on the way is refused;
 * - numbers and strings passed to builtins (`new ArrayBuffer(n)`, `repeat(n)`, `padStart(n)`) are
 *   converted once here (one `valueOf`/`toString`) and the builtin gets the primitive;
 * - typed arrays are measured by their internal length (the native getter), never by a `length`
 *   property a plugin can shadow;
 * - array-likes that are not arrays get a lower bound: V8 walks them property by property.
 * Every native this file uses is captured before any plugin code runs: tampering with
 * `Object`, `Reflect`, `WeakSet` or the prototypes later changes nothing here.
 *
 * What JavaScript cannot bound (a string flattened from a rope the plugin built with `+`, a
 * builtin nobody knows yet) is left to the plugin process (docs/plugins.md "Plugin process").
 *
 * Limits (docs/plugins.md): arrays of at most {@link MAX_ARRAY_LENGTH} elements for array
 * builtins ({@link MAX_ARRAY_LIKE_LENGTH} for other array-likes), typed arrays and ArrayBuffers of
 * at most {@link MAX_BUFFER_BYTES} bytes, strings built by one builtin of at most {@link MAX_STRING_LENGTH}.
 */

/** Longest array an array builtin may work on, and the largest `Array(n)`. */
export const MAX_ARRAY_LENGTH = 1_000_000;
/** Longest array-like that is not an array (an object with a `length`) an array builtin may walk. */
export const MAX_ARRAY_LIKE_LENGTH = 65_536;
/** Largest ArrayBuffer (and so typed array) a plugin may create. */
export const MAX_BUFFER_BYTES = 8 * 1024 * 1024;
/** Longest array `sort`/`toSorted` sorts inside V8 without a comparator; longer ones get an interruptible JavaScript comparator with the same order. */
export const NATIVE_SORT_MAX = 10_000;
/** Longest string `repeat`, `padStart`, `padEnd`, `replace`, `replaceAll` and `join` may build. */
export const MAX_STRING_LENGTH = 16 * 1024 * 1024;

type AnyFunction = (...args: unknown[]) => unknown;

/** Installs the bounds on the isolate's globals. Call once, before any plugin code runs. */
export function boundBuiltins(): void {
  const { defineProperty, getOwnPropertyDescriptor, getPrototypeOf, hasOwn } = Object;
  const apply = Reflect.apply;
  const construct = Reflect.construct;
  const Range = RangeError;
  const Type = TypeError;
  const NativeArray = Array;
  const NativeArrayBuffer = ArrayBuffer;
  const NativeProxy = Proxy;
  const NativeNumber = Number;
  const NativeString = String;
  const isArray = NativeArray.isArray;
  const objectOf = Object;
  const trunc = Math.trunc;
  const stringIndexOf = String.prototype.indexOf as AnyFunction;
  const regExpExec = RegExp.prototype.exec as AnyFunction;
  const TypedArray = getPrototypeOf(Uint8Array) as { prototype: Record<string, unknown> } & Record<string, unknown>;
  const typedLengthGetter = getOwnPropertyDescriptor(TypedArray.prototype, 'length')!.get!;
  const typedByteLengthGetter = getOwnPropertyDescriptor(TypedArray.prototype, 'byteLength')!.get!;
  const bufferByteLengthGetter = getOwnPropertyDescriptor(NativeArrayBuffer.prototype, 'byteLength')!.get!;

  const tooLong = (what: string, n: number, max = MAX_ARRAY_LENGTH): never => {
    throw new Range(`${what}: ${n} elements is over the sandbox limit of ${max}`);
  };
  const tooBig = (what: string, n: number): never => {
    throw new Range(`${what}: ${n} bytes is over the sandbox limit of ${MAX_BUFFER_BYTES}`);
  };
  const tooManyCharacters = (what: string, n: number): never => {
    throw new Range(`${what}: ${n} characters is over the sandbox limit of ${MAX_STRING_LENGTH}`);
  };

  // Every proxy the plugin creates is known (./proxy-registry.ts): a proxy can answer each read differently.
  trackProxies(globalThis);
  const isProxy = isTrackedProxy;

  /** A genuine array (not a proxy of one): its `length` is an own data property the plugin cannot turn into a getter. */
  const isGenuineArray = (value: unknown): value is unknown[] => isArray(value) && !isProxy(value as object);
  /** A genuine typed array: its internal length, or undefined for anything else. */
  const typedLength = (value: unknown): number | undefined => {
    if (value === null || typeof value !== 'object' || isProxy(value)) return undefined;
    try {
      return apply(typedLengthGetter, value, []) as number;
    } catch {
      return undefined;
    }
  };
  const isArrayBuffer = (value: unknown): boolean => {
    if (value === null || typeof value !== 'object' || isProxy(value)) return false;
    try {
      apply(bufferByteLengthGetter, value, []);
      return true;
    } catch {
      return false;
    }
  };

  /**
   * The value V8's `Get(object, key)` will see, found without running plugin code: a data
   * property on a prototype chain without proxies. An accessor or a proxy on the way is refused
   * (`allowTypedLength`: the typed arrays' native `length` getter is the one accessor allowed).
   */
  const stableGet = (value: unknown, key: PropertyKey, what: string, allowTypedLength = false): unknown => {
    let object: object | null = objectOf(value);
    for (let depth = 0; object !== null; depth++) {
      if (depth > 10_000) throw new Type(`${what}: prototype chain too long`);
      if (isProxy(object)) throw new Type(`${what}: a Proxy cannot be used here in the sandbox (it may answer the size check and the builtin differently)`);
      const descriptor = getOwnPropertyDescriptor(object, key);
      if (descriptor) {
        // hasOwn, not `in`: an `Object.prototype.value` must not turn an accessor into data.
        if (hasOwn(descriptor, 'value')) return descriptor.value;
        if (allowTypedLength && descriptor.get === typedLengthGetter) return apply(typedLengthGetter, value, []);
        throw new Type(`${what}: ${NativeString(key)} is an accessor; the sandbox accepts only data properties here (an accessor may answer the size check and the builtin differently)`);
      }
      object = getPrototypeOf(object);
    }
    return undefined;
  };

  /** ToLength of a value that converts without running code; anything else is refused. */
  const plainLength = (raw: unknown, what: string): number => {
    if (raw === undefined) return 0;
    if (typeof raw !== 'number' && typeof raw !== 'string' && typeof raw !== 'boolean') throw new Type(`${what}: length must be a number`);
    const n = trunc(NativeNumber(raw));
    return n === n && n > 0 ? n : 0;
  };

  /**
   * The length a builtin will read from `receiver`, read once in a way it cannot answer twice,
   * and refused when over the bound for its kind.
   */
  const checkedLength = (receiver: unknown, what: string): number => {
    if (receiver === null || receiver === undefined) return 0; // the builtin throws its own TypeError
    if (typeof receiver === 'string') {
      if (receiver.length > MAX_ARRAY_LENGTH) tooLong(what, receiver.length);
      return receiver.length;
    }
    if (isGenuineArray(receiver)) {
      if (receiver.length > MAX_ARRAY_LENGTH) tooLong(what, receiver.length);
      return receiver.length;
    }
    const n = plainLength(stableGet(receiver, 'length', what, true), what);
    const max = typedLength(receiver) === undefined ? MAX_ARRAY_LIKE_LENGTH : MAX_ARRAY_LENGTH;
    if (n > max) tooLong(what, n, max);
    return n;
  };

  /** `native`, refusing receivers longer than the bound before it starts. */
  const boundedMethod = (native: AnyFunction, what: string): AnyFunction =>
    function (this: unknown) {
      checkedLength(this, what);
      // eslint-disable-next-line prefer-rest-params
      return apply(native, this, arguments);
    };

  /** Whether `Array.prototype.concat` spreads `value`, decided as V8 will (no code runs). */
  const spreads = (value: unknown, what: string): boolean => {
    if (value === null || typeof value !== 'object') return false;
    const flag = stableGet(value, Symbol.isConcatSpreadable, what);
    return flag !== undefined ? !!flag : isGenuineArray(value);
  };

  /**
   * What `X.from(source)` will copy, bounded: strings, arrays and typed arrays by their length; an
   * iterable is walked by JavaScript (`next()`), which the CPU limit interrupts; any other
   * array-like by a length read as {@link checkedLength} reads it.
   */
  const checkSource = (source: unknown, what: string): void => {
    if (source === null || source === undefined) return;
    if (typeof source === 'string' || isGenuineArray(source) || typedLength(source) !== undefined) {
      checkedLength(source, what);
      return;
    }
    if (typeof source !== 'object' && typeof source !== 'function') return;
    const iterator = stableGet(source, Symbol.iterator, what);
    if (iterator === undefined || iterator === null) checkedLength(source, what);
  };

  // `X.from(arrayLike)` and `X.of(...items)` build an array of the input's length inside V8.
  const boundFromAndOf = (target: Record<string, unknown>, label: string, elementBytes?: (self: unknown) => number): void => {
    for (const name of ['from', 'of'] as const) {
      const native = target[name] as AnyFunction;
      defineProperty(target, name, {
        value: {
          [name](this: unknown, ...args: unknown[]) {
            if (name === 'of') {
              if (args.length > MAX_ARRAY_LENGTH) tooLong(`${label}.of`, args.length);
            } else {
              checkSource(args[0], `${label}.from`);
            }
            const result = apply(native, this, args);
            if (elementBytes) {
              // From an iterable the size is known only afterwards; JavaScript produced it, so it stayed interruptible.
              const bytes = (typedLength(result) ?? 0) * elementBytes(result);
              if (bytes > MAX_BUFFER_BYTES) tooBig(`${label}.${name}`, bytes);
            }
            return result;
          },
        }[name],
        writable: true,
        configurable: true,
      });
    }
  };

  // Array(n) / new Array(n): the length alone makes later builtins slow.
  const BoundedArray: ArrayConstructor = new NativeProxy(NativeArray, {
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
  const walkers = ['fill', 'copyWithin', 'reverse', 'toString', 'toLocaleString', 'toReversed', 'toSpliced', 'with', 'map', 'filter', 'forEach', 'reduce', 'reduceRight', 'every', 'some', 'find', 'findIndex', 'findLast', 'findLastIndex', 'slice', 'splice', 'indexOf', 'lastIndexOf', 'includes', 'unshift', 'shift'];
  for (const name of walkers) {
    const descriptor = getOwnPropertyDescriptor(proto, name);
    if (!descriptor || typeof descriptor.value !== 'function') continue;
    defineProperty(proto, name, { ...descriptor, value: boundedMethod(descriptor.value as AnyFunction, `Array.prototype.${name}`) });
  }
  // sort / toSorted without a comparator compare inside V8 (a million numbers by their strings:
  // 1 s of CPU that termination cannot reach, measured). Past a few thousand elements they get a
  // comparator that does what the default does, in JavaScript, which the CPU limit interrupts.
  const toStr = NativeString;
  const defaultCompare = (x: unknown, y: unknown): number => {
    const a = toStr(x);
    const b = toStr(y);
    return a < b ? -1 : a > b ? 1 : 0;
  };
  for (const name of ['sort', 'toSorted'] as const) {
    const descriptor = getOwnPropertyDescriptor(proto, name);
    if (!descriptor || typeof descriptor.value !== 'function') continue;
    const native = descriptor.value as AnyFunction;
    const what = `Array.prototype.${name}`;
    defineProperty(proto, name, {
      ...descriptor,
      value: {
        [name](this: unknown, compare?: unknown) {
          const n = checkedLength(this, what);
          return apply(native, this, [compare === undefined && n > NATIVE_SORT_MAX ? defaultCompare : compare]);
        },
      }[name],
    });
  }
  // join: bounded in elements, and in the string it builds when its elements are strings.
  const nativeJoin = proto.join as AnyFunction;
  defineProperty(proto, 'join', {
    ...getOwnPropertyDescriptor(proto, 'join'),
    value: function join(this: unknown, separator?: unknown) {
      const n = checkedLength(this, 'Array.prototype.join');
      const sep = separator === undefined ? ',' : NativeString(separator);
      if (isGenuineArray(this)) {
        let size = n > 0 ? (n - 1) * sep.length : 0;
        for (let i = 0; i < n && size <= MAX_STRING_LENGTH; i++) {
          const item = this[i];
          if (typeof item === 'string') size += item.length;
        }
        if (size > MAX_STRING_LENGTH) tooManyCharacters('Array.prototype.join', size);
      }
      return apply(nativeJoin, this, [sep]);
    },
  });
  // concat: every argument it spreads counts, decided and measured as V8 will.
  const nativeConcat = proto.concat as AnyFunction;
  defineProperty(proto, 'concat', {
    ...getOwnPropertyDescriptor(proto, 'concat'),
    value: function concat(this: unknown, ...items: unknown[]) {
      let total = spreads(objectOf(this), 'Array.prototype.concat') ? checkedLength(this, 'Array.prototype.concat') : 1;
      // Index loops here and below: the array iterator is the plugin's to replace.
      for (let i = 0; i < items.length; i++) total += spreads(items[i], 'Array.prototype.concat') ? checkedLength(items[i], 'Array.prototype.concat') : 1;
      if (total > MAX_ARRAY_LENGTH) tooLong('Array.prototype.concat', total);
      return apply(nativeConcat, this, items);
    },
  });
  // flat / flatMap: the result's size is counted first (flatMap's callbacks are JavaScript).
  const nativeFlat = proto.flat as AnyFunction;
  defineProperty(proto, 'flat', {
    ...getOwnPropertyDescriptor(proto, 'flat'),
    value: function flat(this: unknown, depthArg?: unknown) {
      checkedLength(this, 'Array.prototype.flat');
      const depth = depthArg === undefined ? 1 : trunc(NativeNumber(depthArg)) || 0;
      // An explicit stack, stopping at the bound: a self-containing array cannot make this loop.
      const lists: unknown[] = [this];
      const levels: number[] = [depth];
      let top = 1;
      let total = 0;
      while (top > 0) {
        top--;
        const list = lists[top];
        const level = levels[top]!;
        const n = checkedLength(list, 'Array.prototype.flat');
        for (let i = 0; i < n; i++) {
          const item = (list as Record<number, unknown>)[i];
          if (level > 0 && item !== null && typeof item === 'object' && isArray(item)) {
            if (isProxy(item)) throw new Type('Array.prototype.flat: a Proxy cannot be flattened in the sandbox');
            // defineProperty, not assignment: an index setter on Array.prototype must not see it.
            defineProperty(lists, top, { value: item, writable: true, enumerable: true, configurable: true });
            defineProperty(levels, top, { value: level - 1, writable: true, enumerable: true, configurable: true });
            top++;
          } else if (++total > MAX_ARRAY_LENGTH) tooLong('Array.prototype.flat', total);
        }
      }
      return apply(nativeFlat, this, [depth]);
    },
  });
  const nativeFlatMap = proto.flatMap as AnyFunction;
  defineProperty(proto, 'flatMap', {
    ...getOwnPropertyDescriptor(proto, 'flatMap'),
    value: function flatMap(this: unknown, callback: AnyFunction, thisArg?: unknown) {
      checkedLength(this, 'Array.prototype.flatMap');
      // map (bounded) then flat (bounded): the same result, measured before it is built.
      if (typeof callback !== 'function') return apply(nativeFlatMap, this, [callback, thisArg]);
      const mapped = apply(proto.map as AnyFunction, this, [callback, thisArg]) as unknown[];
      return apply(proto.flat as AnyFunction, mapped, [1]);
    },
  });

  // %TypedArray%.prototype: the same walks, bounded by the view's internal length (a `length`
  // property the plugin defines on a view changes nothing V8 reads).
  const typedProto = TypedArray.prototype;
  /** The typed arrays' default order (numeric, NaN last, -0 before +0), in JavaScript (see sort above). */
  const numericCompare = (x: number | bigint, y: number | bigint): number => {
    if (x !== x) return y !== y ? 0 : 1;
    if (y !== y) return -1;
    if (x < y) return -1;
    if (x > y) return 1;
    if (x === 0 && y === 0 && typeof x === 'number' && typeof y === 'number') {
      const xNegative = 1 / x < 0;
      return xNegative === 1 / y < 0 ? 0 : xNegative ? -1 : 1;
    }
    return 0;
  };
  for (const name of ['sort', 'fill', 'copyWithin', 'reverse', 'join', 'toSorted', 'toReversed', 'map', 'filter', 'slice', 'indexOf', 'lastIndexOf', 'includes', 'set', 'subarray', 'with', 'toString', 'toLocaleString']) {
    const descriptor = getOwnPropertyDescriptor(typedProto, name);
    if (!descriptor || typeof descriptor.value !== 'function') continue;
    const native = descriptor.value as AnyFunction;
    const what = `TypedArray.prototype.${name}`;
    // Typed arrays hold at most MAX_BUFFER_BYTES: the walks stay within it. Sorting is the
    // slowest per element and gets the array bound.
    const max = name === 'sort' || name === 'toSorted' ? MAX_ARRAY_LENGTH : MAX_BUFFER_BYTES;
    defineProperty(typedProto, name, {
      ...descriptor,
      value: function (this: unknown) {
        const n = typedLength(this);
        if (n !== undefined && n > max) tooLong(what, n, max);
        // eslint-disable-next-line prefer-rest-params
        if ((name === 'sort' || name === 'toSorted') && arguments[0] === undefined && n !== undefined && n > NATIVE_SORT_MAX) return apply(native, this, [numericCompare]);
        // eslint-disable-next-line prefer-rest-params
        return apply(native, this, arguments);
      },
    });
  }

  boundFromAndOf(NativeArray as unknown as Record<string, unknown>, 'Array');

  /** ToIndex of a size argument, converted once: the builtin gets the number, not the object. */
  const sizeOf = (value: unknown): number => {
    const n = NativeNumber(value);
    return n === n ? trunc(n) : 0;
  };

  // ArrayBuffer: the one place typed-array memory comes from (SharedArrayBuffer is removed).
  const BoundedArrayBuffer: ArrayBufferConstructor = new NativeProxy(NativeArrayBuffer, {
    construct(target, args: unknown[], newTarget): object {
      const bytes = sizeOf(args[0]);
      if (bytes > MAX_BUFFER_BYTES) tooBig('new ArrayBuffer(n)', bytes);
      const options = args[1];
      let checked: unknown[] = [bytes];
      if (options !== null && typeof options === 'object') {
        const raw = stableGet(options, 'maxByteLength', 'new ArrayBuffer(n, options)');
        if (raw !== undefined) {
          const max = sizeOf(raw);
          if (max > MAX_BUFFER_BYTES) tooBig('ArrayBuffer maxByteLength', max);
          checked = [bytes, { maxByteLength: max }];
        }
      }
      return construct(target, checked, newTarget === BoundedArrayBuffer ? target : newTarget);
    },
  });
  defineProperty(globalThis, 'ArrayBuffer', { value: BoundedArrayBuffer, writable: true, configurable: true });
  // transfer(n) allocates a buffer of n bytes; resize(n) is bounded by maxByteLength already.
  const bufferProto = NativeArrayBuffer.prototype as unknown as Record<string, unknown>;
  for (const name of ['transfer', 'transferToFixedLength', 'slice']) {
    const descriptor = getOwnPropertyDescriptor(bufferProto, name);
    if (!descriptor || typeof descriptor.value !== 'function') continue;
    const native = descriptor.value as AnyFunction;
    defineProperty(bufferProto, name, {
      ...descriptor,
      value: function (this: unknown, ...args: unknown[]) {
        if (name !== 'slice' && args[0] !== undefined) {
          const bytes = sizeOf(args[0]);
          if (bytes > MAX_BUFFER_BYTES) tooBig(`ArrayBuffer.prototype.${name}(n)`, bytes);
          return apply(native, this, [bytes]);
        }
        return apply(native, this, args);
      },
    });
  }

  // Typed arrays allocate their own buffer from a length or an array-like: bounded in bytes. The
  // constructor gets what was measured: a number, a buffer, a typed array, a genuine array, or a
  // genuine array copied from anything else (iterables are walked by JavaScript here).
  const typedNames = ['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array', 'Float16Array'];
  const boundedFrom = (NativeArray as unknown as { from: AnyFunction }).from;
  for (const name of typedNames) {
    const Native = (globalThis as Record<string, unknown>)[name] as (new (...args: unknown[]) => ArrayBufferView) & { BYTES_PER_ELEMENT: number } | undefined;
    if (typeof Native !== 'function') continue;
    const size = Native.BYTES_PER_ELEMENT;
    const Bounded: object = new NativeProxy(Native, {
      construct(target, args: unknown[], newTarget): object {
        const first = args[0];
        const ctor = newTarget === Bounded ? target : newTarget;
        if (first === null || (typeof first !== 'object' && typeof first !== 'function')) {
          if (first === undefined) return construct(target, [], ctor);
          const n = sizeOf(first);
          if (n * size > MAX_BUFFER_BYTES) tooBig(`new ${name}(n)`, n * size);
          return construct(target, [n], ctor);
        }
        if (isArrayBuffer(first)) return construct(target, args, ctor);
        const viewLength = typedLength(first);
        if (viewLength !== undefined || isGenuineArray(first)) {
          const n = viewLength ?? (first as unknown[]).length;
          if (n * size > MAX_BUFFER_BYTES) tooBig(`new ${name}(n)`, n * size);
          return construct(target, [first], ctor);
        }
        // Anything else (array-like, iterable, proxy): copied into a genuine array first.
        const copy = apply(boundedFrom, NativeArray, [first]) as unknown[];
        if (copy.length * size > MAX_BUFFER_BYTES) tooBig(`new ${name}(n)`, copy.length * size);
        return construct(target, [copy], ctor);
      },
    });
    defineProperty(globalThis, name, { value: Bounded, writable: true, configurable: true });
  }
  // TypedArray.from / of build from array-likes too.
  boundFromAndOf(TypedArray, 'TypedArray', (view) => {
    try {
      return (apply(typedByteLengthGetter, view, []) as number) / (apply(typedLengthGetter, view, []) as number || 1);
    } catch {
      return 0;
    }
  });

  // Strings: the builtins that build one string of a computed size get their inputs converted
  // once (a `toString` or `valueOf` runs once) and refuse a result over the bound.
  const stringProto = String.prototype as unknown as Record<string, AnyFunction>;
  const thisString = (value: unknown, what: string): string => {
    if (value === null || value === undefined) throw new Type(`${what} called on null or undefined`);
    return NativeString(value);
  };
  for (const name of ['repeat', 'padStart', 'padEnd'] as const) {
    const native = stringProto[name]!;
    defineProperty(stringProto, name, {
      value: {
        [name](this: unknown, ...args: unknown[]) {
          const self = thisString(this, `String.prototype.${name}`);
          const count = sizeOf(args[0]);
          const size = name === 'repeat' ? self.length * count : count;
          if (size > MAX_STRING_LENGTH) tooManyCharacters(`String.prototype.${name}`, size);
          if (name === 'repeat') return apply(native, self, [count]);
          return apply(native, self, [count, args[1] === undefined ? undefined : NativeString(args[1])]);
        },
      }[name],
      writable: true,
      configurable: true,
    });
  }
  // replace / replaceAll with a replacement string: at most one replacement per match, each at
  // most the replacement's length, or the whole input more for `$\``, `$'` and `$&`. A function
  // replacement (or a pattern object with its own Symbol.replace) runs JavaScript per match,
  // which the CPU limit interrupts, and is left to the engine.
  const regExpSource = getOwnPropertyDescriptor(RegExp.prototype, 'source')!.get!;
  const regExpFlagGetters = (['hasIndices', 'global', 'ignoreCase', 'multiline', 'dotAll', 'unicode', 'unicodeSets', 'sticky'] as const)
    .map((flag) => [flag, getOwnPropertyDescriptor(RegExp.prototype, flag)?.get] as const)
    .filter((entry): entry is readonly [typeof entry[0], () => boolean] => typeof entry[1] === 'function');
  const FLAG_LETTERS: Record<string, string> = { hasIndices: 'd', global: 'g', ignoreCase: 'i', multiline: 'm', dotAll: 's', unicode: 'u', unicodeSets: 'v', sticky: 'y' };
  const NativeRegExp = RegExp;
  /** A global copy of a genuine RegExp from its internal source and flags (getters it cannot answer twice), or undefined. */
  const globalCopy = (value: unknown): RegExp | undefined => {
    if (value === null || typeof value !== 'object' || isProxy(value)) return undefined;
    try {
      const source = apply(regExpSource, value, []) as string;
      let flags = 'g';
      for (let i = 0; i < regExpFlagGetters.length; i++) {
        const flag = regExpFlagGetters[i]![0];
        if (flag !== 'global' && flag !== 'sticky' && apply(regExpFlagGetters[i]![1], value, [])) flags += FLAG_LETTERS[flag];
      }
      return new NativeRegExp(source, flags);
    } catch {
      return undefined;
    }
  };
  /**
   * How many times `pattern` matches `text`, counted by a JavaScript loop (the CPU limit holds)
   * up to `enough` (past it the answer is already "too many").
   */
  const countMatches = (text: string, pattern: string | RegExp, enough: number): number => {
    let count = 0;
    if (typeof pattern === 'string') {
      if (pattern.length === 0) return text.length + 1;
      for (let at = apply(stringIndexOf, text, [pattern]) as number; at !== -1 && count < enough; at = apply(stringIndexOf, text, [pattern, at + pattern.length]) as number) count++;
      return count;
    }
    // The native exec on a regex of our own: no iterator or `exec` the plugin could have replaced.
    while (count < enough) {
      const match = apply(regExpExec, pattern, [text]) as (string[] & { index: number }) | null;
      if (match === null) return count;
      count++;
      if (match[0]!.length === 0) pattern.lastIndex = match.index + 1;
    }
    return count;
  };
  for (const name of ['replace', 'replaceAll'] as const) {
    const native = stringProto[name]!;
    defineProperty(stringProto, name, {
      value: {
        [name](this: unknown, pattern: unknown, replacement: unknown) {
          if (typeof replacement === 'function' || this === null || this === undefined) return apply(native, this, [pattern, replacement]);
          const self = NativeString(this);
          const text = NativeString(replacement);
          const per = text.length + ((apply(stringIndexOf, text, ['$']) as number) !== -1 ? self.length : 0);
          const regex = globalCopy(pattern);
          let measured: string | RegExp;
          let usePattern: unknown = pattern;
          if (regex) measured = regex;
          else if (pattern !== null && (typeof pattern === 'object' || typeof pattern === 'function') && stableGet(pattern, Symbol.replace, `String.prototype.${name}`) != null) return apply(native, self, [pattern, text]);
          else measured = usePattern = NativeString(pattern);
          // Worst case first (every match replaced, as if global); count only when that is too much.
          if (self.length + (self.length + 1) * per > MAX_STRING_LENGTH) {
            const once = name === 'replace' && typeof measured === 'string';
            const size = self.length + (once ? 1 : countMatches(self, measured, trunc((MAX_STRING_LENGTH - self.length) / per) + 1)) * per;
            if (size > MAX_STRING_LENGTH) tooManyCharacters(`String.prototype.${name}`, size);
          }
          return apply(native, self, [usePattern, text]);
        },
      }[name],
      writable: true,
      configurable: true,
    });
  }
  // split: an array of up to one element per character; the engine stops at a limit.
  const nativeSplit = stringProto.split!;
  defineProperty(stringProto, 'split', {
    value: function split(this: unknown, separator: unknown, limit?: unknown) {
      if (this === null || this === undefined) return apply(nativeSplit, this, [separator, limit]);
      const self = NativeString(this);
      const max = limit === undefined ? 2 ** 32 - 1 : NativeNumber(limit) >>> 0;
      if (self.length < MAX_ARRAY_LENGTH || max <= MAX_ARRAY_LENGTH) return apply(nativeSplit, self, [separator, limit === undefined ? undefined : max]);
      const parts = apply(nativeSplit, self, [separator, MAX_ARRAY_LENGTH + 1]) as unknown[];
      if (parts.length > MAX_ARRAY_LENGTH) tooLong('String.prototype.split', parts.length);
      return parts;
    },
    writable: true,
    configurable: true,
  });
}
