import { describe, expect, it } from 'vitest';
import { newRequestId } from './request-id.ts';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('newRequestId', () => {
  it('makes version 4 UUIDs, none repeated across several random batches', () => {
    const seen = new Set<string>();
    // 256 UUIDs per batch: this crosses four refills.
    for (let i = 0; i < 1_000; i++) {
      const id = newRequestId();
      expect(id).toMatch(UUID_V4);
      seen.add(id);
    }
    expect(seen.size).toBe(1_000);
  });

  it('draws every other hex digit at random (version and variant bits aside)', () => {
    // Over 4,096 ids each of the 30 free digit positions sees all 16 values; a digit stuck by a
    // wrong offset or mask would not.
    const values = Array.from({ length: 36 }, () => new Set<string>());
    for (let i = 0; i < 4_096; i++) {
      const id = newRequestId();
      for (let c = 0; c < 36; c++) values[c]!.add(id[c]!);
    }
    const sizes = values.map((s) => s.size);
    for (const dash of [8, 13, 18, 23]) expect(values[dash]).toEqual(new Set(['-']));
    expect(values[14]).toEqual(new Set(['4']));
    expect(values[19]).toEqual(new Set(['8', '9', 'a', 'b']));
    const free = sizes.filter((_, c) => ![8, 13, 14, 18, 19, 23].includes(c));
    expect(free).toEqual(Array(30).fill(16));
  });
});
