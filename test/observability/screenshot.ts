/**
 * Regenerates docs/images/dashboard.png: the stack of stack.ts (real gateway, extauth, upstreams and
 * Prometheus) runs the traffic mix for `--seconds` (default 180), with the payments upstream failing
 * more in the middle third (an incident, so the 5xx line moves), and render-dashboard.ts draws the
 * chart's dashboard from what Prometheus scraped. Not Grafana: see docs/operations.md.
 * The gateway and extauth read their configuration from a real kube-apiserver (`--kube`, the chart's
 * default source; test/kube/install-kube.sh), unless `--no-kube`.
 *   node_modules/.bin/node test/observability/screenshot.ts [--seconds 180] [--out docs/images/dashboard.png] [--no-kube]
 */
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { dashboardHtml, grafanaRange, hasData, loadDashboard, PAGE_WIDTH, queryDashboard, screenshotHtml } from './render-dashboard.ts';
import { driveTraffic, findChromium, findPrometheus, SCRAPE_INTERVAL, startStack } from './stack.ts';
import { findKube } from '../kube/apiserver.ts';

const { values } = parseArgs({
  allowNegative: true,
  options: { seconds: { type: 'string', default: '180' }, out: { type: 'string', default: fileURLToPath(new URL('../../docs/images/dashboard.png', import.meta.url)) }, kube: { type: 'boolean', default: true } },
});
const prometheus = findPrometheus();
const chromium = findChromium();
if (typeof prometheus !== 'string' || typeof chromium !== 'string') {
  console.error('needs prometheus (test/observability/install-prometheus.sh) and chromium-headless-shell (test/graphql/install-chromium.sh)');
  process.exit(1);
}

// With --kube (the default) the processes read a real kube-apiserver, as the chart's default config.source does.
const kube = values.kube ? findKube() : undefined;
if (values.kube && !kube) {
  console.error('needs etcd and kube-apiserver (test/kube/install-kube.sh), or --no-kube');
  process.exit(1);
}

const dashboard = await loadDashboard();
const stack = await startStack(prometheus, kube ? { kube } : {});
try {
  const seconds = Number(values.seconds);
  const start = Date.now() / 1000;
  console.error(`driving traffic for ${seconds} s through ${stack.gateway.url}`);
  const counts = await driveTraffic(stack.gateway.url, seconds, { onProgress: (f) => stack.setPaymentsFailureRate(f > 1 / 3 && f < 2 / 3 ? 0.6 : 0.2) });
  const end = Date.now() / 1000;
  console.error(`statuses: ${JSON.stringify(counts)}`);
  // Two more scrapes, so that the last requests are in Prometheus; the range ends with the traffic.
  await new Promise((r) => setTimeout(r, 2_500 * SCRAPE_INTERVAL));
  const range = grafanaRange(start - 5, end, PAGE_WIDTH / 2, SCRAPE_INTERVAL);
  const results = await queryDashboard(dashboard, stack.prometheusUrl, range);
  for (const [panel, targets] of results) for (const t of targets) if (!t.series.some(hasData)) console.error(`no data: "${panel.title}" ${t.target.refId}: ${t.query}`);
  const html = await dashboardHtml(dashboard, results, range, 'Rendered by test/observability/render-dashboard.ts (uPlot, headless Chromium) from core/helm/gatehouse/dashboards/gatehouse.json, each panel queried from a real Prometheus that scraped a real gatehouse gateway + extauth under test traffic. Not a Grafana screenshot.');
  const shot = await screenshotHtml(chromium, html);
  if (shot.consoleErrors.length > 0) throw new Error(`console errors:\n${shot.consoleErrors.join('\n')}`);
  await writeFile(values.out!, shot.png);
  console.error(`wrote ${values.out} (${shot.png.length} bytes, ${shot.chartsDrawn} charts)`);
} finally {
  await stack.close();
}
