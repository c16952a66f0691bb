/**
 * The chart's Grafana dashboard against real metrics (issue 27, Visibility): Prometheus (built from
 * its Go module, install-prometheus.sh) scrapes a real `gatehouse gateway --kube` + `gatehouse extauth
 * --kube` (configuration applied to a real kube-apiserver, test/kube) while traffic runs (allowed, 401, 403, 5xx, slow), and every target of every panel must return
 * at least one series with data: a panel naming a metric or label that does not exist fails here.
 * Then the dashboard renders in headless Chromium (render-dashboard.ts) without console errors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboardHtml, grafanaRange, hasData, loadDashboard, PAGE_WIDTH, queryDashboard, screenshotHtml, type Dashboard, type Panel, type Range, type TargetResult } from './render-dashboard.ts';
import { driveTraffic, findChromium, findPrometheus, SCRAPE_INTERVAL, startStack, type Stack, type StatusCounts } from './stack.ts';
import { findKube } from '../kube/apiserver.ts';
import { eventually } from '../support/http.ts';

const prometheus = findPrometheus();
const chromium = findChromium();
const kube = findKube();
const missing = [prometheus, chromium, kube ? kube : process.env.CI === 'true' ? new Error('etcd or kube-apiserver not found: run test/kube/install-kube.sh') : undefined].filter((p): p is Error => p instanceof Error);

if (missing.length > 0) {
  describe('the dashboard against real metrics', () => {
    it('needs prometheus, chromium-headless-shell, etcd and kube-apiserver on CI', () => {
      throw new Error(missing.map((e) => e.message).join('; '));
    });
  });
} else {
  if (!prometheus || !chromium || !kube) {
    const absent = [!prometheus && 'prometheus (test/observability/install-prometheus.sh)', !chromium && 'chromium-headless-shell (test/graphql/install-chromium.sh)', !kube && 'etcd or kube-apiserver (test/kube/install-kube.sh)'];
    console.warn(`\n*** SKIPPED test/observability/dashboard.test.ts: ${absent.filter(Boolean).join(' and ')} not found ***\n`);
  }
  // The gateway and extauth read a real kube-apiserver (`--kube`), as the chart's default config.source runs them.
  describe.skipIf(!prometheus || !chromium || !kube)('the dashboard against real metrics', () => {
    let stack: Stack;
    let dashboard: Dashboard;
    let counts: StatusCounts;
    let trafficStart: number;

    beforeAll(async () => {
      dashboard = await loadDashboard();
      stack = await startStack(prometheus as string, { kube: kube! });
      trafficStart = Date.now() / 1000;
      counts = await driveTraffic(stack.gateway.url, 15);
    }, 180_000);
    afterAll(async () => {
      await stack?.close();
    });

    it('drove every kind of traffic the panels show', () => {
      expect(counts[200]).toBeGreaterThan(0);
      expect(counts[401]).toBeGreaterThan(0);
      expect(counts[403]).toBeGreaterThan(0);
      expect((counts[500] ?? 0) + (counts[503] ?? 0)).toBeGreaterThan(0);
      // No request failed at the connection level: the gateway answered all of them.
      expect(counts[0]).toBeUndefined();
    });

    let range: Range;
    let results: Map<Panel, TargetResult[]>;

    it('every target of every panel returns a series with data', { timeout: 60_000 }, async () => {
      // Polls until Prometheus has scraped past the traffic; on timeout the assertion below names the empty targets.
      const empty = (r: Map<Panel, TargetResult[]>) => [...r.entries()].flatMap(([panel, targets]) => targets.filter((t) => !t.series.some(hasData)).map((t) => `"${panel.title}" ${t.target.refId}: ${t.query}`));
      await eventually(async () => {
        range = grafanaRange(trafficStart - 5, Date.now() / 1000, PAGE_WIDTH / 2, SCRAPE_INTERVAL);
        results = await queryDashboard(dashboard, stack.prometheusUrl, range);
        return empty(results).length === 0;
      }, 20_000, 1_000).catch(() => {});
      expect(empty(results)).toEqual([]);
      expect(results.size).toBe(dashboard.panels.length);
    });

    it('a panel whose PromQL Prometheus refuses fails the render with the query and the reason', async () => {
      const broken: Dashboard = { title: 'broken', panels: [{ id: 1, type: 'timeseries', title: 'Typo', gridPos: { h: 8, w: 12, x: 0, y: 0 }, targets: [{ refId: 'A', expr: 'sum by (status (rate(gatehouse_requests_total[$__rate_interval]))' }] }] };
      await expect(queryDashboard(broken, stack.prometheusUrl, range)).rejects.toThrow(/Prometheus refused "sum by \(status \(rate\(gatehouse_requests_total\[4000ms\]\)\)": .*parse error/);
      // A metric that does not exist is no error to Prometheus: an empty result, which the test above catches.
      const unknown = await queryDashboard({ ...broken, panels: [{ ...broken.panels[0]!, targets: [{ refId: 'A', expr: 'gatehouse_no_such_metric' }] }] }, stack.prometheusUrl, range);
      expect([...unknown.values()][0]![0]!.series).toEqual([]);
    });

    it('the series carry what the traffic did', () => {
      const series = (title: string) => [...results.entries()].find(([p]) => p.title === title)?.[1].flatMap((t) => t.series.filter(hasData)) ?? [];
      expect(series('Requests by status').map((s) => s.labels.status).sort()).toEqual(expect.arrayContaining(['200', '401', '403', '503']));
      expect(series('Auth decisions by result').map((s) => s.labels.result)).toEqual(expect.arrayContaining(['allow', 'deny']));
      expect(series('AuthConfigs extauth cannot build').map((s) => s.labels.config)).toEqual(['shop.partner-plugin']);
      // Both processes watch the API server, and say so (extauth's gauge read 0 while connected before).
      expect(series('Kubernetes API connected').map((s) => [s.labels.pod, s.points.at(-1)![1]]).sort()).toEqual([['extauth', 1], ['gateway', 1]]);
      // Every kind has a series (0 when nothing of it is rejected); only the VirtualService routing to a missing Upstream is above 0.
      const rejected = series('Rejected resources by kind').filter((s) => s.points.some(([, v]) => v > 0));
      expect(rejected.map((s) => [s.labels.kind, s.points.at(-1)![1]])).toEqual([['VirtualService', 1]]);
      expect(new Set(series('Process memory (RSS)').map((s) => s.labels.pod))).toEqual(new Set(['gateway', 'extauth']));
    });

    it('renders in headless Chromium: every panel drawn, no console errors', { timeout: 120_000 }, async () => {
      const html = await dashboardHtml(dashboard, results, range, 'test/observability/dashboard.test.ts');
      const shot = await screenshotHtml(chromium as string, html);
      expect(shot.consoleErrors).toEqual([]);
      expect(shot.chartsDrawn).toBe(dashboard.panels.length);
      // A PNG: its signature, then IHDR with the page's width and a height that holds the grid.
      expect(shot.png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
      expect(shot.png.readUInt32BE(16)).toBe(PAGE_WIDTH);
      const rows = Math.max(...dashboard.panels.map((p) => p.gridPos.y + p.gridPos.h));
      expect(shot.png.readUInt32BE(20)).toBeGreaterThan(rows * 30);
      expect(shot.png.length).toBeGreaterThan(20_000);
    });
  });
}
