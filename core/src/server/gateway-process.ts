import { flushTracing } from '../tracing/tracing.ts';
import cluster, { type Worker } from 'node:cluster';
import { existsSync, readFileSync } from 'node:fs';
import type { CrossNamespaceSecrets } from '../config/secret-grants.ts';
import type { Server } from 'node:http';
import { availableParallelism } from 'node:os';
import { getRequestListener } from '@hono/node-server';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { createAdminApp } from '../admin/admin-app.ts';
import { metrics, registry } from '../admin/metrics.ts';
import { ConfigLoader } from '../config/loader.ts';
import type { ServiceEndpoints } from '../config/source/kube.ts';
import { startKubeSource } from './kube-source.ts';
import type { AnyResource } from '../config/resource.ts';
import type { ConfigSnapshot, ResourceChecks } from '../config/store.ts';
import { GatewayRateLimiter } from '../ratelimit/gateway-limiter.ts';
import { rateLimitOptionsFromEnv } from '../ratelimit/grpc-service.ts';
import { loadRedisDriver } from '../redis/client.ts';
import type { Authorizer } from '../extauth/authorizer.ts';
import { flushLogs, type Logger } from '../log/logger.ts';
import type { GraphQLEndpoints } from '../proxy/destinations.ts';
import { startChunkCollector } from '../proxy/request/chunk-collector.ts';
import { Gateway } from '../proxy/gateway.ts';
import type { PathNormalization } from '../proxy/routing/normalize-path.ts';
import { UpstreamRegistry } from '../proxy/upstream/upstream-registry.ts';
import { assertPortFree, closeGracefully, listen, listenTls, type BindOptions, type ListenerLimits } from './listen.ts';
import { TlsContexts } from './tls-contexts.ts';
import { installProcessGuards, startWatchdog } from './process-guards.ts';
import { GatewayListeners, type GatewayListenersDeps } from './gateway-listeners.ts';
import { DEFAULT_PROXY_NAME } from './gateway-checks.ts';
import { createAccessLog, type AccessLog } from '../log/access-log.ts';
import { DEFAULT_PATH_NORMALIZATION } from '../proxy/routing/normalize-path.ts';

/** Default `--watchdog`: longer than any sound pause (a 20,000-route reload blocks ~2 s). */
export const DEFAULT_WATCHDOG_MS = 10_000;

/** Snapshots as a traffic process receives them (from its own loader, or pushed by the primary). */
export interface SnapshotFeed {
  /** The latest snapshot, if one arrived yet. */
  readonly current: ConfigSnapshot | undefined;
  onSnapshot(listener: (snapshot: ConfigSnapshot) => void | Promise<void>): void;
}

/** Pluggable parts of a gateway process: each subsystem adds itself here. */
export interface GatewayParts {
  /** Load-time checks per kind (e.g. GraphQL schema compilation), loaded for the kinds present. */
  checks?: (kinds: ReadonlySet<string>) => Promise<ResourceChecks>;
  /** Builds the GraphQL destination for one traffic process (each worker has its own). */
  graphql?: (deps: { upstreams: UpstreamRegistry; logger: Logger }) => GraphQLEndpoints;
  /**
   * Services of the main process, started before the first config load (e.g. the embedded
   * extauth gRPC server). May return an authorizer that a single-process gateway uses directly.
   */
  primary?: (deps: { logger: Logger; loader: ConfigLoader }) => Promise<PrimaryService>;
  /** Builds the authorizer of one traffic process; with workers, called in every worker. */
  authorizer?: (deps: { logger: Logger; snapshots: SnapshotFeed }) => Promise<Authorizer>;
}

/** What a {@link GatewayParts.primary} hook started. */
export interface PrimaryService {
  /** Extra fields for the `listening` line (e.g. `extauthPort`). */
  readonly listening?: Record<string, unknown>;
  /** An authorizer living in the main process, used when traffic is served there too. */
  readonly authorizer?: Authorizer;
  close(): Promise<void>;
}

