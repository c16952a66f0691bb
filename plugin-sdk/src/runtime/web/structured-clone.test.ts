import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
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
});
