/**
 * The sandbox's `WebAssembly` (SPEC 5.3): V8's own, behind a wrapper that keeps Wasm linear
 * memory inside the isolate's memory limit. V8 allocates linear memory outside the JS heap,
 * so isolated-vm's `memoryLimit` does not see it (measured: a 32 MB isolate grew one memory to
 * 4 GB); the wrapper gives every memory a maximum so that all live memories of the isolate
 * together reserve at most the Wasm budget (the step's `memoryLimitMb`).
 *
 * - A module's own (defined) memories are turned into imports when it is compiled (the binary
 *   is rewritten: the memory section goes, one import per memory is added), and each
 *   instantiation creates them through the budgeted `Memory`: a module instantiated twice
 *   reserves twice.
 * - `Memory` reserves its maximum (a memory declared without one gets what is left of the
 *   budget); past it, `memory.grow` answers -1 and `Memory.prototype.grow` throws a RangeError,
 *   as with any maximum. A reservation is returned when its memory is garbage collected.
 * - Compiling and instantiating are synchronous, inside the plugin's own call and its CPU limit
 *   (`compile`/`instantiate` answer settled promises): no compile task runs after a call.
 * - Tables are budgeted the same way, in entries (8 bytes each on the V8 heap): all tables of the
 *   isolate together may reach an eighth of the memory limit. V8 has no graceful failure for a
 *   table grown past the heap limit: the whole process aborts (measured), so the bound must hold
 *   before V8 allocates.
 * - Shared and 64-bit memories and tables are refused (shared memory brings `Atomics.wait`).
 * Runs inside the isolate.
 */

/** Bytes of one Wasm page. */
const PAGE = 65536;
/** Largest module binary accepted: the sandbox's ArrayBuffer bound (compiled code lives outside the JS heap too). */
export const MAX_WASM_MODULE_BYTES = 8 * 1024 * 1024;
/** The import module name the rewritten modules take their memories from. */
export const WASM_MEMORY_IMPORT = 'gatehouse:memory';

// Captured when the runtime loads, before any plugin code: the rewrite below decides what Wasm
// memory a module may have, so nothing it reads may be answered by the plugin (a plugin that
// emptied `Array.prototype[Symbol.iterator]` made the destructuring here read no sections, and
// its module ran unbudgeted: 5-7 s of CPU growing memory, found by the plugin-host fuzz test).
// No iteration protocol, no array or typed-array methods, no prototype getters: index loops,
// own `length`s of arrays this file made, and the typed arrays' native length getter.
const NativeUint8Array = Uint8Array;
const typedArrayLength = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype) as object, 'length')!.get!;
const applyNative = Reflect.apply;
const floorOf = Math.floor;
const toNumber = Number;
const setPrototypeOf = Object.setPrototypeOf;
const ownKeys = Object.keys;
const weakGet = WeakMap.prototype.get;
const weakSet = WeakMap.prototype.set;
/** `map.get(key)` and `map.set(key, value)` by the native methods (a plugin may replace WeakMap.prototype's). */
const getOf = <K extends object, V>(map: WeakMap<K, V>, key: K): V | undefined => applyNative(weakGet, map, [key]) as V | undefined;
const setIn = <K extends object, V>(map: WeakMap<K, V>, key: K, value: V): void => void applyNative(weakSet, map, [key, value]);
/**
 * A list of this file's own: no prototype, so `out[out.length] = x` stores `x` whatever the
 * plugin defined on `Array.prototype`'s indexes (a setter at '0' that stores nothing emptied
 * every list here: the rewrite saw no sections and the module ran with its own, unbudgeted
 * memory; plugin-host fuzz, seed 1333816398).
 */