/** `--kube`: the Kubernetes API as config source (SPEC 2.1). */
export interface KubeOptions {
  kubeconfig?: string | undefined;
  /** Namespaces watched; empty = all. */
  namespaces: readonly string[];
  /** Write resource status (one replica at a time, by Lease). The gateway does; a separate extauth does not. */
  writeStatus?: boolean;
  /** Which Secrets of other namespaces are read at all (docs/tenancy.md). */
  crossNamespaceSecrets?: CrossNamespaceSecrets;
}

export interface GatewayProcessOptions {
  /** The config directory; unused with {@link kube}. */
  configDir: string;
  kube?: KubeOptions | undefined;
  port: number;
  /** The HTTPS listener's port (SPEC 3.2.1; 0 picks one); VirtualServices with sslConfig are served there. */
  httpsPort?: number;
  /** Bind the HTTPS listener only while a VirtualService has sslConfig (`--https-port` not given); otherwise it always binds. */
  httpsOnDemand?: boolean | undefined;
  adminPort: number;
  host: string;
  /** Where the admin API listens (default 127.0.0.1: /config shows routes and upstream addresses). */
  adminHost?: string;
  /** Downstream connection limits (defaults: {@link DEFAULT_LISTENER_LIMITS}). */
  limits?: Partial<ListenerLimits>;
  /** Requests waiting for a connection per upstream host before 503 (default 1024). */
  maxPendingRequests?: number;
  /** Event loop silent this long: the traffic process is killed to be restarted (default 10 s; 0 = off). */
  watchdogMs?: number;
  /** Path normalisation before routing and auth (default: normalise, merge slashes, reject escaped slashes). */
  paths?: PathNormalization;
  /** 1 = serve in this process; more = that many cluster workers, each with its own SO_REUSEPORT socket on the port. */
  workers: number;
  /** `--proxy-name`: Gateway resources for this proxy define the listeners (docs/gateway.md; default `gateway-proxy`). */
  proxyName?: string | undefined;
  apiGroupDomain: string;
  /** `--cross-namespace-secrets` (docs/tenancy.md; default granted). */
  crossNamespaceSecrets?: CrossNamespaceSecrets;
  kubeClusterDomain: string;
  /** `--resolve HOST=ADDR`: dial ADDR for HOST (tests, clusters without DNS). */
  resolve: ReadonlyMap<string, string>;
  accessLog: boolean;
  shutdownGraceMs: number;
  logger: Logger;
  parts: GatewayParts;
}

/** Parses `--workers N|auto`. */
export function parseWorkers(value: string): number {
  if (value === 'auto') return availableParallelism();
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`--workers must be a positive integer or "auto", got "${value}"`);
  return n;
}

interface SnapshotMessage {
  type: 'gatehouse:snapshot';
  generation: number;
  resources: AnyResource[];
  endpoints?: [string, ServiceEndpoints][];
}

/**
 * Runs the gateway: config loading and the admin API in this process, traffic either
 * here (workers = 1) or in cluster workers that receive every snapshot from this
 * process, so all workers serve the same accepted configuration (and the same
 * last-accepted fallbacks).
 */
