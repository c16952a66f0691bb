/**
 * The clusters of a traffic process, kept across reloads (./upstream-cluster.ts), and the
 * translation of an Upstream resource into cluster options.
 */
import { createHash } from 'node:crypto';
import type { Resource } from '../../config/resource.ts';
import { durationMs } from '../../config/schema/common.ts';
import { upstreamTls, type UpstreamTls } from '../../tls/upstream-tls.ts';
import { KubeDnsResolver, type KubeServiceResolver } from './kube-resolver.ts';
import { UpstreamCluster, type LoadBalancing, type OutlierDetection, type UpstreamOptions } from './upstream-cluster.ts';
import type { HealthCheck } from './health-check.ts';
import { RING_DEFAULT_MAX, RING_DEFAULT_MIN } from './consistent-hash.ts';
import { payloadBytes } from './tcp-health-check.ts';

/**
 * Keeps one {@link UpstreamCluster} per Upstream version (or Kubernetes service) across
 * config reloads, so unchanged upstreams keep their warm connections and in-flight
 * requests are never cut; clusters no longer referenced are closed after they drain.
 */
export class UpstreamRegistry {
  private clusters = new Map<string, UpstreamCluster>();
  private readonly resolve: ((host: string) => string | undefined) | undefined;
  private readonly connections: number | undefined;
  private readonly maxPendingRequests: number | undefined;

  /** Told about an Upstream whose TLS material stopped loading. */
  onTlsError: ((upstream: string, message: string) => void) | undefined;

  constructor(options: { resolve?: (host: string) => string | undefined; connections?: number; maxPendingRequests?: number } = {}) {
    this.resolve = options.resolve;
    this.connections = options.connections;
    this.maxPendingRequests = options.maxPendingRequests;
  }

  /**
   * The cluster for an Upstream resource (reused while its spec, and the TLS material it
   * uses, are unchanged). `secret` resolves `sslConfig.secretRef` (the config snapshot's).
   */
  forUpstream(upstream: Resource<'Upstream'>, secret: (ref: { name: string; namespace?: string }) => Resource<'Secret'> | undefined = () => undefined, kube: KubeServiceResolver = DEFAULT_KUBE_RESOLVER): UpstreamCluster {
    let tls: UpstreamTls | undefined;
    let tlsError: string | undefined;
    try {
      tls = upstreamTls(upstream, secret);
    } catch (error) {
      // Load-time checks reject such an Upstream; material that changed under it since lands here. Fail closed: TLS with system CAs.
      tlsError = (error as Error).message;
      tls = {};
    }
    const material = tls ? createHash('sha256').update(JSON.stringify(tls)).digest('hex').slice(0, 16) : 'plain';
    const hosts = hostsOf(upstream, kube);
    if (hosts.length === 0) throw new Error(`Upstream ${upstream.namespace}/${upstream.name}: its Kubernetes service has no ready endpoints`);
    // A kube Upstream's hosts come from the resolver: new hosts, new cluster (the old one drains).
    const resolved = upstream.spec.kube ? `@${createHash('sha256').update(JSON.stringify(hosts)).digest('hex').slice(0, 16)}` : '';
    const id = `${upstream.key}@${upstream.version}@${material}${resolved}`;
    let cluster = this.clusters.get(id);
    if (!cluster) {
      if (tlsError) this.onTlsError?.(`${upstream.namespace}/${upstream.name}`, tlsError);
      const spec = upstream.spec;
      const lb = spec.loadBalancerConfig;
      const breakers = spec.circuitBreakers;
      cluster = new UpstreamCluster(`${upstream.namespace}/${upstream.name}`, hosts, {
        ...(tls ? { tls } : {}),
        ...(spec.useHttp2 ? { http2: true } : {}),
        ...(loadBalancingOf(lb) ? { loadBalancing: loadBalancingOf(lb)! } : {}),
        ...(spec.connectionConfig?.connectTimeout ? { connectTimeoutMs: durationMs(spec.connectionConfig.connectTimeout) } : {}),
        ...(this.resolve ? { resolve: this.resolve } : {}),
        ...(this.connections ? { connections: this.connections } : {}),
        ...(this.maxPendingRequests ? { maxPendingRequests: this.maxPendingRequests } : {}),
        ...(spec.outlierDetection ? { outlier: outlierOf(spec.outlierDetection) } : {}),
        ...(spec.healthChecks?.[0] ? { healthCheck: healthCheckOf(spec.healthChecks[0]) } : {}),
        // Gloo's failover: each prioritized locality list is one lower priority (its localities' endpoints together).
        ...(spec.failover?.prioritizedLocalities.length ? { failover: spec.failover.prioritizedLocalities.map((p) => p.localityEndpoints.flatMap((l) => l.lbEndpoints.map((e) => ({ addr: e.address, port: e.port, loadBalancingWeight: e.loadBalancingWeight })))) } : {}),
        // circuitBreakers (Envoy's thresholds, per host) win over the process-wide defaults: connections in the pool, requests waiting for one.
        ...(breakers?.maxConnections !== undefined ? { connections: breakers.maxConnections } : {}),
        ...(breakers?.maxPendingRequests !== undefined ? { maxPendingRequests: breakers.maxPendingRequests } : {}),
        ...(breakers?.maxRequests !== undefined ? { maxRequests: breakers.maxRequests } : {}),
        ...(breakers?.maxRetries !== undefined ? { maxRetries: breakers.maxRetries } : {}),
        ...connectionOptions(spec.connectionConfig),
      });
      this.clusters.set(id, cluster);
    }
    return cluster;
  }

