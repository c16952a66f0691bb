import { expressionHolds } from '../config/delegation.ts';
import type { Server } from 'node:http';
import type { ConfigSnapshot } from '../config/store.ts';
import type { AnyResource, Resource } from '../config/resource.ts';
import { bindOf, proxyNamesOf } from './gateway-checks.ts';
import { durationMs } from '../config/schema/common.ts';
import { field, type GatewaySpec } from '../config/schema/gateway.ts';
import { compileJsonFormat, compileStringFormat, ENVOY_DEFAULT_FORMAT } from '../log/access-format.ts';
import { compileAccessLogFilter } from '../log/access-filter.ts';
import { createFormattedAccessLog, type AccessEntry, type AccessLog, type FormattedSink } from '../log/access-log.ts';
import type { Logger } from '../log/logger.ts';
import type { PathNormalization } from '../proxy/routing/normalize-path.ts';
import { listenerHeadersOf, type ListenerHeaders } from '../proxy/request/listener-headers.ts';
import { assertPortFree, closeGracefully, DEFAULT_LISTENER_LIMITS, listen, listenTls, type BindOptions, type ListenerLimits } from './listen.ts';
import { TlsContexts } from './tls-contexts.ts';
import type { ProxyProtocolPolicy } from './proxy-protocol.ts';
import { DEFAULT_TCP_CONNECT_TIMEOUT_MS, DEFAULT_TCP_IDLE_TIMEOUT_MS, TcpProxyListener, type TcpListenerSettings } from './tcp-proxy.ts';
import { compileTcpRoutes } from './tcp-routes.ts';
import { KubeDnsResolver } from '../proxy/upstream/kube-resolver.ts';

/** What one Gateway asks of its listener, as compiled from the snapshot. */
export interface ListenerPlan {
  /** `namespace/name` of the Gateway. */
  readonly gateway: string;
  readonly address: string;
  readonly port: number;
  readonly ssl: boolean;
  /** Connection limits from `httpConnectionManagerSettings` (over the process's). */
  readonly limits: Partial<ListenerLimits>;
  /** Path normalisation from `httpConnectionManagerSettings`, when it sets any. */
  readonly paths: Partial<PathNormalization> | undefined;
  /** The Gateway's file sinks; undefined: the process's default access log. */
  readonly sinks: PlannedSink[] | undefined;
  /** Whether a VirtualService is served on this listener. */
  readonly selects: (vs: AnyResource) => boolean;
  /** `httpGateway.options` (its filters' settings: gzip, grpcWeb, buffer). */
  readonly httpOptions?: Readonly<Record<string, unknown>> | undefined;
  /** `serverName`/`serverHeaderTransformation` and `via` from `httpConnectionManagerSettings`. */
  readonly headers?: ListenerHeaders | undefined;
}

/** A file sink with the text its format was compiled from (what a reload compares). */
export interface PlannedSink extends FormattedSink {
  readonly source: string;
}