export async function runGatewayProcess(options: GatewayProcessOptions): Promise<void> {
  await loadDriversFor();
  installProcessGuards(options.logger);
  if (cluster.isWorker) return runWorker(options);
  const { logger } = options;
  const kube = options.kube ? await startKubeSource({ ...options.kube, ...(options.crossNamespaceSecrets ? { crossNamespaceSecrets: options.crossNamespaceSecrets } : {}) }, options.apiGroupDomain, logger) : undefined;
  const loader = new ConfigLoader({
    ...(kube ? { source: kube.source } : { dir: options.configDir }),
    apiGroupDomain: options.apiGroupDomain,
    crossNamespaceSecrets: options.crossNamespaceSecrets,
    logger,
    ...(options.parts.checks ? { checks: options.parts.checks } : {}),
  });

  const primary = await options.parts.primary?.({ logger, loader });
  let gateway: Gateway | undefined;
  let routesView: Gateway | undefined;
  let flags: FlagListeners | undefined;
  let listeners: GatewayListeners | undefined;
  let port: number | undefined;
  let httpsPort: number | undefined;
  const workers: Worker[] = [];
  let stopping = false;
  /** The Gateway listeners the first worker bound (for the `listening` line). */
  let workerListeners: { gateway: string; address: string; port: number; ssl: boolean }[] | undefined;

  if (options.workers === 1) {
    const authorizer = primary?.authorizer ?? (await options.parts.authorizer?.({ logger, snapshots: loader }));
    gateway = createGateway(options, authorizer);
    loader.onSnapshot((snapshot) => gateway!.update(snapshot));
    const contexts = tlsContextsFor(options.logger);
    flags = new FlagListeners(options, gateway, new HttpsListener(options, gateway, contexts), {});
    listeners = gatewayListeners(options, authorizer, {});
    loader.onSnapshot(async (snapshot) => {
      contexts.update(snapshot);
      await listeners!.update(snapshot);
      await flags!.sync(!listeners!.defines(snapshot)).catch((error: unknown) => logger.error({ err: error, code: 'GH_HTTPS_LISTEN' }, 'a --port/--https-port listener could not bind'));
    });
    const first = await loader.start();
    contexts.update(first);
    gateway.update(first);
    await listeners.update(first);
    await flags.sync(!listeners.defines(first), options.port);
    port = flags.port ?? listeners.describe()[0]?.port;
    httpsPort = flags.httpsPort;
    startWatchdog({ stallMs: options.watchdogMs ?? DEFAULT_WATCHDOG_MS });
  } else {
    // The primary serves no traffic; this route table only answers `admin:/config`
    // (its upstream pools are never dialled).
    routesView = new Gateway({ logger, upstreams: new UpstreamRegistry(), accessLog: false, kubeClusterDomain: options.kubeClusterDomain });
    // Subscribed before the first load, so a change while workers start is not lost.
    loader.onSnapshot((snapshot) => {
      routesView!.update(snapshot);
      const message = toMessage(snapshot);
      for (const worker of workers) if (worker.isConnected()) worker.send(message);
    });
    await loader.start();
    // Each worker binds the port itself with SO_REUSEPORT (SPEC 8): the primary holds no
    // listening socket, and the kernel spreads connections over the workers' sockets. A port
    // someone else listens on must still fail here, as it would without workers: a socket
    // without SO_REUSEPORT cannot bind while any other listens.
    await assertPortFree(options.port, options.host);
    if (options.httpsPort !== undefined && !options.httpsOnDemand) await assertPortFree(options.httpsPort, options.host);
    const ports = await Promise.all(Array.from({ length: options.workers }, () => forkWorker(() => loader.current!, workers, options)));
    port = ports[0]!.port;
    httpsPort = ports[0]!.httpsPort;
    if (ports[0]!.listeners?.length) workerListeners = ports[0]!.listeners;
    superviseWorkers(workers, () => loader.current!, logger, () => stopping, options);
  }

  const admin = createAdminApp({
    snapshot: () => loader.current,
    notReady: () => {
      if (options.workers === 1) return undefined;
      // Serving, not merely forked: a replacement counts once it listens (issue 29 finding 7).
      const alive = workers.filter((w) => LISTENING.has(w) && !w.isDead() && w.isConnected() && processRuns(w.process.pid)).length;
      return alive < options.workers ? `${alive} of ${options.workers} workers running (restarting the others)` : undefined;
    },
    routes: () => (listeners?.describe().length ? listeners.describeRoutes() : (gateway ?? routesView)?.describeRoutes()) ?? [],
    ...(kube ? { readyDetail: kube.readyDetail } : {}),
    metrics: async () => {
      if (workers.length === 0) return { contentType: registry.contentType, body: await registry.metrics() };
      // Sum the primary's metrics (config loads) with every worker's (traffic).
      const all = await Promise.all([registry.getMetricsAsJSON(), ...workers.map(workerMetrics)]);
      const merged = AggregatorRegistry.aggregate(all);
      return { contentType: merged.contentType, body: await merged.metrics() };
    },
  });
  kube?.afterFirstLoad(loader);
  const adminServer = await listen(getRequestListener(admin.fetch), options.adminPort, options.adminHost ?? '127.0.0.1');
  const gatewayListeners_ = listeners?.describe() ?? workerListeners ?? [];
  logger.info({ port, ...(httpsPort !== undefined ? { httpsPort } : {}), ...(gatewayListeners_.length ? { listeners: gatewayListeners_ } : {}), adminPort: adminServer.port, workers: options.workers, ...primary?.listening }, 'listening');

  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: draining in-flight requests');
    // Stop accepting at once (here and in the workers); drain while the loader stops.
    const drained = Promise.all([flags?.close(), listeners?.close(), ...workers.map((w) => stopWorker(w))]);
    await kube?.close();
    await loader.close();
    await drained;
    await gateway?.close();
    await routesView?.close();
    await primary?.close();
    await closeGracefully(adminServer.server, 1_000);
    await flushTracing();
    logger.info('stopped');
    flushLogs();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

function createGateway(options: GatewayProcessOptions, authorizer: Authorizer | undefined): Gateway {
  const { logger, parts } = options;
  // Traffic processes only: the admin API and config loading stream no bodies.
  startChunkCollector();
  const upstreams = new UpstreamRegistry({ resolve: (host) => options.resolve.get(host), ...(options.maxPendingRequests ? { maxPendingRequests: options.maxPendingRequests } : {}) });
  return new Gateway({
    logger,
    upstreams,
    accessLog: options.accessLog,
    kubeClusterDomain: options.kubeClusterDomain,
    ...(options.paths ? { paths: options.paths } : {}),
    ...(options.limits?.maxRequestHeaders !== undefined ? { maxRequestHeaders: options.limits.maxRequestHeaders } : {}),
    // An upgraded (WebSocket) connection idles out like any stream (--idle-timeout).
    ...(options.limits?.idleTimeoutMs !== undefined ? { upgradeLimits: { idleTimeoutMs: options.limits.idleTimeoutMs } } : {}),
    ...(parts.graphql ? { graphql: parts.graphql({ upstreams, logger }) } : {}),
    ...(authorizer ? { authorizer } : {}),
    rateLimiter: rateLimiterOf(logger),
  });
}

let processRateLimiter: GatewayRateLimiter | undefined;

/** The Redis driver, when the rate limiter's settings use Redis (loaded before any traffic, so the first decisions find it). */
async function loadDriversFor(): Promise<void> {
  if (rateLimitOptionsFromEnv().backend?.type === 'redis') await loadRedisDriver();
}

/**
 * Route and virtual-host rate limits: counters in memory, or in Redis (GATEHOUSE_RATELIMIT_*,
 * shared with the rate-limit server's settings). One per traffic process, shared by the
 * `--port` listeners and every Gateway listener, so a limit counts across listeners.
 */
function rateLimiterOf(logger: Logger): GatewayRateLimiter {
  return (processRateLimiter ??= new GatewayRateLimiter({ ...rateLimitOptionsFromEnv(), logger }));
}

function toMessage(snapshot: ConfigSnapshot): SnapshotMessage {
  return { type: 'gatehouse:snapshot', generation: snapshot.generation, resources: [...snapshot.resources.values()], ...(snapshot.endpoints ? { endpoints: [...snapshot.endpoints] } : {}) };
}

function fromMessage(message: SnapshotMessage): ConfigSnapshot {
  return { generation: message.generation, resources: new Map(message.resources.map((r) => [r.key, r])), statuses: [], diagnostics: [], ...(message.endpoints ? { endpoints: new Map(message.endpoints) } : {}) };
}

const HAS_PROC = existsSync('/proc/self/stat');

/**
 * Whether process `pid` still runs, asked of the kernel now: a killed worker is a zombie at once,
 * while the cluster's `exit` event arrives a moment later, when /readyz said ready meanwhile
 * (issue 29 finding 7). Where there is no /proc, the cluster's view alone decides.
 */
function processRuns(pid: number | undefined): boolean {
  if (!HAS_PROC || pid === undefined) return true;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // `pid (comm) state …`: comm may hold spaces and parentheses, the state follows the last ')'.
    const state = stat.charAt(stat.lastIndexOf(')') + 2);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Ports as workers bind them. */
interface Ports {
  port: number;
  httpsPort?: number | undefined;
  /** The Gateway listeners a worker bound (reported, not assigned). */
  listeners?: { gateway: string; address: string; port: number; ssl: boolean }[] | undefined;
}

/**
 * What the first worker bound (what `--port 0` and `--https-port 0` picked). With SO_REUSEPORT
 * every worker owns its socket, so `0` would give each its own port: the first worker binds the
 * ports as the flags say, and every later one (replacements too) is told the ports it got.
 */
let firstBound: Promise<Ports> | undefined;

/** The ports `worker` must bind, once known. */
function portsFor(worker: Worker, options: GatewayProcessOptions): Promise<Ports> {
  if (!firstBound) {
    firstBound = new Promise((resolve) => {
      const onMessage = (message: { type?: string; port?: number; httpsPort?: number }) => {
        if (message.type !== 'gatehouse:listening') return;
        worker.off('message', onMessage);
        resolve({ port: message.port!, httpsPort: message.httpsPort });
      };
      worker.on('message', onMessage);
    });
    return Promise.resolve({ port: options.port, httpsPort: options.httpsPort });
  }
  return firstBound.then((bound) => ({
    port: options.port === 0 ? bound.port : options.port,
    // Not bound by the first worker (on demand, no TLS VirtualService yet): the flag's port.
    httpsPort: options.httpsPort === 0 ? (bound.httpsPort ?? 0) : options.httpsPort,
  }));
}

/** Workers that said they listen; readiness counts only them. */
const LISTENING = new WeakSet<Worker>();

function forkWorker(latest: () => ConfigSnapshot, workers: Worker[], options: GatewayProcessOptions): Promise<Ports> {
  return new Promise((resolve, reject) => {
    const worker = cluster.fork();
    workers.push(worker);
    worker.on('message', (message: { type?: string; port?: number; httpsPort?: number; error?: string }) => {
      // Sent once the worker listens for messages: anything sent earlier may have been lost.
      if (message.type === 'gatehouse:ready') {
        worker.send(toMessage(latest()));
        void portsFor(worker, options).then((ports) => worker.isConnected() && worker.send({ type: 'gatehouse:ports', ...ports }));
      }
      if (message.type === 'gatehouse:listening') {
        LISTENING.add(worker);
        const listeners = (message as { listeners?: Ports['listeners'] }).listeners;
        resolve({ port: message.port!, ...(message.httpsPort !== undefined ? { httpsPort: message.httpsPort } : {}), ...(listeners ? { listeners } : {}) });
      }
      if (message.type === 'gatehouse:failed') reject(new Error(`worker failed to start: ${message.error}`));
    });
    worker.once('exit', (code) => reject(new Error(`worker exited with code ${code} before listening`)));
  });
}

/**
 * Forks a worker again when one dies (issue 17 finding 6: crashed workers were never replaced
 * while /readyz said ready), with exponential backoff from 100 ms to 10 s, reset once a worker
 * has lived for 30 s. Readiness reports missing workers meanwhile.
 */
function superviseWorkers(workers: Worker[], latest: () => ConfigSnapshot, logger: Logger, stopping: () => boolean, options: GatewayProcessOptions): void {
  let failures = 0;
  const watch = (worker: Worker) => {
    const born = Date.now();
    worker.once('exit', (code, signal) => {
      if (stopping()) return;
      const index = workers.indexOf(worker);
      if (index !== -1) workers.splice(index, 1);
      if (Date.now() - born > 30_000) failures = 0;
      const delay = Math.min(10_000, 100 * 2 ** failures++);
      logger.error({ code: 'GH_WORKER_EXITED', pid: worker.process.pid, exitCode: code, signal, restartInMs: delay }, 'a traffic worker died; forking a new one');
      setTimeout(() => {
        if (stopping()) return;
        metrics.workerRestarts.inc();
        // forkWorker adds the worker synchronously; one that dies before listening comes back here.
        forkWorker(latest, workers, options).catch((error: unknown) => logger.error({ err: error, code: 'GH_WORKER_EXITED' }, 'a replacement worker failed to start'));
        watch(workers[workers.length - 1]!);
      }, delay).unref();
    });
  };
  for (const worker of workers) watch(worker);
}

function stopWorker(worker: Worker): Promise<void> {
  if (worker.isDead()) return Promise.resolve();
  return new Promise((resolve) => {
    worker.once('exit', () => resolve());
    worker.send({ type: 'gatehouse:stop' });
  });
}

let metricsRequestId = 0;

/** Asks one worker for its metrics (as prom-client JSON). */
function workerMetrics(worker: Worker): Promise<MetricObjectWithValues<MetricValue<string>>[]> {
  const id = ++metricsRequestId;
  return new Promise((resolve) => {
    const timer = setTimeout(() => done([]), 2_000);
    const onMessage = (message: { type?: string; id?: number; metrics?: MetricObjectWithValues<MetricValue<string>>[] }) => {
      if (message.type === 'gatehouse:metrics' && message.id === id) done(message.metrics ?? []);
    };
    const done = (metrics: MetricObjectWithValues<MetricValue<string>>[]) => {
      clearTimeout(timer);
      worker.off('message', onMessage);
      resolve(metrics);
    };
    worker.on('message', onMessage);
    worker.send({ type: 'gatehouse:metrics', id });
  });
}

/** A cluster worker: serves traffic with snapshots pushed by the primary. */
async function runWorker(options: GatewayProcessOptions): Promise<void> {
  await loadDriversFor();
  const listeners = new Set<(snapshot: ConfigSnapshot) => void | Promise<void>>();
  const feed: SnapshotFeed & { current: ConfigSnapshot | undefined } = {
    current: undefined,
    onSnapshot: (listener) => void listeners.add(listener),
  };
  const authorizer = await options.parts.authorizer?.({ logger: options.logger, snapshots: feed });
  const gateway = createGateway(options, authorizer);
  const contexts = tlsContextsFor(options.logger);
  startWatchdog({ stallMs: options.watchdogMs ?? DEFAULT_WATCHDOG_MS });
  let started = false;
  const https = new HttpsListener(options, gateway, contexts, { reusePort: true });
  const flags = new FlagListeners(options, gateway, https, { reusePort: true });
  const gatewayListenerSet = gatewayListeners(options, authorizer, { reusePort: true });
  /** The ports to bind, as the primary says (`--port 0`: what the first worker got). */
  let givePorts!: (ports: Ports) => void;
  const ports = new Promise<Ports>((resolve) => (givePorts = resolve));
  const apply = async (snapshot: ConfigSnapshot) => {
    // A broadcast may overtake the reply to `ready`: never go back to an older config.
    if (feed.current && snapshot.generation <= feed.current.generation) return;
    feed.current = snapshot;
    for (const listener of listeners) await listener(snapshot);
    contexts.update(snapshot);
    gateway.update(snapshot);
    await gatewayListenerSet.update(snapshot);
    const useFlags = !gatewayListenerSet.defines(snapshot);
    if (!started) {
      try {
        const bind = await ports;
        await flags.sync(useFlags, bind.port);
        started = true;
        const bound = gatewayListenerSet.describe();
        process.send!({ type: 'gatehouse:listening', port: flags.port ?? bound[0]?.port ?? bind.port, ...(flags.httpsPort !== undefined ? { httpsPort: flags.httpsPort } : {}), ...(bound.length ? { listeners: bound } : {}) });
      } catch (error) {
        process.send!({ type: 'gatehouse:failed', error: (error as Error).message });
        process.exit(1);
      }
    } else {
      await flags.sync(useFlags).catch((error: unknown) => options.logger.error({ err: error, code: 'GH_HTTPS_LISTEN' }, 'a --port/--https-port listener could not bind'));
    }
  };
  // Snapshots are applied one at a time, in order: listeners are async and must not interleave.
  let applying = Promise.resolve();
  process.on('message', async (message: { type?: string }) => {
    if (message.type === 'gatehouse:ports') {
      const given = message as unknown as Ports;
      if (given.httpsPort !== undefined) https.usePort(given.httpsPort);
      givePorts(given);
    } else if (message.type === 'gatehouse:snapshot') {
      const snapshot = fromMessage(message as SnapshotMessage);
      // A snapshot that fails to apply is logged; it must not poison the chain for later ones.
      applying = applying.then(() => apply(snapshot)).catch((error: unknown) => options.logger.error({ err: error, generation: snapshot.generation }, 'applying configuration failed'));
    } else if (message.type === 'gatehouse:metrics') {
      process.send!({ type: 'gatehouse:metrics', id: (message as { id?: number }).id, metrics: await registry.getMetricsAsJSON() });
    } else if (message.type === 'gatehouse:stop') {
      await Promise.all([flags.close(), gatewayListenerSet.close()]);
      await gateway.close();
      await flushTracing();
      flushLogs();
      process.exit(0);
    }
  });
  process.send!({ type: 'gatehouse:ready' });
  // Signals go to the primary, which drains the workers; a worker ignores them to finish its requests.
  process.on('SIGTERM', () => {});
  process.on('SIGINT', () => {});
}

/**
 * The HTTPS listener (SPEC 3.2.1): with `--https-port` it always listens; without, it binds the
 * default port only while a VirtualService has sslConfig, so a gateway without TLS holds no
 * second port (issue 29 finding 17), and is closed gracefully when the last one goes.
 */
class HttpsListener {
  private server: Server | undefined;
  private port: number | undefined;
  /** The port to bind, when another worker already picked the one `--https-port 0` asked for. */
  private wantedPort: number | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** Gateway resources define the listeners meanwhile (docs/gateway.md). */
  private suspended = false;
  private readonly options: GatewayProcessOptions;
  private readonly gateway: Gateway;
  private readonly contexts: TlsContexts;
  private readonly bind: BindOptions;

  constructor(options: GatewayProcessOptions, gateway: Gateway, contexts: TlsContexts, bind: BindOptions = {}) {
    this.options = options;
    this.gateway = gateway;
    this.contexts = contexts;
    this.bind = bind;
  }

  /** Binds or closes as the configuration needs; resolves with the bound port (undefined: not listening). */
  sync(): Promise<number | undefined> {
    const next = this.queue.then(async () => {
      const { options } = this;
      const wanted = !this.closed && !this.suspended && options.httpsPort !== undefined && (!options.httpsOnDemand || this.contexts.size > 0);
      if (wanted && !this.server) {
        const { server, port } = await listenTls(this.gateway.handle, this.wantedPort ?? options.httpsPort!, options.host, this.contexts, options.limits, this.gateway.handleUpgrade, this.bind);
        this.server = server;
        this.port = port;
        // Bound again later (after Gateways went away): the same port, not another one `0` would pick.
        this.wantedPort ??= port;
        if (options.httpsOnDemand) options.logger.info({ httpsPort: port }, 'HTTPS listener bound: a VirtualService has sslConfig');
      } else if (!wanted && this.server) {
        const server = this.server;
        this.server = this.port = undefined;
        options.logger.info('HTTPS listener closed: no VirtualService has sslConfig');
        await closeGracefully(server, options.shutdownGraceMs);
      }
      return this.port;
    });
    // One change at a time; a failed bind does not stop later ones.
    this.queue = next.catch(() => {});
    return next;
  }

  /** Closes (gracefully) while Gateway resources define the listeners, and binds again when they go. */
  suspend(suspended: boolean): Promise<number | undefined> {
    this.suspended = suspended;
    return this.sync();
  }

  /** Binds `port` from now on (the one an earlier worker got for `--https-port 0`). */
  usePort(port: number): void {
    this.wantedPort = port;
  }

  /** Stops listening for good (graceful, as the plain listener). */
  close(): Promise<unknown> {
    this.closed = true;
    return this.sync();
  }
}

/** The HTTPS listener's certificates; a certificate that stops loading is logged, and the one served before keeps serving. */
function tlsContextsFor(logger: Logger): TlsContexts {
  return new TlsContexts((virtualService, message) => logger.error({ code: 'GH_CONFIG_BAD_TLS', virtualService }, `the new certificate of VirtualService ${virtualService} cannot be used (the previous one keeps serving): ${message}`));
}

/**
 * The listeners of the flags (`--port`, `--https-port`), bound while no Gateway resource defines
 * the listeners (docs/gateway.md) and closed gracefully while one does; bound again on the ports
 * they had.
 */
class FlagListeners {
  private server: Server | undefined;
  /** The plain listener's port, once bound (kept across a close). */
  port: number | undefined;
  httpsPort: number | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly options: GatewayProcessOptions;
  private readonly gateway: Gateway;
  private readonly https: HttpsListener;
  private readonly bind: BindOptions;
  /** The port to bind first (`--port`, or what the first worker got for `--port 0`). */
  private wantedPort: number | undefined;
  /** Whether the first sync (at start) is done. */
  private synced = false;

  constructor(options: GatewayProcessOptions, gateway: Gateway, https: HttpsListener, bind: BindOptions) {
    this.options = options;
    this.gateway = gateway;
    this.https = https;
    this.bind = bind;
  }

  /** Binds (`active`) or closes both listeners; `port` is the plain port to bind first. */
  sync(active: boolean, port?: number): Promise<void> {
    if (port !== undefined) this.wantedPort ??= port;
    const next = this.queue.then(async () => {
      const { options } = this;
      if (active && !this.server) {
        const bound = await listen(this.gateway.handle, this.port ?? this.wantedPort ?? options.port, options.host, options.limits, this.gateway.handleUpgrade, this.bind);
        this.server = bound.server;
        // The first bind is announced by the `listening` line; a later one (Gateways gone) here.
        if (this.synced) options.logger.info({ port: bound.port }, 'the --port listener bound: no Gateway resource defines the listeners');
        this.port = bound.port;
      } else if (!active && this.server) {
        const server = this.server;
        this.server = undefined;
        options.logger.info({ port: this.port }, 'the --port listener closed: Gateway resources define the listeners');
        await closeGracefully(server, options.shutdownGraceMs);
      }
      const https = await this.https.suspend(!active);
      if (https !== undefined) this.httpsPort = https;
      this.synced = true;
    });
    this.queue = next.catch(() => {});
    return next;
  }

  /** Stops both for good (graceful). */
  async close(): Promise<void> {
    await this.queue;
    const server = this.server;
    this.server = undefined;
    await Promise.all([server ? closeGracefully(server, this.options.shutdownGraceMs) : undefined, this.https.close()]);
  }
}

/** The Gateway-resource listeners of one traffic process; each listener gets its own proxy (route table, upstream pools). */
function gatewayListeners(options: GatewayProcessOptions, authorizer: Authorizer | undefined, bind: BindOptions): GatewayListeners {
  let defaultLog: AccessLog | undefined;
  const makeGateway: GatewayListenersDeps['makeGateway'] = ({ paths, accessLog, limits, headers }) => {
    const upstreams = new UpstreamRegistry({ resolve: (host) => options.resolve.get(host), ...(options.maxPendingRequests ? { maxPendingRequests: options.maxPendingRequests } : {}) });
    const graphql = options.parts.graphql?.({ upstreams, logger: options.logger });
    if (!accessLog && options.accessLog) defaultLog ??= createAccessLog(options.logger.bindings().name ?? 'gateway');
    const logTo = accessLog ?? (options.accessLog ? defaultLog : undefined);
    const proxy = new Gateway({
      logger: options.logger,
      upstreams,
      accessLog: logTo !== undefined,
      ...(logTo ? { accessLogger: logTo } : {}),
      kubeClusterDomain: options.kubeClusterDomain,
      paths: { ...(options.paths ?? DEFAULT_PATH_NORMALIZATION), ...paths },
      ...(limits.maxRequestHeaders !== undefined ? { maxRequestHeaders: limits.maxRequestHeaders } : {}),
      ...(limits.idleTimeoutMs !== undefined ? { upgradeLimits: { idleTimeoutMs: limits.idleTimeoutMs } } : {}),
      ...(headers ? { listenerHeaders: headers } : {}),
      ...(graphql ? { graphql } : {}),
      ...(authorizer ? { authorizer } : {}),
      rateLimiter: rateLimiterOf(options.logger),
    });
    return {
      handle: proxy.handle,
      handleUpgrade: proxy.handleUpgrade,
      update: (snapshot) => proxy.update(snapshot),
      describeRoutes: () => proxy.describeRoutes(),
      // The authorizer and the rate limiter are the process's: closed with it, not with one listener.
      release: async () => {
        await graphql?.close();
        await upstreams.close();
      },
    };
  };
  return new GatewayListeners({ proxyName: options.proxyName ?? DEFAULT_PROXY_NAME, limits: options.limits ?? {}, bind, graceMs: options.shutdownGraceMs, logger: options.logger, makeGateway, resolve: (host) => options.resolve.get(host), kubeClusterDomain: options.kubeClusterDomain });
}