  /** The cluster for a Kubernetes service destination (`<name>.<namespace>.svc.<clusterDomain>:<port>`). */
  /** A round-robin cluster over several hosts (a Kubernetes service's endpoints), reused while they are the same. */
  forHosts(hosts: readonly { addr: string; port: number }[]): UpstreamCluster {
    const id = `hosts:${hosts.map((h) => `${h.addr}:${h.port}`).join(',')}`;
    let cluster = this.clusters.get(id);
    if (!cluster) {
      cluster = new UpstreamCluster(hosts.map((h) => `${h.addr}:${h.port}`).join(','), [...hosts], {
        ...(this.resolve ? { resolve: this.resolve } : {}),
        ...(this.connections ? { connections: this.connections } : {}),
        ...(this.maxPendingRequests ? { maxPendingRequests: this.maxPendingRequests } : {}),
      });
      this.clusters.set(id, cluster);
    }
    return cluster;
  }

  forHost(addr: string, port: number): UpstreamCluster {
    const id = `host:${addr}:${port}`;
    let cluster = this.clusters.get(id);
    if (!cluster) {
      cluster = new UpstreamCluster(`${addr}:${port}`, [{ addr, port }], {
        ...(this.resolve ? { resolve: this.resolve } : {}),
        ...(this.connections ? { connections: this.connections } : {}),
        ...(this.maxPendingRequests ? { maxPendingRequests: this.maxPendingRequests } : {}),
      });
      this.clusters.set(id, cluster);
    }
    return cluster;
  }

  /** Closes (after draining) every cluster not in `keep`. Call after a new route table is live. */
  retainOnly(keep: ReadonlySet<UpstreamCluster>): void {
    for (const [id, cluster] of this.clusters) {
      if (!keep.has(cluster)) {
        this.clusters.delete(id);
        void cluster.close();
      }
    }
  }

  /** Closes every cluster; requests still running after `graceMs` are cut. */
  async close(graceMs = 5_000): Promise<void> {
    const all = [...this.clusters.values()];
    this.clusters.clear();
    await Promise.all(all.map((c) => c.close(graceMs)));
  }
}



/** Gloo's connectionConfig as cluster options (connectTimeout aside); fields not honoured get warnings at load (../config/checks/upstream.ts). */
function connectionOptions(config: Resource<'Upstream'>['spec']['connectionConfig']): UpstreamOptions {
  const http = config?.commonHttpProtocolOptions;
  const out: UpstreamOptions = {};
  if (config?.maxRequestsPerConnection) out.maxRequestsPerConnection = config.maxRequestsPerConnection;
  if (config?.tcpKeepalive) out.tcpKeepaliveMs = config.tcpKeepalive.keepaliveTime !== undefined ? keepaliveMs(config.tcpKeepalive.keepaliveTime) : DEFAULT_TCP_KEEPALIVE_MS;
  if (http?.idleTimeout !== undefined) out.idleTimeoutMs = durationMs(http.idleTimeout);
  if (http?.maxStreamDuration !== undefined && durationMs(http.maxStreamDuration) > 0) out.maxStreamDurationMs = durationMs(http.maxStreamDuration);
  if (http?.maxHeadersCount) out.maxHeadersCount = http.maxHeadersCount;
  return out;
}

