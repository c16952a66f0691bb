/**
 * Renders the chart's Grafana dashboard (core/helm/gatehouse/dashboards/gatehouse.json) without
 * Grafana, which cannot be built here: each panel's PromQL targets run against a real Prometheus
 * (`/api/v1/query_range`, with Grafana's `$__interval` / `$__rate_interval` arithmetic), and the
 * panels are drawn on Grafana's 24-column grid (gridPos) with uPlot, the charting library Grafana's
 * time series panel is built on; titles, units and legends come from the JSON. Headless Chromium
 * (Debian's chromium-headless-shell) loads the page over the DevTools protocol, collects console
 * errors, and takes the PNG. Used by dashboard.test.ts and screenshot.ts (docs/images/dashboard.png).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The chart's dashboard, the file Grafana's sidecar loads from the `gatehouse-dashboard` ConfigMap. */
export const DASHBOARD_PATH = fileURLToPath(new URL('../../core/helm/gatehouse/dashboards/gatehouse.json', import.meta.url));

/** One query of a panel (Grafana's Prometheus target). */
export interface Target {
  refId: string;
  expr: string;
  legendFormat?: string;
}

/** The part of Grafana's panel model the renderer reads. */
export interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  fieldConfig?: { defaults?: { unit?: string } };
  targets: Target[];
}

/** The part of Grafana's dashboard model the renderer reads. */
export interface Dashboard {
  title: string;
  panels: Panel[];
}

/** A series as a panel draws it: its legend name and values on the query's step grid. */
export interface Series {
  refId: string;
  name: string;
  labels: Record<string, string>;
  /** `[unix seconds, value]`; NaN (a quantile over an empty window) is kept as NaN. */
  points: [number, number][];
}

/** What one target returned. */
export interface TargetResult {
  target: Target;
  /** The PromQL sent, Grafana's variables substituted. */
  query: string;
  series: Series[];
}

/** The time range of a render, Grafana-style: the step is `$__interval`. */
export interface Range {
  start: number;
  end: number;
  step: number;
  /** `$__rate_interval`, in seconds. */
  rateInterval: number;
}

/** Reads a dashboard JSON (the chart's by default). */
export async function loadDashboard(path = DASHBOARD_PATH): Promise<Dashboard> {
  const dashboard = JSON.parse(await readFile(path, 'utf8')) as Dashboard;
  if (!Array.isArray(dashboard.panels)) throw new Error(`${path}: no panels`);
  return dashboard;
}

/** Grafana's `rangeUtil.roundInterval` (milliseconds in, milliseconds out): the interval a panel of that resolution gets. */
export function roundInterval(ms: number): number {
  const table: [number, number][] = [
    [15, 10], [35, 20], [75, 50], [150, 100], [350, 200], [750, 500], [1_500, 1_000], [3_500, 2_000], [7_500, 5_000],
    [12_500, 10_000], [17_500, 15_000], [25_000, 20_000], [45_000, 30_000], [90_000, 60_000], [210_000, 120_000],
    [450_000, 300_000], [750_000, 600_000], [1_050_000, 900_000], [1_500_000, 1_200_000], [2_700_000, 1_800_000],
    [5_400_000, 3_600_000], [9_000_000, 7_200_000], [16_200_000, 10_800_000], [32_400_000, 21_600_000],
  ];
  for (const [below, interval] of table) if (ms < below) return interval;
  return 43_200_000;
}

/**
 * The range Grafana would query for `[start, end]` in a panel `widthPx` wide with a data source whose
 * scrape interval is `scrapeInterval` seconds: `$__interval` = range / data points, rounded, at least
 * the scrape interval; `$__rate_interval` = max(`$__interval` + scrape interval, 4 × scrape interval).
 */
export function grafanaRange(start: number, end: number, widthPx: number, scrapeInterval: number): Range {
  const interval = Math.max(roundInterval(((end - start) * 1000) / widthPx) / 1000, scrapeInterval);
  // Grafana aligns the range to the step, so that a refresh draws the same points.
  return {
    start: Math.floor(start / interval) * interval,
    end: Math.floor(end / interval) * interval,
    step: interval,
    rateInterval: Math.max(interval + scrapeInterval, 4 * scrapeInterval),
  };
}

/** Substitutes Grafana's global variables in a PromQL expression. */
export function expandExpr(expr: string, range: Range): string {
  const vars: Record<string, string> = {
    __rate_interval: `${range.rateInterval * 1000}ms`,
    __interval: `${range.step * 1000}ms`,
    __interval_ms: String(range.step * 1000),
    __range: `${Math.round(range.end - range.start)}s`,
  };
  return expr.replace(/\$\{(\w+)\}|\$(\w+)/g, (all, braced: string | undefined, bare: string | undefined) => vars[(braced ?? bare)!] ?? all);
}

