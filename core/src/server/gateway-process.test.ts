import { availableParallelism } from 'node:os';
import { describe, expect, test } from 'vitest';
import { parseWorkers } from './gateway-process.ts';

describe('parseWorkers (--workers N|auto)', () => {
  test('a positive integer, or auto = one per core', () => {
    expect(parseWorkers('1')).toBe(1);
    expect(parseWorkers('4')).toBe(4);
    expect(parseWorkers('auto')).toBe(availableParallelism());
  });

  test.each(['0', '-1', '1.5', 'two', '', 'AUTO'])('"%s" is rejected with a message naming the flag', (value) => {
    expect(() => parseWorkers(value)).toThrow(/--workers must be a positive integer or "auto"/);
  });
});