/** A tcpKeepalive time: a duration, or whole seconds (Gloo's guide writes `keepaliveTime: 60`). */
function keepaliveMs(value: string | number): number {
  return typeof value === 'number' ? value * 1000 : durationMs(value);
}

/** Linux's default idle time before keep-alive probes (net.ipv4.tcp_keepalive_time), which Envoy leaves in place when keepaliveTime is unset. */
const DEFAULT_TCP_KEEPALIVE_MS = 7_200_000;

/** Gloo's loadBalancerConfig as a policy (undefined: round robin). */
function loadBalancingOf(lb: Resource<'Upstream'>['spec']['loadBalancerConfig']): LoadBalancing | undefined {
  if (lb?.random) return { kind: 'random' };
  if (lb?.leastRequest) return { kind: 'least-request', choiceCount: lb.leastRequest.choiceCount ?? 2 };
  if (lb?.ringHash) {
    const config = lb.ringHash.ringHashConfig;
    const max = config?.maximumRingSize !== undefined ? Number(config.maximumRingSize) : RING_DEFAULT_MAX;
    return { kind: 'ring-hash', minimumRingSize: Math.min(config?.minimumRingSize !== undefined ? Number(config.minimumRingSize) : RING_DEFAULT_MIN, max), maximumRingSize: max };
  }
  if (lb?.maglev) return { kind: 'maglev' };
  return undefined;
}

/** Resolves `kube` Upstreams when the caller gives no resolver: DNS under cluster.local. */
const DEFAULT_KUBE_RESOLVER = new KubeDnsResolver();

/** An Upstream's hosts: its static list, or what the resolver says its Kubernetes service is. */
export function hostsOf(upstream: Resource<'Upstream'>, kube: KubeServiceResolver): { addr: string; port: number; loadBalancingWeight?: number | undefined; sniAddr?: string | undefined }[] {
  const spec = upstream.spec;
  if (spec.static) return spec.static.hosts;
  const k = spec.kube!;
  return [...kube.hosts({ name: k.serviceName, namespace: k.serviceNamespace ?? upstream.namespace, port: k.servicePort, selector: k.selector })];
}

/** Envoy's outlier-detection defaults: 5 errors in a row, 30 s base ejection, at most 10% of hosts. */
function outlierOf(spec: NonNullable<Resource<'Upstream'>['spec']['outlierDetection']>): OutlierDetection {
  return {
    consecutive5xx: spec.consecutive5xx ?? 5,
    consecutiveGateway: spec.consecutiveGatewayFailure ?? 5,
    baseEjectionMs: spec.baseEjectionTime ? durationMs(spec.baseEjectionTime) : 30_000,
    maxEjectionPercent: spec.maxEjectionPercent ?? 10,
  };
}

function healthCheckOf(spec: NonNullable<Resource<'Upstream'>['spec']['healthChecks']>[number]): HealthCheck {
  const http = spec.httpHealthCheck;
  const ranges = http?.expectedStatuses ?? [{ start: 200, end: 201 }];
  return {
    ...(http ? { path: http.path } : {}),
    ...(http?.host ? { host: http.host } : {}),
    ...(spec.grpcHealthCheck ? { grpc: { serviceName: spec.grpcHealthCheck.serviceName ?? '', authority: spec.grpcHealthCheck.authority } } : {}),
    ...(spec.tcpHealthCheck ? { tcp: { send: spec.tcpHealthCheck.send ? payloadBytes(spec.tcpHealthCheck.send) : undefined, receive: (spec.tcpHealthCheck.receive ?? []).map(payloadBytes) } } : {}),
    intervalMs: durationMs(spec.interval),
    timeoutMs: durationMs(spec.timeout),
    healthyThreshold: spec.healthyThreshold,
    unhealthyThreshold: spec.unhealthyThreshold,
    // Envoy's ranges are half-open: [start, end).
    expected: (status) => ranges.some((r) => status >= r.start && status < r.end),
  };
}
