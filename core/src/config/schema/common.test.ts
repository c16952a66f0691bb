import { describe, expect, it } from 'vitest';
import { Duration, durationMs } from './common.ts';

/** The schema's own pattern, as the validator applies it. */
const pattern = new RegExp((Duration as unknown as { pattern: string }).pattern);

describe('Duration', () => {
  it('takes single-unit durations and Go compound ones (Gloo reads durations with time.ParseDuration), summing the parts', () => {
    expect(durationMs('15s')).toBe(15_000);
    expect(durationMs('1.5s')).toBe(1_500);
    expect(durationMs('250ms')).toBe(250);
    expect(durationMs('1m')).toBe(60_000);
    expect(durationMs('1m2s')).toBe(62_000);
    expect(durationMs('1h30m')).toBe(5_400_000);
    expect(durationMs('2m1ms')).toBe(120_001);
    for (const ok of ['15s', '1m2s', '1h30m0.5s']) expect(pattern.test(ok), ok).toBe(true);
  });

  it('refuses what is not a duration', () => {
    for (const bad of ['', '15', 's', '1m 2s', '-1s', '1d', '1s1s1s1s1s', '1.s', '.5s']) {
      expect(pattern.test(bad), bad).toBe(false);
      expect(() => durationMs(bad), bad).toThrow(TypeError);
    }
  });
});
