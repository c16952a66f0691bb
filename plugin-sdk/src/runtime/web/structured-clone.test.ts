import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { trackProxies } from '../proxy-registry.ts';
import { structuredClone as sandboxClone } from './structured-clone.ts';

// Differential tests: the sandbox's structuredClone against Node's, values and failures.

function outcome(run: () => unknown): { value?: unknown; error?: string } {
  try {
    return { value: run() };
  } catch (error) {
    return { error: (error as Error).name };
  }
}

describe('structuredClone', () => {
  const shared = { s: 1 };
  const cyclic: Record<string, unknown> = { name: 'loop' };
  cyclic.self = cyclic;
  const buffer = new ArrayBuffer(16);
  const values: unknown[] = [
    1, -0, NaN, 'text', 10n, true, null, undefined,
    { a: [1, 2, { b: 'c' }], d: new Date(0), r: /x+/gi, m: new Map<unknown, unknown>([[1, { k: 2 }]]), s: new Set([1, 'two']) },
    [1, , 3], Object.assign([1, 2], { extra: 'prop' }),
    new Boolean(false), new Number(5), new String('boxed'), Object(7n),
    new Uint8Array([1, 2, 3]), new Float64Array([1.5, -2]), new BigInt64Array([5n]), new DataView(new ArrayBuffer(4), 1, 2),
    { a: new Uint8Array(buffer, 0, 4), b: new Uint16Array(buffer, 4, 2) },
    { one: shared, two: shared },
    cyclic,
    new RangeError('bad range', { cause: { why: 'test' } }),
    Object.create({ inherited: 1 }, { own: { value: 2, enumerable: true } }),
  ];

  it.each(values.map((v, i) => [i, v]))('value %i clones as Node clones it', (_i, value) => {
    const ours = sandboxClone(value);
    const theirs = structuredClone(value);
    if (value instanceof Error) {
      expect([(ours as Error).name, (ours as Error).message, (ours as Error).cause]).toEqual([(theirs as Error).name, (theirs as Error).message, (theirs as Error).cause]);
    } else expect(isDeepStrictEqual(ours, theirs)).toBe(true);
    if (typeof value === 'object' && value !== null) expect(ours).not.toBe(value);
  });

  it('shared and cyclic references are preserved', () => {
    const ours = sandboxClone({ one: shared, two: shared, cyclic });
    expect(ours.one).toBe(ours.two);
    expect(ours.cyclic.self).toBe(ours.cyclic);
    const views = sandboxClone({ a: new Uint8Array(buffer, 0, 4), b: new Uint16Array(buffer, 4, 2) });
    expect(views.a.buffer).toBe(views.b.buffer);
  });

  it('uncloneable values fail with DataCloneError as in Node', () => {
    for (const value of [() => 1, Symbol('s'), { f() {} }, Promise.resolve(), new WeakMap(), [Symbol.iterator]]) {
      expect(outcome(() => sandboxClone(value)).error).toBe(outcome(() => structuredClone(value)).error);
    }
  });

  it('a value nested deeper than 2048 levels throws a catchable DataCloneError', () => {
    let deep: unknown = {};
    for (let i = 0; i < 100_000; i++) deep = { deep };
    expect(outcome(() => sandboxClone(deep)).error).toBe('DataCloneError');
  });

  // Issue 26 item 7: what a value is comes from its internal slots, never from a tag it can spoof.
  it('a spoofed Symbol.toStringTag changes nothing: class instances clone as plain objects, as in Node', () => {
    for (const tag of ['Map', 'Set', 'Date', 'RegExp', 'ArrayBuffer', 'Uint8Array', 'DataView', 'Error', 'Boolean', 'Promise', 'WeakMap', 'Arguments', 'Array Iterator']) {
      class Spoof {
        field = 'kept';
        get [Symbol.toStringTag]() {
          return tag;
        }
      }
      const ours = outcome(() => sandboxClone(new Spoof()));
      const theirs = outcome(() => structuredClone(new Spoof()));
      expect([tag, ours]).toEqual([tag, theirs]);
    }
    // And the other way: real built-ins whose tag was overridden are still what they are.
    const map = Object.defineProperty(new Map([[1, 2]]), Symbol.toStringTag, { value: 'Object' });
    expect(isDeepStrictEqual(sandboxClone(map), structuredClone(map))).toBe(true);
    const date = Object.defineProperty(new Date(5), Symbol.toStringTag, { value: 'Object' });
    expect(sandboxClone(date)).toEqual(new Date(5));
  });

  it('Proxies made through the tracked constructor fail with DataCloneError as in Node, revocable ones too', () => {
    const global = { Proxy } as { Proxy: ProxyConstructor };
    trackProxies(global);
    const proxy = new global.Proxy({ a: 1 }, {});
    const arrayProxy = new global.Proxy([1, 2], {});
    const { proxy: revocable } = global.Proxy.revocable({}, {});
    for (const value of [proxy, arrayProxy, revocable, { nested: [proxy] }]) {
      expect(outcome(() => sandboxClone(value))).toEqual({ error: 'DataCloneError' });
      expect(outcome(() => structuredClone(value))).toEqual({ error: 'DataCloneError' });
    }
    // The tracked constructor is still Proxy: same name and length, and `new` is required.
    expect([global.Proxy.name, global.Proxy.length]).toEqual([Proxy.name, Proxy.length]);
    expect(() => (global.Proxy as unknown as (t: object, h: object) => unknown)({}, {})).toThrow(TypeError);
  });

  it('objects with internal slots V8 refuses fail as in Node; RegExp.prototype and Map.prototype-derived plain objects clone', () => {
    const args = (function (..._rest: unknown[]) {
      // eslint-disable-next-line prefer-rest-params
      return arguments;
    })(1, 2);
    const values = [args, [].values(), new Map().entries(), (function* () {})(), new WeakSet(), new WeakRef({}), new FinalizationRegistry(() => {}), Object(Symbol('s')), RegExp.prototype, Object.create(Map.prototype), Object.create(null)];
    for (const value of values) {
      const theirs = outcome(() => structuredClone(value));
      const ours = outcome(() => sandboxClone(value));
      expect(ours.error).toBe(theirs.error);
      if (!theirs.error) expect(isDeepStrictEqual(ours.value, theirs.value)).toBe(true);
    }
  });

  it('transfer detaches the listed ArrayBuffers once the clone succeeds, and refuses bad lists as Node does', () => {
    const mine = new ArrayBuffer(8);
    new Uint8Array(mine).set([1, 2, 3]);
    const copy = sandboxClone({ view: new Uint8Array(mine, 1, 2) }, { transfer: [mine] });
    expect([...copy.view]).toEqual([2, 3]);
    expect(mine.detached).toBe(true);
    // A clone that fails leaves the buffer attached.
    const kept = new ArrayBuffer(4);
    expect(outcome(() => sandboxClone({ kept, f: () => 1 }, { transfer: [kept] })).error).toBe('DataCloneError');
    expect(kept.detached).toBe(false);
    const one = new ArrayBuffer(1);
    for (const transfer of [[one, one], [one, 5], [new Uint8Array(1)], [mine]]) {
      expect(outcome(() => sandboxClone(1, { transfer }))).toEqual(outcome(() => structuredClone(1, { transfer: transfer as ArrayBuffer[] })));
    }
  });
});
