import { randomBytes, webcrypto } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { atob } from './encoding.ts';
import { createRandom, MAX_RANDOM_BYTES } from './random.ts';

const crypto = createRandom((n) => randomBytes(n).toString('base64'), atob);
const nameOf = (run: () => unknown): string => {
  try {
    run();
    return 'ok';
  } catch (error) {
    return (error as Error).name;
  }
};

describe('crypto.getRandomValues / randomUUID in the sandbox (SPEC 5.3), against Node\'s webcrypto', () => {
  test('fills integer views in place and returns them; two fills differ', () => {
    const a = new Uint32Array(8);
    expect(crypto.getRandomValues(a)).toBe(a);
    const b = crypto.getRandomValues(new Uint32Array(8));
    expect([...a]).not.toEqual([...b]);
    const view = new Uint8Array(new ArrayBuffer(32), 8, 16);
    crypto.getRandomValues(view);
    expect([...new Uint8Array(view.buffer, 0, 8)]).toEqual(new Array(8).fill(0));
  });

  test('refuses what Node refuses, with the same error names', () => {
    for (const make of [() => new Float32Array(4), () => new Float64Array(1), () => new DataView(new ArrayBuffer(4)) as unknown as Uint8Array, () => new Uint8Array(MAX_RANDOM_BYTES + 1)]) {
      expect(nameOf(() => crypto.getRandomValues(make()))).toBe(nameOf(() => webcrypto.getRandomValues(make() as never)));
    }
    expect(nameOf(() => crypto.getRandomValues(new Uint8Array(MAX_RANDOM_BYTES)))).toBe('ok');
  });

  test('randomUUID gives distinct version 4 UUIDs in Node\'s format', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 1_000; i++) {
      const id = crypto.randomUUID();
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      seen.add(id);
    }
    expect(seen.size).toBe(1_000);
    expect(webcrypto.randomUUID()).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