const list = <T>(...items: T[]): T[] => setPrototypeOf(items, null) as T[];
/** A typed array's length by V8's own getter (a plugin may shadow `length` on the prototype). */
const lengthOf = (bytes: Uint8Array): number => applyNative(typedArrayLength, bytes, []) as number;
/** Appends `values` to `out` by index. */
const append = (out: number[], values: ArrayLike<number>, count = values.length): void => {
  for (let i = 0; i < count; i++) out[out.length] = values[i]!;
};

/** The parts of V8's `WebAssembly` namespace the wrapper uses (the sandbox's lib has no Wasm typings). */
export interface WasmNamespace {
  Module: WasmModuleConstructor;
  Instance: new (module: object, imports?: object) => object;
  Memory: new (descriptor: { initial: number; maximum?: number }) => object;
  Table: unknown;
  Global: unknown;
  CompileError: new (message?: string) => Error;
  LinkError: new (message?: string) => Error;
  RuntimeError: new (message?: string) => Error;
  validate(bytes: Uint8Array): boolean;
  Tag?: unknown;
  Exception?: unknown;
}
interface WasmModuleConstructor {
  new (bytes: Uint8Array): object;
  prototype: object;
}
declare namespace WebAssembly {
  type Module = object;
  type Instance = object;
  type Memory = object;
  type Imports = object;
  type MemoryDescriptor = { initial: number; maximum?: number };
}

/** A parsed `limits` of the memory section. */
interface Limits {
  initial: number;
  maximum: number | undefined;
}

class ParseError extends Error {}

/** The offset after the last {@link leb} read (a second return value without an array to destructure). */
let lebNext = 0;

/** Reads an unsigned LEB128 (up to 32 bits) at `at` of a module `length` bytes long; answers the value, the next offset in {@link lebNext}. */
function leb(bytes: Uint8Array, at: number, length: number): number {
  let value = 0;
  let shift = 0;
  for (let i = at; i < length && i < at + 5; i++) {
    const byte = bytes[i]!;
    value += (byte & 0x7f) * 2 ** shift;
    if ((byte & 0x80) === 0) {
      lebNext = i + 1;
      return value;
    }
    shift += 7;
  }
  throw new ParseError('bad LEB128');
}

/** Appends `value` as an unsigned LEB128 to `out`. */
function appendLeb(out: number[], value: number): void {
  let rest = value;
  do {
    let byte = rest % 128;
    rest = floorOf(rest / 128);
    if (rest > 0) byte |= 0x80;
    out[out.length] = byte;
  } while (rest > 0);
}

/** Appends an ASCII name, length first, to `out`. */
function appendName(out: number[], text: string): void {
  appendLeb(out, text.length);
  for (let i = 0; i < text.length; i++) out[out.length] = text.charCodeAt(i) & 0x7f;
}

/** What {@link rewriteModule} made of a module: its new binary, its memories' limits, its tables' clamped maximums. */
export interface RewrittenModule {
  bytes: Uint8Array;
  /** The module's own memories, now imports (`gatehouse:memory`, `memory0`…), in order. */
  memories: Limits[];
  /** Entries the module's own tables may hold (their maximums, clamped to `tableCap`), together. */
  tableEntries: number;
}

/** Reads a signed LEB128 heap type (GC proposal reference types); answers the next offset. */
function skipLeb(bytes: Uint8Array, at: number, length: number): number {
  for (let i = at; i < length && i < at + 10; i++) if ((bytes[i]! & 0x80) === 0) return i + 1;
  throw new ParseError('bad LEB128');
}

/**
 * Rewrites a module binary for the sandbox's budgets: its defined memories become imports
 * (`gatehouse:memory`, `memory0`, `memory1`, … in definition order, after its own imported
 * memories, so memory indices keep their meaning), and its defined tables get a maximum of at
 * most `tableCap` entries, 65,536 more than its initial size when it declares none (a table is
 * a V8 heap object: one grown past the heap limit in one allocation is a fatal out-of-memory
 * error for the whole process, not a catchable one: measured with isolated-vm). Answers
 * undefined when the module defines neither. Throws {@link ParseError} for a binary it cannot
 * frame, and a message for what the sandbox refuses (shared or 64-bit memories, 64-bit tables,
 * tables with initializer expressions, a table whose initial size is over `tableCap`).
 */
