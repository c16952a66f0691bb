import { describe, expect, it } from 'vitest';
import { createWebAssembly, MAX_WASM_MODULE_BYTES, rewriteModule, WASM_MEMORY_IMPORT, type WasmNamespace } from './wasm.ts';

// The sandbox's WebAssembly wrapper on V8's own (run here, in Node): modules keep working, every
// memory and table a module can make is budgeted, and a mangled binary never gets past it.

const fromBase64 = (text: string) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
/** memory 1 page; hog (grow until -1, then trap), spin, add, pages, mem. */
const MAIN = fromBase64('AGFzbQEAAAABDgNgAABgAn9/AX9gAAF/AwUEAAABAgUDAQABByIFA2hvZwAABHNwaW4AAQNhZGQAAgVwYWdlcwADA21lbQIACiYEDwADQEEQQABBf0cNAAsACwcAA0AMAAsLBwAgACABagsEAD8ACw==');
/** An imported function env.f, tables t0 (10, no maximum) and t1 (5..20), a memory, all exported. */
const TABLES = fromBase64('AGFzbQEAAAABBAFgAAACCQEDZW52AWYAAAQIAnAACnABBRQFAwEAAQcRAwJ0MAEAAnQxAQEDbWVtAgA=');
// The repository's lib has no WebAssembly typings (the sandbox's own are in types/sandbox.d.ts).
const V8: any = (globalThis as any).WebAssembly;
const wasm = (mb: number): any => createWebAssembly(V8 as WasmNamespace, mb);

