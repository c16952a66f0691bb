/**
 * The stack the dashboard is rendered against, all real processes on 127.0.0.1: `gatehouse
 * gateway --extauth-address` + `gatehouse extauth` (the chart's two Deployments), three upstreams
 * (fast, failing, slow), and Prometheus (test/observability/install-prometheus.sh) scraping both
 * admin ports every second, with the target labels a prometheus-operator ServiceMonitor adds.
 * {@link driveTraffic} sends a bounded mix: allowed, denied (401 no or wrong key, 403 an AuthConfig
 * whose plugin cannot be built), 5xx from the failing upstream, slow answers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { renderCrds } from '../../core/src/install/crds.ts';
import { startKubeApiServer, type KubeBinaries, type KubeObject } from '../kube/apiserver.ts';
import { makeConfigDir, manifests } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually } from '../support/http.ts';
import { freePort } from '../support/ports.ts';
import { startEcho, startServer, type TestServer } from '../support/upstream.ts';

/** Prometheus's scrape interval in the stack, in seconds: the `$__rate_interval` arithmetic uses it. */
export const SCRAPE_INTERVAL = 1;

/** A peer binary, `undefined` when missing outside CI (the caller prints SKIPPED), an Error when missing on CI. */
export type Found = string | Error | undefined;

function find(what: string, candidates: (string | undefined)[], hint: string): Found {
  const found = candidates.filter((c): c is string => !!c).find((c) => existsSync(c));
  if (found) return found;
  const message = `${what} not found: ${hint}`;
  return process.env.CI === 'true' ? new Error(message) : undefined;
}

/** The Prometheus server built by install-prometheus.sh (or GATEHOUSE_PROMETHEUS). */
export function findPrometheus(): Found {
  const tools = process.env.GATEHOUSE_TOOLS_DIR ?? join(homedir(), '.cache/gatehouse-tools');
  return find('prometheus', [process.env.GATEHOUSE_PROMETHEUS, join(tools, 'prometheus/bin/prometheus')], 'run test/observability/install-prometheus.sh (or set GATEHOUSE_PROMETHEUS)');
}

/** Debian's chromium-headless-shell (test/graphql/install-chromium.sh, or GATEHOUSE_CHROMIUM). */
export function findChromium(): Found {
  return find('chromium-headless-shell', [process.env.GATEHOUSE_CHROMIUM, '/usr/bin/chromium-headless-shell', '/usr/bin/chromium'], 'run test/graphql/install-chromium.sh (or set GATEHOUSE_CHROMIUM)');
}

/** The API key the traffic's allowed requests carry. */
export const API_KEY = 'obs-4c1d2e9a-allowed-key';

/** The running stack. */
export interface Stack {
  gateway: GatehouseProcess;
  extauth: GatehouseProcess;
  prometheusUrl: string;
  /** The share of requests (0–1) the failing `payments` upstream answers with 5xx; traffic may change it. */
  setPaymentsFailureRate(rate: number): void;
  close(): Promise<void>;
}

const b64 = (text: string) => Buffer.from(text).toString('base64');

/** The namespace of the configuration with `kube`. */
const NAMESPACE = 'shop';

/**
 * Starts upstreams, extauth, the gateway and Prometheus; resolves once Prometheus scrapes both admin
 * ports. With `kube` (etcd and kube-apiserver, test/kube/install-kube.sh) the configuration is applied
 * to a real API server and both processes run with `--kube`, as the chart's default
 * `config.source: kube` runs them; without it they read a config directory.
 */