export function rewriteModule(bytes: Uint8Array, tableCap: number): RewrittenModule | undefined {
  const length = lengthOf(bytes);
  if (length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) throw new ParseError('not a Wasm binary');
  // Sections as flat quadruples: id, start, end, body.
  const sections: number[] = list();
  let at = 8;
  while (at < length) {
    const id = bytes[at]!;
    const size = leb(bytes, at + 1, length);
    const body = lebNext;
    const end = body + size;
    if (end > length) throw new ParseError('section past the end');
    sections[sections.length] = id;
    sections[sections.length] = at;
    sections[sections.length] = end;
    sections[sections.length] = body;
    at = end;
  }
  /** The index in `sections` of the first section with `id`, or -1. */
  const find = (id: number): number => {
    for (let i = 0; i < sections.length; i += 4) if (sections[i] === id) return i;
    return -1;
  };
  const memory = find(5);
  const table = find(4);
  if (memory < 0 && table < 0) return undefined;
  const memories: Limits[] = list();
  if (memory >= 0) {
    const count = leb(bytes, sections[memory + 3]!, length);
    let p = lebNext;
    for (let i = 0; i < count; i++) {
      const flags = bytes[p++];
      if (flags !== 0 && flags !== 1) throw new Error(`the plugin sandbox runs no shared or 64-bit Wasm memories (memory ${i} has limits flags 0x${(flags ?? 0).toString(16)})`);
      const initial = leb(bytes, p, length);
      p = lebNext;
      let maximum: number | undefined;
      if (flags === 1) {
        maximum = leb(bytes, p, length);
        p = lebNext;
      }
      memories[memories.length] = { initial, maximum };
    }
    if (p !== sections[memory + 2]) throw new ParseError('memory section size');
  }
  let tableSection: number[] | undefined;
  let tableEntries = 0;
  if (table >= 0) {
    const count = leb(bytes, sections[table + 3]!, length);
    let p = lebNext;
    const payload: number[] = list();
    appendLeb(payload, count);
    for (let i = 0; i < count; i++) {
      const typeStart = p;
      if (bytes[p] === 0x40) throw new Error(`the plugin sandbox runs no Wasm tables with initializer expressions (table ${i})`);
      // A reference type: one byte, or 0x63/0x64 and a heap type.
      p = bytes[p] === 0x63 || bytes[p] === 0x64 ? skipLeb(bytes, p + 1, length) : p + 1;
      const typeEnd = p;
      const flags = bytes[p++];
      if (flags !== 0 && flags !== 1) throw new Error(`the plugin sandbox runs no shared or 64-bit Wasm tables (table ${i} has limits flags 0x${(flags ?? 0).toString(16)})`);
      const initial = leb(bytes, p, length);
      p = lebNext;
      let maximum: number | undefined;
      if (flags === 1) {
        maximum = leb(bytes, p, length);
        p = lebNext;
      }
      if (initial > tableCap) throw new RangeError(`Wasm table ${i} starts with ${initial} entries: the plugin sandbox allows at most ${tableCap} (the step's memory limit)`);
      // Without a declared maximum a table may grow by 65,536 entries (the budget is for all tables of all instances).
      const wanted = maximum ?? initial + 65536;
      const clamped = wanted < tableCap ? wanted : tableCap;
      tableEntries += clamped;
      for (let b = typeStart; b < typeEnd; b++) payload[payload.length] = bytes[b]!;
      payload[payload.length] = 0x01;
      appendLeb(payload, initial);
      appendLeb(payload, clamped);
    }
    if (p !== sections[table + 2]) throw new ParseError('table section size');
    tableSection = list(4);
    appendLeb(tableSection, payload.length);
    append(tableSection, payload);
  }
  // The output as flat ranges: [source start, source end] of `bytes`, or -1 and an index into `inserts`.
  const ranges: number[] = list();
  const inserts: number[][] = list();
  let from = 0;
  /** Copies the bytes up to `until`, then `insert`, and continues after `skipTo`. */
  const splice = (until: number, insert: number[], skipTo: number): void => {
    ranges[ranges.length] = from;
    ranges[ranges.length] = until;
    ranges[ranges.length] = -1;
    ranges[ranges.length] = inserts.length;
    inserts[inserts.length] = insert;
    from = skipTo;
  };
  if (memories.length > 0) {
    const entries: number[] = list();
    for (let i = 0; i < memories.length; i++) {
      const limits = memories[i]!;
      appendName(entries, WASM_MEMORY_IMPORT);
      appendName(entries, `memory${i}`);
      entries[entries.length] = 0x02;
      // The import's own limits: the instance's memory must fit them (it does: made from them).
      entries[entries.length] = limits.maximum === undefined ? 0x00 : 0x01;
      appendLeb(entries, limits.initial);
      if (limits.maximum !== undefined) appendLeb(entries, limits.maximum);
    }
    const imports = find(2);
    const payload: number[] = list();
    let section: number[];
    if (imports >= 0) {
      const existing = leb(bytes, sections[imports + 3]!, length);
      appendLeb(payload, existing + memories.length);
      for (let b = lebNext; b < sections[imports + 2]!; b++) payload[payload.length] = bytes[b]!;
      append(payload, entries);
      section = list(2);
      appendLeb(section, payload.length);
      append(section, payload);
      splice(sections[imports + 1]!, section, sections[imports + 2]!);
    } else {
      // Section order: the import section follows the type section (custom sections may sit anywhere).
      const type = find(1);
      const after = type >= 0 ? sections[type + 2]! : 8;
      appendLeb(payload, memories.length);
      append(payload, entries);
      section = list(2);
      appendLeb(section, payload.length);
      append(section, payload);
      splice(after, section, after);
    }
  }
  if (table >= 0 && tableSection) splice(sections[table + 1]!, tableSection, sections[table + 2]!);
  if (memory >= 0 && memories.length > 0) splice(sections[memory + 1]!, list(), sections[memory + 2]!);
  ranges[ranges.length] = from;
  ranges[ranges.length] = length;
  let total = 0;
  for (let i = 0; i < ranges.length; i += 2) total += ranges[i] === -1 ? inserts[ranges[i + 1]!]!.length : ranges[i + 1]! - ranges[i]!;
  const out = new NativeUint8Array(total);
  let offset = 0;
  for (let i = 0; i < ranges.length; i += 2) {
    if (ranges[i] === -1) {
      const insert = inserts[ranges[i + 1]!]!;
      for (let b = 0; b < insert.length; b++) out[offset++] = insert[b]!;
    } else {
      for (let b = ranges[i]!; b < ranges[i + 1]!; b++) out[offset++] = bytes[b]!;
    }
  }
  return { bytes: out, memories, tableEntries };
}