/** A series' legend: `legendFormat` with `{{label}}` replaced, or Prometheus's `name{labels}` when there is none (as Grafana). */
export function legendName(legendFormat: string | undefined, labels: Record<string, string>): string {
  if (legendFormat && legendFormat !== '__auto') return legendFormat.replace(/\{\{\s*(.+?)\s*\}\}/g, (_, name: string) => labels[name] ?? '');
  const { __name__: name = '', ...rest } = labels;
  const pairs = Object.entries(rest).map(([k, v]) => `${k}="${v}"`);
  return pairs.length ? `${name}{${pairs.join(', ')}}` : name || '{}';
}

/** Runs one PromQL range query; throws with Prometheus's error when it is not a success. */
export async function queryRange(prometheusUrl: string, query: string, range: Range): Promise<{ metric: Record<string, string>; values: [number, string][] }[]> {
  const params = new URLSearchParams({ query, start: String(range.start), end: String(range.end), step: String(range.step) });
  const response = await fetch(`${prometheusUrl}/api/v1/query_range`, { method: 'POST', body: params });
  const body = (await response.json()) as { status: string; error?: string; data?: { resultType: string; result: { metric: Record<string, string>; values: [number, string][] }[] } };
  if (body.status !== 'success' || !body.data) throw new Error(`Prometheus refused ${JSON.stringify(query)}: ${body.error ?? response.status}`);
  if (body.data.resultType !== 'matrix') throw new Error(`${JSON.stringify(query)}: a ${body.data.resultType}, not a matrix`);
  return body.data.result;
}

/** Every target of every panel, queried over `range`. */
export async function queryDashboard(dashboard: Dashboard, prometheusUrl: string, range: Range): Promise<Map<Panel, TargetResult[]>> {
  const results = new Map<Panel, TargetResult[]>();
  for (const panel of dashboard.panels) {
    const perTarget: TargetResult[] = [];
    for (const target of panel.targets) {
      const query = expandExpr(target.expr, range);
      const matrix = await queryRange(prometheusUrl, query, range);
      perTarget.push({
        target,
        query,
        series: matrix.map((s) => ({ refId: target.refId, name: legendName(target.legendFormat, s.metric), labels: s.metric, points: s.values.map(([t, v]) => [t, Number(v)] as [number, number]) })),
      });
    }
    results.set(panel, perTarget);
  }
  return results;
}

/** True when the series has at least one finite value (a quantile over empty windows is all NaN). */
export function hasData(series: Series): boolean {
  return series.points.some(([, v]) => Number.isFinite(v));
}

const require = createRequire(import.meta.url);

/** Width of the rendered page in CSS pixels; the grid's 24 columns share it. */
export const PAGE_WIDTH = 1600;

/**
 * The dashboard as one self-contained HTML page (uPlot inlined, no other origin): the data is
 * embedded, the page script (dashboard-page.js) lays out the panels and sets
 * `window.dashboardRendered` to the number of charts drawn.
 */
