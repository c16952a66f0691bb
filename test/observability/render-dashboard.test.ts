/**
 * The renderer's Grafana arithmetic, on its own (no process): `$__interval` and `$__rate_interval`
 * as Grafana computes them, variable substitution, and legends. dashboard.test.ts runs it against
 * real Prometheus data.
 */
import { describe, expect, it } from 'vitest';
import { expandExpr, grafanaRange, legendName, roundInterval } from './render-dashboard.ts';

describe('Grafana arithmetic', () => {
  it('rounds a raw interval as Grafana does', () => {
    expect([10, 40, 200, 1_000, 1_600, 8_000, 20_000, 60_000, 100_000_000].map(roundInterval)).toEqual([10, 50, 200, 1_000, 2_000, 10_000, 20_000, 60_000, 43_200_000]);
  });

  it('never steps below the scrape interval, and $__rate_interval is max(step + scrape, 4 × scrape)', () => {
    // 3 minutes in 800 px: 225 ms raw, 200 ms rounded, raised to the 1 s scrape interval.
    expect(grafanaRange(1_000, 1_180, 800, 1)).toEqual({ start: 1_000, end: 1_180, step: 1, rateInterval: 4 });
    // 6 hours in 800 px: 27 s raw, 30 s rounded; the range is aligned to the step.
    expect(grafanaRange(1_000_015, 1_021_615, 800, 15)).toEqual({ start: 999_990, end: 1_021_590, step: 30, rateInterval: 60 });
  });

  // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's braced variable syntax, not a template literal.
  it('substitutes $__rate_interval, ${__interval} and $__range, and leaves other variables alone', () => {
    const range = { start: 0, end: 300, step: 2, rateInterval: 8 };
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's braced variable syntax, not a template literal.
    expect(expandExpr('rate(x[$__rate_interval]) + rate(y[${__interval}]) + increase(z[$__range]) + $unknown', range)).toBe('rate(x[8000ms]) + rate(y[2000ms]) + increase(z[300s]) + $unknown');
  });

  it('fills {{label}} in legends (a missing label is empty) and falls back to the series name', () => {
    expect(legendName('{{status}} on {{ pod }}', { status: '503', pod: 'gateway' })).toBe('503 on gateway');
    expect(legendName('{{missing}}x', {})).toBe('x');
    expect(legendName('', { __name__: 'up', job: 'extauth' })).toBe('up{job="extauth"}');
    expect(legendName(undefined, {})).toBe('{}');
  });
});