/**
 * Builds the sandbox's `WebAssembly` namespace over V8's (`native`), with `budgetPages` Wasm
 * pages for all memories together. The originals stay in this closure: prototypes' `constructor`
 * point at the wrappers, so no plugin code reaches an unbudgeted constructor.
 */
export function createWebAssembly(native: WasmNamespace, budgetMb: number): WasmNamespace {
  const { Module: NativeModule, Instance: NativeInstance, Memory: NativeMemory } = native;
  const NativeTable = native.Table as new (descriptor: object, value?: unknown) => object;
  const instanceExports = Object.getOwnPropertyDescriptor((NativeInstance as { prototype: object }).prototype, 'exports')!.get!;
  const { freeze, defineProperty, create } = Object;
  const isView = ArrayBuffer.isView;
  const budgetPages = Math.max(0, Math.floor((budgetMb * 1024 * 1024) / PAGE));
  /** Table entries all tables of the isolate may hold: 8 bytes each on the heap, kept to an eighth of the limit (growing copies). */
  const budgetEntries = Math.max(0, Math.floor((budgetMb * 1024 * 1024) / 64));
  let reserved = 0;
  let reservedEntries = 0;
  /** What a rewritten module needs per instantiation. */
  const moduleNeeds = new WeakMap<object, { memories: Limits[]; tableEntries: number }>();
  // Reservations come back when their memory or table is collected (a cleanup task of our own code only).
  const registry = typeof FinalizationRegistry === 'function' ? new FinalizationRegistry<number>((pages) => (reserved -= pages)) : undefined;
  const tableRegistry = typeof FinalizationRegistry === 'function' ? new FinalizationRegistry<number>((entries) => (reservedEntries -= entries)) : undefined;
  /** An exported table keeps its instance (whose reservation covers it) alive. */
  const keepInstance = new WeakMap<object, object>();

  const copyBytes = (source: unknown, what: string): Uint8Array => {
    let view: Uint8Array;
    if (source instanceof ArrayBuffer) view = new NativeUint8Array(source);
    else if (isView(source)) view = new NativeUint8Array(source.buffer, source.byteOffset, source.byteLength);
    else throw new TypeError(`${what}: Argument 0 must be a buffer source`);
    // A copy: the plugin cannot change the bytes between the check and the compile; its length
    // read by V8's own getter.
    const copy = new NativeUint8Array(view);
    if (lengthOf(copy) > MAX_WASM_MODULE_BYTES) throw new RangeError(`${what}: a Wasm module in the plugin sandbox is at most ${MAX_WASM_MODULE_BYTES} bytes (this one has ${lengthOf(copy)})`);
    return copy;
  };

  /** A budgeted native Memory. */
  const newMemory = (descriptor: unknown, what: string): WebAssembly.Memory => {
    if (typeof descriptor !== 'object' || descriptor === null) throw new TypeError(`${what}: Argument 0 must be a memory descriptor`);
    const d = descriptor as { initial?: unknown; minimum?: unknown; maximum?: unknown; shared?: unknown; address?: unknown; index?: unknown };
    if (d.shared) throw new TypeError(`${what}: the plugin sandbox has no shared Wasm memory`);
    if ((d.address !== undefined && d.address !== 'i32') || (d.index !== undefined && d.index !== 'i32')) throw new TypeError(`${what}: the plugin sandbox has no 64-bit Wasm memory`);
    const initial = toNumber(d.initial ?? d.minimum);
    const declared = d.maximum === undefined ? undefined : toNumber(d.maximum);
    const left = budgetPages - reserved;
    // V8's own TypeError, from the value read here: the plugin's descriptor could answer V8 differently.
    if (!(initial >= 0)) return new NativeMemory({ initial, maximum: 0 });
    if (initial > left) {
      throw new RangeError(`${what}: could not allocate memory: ${initial} pages (${(initial * PAGE) / 1048576} MB) is more than the ${left} pages left of the plugin's Wasm memory budget (memoryLimitMb ${budgetMb})`);
    }
    const maximum = declared === undefined || !(declared <= left) ? left : declared;
    if (declared !== undefined && declared < initial) return new NativeMemory({ initial, maximum: declared }); // V8's own RangeError
    const memory = new NativeMemory({ initial, maximum });
    reserved += maximum;
    registry?.register(memory, maximum);
    return memory;
  };

  /** A budgeted native Table: its maximum (the budget's rest when it declares none) is reserved. */
  const newTable = (descriptor: unknown, value: unknown[], what: string): object => {
    if (typeof descriptor !== 'object' || descriptor === null) throw new TypeError(`${what}: Argument 0 must be a table descriptor`);
    const d = descriptor as { element?: unknown; initial?: unknown; minimum?: unknown; maximum?: unknown; address?: unknown; index?: unknown };
    if ((d.address !== undefined && d.address !== 'i32') || (d.index !== undefined && d.index !== 'i32')) throw new TypeError(`${what}: the plugin sandbox has no 64-bit Wasm tables`);
    const initial = toNumber(d.initial ?? d.minimum);
    const declared = d.maximum === undefined ? undefined : toNumber(d.maximum);
    const left = budgetEntries - reservedEntries;
    if (!(initial >= 0)) return new NativeTable({ element: d.element, initial, maximum: 0 }, ...value); // V8's own TypeError, as for Memory
    if (initial > left) throw new RangeError(`${what}: could not allocate a table of ${initial} entries: ${left} are left of the plugin's Wasm table budget (memoryLimitMb ${budgetMb})`);
    if (declared !== undefined && declared < initial) return new NativeTable({ element: d.element, initial, maximum: declared }, ...value); // V8's own RangeError
    const maximum = declared === undefined || !(declared <= left) ? left : declared;
    const table = new NativeTable({ element: d.element, initial, maximum }, ...value);
    reservedEntries += maximum;
    tableRegistry?.register(table, maximum);
    return table;
  };

  const compileSync = (source: unknown, what: string): WebAssembly.Module => {
    const bytes = copyBytes(source, what);
    let rewritten: ReturnType<typeof rewriteModule>;
    try {
      rewritten = rewriteModule(bytes, budgetEntries);
    } catch (error) {
      if (!(error instanceof ParseError)) throw new native.CompileError(`${what}: ${(error as Error).message}`);
      // A binary this framing cannot read: V8 must reject it too (its CompileError says why).
      new NativeModule(bytes);
      throw new native.CompileError(`${what}: the module could not be read`);
    }
    const module = new NativeModule(rewritten ? rewritten.bytes : bytes);
    if (rewritten) setIn(moduleNeeds, module, { memories: rewritten.memories, tableEntries: rewritten.tableEntries });
    return module;
  };

  const instantiateSync = (module: WebAssembly.Module, importObject: unknown): WebAssembly.Instance => {
    const needs = getOf(moduleNeeds, module);
    if (!needs) return new NativeInstance(module, importObject as WebAssembly.Imports);
    if (importObject !== undefined && (typeof importObject !== 'object' || importObject === null)) throw new TypeError('WebAssembly.Instance(): Argument 1 must be an object');
    const { memories, tableEntries } = needs;
    if (tableEntries > budgetEntries - reservedEntries) {
      throw new RangeError(`WebAssembly.Instance(): the module's tables may hold ${tableEntries} entries: ${budgetEntries - reservedEntries} are left of the plugin's Wasm table budget (memoryLimitMb ${budgetMb})`);
    }
    let imports = importObject;
    if (memories.length > 0) {
      const created: Record<string, WebAssembly.Memory> = create(null) as Record<string, WebAssembly.Memory>;
      for (let i = 0; i < memories.length; i++) created[`memory${i}`] = newMemory(memories[i], 'WebAssembly.Instance()');
      // The plugin's imports stay where V8 looks them up (through the prototype); ours are added.
      imports = create((importObject ?? null) as object | null) as Record<string, unknown>;
      defineProperty(imports, WASM_MEMORY_IMPORT, { value: created, enumerable: true });
    }
    const instance = new NativeInstance(module, imports as WebAssembly.Imports);
    if (tableEntries > 0) {
      reservedEntries += tableEntries;
      tableRegistry?.register(instance, tableEntries);
      // Exported tables keep the instance, so the reservation lasts as long as they do. Read with
      // V8's own getter and no iteration protocol (a plugin may have replaced both by now).
      const exports = applyNative(instanceExports, instance, []) as Record<string, unknown>;
      const names = ownKeys(exports);
      for (let i = 0; i < names.length; i++) {
        const value = exports[names[i]!];
        if (value instanceof NativeTable) setIn(keepInstance, value, instance);
      }
    }
    return instance;
  };

  function Module(this: unknown, bytes: unknown): WebAssembly.Module {
    if (!new.target) throw new TypeError("WebAssembly.Module must be invoked with 'new'");
    return compileSync(bytes, 'WebAssembly.Module()');
  }
  function Instance(this: unknown, module: unknown, importObject?: unknown): WebAssembly.Instance {
    if (!new.target) throw new TypeError("WebAssembly.Instance must be invoked with 'new'");
    return instantiateSync(module as WebAssembly.Module, importObject);
  }
  function Memory(this: unknown, descriptor: unknown): WebAssembly.Memory {
    if (!new.target) throw new TypeError("WebAssembly.Memory must be invoked with 'new'");
    return newMemory(descriptor, 'WebAssembly.Memory()');
  }
  function Table(this: unknown, descriptor: unknown, ...value: unknown[]): object {
    if (!new.target) throw new TypeError("WebAssembly.Table must be invoked with 'new'");
    return newTable(descriptor, value.slice(0, 1), 'WebAssembly.Table()');
  }
  for (const [wrapper, original] of [
    [Module, NativeModule],
    [Instance, NativeInstance],
    [Memory, NativeMemory],
    [Table, NativeTable],
  ] as const) {
    defineProperty(wrapper, 'prototype', { value: original.prototype });
    // `x.constructor` must lead to the wrapper, never to V8's unbudgeted constructor.
    defineProperty(original.prototype, 'constructor', { value: wrapper, writable: true, configurable: true });
  }
  for (const name of ['exports', 'imports', 'customSections'] as const) {
    defineProperty(Module, name, { value: (NativeModule as unknown as Record<string, unknown>)[name], writable: true, configurable: true });
  }

  const settled = <T>(run: () => T): Promise<T> => {
    try {
      return Promise.resolve(run());
    } catch (error) {
      return Promise.reject(error);
    }
  };
  const instantiate = (source: unknown, importObject?: unknown): Promise<unknown> =>
    settled(() => {
      if (source instanceof (NativeModule as unknown as new () => object)) return instantiateSync(source as object, importObject);
      const module = compileSync(source, 'WebAssembly.instantiate()');
      return { module, instance: instantiateSync(module, importObject) };
    });
  const compile = (source: unknown): Promise<WebAssembly.Module> => settled(() => compileSync(source, 'WebAssembly.compile()'));
  /** The bytes of a `Response` (or a promise of one), as the streaming variants take them. */
  const responseBytes = async (source: unknown): Promise<ArrayBuffer> => {
    const response = (await source) as { arrayBuffer?: () => Promise<ArrayBuffer> } | null;
    if (typeof response?.arrayBuffer !== 'function') throw new TypeError('WebAssembly: Argument 0 must be a Response or a promise of one');
    return response.arrayBuffer();
  };

  const namespace = {
    Module,
    Instance,
    Memory,
    Table,
    Global: native.Global,
    CompileError: native.CompileError,
    LinkError: native.LinkError,
    RuntimeError: native.RuntimeError,
    ...(typeof native.Tag === 'function' ? { Tag: native.Tag } : {}),
    ...(typeof native.Exception === 'function' ? { Exception: native.Exception } : {}),
    validate(bytes: unknown): boolean {
      const copy = copyBytes(bytes, 'WebAssembly.validate()');
      if (!native.validate(copy)) return false;
      try {
        rewriteModule(copy, budgetEntries);
        return true;
      } catch {
        return false;
      }
    },
    compile,
    instantiate,
    compileStreaming: (source: unknown) => responseBytes(source).then(compile),
    instantiateStreaming: (source: unknown, importObject?: unknown) => responseBytes(source).then((bytes) => instantiate(bytes, importObject)),
  };
  defineProperty(namespace, Symbol.toStringTag, { value: 'WebAssembly' });
  return freeze(namespace) as unknown as WasmNamespace;
}