export async function dashboardHtml(dashboard: Dashboard, results: Map<Panel, TargetResult[]>, range: Range, footer: string): Promise<string> {
  const uplotDir = dirname(require.resolve('uplot/package.json'));
  const [uplotJs, uplotCss, pageJs] = await Promise.all([
    readFile(join(uplotDir, 'dist/uPlot.iife.min.js'), 'utf8'),
    readFile(join(uplotDir, 'dist/uPlot.min.css'), 'utf8'),
    readFile(fileURLToPath(new URL('./dashboard-page.js', import.meta.url)), 'utf8'),
  ]);
  const model = {
    title: dashboard.title,
    width: PAGE_WIDTH,
    range,
    footer,
    panels: dashboard.panels.map((panel) => ({
      title: panel.title,
      type: panel.type,
      gridPos: panel.gridPos,
      unit: panel.fieldConfig?.defaults?.unit ?? 'short',
      series: (results.get(panel) ?? []).flatMap((r) => r.series.map((s) => ({ name: s.name, points: s.points.map(([t, v]) => [t, Number.isFinite(v) ? v : null]) }))),
    })),
  };
  // `</` inside the JSON could close the script element: escape it.
  const json = JSON.stringify(model).replace(/</g, '\\u003c');
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>${escapeHtml(dashboard.title)}</title>
<style>${uplotCss}</style>
</head><body>
<script>${uplotJs}</script>
<script>window.dashboardModel = ${json};</script>
<script>${pageJs}</script>
</body></html>
`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** What a screenshot saw. */
export interface Screenshot {
  png: Buffer;
  /** Console errors, uncaught exceptions and failed loads, in the order the page reported them. */
  consoleErrors: string[];
  /** How many charts the page says it drew. */
  chartsDrawn: number;
}

/**
 * Loads `html` in headless Chromium (`chromium`: the chromium-headless-shell binary) through the
 * DevTools protocol and returns a full-page PNG and the page's console errors. No origin but the
 * page's file resolves, so an asset that is not inlined shows up as an error.
 */
export async function screenshotHtml(chromium: string, html: string, timeoutMs = 90_000): Promise<Screenshot> {
  const work = await mkdtemp(join(tmpdir(), 'gatehouse-dashboard-'));
  const page = join(work, 'dashboard.html');
  await writeFile(page, html);
  const child = spawn(
    chromium,
    ['--no-sandbox', '--disable-gpu', '--no-first-run', '--hide-scrollbars', '--host-resolver-rules=MAP * ~NOTFOUND', `--user-data-dir=${join(work, 'profile')}`, '--remote-debugging-port=0', 'about:blank'],
    // Its own process group: Chromium's zygote and renderers hold the stderr pipe, and all of them end with it.
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, TZ: 'UTC' }, detached: true },
  );
  let stderr = '';
  const deadline = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  try {
    const browserWs = await new Promise<string>((resolve, reject) => {
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
        stderr += chunk;
        const match = /DevTools listening on (ws:\/\/\S+)/.exec(stderr);
        if (match) resolve(match[1]!);
      });
      child.once('exit', (code) => reject(new Error(`chromium exited with ${code} before DevTools listened:\n${stderr}`)));
    });
    const cdp = await DevTools.connect(browserWs);
    try {
      const { targetId } = (await cdp.send('Target.createTarget', { url: 'about:blank' })) as { targetId: string };
      const { sessionId } = (await cdp.send('Target.attachToTarget', { targetId, flatten: true })) as { sessionId: string };
      const consoleErrors: string[] = [];
      cdp.onEvent = (method, params, session) => {
        if (session !== sessionId) return;
        const p = params as Record<string, any>;
        if (method === 'Runtime.consoleAPICalled' && (p.type === 'error' || p.type === 'assert')) consoleErrors.push(`console.${p.type}: ${(p.args as { value?: unknown; description?: string }[]).map((a) => a.description ?? String(a.value)).join(' ')}`);
        if (method === 'Runtime.exceptionThrown') consoleErrors.push(`exception: ${p.exceptionDetails?.exception?.description ?? p.exceptionDetails?.text}`);
        if (method === 'Log.entryAdded' && p.entry?.level === 'error') consoleErrors.push(`log: ${p.entry.text}${p.entry.url ? ` (${p.entry.url})` : ''}`);
      };
      for (const domain of ['Runtime.enable', 'Log.enable', 'Page.enable']) await cdp.send(domain, {}, sessionId);
      await cdp.send('Emulation.setDeviceMetricsOverride', { width: PAGE_WIDTH, height: 900, deviceScaleFactor: 1, mobile: false }, sessionId);
      await cdp.send('Page.navigate', { url: pathToFileURL(page).href }, sessionId);
      // The page script sets window.dashboardRendered once every panel is drawn.
      let chartsDrawn: number | undefined;
      for (;;) {
        const { result } = (await cdp.send('Runtime.evaluate', { expression: 'window.dashboardRendered', returnByValue: true }, sessionId)) as { result: { value?: number } };
        if (typeof result.value === 'number') {
          chartsDrawn = result.value;
          break;
        }
        if (consoleErrors.length > 0) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const { result: size } = (await cdp.send('Runtime.evaluate', { expression: 'JSON.stringify([document.documentElement.scrollWidth, document.documentElement.scrollHeight])', returnByValue: true }, sessionId)) as { result: { value: string } };
      const [width, height] = JSON.parse(size.value) as [number, number];
      await cdp.send('Emulation.setDeviceMetricsOverride', { width, height, deviceScaleFactor: 1, mobile: false }, sessionId);
      const { data } = (await cdp.send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: false }, sessionId)) as { data: string };
      return { png: Buffer.from(data, 'base64'), consoleErrors, chartsDrawn: chartsDrawn ?? 0 };
    } finally {
      cdp.close();
    }
  } finally {
    clearTimeout(deadline);
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
    }
    // The group's leader is gone; whatever of the group is left goes too.
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // ESRCH: nothing was left.
    }
    child.stderr?.destroy();
    await rm(work, { recursive: true, force: true });
  }
}

/** A minimal DevTools protocol client over Node's WebSocket (flat sessions). */
class DevTools {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly ws: WebSocket;
  onEvent: (method: string, params: unknown, sessionId: string | undefined) => void = () => {};

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.addEventListener('message', (event) => {
      const message = JSON.parse(String(event.data)) as { id?: number; method?: string; params?: unknown; sessionId?: string; result?: unknown; error?: { message: string } };
      if (message.id !== undefined) {
        const waiter = this.pending.get(message.id);
        this.pending.delete(message.id);
        if (message.error) waiter?.reject(new Error(`DevTools: ${message.error.message}`));
        else waiter?.resolve(message.result);
      } else if (message.method) this.onEvent(message.method, message.params, message.sessionId);
    });
    ws.addEventListener('close', () => {
      for (const waiter of this.pending.values()) waiter.reject(new Error('DevTools connection closed'));
      this.pending.clear();
    });
  }

  static connect(url: string): Promise<DevTools> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.addEventListener('open', () => resolve(new DevTools(ws)), { once: true });
      ws.addEventListener('error', () => reject(new Error(`cannot connect to DevTools at ${url}`)), { once: true });
    });
  }

  send(method: string, params: object, sessionId?: string): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  }

  close(): void {
    this.ws.close();
  }
}
