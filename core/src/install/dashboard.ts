/**
 * The Grafana dashboard of an install (issue 27 item 7): generated here, committed in the chart as
 * dashboards/gatehouse.json (test/helm/chart-files.ts), rendered as a ConfigMap with
 * `metrics.dashboard.enabled` by both the chart and `gatehouse install render`.
 */

type Panel = { title: string; expr: string[]; unit: string; legend: string[] };

const PANELS: Panel[] = [
  { title: 'Requests by status', expr: ['sum by (status) (rate(gatehouse_requests_total[$__rate_interval]))'], unit: 'reqps', legend: ['{{status}}'] },
  {
    title: 'Upstream latency (p50, p99)',
    expr: ['histogram_quantile(0.5, sum by (le) (rate(gatehouse_upstream_latency_seconds_bucket[$__rate_interval])))', 'histogram_quantile(0.99, sum by (le) (rate(gatehouse_upstream_latency_seconds_bucket[$__rate_interval])))'],
    unit: 's',
    legend: ['p50', 'p99'],
  },
  { title: 'Auth decisions by result', expr: ['sum by (result) (rate(gatehouse_auth_decisions_total[$__rate_interval]))'], unit: 'reqps', legend: ['{{result}}'] },
  {
    title: 'ext_authz call latency (p50, p99)',
    expr: ['histogram_quantile(0.5, sum by (le) (rate(gatehouse_ext_authz_duration_seconds_bucket[$__rate_interval])))', 'histogram_quantile(0.99, sum by (le) (rate(gatehouse_ext_authz_duration_seconds_bucket[$__rate_interval])))'],
    unit: 's',
    legend: ['p50', 'p99'],
  },
  { title: 'AuthConfigs extauth cannot build', expr: ['sum by (config) (gatehouse_extauth_config_unavailable)'], unit: 'short', legend: ['{{config}}'] },
  { title: 'Rejected resources by kind', expr: ['max by (kind) (gatehouse_config_rejected_resources)'], unit: 'short', legend: ['{{kind}}'] },
  { title: 'Kubernetes API connected', expr: ['min by (pod) (gatehouse_kube_connected)'], unit: 'short', legend: ['{{pod}}'] },
  // prom-client's default metrics keep their own `process_` prefix after ours (admin/metrics.ts).
  { title: 'Process memory (RSS)', expr: ['sum by (pod) (gatehouse_process_process_resident_memory_bytes)'], unit: 'bytes', legend: ['{{pod}}'] },
];

/** The dashboard as Grafana's JSON model (schemaVersion 39), with a Prometheus data source variable. */
export function dashboardJson(): string {
  const dashboard = {
    title: 'Gatehouse',
    uid: 'gatehouse',
    tags: ['gatehouse'],
    schemaVersion: 39,
    time: { from: 'now-1h', to: 'now' },
    refresh: '30s',
    templating: { list: [{ name: 'datasource', type: 'datasource', query: 'prometheus', label: 'Data source' }] },
    panels: PANELS.map((panel, i) => ({
      id: i + 1,
      type: 'timeseries',
      title: panel.title,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's dashboard variable, not a template literal.
      datasource: { type: 'prometheus', uid: '${datasource}' },
      gridPos: { h: 8, w: 12, x: (i % 2) * 12, y: Math.floor(i / 2) * 8 },
      fieldConfig: { defaults: { unit: panel.unit }, overrides: [] },
      targets: panel.expr.map((expr, j) => ({ refId: String.fromCharCode(65 + j), expr, legendFormat: panel.legend[j] ?? '' })),
    })),
  };
  return `${JSON.stringify(dashboard, null, 2)}\n`;
}