export async function startStack(prometheus: string, options: { kube?: KubeBinaries } = {}): Promise<Stack> {
  const closers: (() => Promise<unknown>)[] = [];
  const close = async () => {
    for (const closer of closers.reverse()) await closer().catch(() => {});
  };
  try {
    const orders = await startEcho('orders');
    closers.push(() => orders.close());
    let failureRate = 0.25;
    let paymentsCalls = 0;
    let paymentsFailures = 0;
    // Fails `failureRate` of its requests, spread evenly (a counter, not a random draw): 503 and 500 alternate.
    const payments = await startServer((_req, res) => {
      paymentsCalls++;
      const fails = paymentsFailures < Math.floor(paymentsCalls * failureRate);
      if (fails) paymentsFailures++;
      res.writeHead(fails ? (paymentsFailures % 2 ? 503 : 500) : 200, { 'content-type': 'application/json' });
      res.end('{}');
    });
    closers.push(() => payments.close());
    let reportsCalls = 0;
    // Answers after 50–750 ms, cycling: the upstream latency panel's p99 stands apart from its p50.
    const reports = await startServer((_req, res) => {
      const delay = [50, 80, 120, 60, 90, 750, 70, 300][reportsCalls++ % 8]!;
      const timer = setTimeout(() => res.end('{"report":"ok"}'), delay);
      res.once('close', () => clearTimeout(timer));
    });
    closers.push(() => reports.close());

    const files = configFiles({ orders, payments, reports });
    const dir = await makeConfigDir(options.kube ? {} : files);
    closers.push(() => dir.cleanup());
    let source = ['--config-dir', dir.path];
    const env = (pod: string) => ({ env: { POD_NAME: pod, POD_NAMESPACE: NAMESPACE } });
    if (options.kube) {
      const kube = await startKubeApiServer({ binaries: options.kube });
      closers.push(() => kube.stop());
      await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
      for (const crd of renderCrds('gatehouse.dev', {})) {
        await kube.apply(crd as unknown as KubeObject);
        await kube.waitForCrd(crd.metadata!.name!);
      }
      for (const object of Object.values(files).flat() as KubeObject[]) await kube.apply({ ...object, metadata: { ...object.metadata, namespace: NAMESPACE } });
      source = ['--kube', '--kubeconfig', kube.kubeconfig, '--namespace', NAMESPACE];
    }
    const extauth = await startGatehouse('extauth', [...source, '--host', '127.0.0.1', '--plugin-dir', join(dir.path, 'no-plugins')], env('extauth'));
    closers.push(() => extauth.stop());
    // A relaxed auth timeout: a loaded machine must not turn the picture's allowed requests into 403s.
    const gateway = await startGatehouse('gateway', [...source, '--access-log', 'false', '--extauth-address', `127.0.0.1:${extauth.port}`, '--extauth-timeout', '2s'], env('gateway'));
    closers.push(() => gateway.stop());
    // Both serve their first configuration (with --kube, once the API server's lists arrived).
    for (const process of [extauth, gateway]) await eventually(async () => (await fetch(`${process.adminUrl}/readyz`)).ok, 60_000, 100);

    const prom = await startPrometheus(prometheus, [
      { job: 'gateway-admin', port: gateway.adminPort!, pod: 'gateway', container: 'gateway' },
      { job: 'extauth', port: extauth.adminPort!, pod: 'extauth', container: 'extauth' },
    ]);
    closers.push(() => prom.close());
    return {
      gateway,
      extauth,
      prometheusUrl: prom.url,
      setPaymentsFailureRate(rate) {
        failureRate = rate;
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** The configuration: one virtual host behind API keys, a partner route behind a plugin that is not installed, and one rejected VirtualService. */
function configFiles(upstreams: { orders: TestServer; payments: TestServer; reports: TestServer }): Record<string, object | object[]> {
  const route = (prefix: string, upstream: string, config = 'api-keys') => ({ matchers: [{ prefix }], options: { extauth: { configRef: { name: config } } }, routeAction: { single: { upstream: { name: upstream } } } });
  return {
    'keys.yaml': { apiVersion: 'v1', kind: 'Secret', type: 'extauth.solo.io/apikey', metadata: { name: 'shop-client', namespace: 'default', labels: { team: 'shop' } }, data: { 'api-key': b64(API_KEY) } },
    'auth.yaml': [
      manifests.authConfig('api-keys', [{ apiKeyAuth: { labelSelector: { team: 'shop' } } }]),
      // Its plugin file is not in --plugin-dir: extauth cannot build it, denies its requests (403)
      // and reports it in gatehouse_extauth_config_unavailable, as after a botched plugin rollout.
      manifests.authConfig('partner-plugin', [{ pluginAuth: { name: 'PartnerCheck', config: {} } }]),
    ],
    'upstreams.yaml': Object.entries(upstreams).map(([name, server]) => manifests.upstream(name, [{ addr: '127.0.0.1', port: server.port }])),
    'shop.yaml': manifests.virtualService('shop', {
      domains: ['*'],
      routes: [route('/orders', 'orders'), route('/payments', 'payments'), route('/reports', 'reports'), route('/partners', 'orders', 'partner-plugin')],
    }),
    // Routes to an Upstream nobody created: Rejected (gatehouse_config_rejected_resources{kind="VirtualService"}).
    'legacy.yaml': manifests.virtualService('legacy', { domains: ['legacy.example'], routes: [route('/', 'inventory')] }),
  };
}

interface ScrapeTarget {
  job: string;
  port: number;
  pod: string;
  container: string;
}

async function startPrometheus(binary: string, targets: ScrapeTarget[]): Promise<{ url: string; close(): Promise<void> }> {
  const work = await mkdtemp(join(tmpdir(), 'gatehouse-prometheus-'));
  const config = {
    global: { scrape_interval: `${SCRAPE_INTERVAL}s`, scrape_timeout: `${SCRAPE_INTERVAL}s`, evaluation_interval: `${SCRAPE_INTERVAL}s` },
    scrape_configs: targets.map((t) => ({
      job_name: t.job,
      metrics_path: '/metrics',
      // The labels prometheus-operator puts on a ServiceMonitor's targets; the dashboard groups by `pod`.
      static_configs: [{ targets: [`127.0.0.1:${t.port}`], labels: { namespace: 'gatehouse-system', service: t.job, pod: t.pod, container: t.container, endpoint: 'admin' } }],
    })),
  };
  await writeFile(join(work, 'prometheus.yml'), stringify(config));
  const port = await freePort();
  const child: ChildProcess = spawn(binary, [`--config.file=${join(work, 'prometheus.yml')}`, `--storage.tsdb.path=${join(work, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    await rm(work, { recursive: true, force: true });
  };
  try {
    // Up: every target scraped successfully at least once.
    await eventually(async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}:\n${stderr}`);
      const response = await fetch(`${url}/api/v1/query?query=${encodeURIComponent('up == 1')}`);
      const body = (await response.json()) as { data?: { result: unknown[] } };
      return (body.data?.result.length ?? 0) === targets.length;
    }, 60_000, 200);
  } catch (error) {
    await close();
    throw new Error(`prometheus did not scrape its targets: ${(error as Error).message}\n${stderr}`);
  }
  return { url, close };
}

/** What the traffic got, by status (0: the request failed). */
export type StatusCounts = Record<number, number>;

/**
 * Sends the mix for `seconds` from `workers` concurrent loops (each request bounded by a 10 s timeout),
 * and resolves with the statuses seen. `onProgress(fraction)` runs every second (a script uses it to
 * stage an incident).
 */
export async function driveTraffic(gatewayUrl: string, seconds: number, options: { workers?: number; pauseMs?: number; onProgress?: (fraction: number) => void } = {}): Promise<StatusCounts> {
  const counts: StatusCounts = {};
  const mix: { path: string; key?: string }[] = [
    { path: '/orders/42', key: API_KEY },
    { path: '/payments/charge', key: API_KEY },
    { path: '/orders/7', key: API_KEY },
    { path: '/reports/daily', key: API_KEY },
    { path: '/orders/42' },
    { path: '/orders/9', key: API_KEY },
    { path: '/partners/acme', key: API_KEY },
    { path: '/payments/refund', key: API_KEY },
    { path: '/orders/1', key: 'revoked-key' },
    { path: '/orders/3', key: API_KEY },
  ];
  const start = Date.now();
  const end = start + seconds * 1000;
  const progress = options.onProgress ? setInterval(() => options.onProgress!((Date.now() - start) / (end - start)), 1000) : undefined;
  let next = 0;
  const worker = async () => {
    while (Date.now() < end) {
      const { path, key } = mix[next++ % mix.length]!;
      let status = 0;
      try {
        const response = await fetch(gatewayUrl + path, { headers: key ? { 'api-key': key } : {}, signal: AbortSignal.timeout(10_000) });
        await response.arrayBuffer();
        status = response.status;
      } catch {
        status = 0;
      }
      counts[status] = (counts[status] ?? 0) + 1;
      await new Promise((r) => setTimeout(r, options.pauseMs ?? 60));
    }
  };
  try {
    await Promise.all(Array.from({ length: options.workers ?? 3 }, worker));
  } finally {
    clearInterval(progress);
  }
  return counts;
}