describe('the budgeted WebAssembly', () => {
  it('a module\'s own memory becomes a budgeted import; its code runs unchanged', () => {
    const W = wasm(4);
    const module = new W.Module(MAIN);
    expect(W.Module.imports(module)).toEqual([{ module: WASM_MEMORY_IMPORT, name: 'memory0', kind: 'memory' }]);
    const { exports } = new W.Instance(module, {});
    expect(exports.add(2, 40)).toBe(42);
    expect(() => exports.hog()).toThrow(V8.RuntimeError);
    // 4 MB = 64 pages: grown 16 pages at a time to 49, where the next 16 would pass the budget.
    expect(exports.pages()).toBe(49);
    expect(exports.mem.grow(15)).toBe(49);
    expect(() => exports.mem.grow(1)).toThrow(RangeError);
    // The budget is spent until that memory is collected: a second instance cannot start.
    expect(() => new W.Instance(module, {})).toThrow(/could not allocate memory: 1 pages .* 0 pages left of the plugin's Wasm memory budget \(memoryLimitMb 4\)/);
  });

  it('a plugin that tampers with the builtins the rewrite could use still gets a budgeted memory (plugin-host fuzz, seed 1943233312)', () => {
    // The fuzz program emptied the array iterator, so the rewrite's destructuring read no sections
    // and the module ran with its own memory: 5-7 s of CPU growing it. Each of these alone, too.
    const typedProto = Object.getPrototypeOf(Uint8Array.prototype);
    const saved = {
      iterator: Array.prototype[Symbol.iterator],
      push: Array.prototype.push,
      forEach: Array.prototype.forEach,
      find: Array.prototype.find,
      min: Math.min,
      floor: Math.floor,
      subarray: typedProto.subarray,
      set: typedProto.set,
      length: Object.getOwnPropertyDescriptor(typedProto, 'length')!,
    };
    const W = wasm(4);
    try {
      Array.prototype[Symbol.iterator] = function* () {} as never;
      Array.prototype.push = () => 0;
      Array.prototype.forEach = () => {};
      Array.prototype.find = () => undefined;
      Math.min = () => 65536 * 4;
      Math.floor = () => 0;
      typedProto.subarray = function () {
        return new Uint8Array(0);
      };
      typedProto.set = () => {};
      Object.defineProperty(typedProto, 'length', { get: () => 0, configurable: true });
      const module = new W.Module(MAIN);
      expect(V8.Module.imports(module)).toEqual([{ module: WASM_MEMORY_IMPORT, name: 'memory0', kind: 'memory' }]);
      const { exports } = new W.Instance(module, {});
      expect(() => exports.hog()).toThrow(V8.RuntimeError);
      expect(exports.pages()).toBe(49);
    } finally {
      Array.prototype[Symbol.iterator] = saved.iterator;
      Array.prototype.push = saved.push;
      Array.prototype.forEach = saved.forEach;
      Array.prototype.find = saved.find;
      Math.min = saved.min;
      Math.floor = saved.floor;
      typedProto.subarray = saved.subarray;
      typedProto.set = saved.set;
      Object.defineProperty(typedProto, 'length', saved.length);
    }
  });

  it('accessors on Array.prototype\'s indexes cannot empty the rewrite\'s own lists (plugin-host fuzz, seed 1333816398, program 72)', () => {
    // With a setter that stores nothing at '0', every `list[list.length] = x` of the rewrite wrote
    // into the accessor: it saw no sections, took the module for one without memory, and the module
    // grew its own, unbudgeted (5 s of the plugin process's CPU in fresh-clone CI run P).
    const W = wasm(4);
    const indexes = ['0', '1', '2', '3', '4', '5', '6', '7'];
    // Read while the accessors are there, compared once they are gone (the comparison uses arrays too).
    let imports: { module: string; name: string; kind: string } | undefined;
    let hog: unknown;
    let pages: number | undefined;
    let tableGrow: unknown;
    try {
      for (const index of indexes) Object.defineProperty(Array.prototype, index, { set() {}, get() { return 0; }, configurable: true });
      const module = new W.Module(MAIN);
      const described = V8.Module.imports(module);
      imports = described.length === 1 ? { ...Object.getOwnPropertyDescriptor(described, '0')!.value } : undefined;
      const { exports } = new W.Instance(module, {});
      try {
        exports.hog();
      } catch (error) {
        hog = error;
      }
      pages = exports.pages();
      // Tables too: t0 declares no maximum, the rewrite gives it 65,536 entries more than its 10.
      const W64 = wasm(64);
      const tables = new W64.Instance(new W64.Module(TABLES), { env: { f() {} } }).exports;
      try {
        tables.t0.grow(65537);
      } catch (error) {
        tableGrow = error;
      }
    } finally {
      for (const index of indexes) delete (Array.prototype as unknown as Record<string, unknown>)[index];
    }
    expect(imports).toEqual({ module: WASM_MEMORY_IMPORT, name: 'memory0', kind: 'memory' });
    expect(hog).toBeInstanceOf(V8.RuntimeError);
    // 4 MB = 64 pages: grown 16 pages at a time to 49 (unbudgeted, it went on to 65,536).
    expect(pages).toBe(49);
    expect(tableGrow).toBeInstanceOf(RangeError);
  });

  it('a descriptor that answers the budget check and V8 differently, or a replaced Number, gets no unbudgeted memory', () => {
    const W = wasm(4);
    // `initial` reads as not a number once (the check), then as 1 (what V8 would read next).
    let reads = 0;
    const lying = { get initial() { return reads++ === 0 ? 'x' : 1; } };
    expect(() => new W.Memory(lying)).toThrow(TypeError);
    let tableReads = 0;
    const table = { element: 'anyfunc', get initial() { return tableReads++ === 0 ? -1 : 1; } };
    expect(() => new W.Table(table)).toThrow(TypeError);
    const saved = Number;
    try {
      (globalThis as { Number: unknown }).Number = () => Number.NaN;
      const memory = new W.Memory({ initial: 1 });
      // Budgeted: its maximum is what is left of the 4 MB (64 pages), not V8's 65,536.
      expect(() => memory.grow(64)).toThrow(RangeError);
    } finally {
      (globalThis as { Number: unknown }).Number = saved;
    }
  });

  it('declared maximums let several memories share the budget', () => {
    const W = wasm(4);
    const a = new W.Memory({ initial: 1, maximum: 16 });
    const b = new W.Memory({ initial: 1, maximum: 48 });
    expect(() => new W.Memory({ initial: 1 })).toThrow(RangeError);
    expect(a.grow(15)).toBe(1);
    expect(() => a.grow(1)).toThrow(RangeError);
    expect(b.grow(47)).toBe(1);
  });

  it('tables get maximums within the table budget; one that starts over it does not compile', () => {
    const W = wasm(64);
    const instance = new W.Instance(new W.Module(TABLES), { env: { f() {} } });
    expect(instance.exports.t1.grow(15)).toBe(5);
    expect(() => instance.exports.t1.grow(1)).toThrow(RangeError);
    expect(() => instance.exports.t0.grow(65537)).toThrow(RangeError);
    expect(instance.exports.t0.grow(65536)).toBe(10);
    const table = new W.Table({ element: 'anyfunc', initial: 1 });
    expect(() => {
      for (;;) table.grow(100_000);
    }).toThrow(RangeError);
    // 64 MB: 1,048,576 entries for all tables (8 bytes each on the heap, an eighth of the limit).
    expect(table.length + 65546 + 20).toBeLessThanOrEqual(1_048_576);
    const huge = fromBase64('AGFzbQEAAAAEBwFwAMCWsQI=');
    expect(() => new W.Module(huge)).toThrow(/Wasm table 0 starts with 5000000 entries: the plugin sandbox allows at most 1048576/);
  });

  it('no way back to V8\'s constructors; no shared or 64-bit memory; modules over the size bound are refused', () => {
    const W = wasm(4);
    const module = new W.Module(MAIN);
    expect(module.constructor).toBe(W.Module);
    expect(Object.getPrototypeOf(module).constructor).toBe(W.Module);
    expect(new W.Memory({ initial: 0, maximum: 1 }).constructor).toBe(W.Memory);
    expect(() => new W.Memory({ initial: 1, maximum: 2, shared: true })).toThrow(TypeError);
    for (const text of ['AGFzbQEAAAAFBAEDAQI=', 'AGFzbQEAAAAFAwEEAQ==']) {
      expect(() => new W.Module(fromBase64(text))).toThrow(V8.CompileError);
      expect(W.validate(fromBase64(text))).toBe(false);
    }
    expect(() => new W.Module(new Uint8Array(MAX_WASM_MODULE_BYTES + 1))).toThrow(RangeError);
  });

  it('compile and instantiate answer settled promises (the work is done inside the call)', async () => {
    const W = wasm(4);
    const compiled = W.compile(MAIN);
    let settled = false;
    void compiled.then(() => (settled = true));
    await Promise.resolve();
    expect(settled).toBe(true);
    const { instance, module } = await W.instantiate(MAIN, {});
    expect(module).toBeInstanceOf(W.Module);
    expect((instance.exports as { add(a: number, b: number): number }).add(1, 1)).toBe(2);
    await expect(W.compile(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 5, 255]))).rejects.toBeInstanceOf(V8.CompileError);
  });

  it('5,000 seeded mutations of module binaries: each is refused with a CompileError, LinkError, RangeError or TypeError, or compiles with every memory an import', () => {
    let seed = 7;
    const next = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    const outcomes: Record<string, number> = {};
    for (let i = 0; i < 5000; i++) {
      const source = i % 2 ? MAIN : TABLES;
      const bytes = new Uint8Array(source);
      for (let k = 0; k < 1 + Math.floor(next() * 3); k++) bytes[8 + Math.floor(next() * (bytes.length - 8))] = Math.floor(next() * 256);
      const W = wasm(1);
      let outcome: string;
      try {
        const module = new W.Module(bytes);
        const rewritten = rewriteModule(bytes, 16_384);
        // Nothing V8 compiled defines a memory of its own: the section was rewritten into imports.
        expect(rewritten === undefined || V8.Module.imports(module).filter((entry: { kind: string; module: string }) => entry.kind === 'memory' && entry.module === WASM_MEMORY_IMPORT).length === rewritten.memories.length).toBe(true);
        try {
          new W.Instance(module, { env: { f() {} } });
          outcome = 'ran';
        } catch (error) {
          outcome = (error as Error).name;
        }
      } catch (error) {
        outcome = (error as Error).name;
      }
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      expect(['ran', 'CompileError', 'RangeError', 'LinkError', 'TypeError']).toContain(outcome);
    }
    // Both sides were exercised.
    expect(outcomes.CompileError).toBeGreaterThan(0);
    expect(outcomes.ran).toBeGreaterThan(0);
  });
});
