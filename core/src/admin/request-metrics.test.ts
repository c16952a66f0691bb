import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, test } from 'vitest';
import { RequestCounter, RequestHistogram } from './request-metrics.ts';

const buckets = [0.001, 0.01, 0.1, 1];
const observations = [0.0005, 0.001, 0.002, 0.05, 0.1, 0.7, 3, 0];

describe('request metrics', () => {
  test('expose exactly what prom-client would for the same samples', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const histogram = new RequestHistogram({ name: 'h_seconds', help: 'h.', labelNames: ['upstream'], buckets, registry: ours });
    const reference = new Histogram({ name: 'h_seconds', help: 'h.', labelNames: ['upstream'], buckets, registers: [theirs] });
    const counter = new RequestCounter({ name: 'c_total', help: 'c.', labelNames: ['route', 'status'], registry: ours });
    const referenceCounter = new Counter({ name: 'c_total', help: 'c.', labelNames: ['route', 'status'], registers: [theirs] });
    for (const [i, value] of observations.entries()) {
      const upstream = i % 2 === 0 ? 'a' : 'b"quoted"';
      histogram.labels(upstream).observe(value);
      reference.labels(upstream).observe(value);
      counter.labels(upstream, String(200 + i)).inc();
      referenceCounter.labels(upstream, String(200 + i)).inc();
    }
    // The same child comes back for the same labels.
    expect(counter.labels('a', '200')).toBe(counter.labels('a', '200'));
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  test('workers’ series are summed by the aggregator registry', async () => {
    const workers = await Promise.all(
      [1, 2].map(async (n) => {
        const registry = new Registry();
        const histogram = new RequestHistogram({ name: 'h_seconds', help: 'h.', labelNames: ['upstream'], buckets, registry });
        const counter = new RequestCounter({ name: 'c_total', help: 'c.', labelNames: ['route'], registry });
        for (let i = 0; i < n; i++) {
          histogram.labels('u').observe(0.005);
          counter.labels('r').inc();
        }
        return registry.getMetricsAsJSON();
      }),
    );
    const text = await AggregatorRegistry.aggregate(workers).metrics();
    expect(text).toContain('c_total{route="r"} 3');
    expect(text).toContain('h_seconds_bucket{le="0.01",upstream="u"} 3');
    expect(text).toContain('h_seconds_bucket{le="0.001",upstream="u"} 0');
    expect(text).toContain('h_seconds_count{upstream="u"} 3');
  });
});