/** The Gateways of `snapshot` for the proxy `proxyName` that bind an HTTP listener, in a stable order. */
export function gatewaysFor(snapshot: ConfigSnapshot, proxyName: string): Resource<'Gateway'>[] {
  const out: Resource<'Gateway'>[] = [];
  for (const resource of snapshot.resources.values()) {
    if (resource.kind !== 'Gateway') continue;
    const gw = resource as Resource<'Gateway'>;
    if (field(gw.spec, 'tcpGateway') !== undefined || field(gw.spec, 'hybridGateway') !== undefined) continue;
    if (proxyNamesOf(gw.spec).includes(proxyName)) out.push(gw);
  }
  return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** The `tcpGateway` Gateways of `snapshot` for the proxy `proxyName` (TCP proxy listeners, docs/tcp-proxy.md). */
export function tcpGatewaysFor(snapshot: ConfigSnapshot, proxyName: string): Resource<'Gateway'>[] {
  const out: Resource<'Gateway'>[] = [];
  for (const resource of snapshot.resources.values()) {
    if (resource.kind !== 'Gateway') continue;
    const gw = resource as Resource<'Gateway'>;
    if (field(gw.spec, 'tcpGateway') !== undefined && field(gw.spec, 'hybridGateway') === undefined && proxyNamesOf(gw.spec).includes(proxyName)) out.push(gw);
  }
  return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/**
 * A Gateway's PROXY protocol setting: `options.proxyProtocol` (its
 * `allowRequestsWithoutProxyProtocol` honoured) or `useProxyProto: true`, as Gloo turns either
 * into Envoy's proxy_protocol listener filter; undefined: not read.
 */
export function proxyProtocolOf(spec: GatewaySpec): ProxyProtocolPolicy | undefined {
  const options = field<{ allowRequestsWithoutProxyProtocol?: boolean }>(field<object>(spec, 'options'), 'proxyProtocol');
  if (options !== undefined) return options.allowRequestsWithoutProxyProtocol === true ? { allowWithout: true } : {};
  return field<boolean>(spec, 'useProxyProto') === true ? {} : undefined;
}

/** A `tcpGateway` Gateway's listener settings over the process's limits. */
export function tcpSettingsOf(gw: Resource<'Gateway'>, base: Partial<ListenerLimits>): TcpListenerSettings {
  const { address, port } = bindOf(gw.spec);
  const options = field<NonNullable<NonNullable<GatewaySpec['tcpGateway']>['options']>>(field<object>(gw.spec, 'tcpGateway'), 'options');
  const idle = options?.tcpProxySettings?.idleTimeout;
  return {
    gateway: `${gw.namespace}/${gw.name}`,
    address,
    port,
    proxyProtocol: proxyProtocolOf(gw.spec),
    maxConnections: options?.connectionLimit?.maxActiveConnections ?? base.maxConnections ?? DEFAULT_LISTENER_LIMITS.maxConnections,
    idleTimeoutMs: idle !== undefined ? durationMs(idle) : DEFAULT_TCP_IDLE_TIMEOUT_MS,
    helloTimeoutMs: base.requestHeadersTimeoutMs ?? DEFAULT_LISTENER_LIMITS.requestHeadersTimeoutMs,
    maxConnectAttempts: options?.tcpProxySettings?.maxConnectAttempts ?? 1,
    connectTimeoutMs: DEFAULT_TCP_CONNECT_TIMEOUT_MS,
  };
}

/** Compiles a served Gateway (its checks passed) into a listener plan. */
export function planOf(gw: Resource<'Gateway'>, base: Partial<ListenerLimits>): ListenerPlan {
  const spec = gw.spec;
  const { address, port } = bindOf(spec);
  const http = field<NonNullable<GatewaySpec['httpGateway']>>(spec, 'httpGateway');
  const hcm = field<Record<string, unknown>>(field<object>(http, 'options'), 'httpConnectionManagerSettings');
  const limits: Partial<ListenerLimits> = { ...base };
  // The Gateway's own setting, never the --proxy-protocol flag's (that one is for the flags' listeners).
  const proxyProtocol = proxyProtocolOf(spec);
  if (proxyProtocol) limits.proxyProtocol = proxyProtocol;
  else delete limits.proxyProtocol;
  const ms = (name: string) => {
    const value = field<string>(hcm, name);
    return value === undefined ? undefined : durationMs(value);
  };
  const requestTimeout = ms('requestTimeout');
  if (requestTimeout !== undefined) limits.requestTimeoutMs = requestTimeout;
  const headersTimeout = ms('requestHeadersTimeout');
  if (headersTimeout !== undefined) limits.requestHeadersTimeoutMs = headersTimeout;
  // Envoy's stream idle timeout is the gateway's idle limit of a connection with a request in flight.
  const streamIdle = ms('streamIdleTimeout');
  if (streamIdle !== undefined) limits.idleTimeoutMs = streamIdle;
  const idle = ms('idleTimeout');
  if (idle !== undefined) limits.keepAliveTimeoutMs = idle;
  const headersCount = field<number>(hcm, 'maxHeadersCount');
  if (headersCount !== undefined) limits.maxRequestHeaders = headersCount;
  const headersKb = field<number>(hcm, 'maxRequestHeadersKb');
  if (headersKb !== undefined) limits.maxRequestHeaderBytes = headersKb * 1024;
  let paths: Partial<PathNormalization> | undefined;
  const normalize = field<boolean>(hcm, 'normalizePath');
  const merge = field<boolean>(hcm, 'mergeSlashes');
  const escaped = field<string | number>(hcm, 'pathWithEscapedSlashesAction');
  if (normalize !== undefined || merge !== undefined || escaped !== undefined) {
    paths = {};
    if (normalize !== undefined) paths.normalize = normalize;
    if (merge !== undefined) paths.mergeSlashes = merge;
    const action = typeof escaped === 'number' ? ['IMPLEMENTATION_SPECIFIC_DEFAULT', 'KEEP_UNCHANGED', 'REJECT_REQUEST', 'UNESCAPE_AND_REDIRECT', 'UNESCAPE_AND_FORWARD'][escaped] : escaped;
    if (action === 'KEEP_UNCHANGED') paths.escapedSlashes = 'keep';
    else if (action === 'REJECT_REQUEST') paths.escapedSlashes = 'reject';
    else if (action === 'UNESCAPE_AND_FORWARD' || action === 'UNESCAPE_AND_REDIRECT') paths.escapedSlashes = 'unescape';
  }
  const als = field<object>(field<object>(spec, 'options'), 'accessLoggingService');
  const logs = field<object[]>(als, 'accessLog');
  let sinks: PlannedSink[] | undefined;
  if (logs?.length) {
    sinks = [];
    for (const log of logs) {
      const sink = field<object>(log, 'fileSink');
      if (!sink) continue;
      const json = field<Record<string, unknown>>(sink, 'jsonFormat');
      const text = field<string>(sink, 'stringFormat');
      // One entry, one line: a format without a final newline gets one (Envoy would run the entries together).
      const source = json !== undefined ? JSON.stringify(json) : text ? (text.endsWith('\n') ? text : `${text}\n`) : ENVOY_DEFAULT_FORMAT;
      const filter = field<object>(log, 'filter');
      // The filter is part of what a reload compares: a changed filter swaps the log in place.
      sinks.push({ path: field<string>(sink, 'path')!, source: filter === undefined ? source : `${source}\0${JSON.stringify(filter)}`, format: json !== undefined ? compileJsonFormat(json) : compileStringFormat(source), filter: filter === undefined ? undefined : compileAccessLogFilter(filter, [], { errors: [], warnings: [] }) });
    }
  }
  return { gateway: `${gw.namespace}/${gw.name}`, address, port, ssl: field<boolean>(spec, 'ssl') === true, limits, paths, sinks, selects: selector(gw), httpOptions: field<Record<string, unknown>>(http, 'options'), headers: listenerHeadersOf({ serverName: field(hcm, 'serverName'), serverHeaderTransformation: field(hcm, 'serverHeaderTransformation'), via: field(hcm, 'via') }) };
}

/**
 * Gloo's VirtualService selection (gateway.proto, HttpGateway): the listed `virtualServices`;
 * else those matching `virtualServiceSelector` labels and `virtualServiceExpressions`; else all;
 * always within `virtualServiceNamespaces` (empty or `*`: every namespace). An `ssl` Gateway
 * serves the VirtualServices with sslConfig, a plain one those without (Gloo).
 */
function selector(gw: Resource<'Gateway'>): (vs: AnyResource) => boolean {
  const http = field<NonNullable<GatewaySpec['httpGateway']>>(gw.spec, 'httpGateway');
  const ssl = field<boolean>(gw.spec, 'ssl') === true;
  const refs = field<{ name: string; namespace?: string }[]>(http, 'virtualServices');
  const labels = field<Record<string, string>>(http, 'virtualServiceSelector');
  const expressions = field<{ expressions?: { key: string; operator?: string; values?: string[] }[] }>(http, 'virtualServiceExpressions')?.expressions;
  const namespaces = field<string[]>(http, 'virtualServiceNamespaces');
  const anyNamespace = !namespaces?.length || namespaces.includes('*');
  const listed = refs?.length ? new Set(refs.map((r) => `${r.namespace ?? gw.namespace}/${r.name}`)) : undefined;
  return (vs) => {
    if (vs.kind !== 'VirtualService') return false;
    if ((vs as Resource<'VirtualService'>).spec.sslConfig !== undefined !== ssl) return false;
    if (listed) return listed.has(`${vs.namespace}/${vs.name}`);
    if (!anyNamespace && !namespaces!.includes(vs.namespace)) return false;
    const own = vs.labels ?? {};
    if (labels && !Object.entries(labels).every(([k, v]) => own[k] === v)) return false;
    return (expressions ?? []).every((e) => expressionHolds(e, own));
  };
}

/** `snapshot` with only the VirtualServices `plan` serves (everything else unchanged). */
export function snapshotFor(snapshot: ConfigSnapshot, plan: ListenerPlan): ConfigSnapshot {
  const resources = new Map<string, AnyResource>();
  for (const [key, resource] of snapshot.resources) if (resource.kind !== 'VirtualService' || plan.selects(resource)) resources.set(key, resource);
  // The listener's HTTP filter options (gzip, grpcWeb, buffer) reach its routes' filters (proxy/filters/).
  const httpOptions = plan.httpOptions;
  return { ...snapshot, resources, listener: plan.gateway, listenerHttp: { httpOptions, key: httpOptions === undefined ? '' : JSON.stringify(httpOptions) } };
}

/** The parts of a listener a traffic process makes for each Gateway (its own route table, pools and access log). */
export interface ListenerGateway {
  readonly handle: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void;
  readonly handleUpgrade: (req: import('node:http').IncomingMessage, socket: import('node:stream').Duplex, head: Buffer) => void;
  update(snapshot: ConfigSnapshot): void;
  describeRoutes(): unknown[];
  /** Releases its upstream pools (the authorizer is the process's, closed with it). */
  release(): Promise<void>;
}

/** What {@link GatewayListeners} needs of its traffic process. */
export interface GatewayListenersDeps {
  /** This process's proxy name (`--proxy-name`): Gateways whose `proxyNames` hold it are served. */
  proxyName: string;
  /** The process's listener limits, under each Gateway's connection-manager settings. */
  limits: Partial<ListenerLimits>;
  bind: BindOptions;
  graceMs: number;
  logger: Logger;
  /** `--resolve`: the address to dial for an upstream host name (TCP proxy listeners; HTTP ones resolve in their proxy). */
  resolve?: ((host: string) => string | undefined) | undefined;
  /** Kubernetes cluster domain of `kube` destinations of TCP proxy listeners (default cluster.local). */
  kubeClusterDomain?: string | undefined;
  /** A proxy for one listener, with its paths and access log (undefined: the process's default log). */
  makeGateway(options: { paths: Partial<PathNormalization> | undefined; accessLog: AccessLog | undefined; limits: Partial<ListenerLimits>; headers?: ListenerHeaders | undefined }): ListenerGateway;
}

interface BoundTcp {
  gateway: string;
  address: string;
  /** What forces a new socket when it changes (every setting). */
  bindKey: string;
  listener: TcpProxyListener;
}

interface Bound {
  plan: ListenerPlan;
  /** What forces a new socket when it changes: address, port, TLS, limits, paths. */
  bindKey: string;
  server: Server;
  port: number;
  gateway: ListenerGateway;
  contexts: TlsContexts;
  log: SwappableAccessLog;
}

/**
 * The listeners Gateway resources define (docs/gateway.md), kept in step with each snapshot:
 * a new Gateway binds, a removed one closes gracefully, a changed address, port, TLS flag,
 * limit or path setting binds the new socket first and then drains the old one (in-flight
 * requests finish on it); a changed VirtualService selection or access-log format is swapped in
 * place. A Gateway that cannot bind is logged and retried with the next snapshot.
 */
export class GatewayListeners {
  private readonly bound = new Map<string, Bound>();
  private readonly tcp = new Map<string, BoundTcp>();
  private readonly kube: KubeDnsResolver;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  private readonly deps: GatewayListenersDeps;

  constructor(deps: GatewayListenersDeps) {
    this.deps = deps;
    this.kube = new KubeDnsResolver(deps.kubeClusterDomain);
  }

  /** Whether `snapshot` has Gateways for this proxy (then the `--port` listeners are not bound). */
  defines(snapshot: ConfigSnapshot): boolean {
    return gatewaysFor(snapshot, this.deps.proxyName).length > 0;
  }

  /** The listeners bound now, for the `listening` line and `admin:/config`. */
  describe(): { gateway: string; address: string; port: number; ssl: boolean; tcp?: true }[] {
    return [
      ...[...this.bound.values()].map((b) => ({ gateway: b.plan.gateway, address: b.plan.address, port: b.port, ssl: b.plan.ssl })),
      ...[...this.tcp.values()].map((t) => ({ gateway: t.gateway, address: t.address, port: t.listener.port, ssl: false, tcp: true as const })),
    ];
  }

  /** Routes of every listener, for `admin:/config`. */
  describeRoutes(): unknown[] {
    return [...this.bound.values()].flatMap((b) => b.gateway.describeRoutes().map((r) => ({ ...(r as object), gateway: b.plan.gateway })));
  }

  /** Binds, rebinds and closes to match `snapshot`; one update at a time. */
  update(snapshot: ConfigSnapshot): Promise<void> {
    const next = this.queue.then(() => this.apply(snapshot));
    this.queue = next.catch(() => {});
    return next;
  }

  private async apply(snapshot: ConfigSnapshot): Promise<void> {
    if (this.closed) return;
    const { logger } = this.deps;
    const wanted = new Map(gatewaysFor(snapshot, this.deps.proxyName).map((gw) => [`${gw.namespace}/${gw.name}`, planOf(gw, this.deps.limits)]));
    const draining: Promise<void>[] = [];
    for (const [key, old] of this.bound) {
      if (wanted.has(key)) continue;
      this.bound.delete(key);
      logger.info({ gateway: key, port: old.port }, 'Gateway listener closed');
      draining.push(this.retire(old));
    }
    for (const [key, plan] of wanted) {
      const old = this.bound.get(key);
      const bindKey = JSON.stringify([plan.address, plan.port, plan.ssl, plan.limits, plan.paths ?? null, plan.headers ?? null]);
      const scoped = snapshotFor(snapshot, plan);
      if (old && old.bindKey === bindKey) {
        old.plan = plan;
        old.contexts.update(scoped);
        old.gateway.update(scoped);
        old.log.swap(plan.sinks);
        continue;
      }
      // A changed bind: the new server listens first, then the old one drains its connections:
      // no moment without a listener.
      try {
        // Same address, port and protocol: the new server accepts on the old one's socket, so no
        // connection waiting in the old socket's queue is reset; otherwise a new socket binds.
        const sameSocket = old && old.plan.address === plan.address && old.port === plan.port && plan.port !== 0 && old.plan.ssl === plan.ssl ? old.server : undefined;
        const made = await this.bindOne(plan, bindKey, scoped, sameSocket);
        this.bound.set(key, made);
        logger.info({ gateway: key, address: plan.address, port: made.port, ssl: plan.ssl }, 'Gateway listener bound');
        if (old) draining.push(this.retire(old));
      } catch (error) {
        logger.error({ err: error, code: 'GH_GATEWAY_LISTEN', gateway: key, address: plan.address, port: plan.port }, 'a Gateway listener could not bind; retried with the next configuration');
      }
    }
    await this.applyTcp(snapshot, draining);
    await Promise.all(draining);
  }

  /** The TCP proxy listeners of `snapshot`: routes swapped in place, a changed setting binds anew (as HTTP listeners). */
  private async applyTcp(snapshot: ConfigSnapshot, draining: Promise<void>[]): Promise<void> {
    const { logger, graceMs } = this.deps;
    const wanted = new Map(tcpGatewaysFor(snapshot, this.deps.proxyName).map((gw) => [`${gw.namespace}/${gw.name}`, gw]));
    for (const [key, old] of this.tcp) {
      if (wanted.has(key)) continue;
      this.tcp.delete(key);
      logger.info({ gateway: key, port: old.listener.port }, 'Gateway listener closed');
      draining.push(old.listener.close(graceMs));
    }
    for (const [key, gw] of wanted) {
      const settings = tcpSettingsOf(gw, this.deps.limits);
      let routes: ReturnType<typeof compileTcpRoutes>;
      try {
        routes = compileTcpRoutes(gw, snapshot, { resolve: this.deps.resolve, kubeResolver: this.kube });
      } catch (error) {
        // Not expected (the checks passed): the listener keeps the routes it has, a new one is not bound.
        logger.error({ err: error, code: 'GH_TCP_PROXY', gateway: key }, 'a TCP Gateway could not be compiled; its listener keeps its previous routes');
        continue;
      }
      for (const route of routes.routes) if (route.broken) logger.error({ code: 'GH_TCP_PROXY', gateway: key, tcpHost: route.name, cause: route.broken }, 'a TCP host cannot forward: its connections are closed');
      const bindKey = JSON.stringify(settings);
      const old = this.tcp.get(key);
      if (old && old.bindKey === bindKey) {
        old.listener.update(routes);
        continue;
      }
      try {
        if (!this.deps.bind.reusePort && !this.holds(settings.address, settings.port)) await assertPortFree(settings.port, settings.address);
        const listener = await TcpProxyListener.listen(routes, settings, logger, { reusePort: true });
        this.tcp.set(key, { gateway: key, address: settings.address, bindKey, listener });
        logger.info({ gateway: key, address: settings.address, port: listener.port, tcp: true }, 'Gateway listener bound');
        if (old) draining.push(old.listener.close(graceMs));
      } catch (error) {
        logger.error({ err: error, code: 'GH_GATEWAY_LISTEN', gateway: key, address: settings.address, port: settings.port }, 'a Gateway listener could not bind; retried with the next configuration');
      }
    }
  }

  private async bindOne(plan: ListenerPlan, bindKey: string, scoped: ConfigSnapshot, takeOver?: Bound['server']): Promise<Bound> {
    const log = new SwappableAccessLog(plan.sinks, this.deps.logger);
    const gateway = this.deps.makeGateway({ paths: plan.paths, accessLog: plan.sinks ? log : undefined, limits: plan.limits, headers: plan.headers });
    const contexts = new TlsContexts((virtualService, message) => this.deps.logger.error({ code: 'GH_CONFIG_BAD_TLS', virtualService }, `the new certificate of VirtualService ${virtualService} cannot be used (the previous one keeps serving): ${message}`));
    contexts.update(scoped);
    gateway.update(scoped);
    try {
      // Every Gateway socket has SO_REUSEPORT, so that a rebind on the same port can overlap the
      // old socket. A port this process does not hold yet is probed first (one process: workers
      // bind beside each other), so a port someone else listens on still fails (EADDRINUSE).
      if (!this.deps.bind.reusePort && !this.holds(plan.address, plan.port)) await assertPortFree(plan.port, plan.address);
      const bind = { reusePort: true, takeOver };
      const { server, port } = plan.ssl
        ? await listenTls(gateway.handle, plan.port, plan.address, contexts, plan.limits, gateway.handleUpgrade, bind)
        : await listen(gateway.handle, plan.port, plan.address, plan.limits, gateway.handleUpgrade, bind);
      return { plan, bindKey, server, port, gateway, contexts, log };
    } catch (error) {
      log.close();
      await gateway.release();
      throw error;
    }
  }

  /** Whether a listener of this set is bound to `address:port` now. */
  private holds(address: string, port: number): boolean {
    return [...this.bound.values()].some((b) => b.port === port && b.plan.address === address) || [...this.tcp.values()].some((t) => t.listener.port === port && t.address === address);
  }

  private async retire(old: Bound): Promise<void> {
    await closeGracefully(old.server, this.deps.graceMs);
    old.log.close();
    await old.gateway.release();
  }

  /** Stops every listener gracefully. */
  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
    const all = [...this.bound.values()];
    const tcp = [...this.tcp.values()];
    this.bound.clear();
    this.tcp.clear();
    await Promise.all([...all.map((b) => this.retire(b)), ...tcp.map((t) => t.listener.close(this.deps.graceMs))]);
  }
}

/**
 * A listener's access log, whose format changes with its Gateway without a new proxy: entries go
 * to the current sinks; the previous ones are flushed and closed on a swap.
 */
class SwappableAccessLog implements AccessLog {
  private current: (AccessLog & { close(): void }) | undefined;
  private key: string | undefined;
  private readonly logger: Logger;

  constructor(sinks: PlannedSink[] | undefined, logger: Logger) {
    this.logger = logger;
    this.swap(sinks);
  }

  /** Takes `sinks` from now on (kept as they are when their paths and format texts did not change). */
  swap(sinks: PlannedSink[] | undefined): void {
    const key = sinks ? JSON.stringify(sinks.map((s) => [s.path, s.source])) : undefined;
    if (key === this.key) return;
    this.current?.close();
    this.current = undefined;
    this.key = key;
    if (!sinks?.length) return;
    try {
      this.current = createFormattedAccessLog(sinks);
    } catch (error) {
      this.logger.error({ err: error, code: 'GH_ACCESS_LOG_OPEN', paths: sinks.map((s) => s.path) }, 'an access log file cannot be opened; this listener logs no access lines');
    }
  }

  write(entry: AccessEntry): void {
    this.current?.write(entry);
  }

  flush(): void {
    this.current?.flush();
  }

  close(): void {
    this.current?.close();
    this.current = undefined;
  }
}
