import { isIP } from 'node:net';
import type { SecureVersion } from 'node:tls';
import { buildConnector, Pool, type Dispatcher } from 'undici';
import { Http2Dispatcher } from './http2-dispatcher.ts';
import { tcpHealthProbe } from './tcp-health-check.ts';
import { grpcHealthProbe, httpHealthProbe, type HealthCheck } from './health-check.ts';
import { Maglev, RingHash, type HashTable } from './consistent-hash.ts';
import { tlsParameters, type UpstreamTls } from '../../tls/upstream-tls.ts';

// Upstream TLS material moved to ../tls/ (one version table with the listener); re-exported for importers.
export { upstreamTls, type UpstreamTls } from '../../tls/upstream-tls.ts';

/** One upstream host with its connection pool and passive health state. */
export interface UpstreamHost {
  readonly addr: string;
  readonly port: number;
  /** `http://addr:port` (or https). */
  readonly origin: string;
  readonly dispatcher: Dispatcher;
  /** Until this time (ms since epoch) the host is skipped after refusing a connection. */
  ejectedUntil: number;
  /** Errors in a row (outlier detection): 5xx, and gateway failures (502/503/504, connect failures). */
  consecutive5xx: number;
  consecutiveGateway: number;
  /** Times ejected by outlier detection (each ejection lasts baseEjectionTime × this). */
  ejections: number;
  /** False while active health checks find the host down. */
  healthy: boolean;
  /** Requests sent to this host still waiting for response headers (on a connection or queued for one). */
  inFlight: number;
  /** Its pool's connections: requests beyond them wait in the pool's queue. */
  readonly connections: number;
  /** `connections` + the pending-request limit: beyond it requests get 503 (Envoy's max_pending_requests). */
  readonly maxInFlight: number;
  /** Requests go over HTTP/2 (Upstream `useHttp2`): h2c on plain connections, ALPN `h2` on TLS. */
  readonly http2: boolean;
  /** With TLS: the server name every request to this host names (the connection's SNI is fixed by the pool). */
  readonly servername: string | undefined;
}

/** Streams per HTTP/2 upstream connection (undici opens another connection beyond it). */
export const UPSTREAM_H2_STREAMS = 100;

/** Envoy's default `max_pending_requests` circuit breaker. */
export const DEFAULT_MAX_PENDING_REQUESTS = 1024;

/** Envoy's default `max_requests` circuit breaker: requests in flight to one cluster. */
export const DEFAULT_MAX_REQUESTS = 1024;

/** Envoy's default `max_retries` circuit breaker: retries in flight to one cluster. */
export const DEFAULT_MAX_RETRIES = 3;

/** `idleTimeout: 0s` turns the idle timeout off (Envoy); timers cannot wait longer than this. */
const NO_IDLE_TIMEOUT_MS = 2 ** 31 - 1;

/** How long a host that refused a connection is skipped (passive health, SPEC 3.1). */
export const EJECTION_MS = 5_000;

const CONNECT_REFUSED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN']);

/** True when an error means the host could not be connected to at all (as opposed to a reset mid-request). */
export function isConnectFailure(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code !== undefined && CONNECT_REFUSED.has(code);
}

/**
 * The hosts of one Upstream (or one Kubernetes service), picked round-robin.
 * Hosts that refused a connection are skipped until their ejection ends; when every
 * host is ejected, all are tried again (Envoy's panic mode) rather than failing outright.
 */
export class UpstreamCluster {
  readonly name: string;
  readonly hosts: readonly UpstreamHost[];
  private cursor = 0;
  private readonly policy: LoadBalancing;
  /** Host indexes repeated by weight (round robin over them is weighted round robin); undefined when all weigh 1. */
  private readonly schedule: readonly number[] | undefined;
  /** Ring hash or Maglev: the host for a request's hash. */
  private readonly hashTable: HashTable | undefined;
  /** Requests in flight to the cluster (every try counts), bounded by `maxRequests` (Envoy's max_requests). */
  activeRequests = 0;
  readonly maxRequests: number;
  /** Retries in flight (from the decision to retry until that try ends), bounded by `maxRetries`. */
  activeRetries = 0;
  readonly maxRetries: number;
  /** Connection config `maxStreamDuration`: a cap on each try, response body included. */
  readonly maxStreamDurationMs: number | undefined;
  /** Connection config `maxHeadersCount`: a response with more header fields is refused (503). */
  readonly maxHeadersCount: number | undefined;

  constructor(name: string, hosts: { addr: string; port: number; loadBalancingWeight?: number | undefined; sniAddr?: string | undefined }[], options: UpstreamOptions = {}) {
    this.name = name;
    this.policy = options.loadBalancing ?? { kind: 'round-robin' };
    this.maxRequests = options.maxRequests ?? DEFAULT_MAX_REQUESTS;
    this.maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    this.maxStreamDurationMs = options.maxStreamDurationMs;
    this.maxHeadersCount = options.maxHeadersCount;
    const idleMs = options.idleTimeoutMs === undefined ? undefined : options.idleTimeoutMs === 0 ? NO_IDLE_TIMEOUT_MS : options.idleTimeoutMs;
    // undici's connector sets SO_KEEPALIVE with this first delay (Node cannot set the probe count or interval).
    const keepalive = options.tcpKeepaliveMs !== undefined ? { keepAlive: true, keepAliveInitialDelay: options.tcpKeepaliveMs } : {};
    const scheme = options.tls ? 'https' : 'http';
    this.hosts = hosts.map(({ addr, port, sniAddr }) => {
      const connectAddr = options.resolve?.(addr) ?? addr;
      const origin = `${scheme}://${connectAddr.includes(':') ? `[${connectAddr}]` : connectAddr}:${port}`;
      const http2 = options.http2 === true;
      const tls = options.tls && sniAddr ? { ...(options.tls === true ? {} : options.tls), servername: sniAddr } : options.tls;
      // HTTP/2 multiplexes: a few connections carry many streams (./http2-dispatcher.ts).
      // HTTP/1.1 when not asked for HTTP/2, as Envoy and Gloo.
      const poolConnections = options.connections ?? (http2 ? 4 : 128);
      const dispatcher: Dispatcher = http2
        ? new Http2Dispatcher(origin, {
            connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
            maxSessions: poolConnections,
            maxStreams: UPSTREAM_H2_STREAMS,
            tls: tls ? tlsConnect(addr, tls) : undefined,
            ...(idleMs !== undefined ? { idleTimeoutMs: idleMs } : {}),
            ...(options.maxRequestsPerConnection ? { maxRequestsPerSession: options.maxRequestsPerConnection } : {}),
            ...(options.tcpKeepaliveMs !== undefined ? { tcpKeepaliveMs: options.tcpKeepaliveMs } : {}),
          })
        : new Pool(origin, {
            connections: poolConnections,
            pipelining: 1,
            // The connection's idle timeout (Gloo's commonHttpProtocolOptions.idleTimeout): also the
            // most a server's Keep-Alive hint may stretch it to.
            keepAliveTimeout: idleMs ?? 30_000,
            ...(idleMs !== undefined ? { keepAliveMaxTimeout: idleMs } : {}),
            // undici closes a connection after this many requests (`connection: close` on the last).
            ...(options.maxRequestsPerConnection ? { maxRequestsPerClient: options.maxRequestsPerConnection } : {}),
            // HTTP/1.1 only: undici would otherwise offer h2 over ALPN by default.
            allowH2: false,
            connect: tls ? pinnedServername({ timeout: options.connectTimeoutMs ?? 5_000, ...keepalive, ...tlsConnect(addr, tls) }) : { timeout: options.connectTimeoutMs ?? 5_000, ...keepalive },
          });
      const connections = http2 ? poolConnections * UPSTREAM_H2_STREAMS : poolConnections;
      // undici takes a request's TLS server name from its Host header and reconnects whenever it
      // changes; one constant name per host keeps the pool's connections (see pinnedServername).
      const servername = tls ? (tlsConnect(addr, tls).servername as string | undefined) ?? addr : undefined;
      return { addr, port, origin, dispatcher, http2, servername, ejectedUntil: 0, inFlight: 0, connections, maxInFlight: connections + (options.maxPendingRequests ?? DEFAULT_MAX_PENDING_REQUESTS), consecutive5xx: 0, consecutiveGateway: 0, ejections: 0, healthy: true };
    });
    this.outlier = options.outlier;
    if (options.healthCheck) this.startHealthChecks(options.healthCheck);
    // Each failover priority is a cluster of its own (its pools, health checks, outlier detection), with the same settings.
    this.failover = options.failover?.map((level, i) => new UpstreamCluster(`${name} failover ${i + 1}`, [...level], { ...options, failover: undefined }));
    const weights = hosts.map((h) => h.loadBalancingWeight ?? 1);
    this.schedule = weights.some((w) => w !== 1) ? interleave(weights) : undefined;
    // Hosts are placed by their address, so the same host keeps its keys whatever its position in the list.
    const keys = hosts.map((h) => `${h.addr}:${h.port}`);
    const policy = this.policy;
    this.hashTable = hosts.length < 2 ? undefined : policy.kind === 'ring-hash' ? new RingHash(keys, weights, policy.minimumRingSize, policy.maximumRingSize) : policy.kind === 'maglev' ? new Maglev(keys, weights) : undefined;
  }

  /** Ring hash or Maglev: picks take the route's hash key (Envoy computes it, and generates hash cookies, only then). */
  get hashing(): boolean {
    return this.policy.kind === 'ring-hash' || this.policy.kind === 'maglev';
  }

  /**
   * The next host to use (per the load-balancing policy), skipping ejected hosts while any is
   * healthy. `hash` is the request's key for ring hash and Maglev (the route's hash policies);
   * without one those pick at random, as Envoy does.
   */
  pick(at?: number, hash?: number): UpstreamHost {
    const hosts = this.hosts;
    // One host and no failover (a static Upstream's usual shape): nothing to weigh, no clock read.
    if (hosts.length === 1 && !this.failover) return hosts[0]!;
    const now = at ?? Date.now();
    if (this.failover && !hosts.some((h) => usable(h, now))) {
      // Envoy's priorities: no usable host here, the first lower priority that has one takes the request.
      const level = this.failover.find((c) => c.hosts.some((h) => usable(h, now)));
      if (level) return level.pick(now, hash);
    }
    if (hosts.length === 1) return hosts[0]!;
    if (this.hashTable) {
      const key = hash ?? Math.floor(Math.random() * 0x100000000);
      const host = hosts[this.hashTable.pick(key, (i) => usable(hosts[i]!, now))]!;
      return host;
    }
    if (this.policy.kind === 'random') {
      for (let i = 0; i < hosts.length; i++) {
        const host = this.weighted(Math.floor(Math.random() * this.span()));
        if (usable(host, now)) return host;
      }
    } else if (this.policy.kind === 'least-request') {
      // Envoy's power-of-N choices: the least busy of N random hosts.
      let best: UpstreamHost | undefined;
      for (let i = 0; i < this.policy.choiceCount; i++) {
        const host = this.weighted(Math.floor(Math.random() * this.span()));
        if (!usable(host, now)) continue;
        if (!best || host.inFlight < best.inFlight) best = host;
      }
      if (best) return best;
    } else {
      for (let i = 0; i < this.span(); i++) {
        const host = this.weighted(this.cursor++ % this.span());
        if (usable(host, now)) return host;
      }
    }
    return this.weighted(this.cursor++ % this.span());
  }

  private span(): number {
    return this.schedule?.length ?? this.hosts.length;
  }

  private weighted(slot: number): UpstreamHost {
    return this.hosts[this.schedule ? this.schedule[slot]! : slot]!;
  }

  /** Records a connection failure: the host is skipped for a while. */
  eject(host: UpstreamHost, now: number = Date.now()): void {
    const owner = this.ownerOf(host);
    if (owner !== this) return owner.eject(host, now);
    host.ejectedUntil = now + EJECTION_MS;
    this.observe(host, 503, now);
  }

  private readonly outlier: OutlierDetection | undefined;
  private healthTimer: NodeJS.Timeout | undefined;
  /** `failover` priorities below this one (undefined: none). */
  private readonly failover: readonly UpstreamCluster[] | undefined;

  /** The cluster (this one or a failover priority) a host belongs to. */
  private ownerOf(host: UpstreamHost): UpstreamCluster {
    if (!this.failover || this.hosts.includes(host)) return this;
    return this.failover.find((c) => c.hosts.includes(host)) ?? this;
  }

  /**
   * Outlier detection (Envoy): a host that answers `consecutive5xx` 5xx (or
   * `consecutiveGatewayFailure` 502/503/504 or connect failures) in a row is ejected for
   * `baseEjectionTime` × the times it was ejected, unless `maxEjectionPercent` of the hosts
   * already are (one host may always be). Any other answer resets its counts.
   */
  observe(host: UpstreamHost, status: number, at?: number): void {
    const owner = this.ownerOf(host);
    if (owner !== this) return owner.observe(host, status, at);
    const o = this.outlier;
    if (!o) return;
    if (status < 500) {
      host.consecutive5xx = 0;
      host.consecutiveGateway = 0;
      return;
    }
    host.consecutive5xx++;
    if (status >= 502 && status <= 504) host.consecutiveGateway++;
    if (host.consecutive5xx < o.consecutive5xx && host.consecutiveGateway < o.consecutiveGateway) return;
    // Read only now: every response is observed, few eject.
    const now = at ?? Date.now();
    const ejected = this.hosts.filter((h) => h !== host && h.ejectedUntil > now).length;
    if (ejected > 0 && (ejected + 1) * 100 > o.maxEjectionPercent * this.hosts.length) return;
    host.ejections++;
    host.ejectedUntil = Math.max(host.ejectedUntil, now + o.baseEjectionMs * host.ejections);
    host.consecutive5xx = 0;
    host.consecutiveGateway = 0;
  }

  /**
   * Active health checks (HTTP, or gRPC's grpc.health.v1 Check): a host failing
   * `unhealthyThreshold` in a row is skipped until it passes `healthyThreshold` in a row.
   */
  private startHealthChecks(check: HealthCheck): void {
    const streak = new Map<UpstreamHost, number>();
    const probe = (host: UpstreamHost) => {
      const signal = AbortSignal.timeout(check.timeoutMs);
      (check.grpc ? grpcHealthProbe(host, check.grpc, signal) : check.tcp ? tcpHealthProbe(host, check.tcp, signal) : httpHealthProbe(host, check, signal))
        .catch(() => false)
        .then((ok) => {
          const previous = streak.get(host) ?? 0;
          const now = ok ? Math.max(0, previous) + 1 : Math.min(0, previous) - 1;
          streak.set(host, now);
          if (ok && !host.healthy && now >= check.healthyThreshold) host.healthy = true;
          if (!ok && host.healthy && -now >= check.unhealthyThreshold) host.healthy = false;
        });
    };
    const tick = () => {
      for (const host of this.hosts) probe(host);
    };
    tick();
    this.healthTimer = setInterval(tick, check.intervalMs);
    this.healthTimer.unref();
  }

  /**
   * Closes the pools after their in-flight requests finish; with `graceMs`, requests still
   * running after it are cut (shutdown must end even if an upstream never answers).
   */
  async close(graceMs?: number): Promise<void> {
    clearInterval(this.healthTimer);
    await Promise.all([
      ...(this.failover ?? []).map((c) => c.close(graceMs)),
      ...this.hosts.map((h) => {
        const closed = h.dispatcher.close();
        if (graceMs === undefined) return closed;
        let timer: NodeJS.Timeout | undefined;
        const cut = new Promise<void>((resolve) => {
          timer = setTimeout(() => h.dispatcher.destroy().then(resolve, resolve), graceMs);
        });
        return Promise.race([closed, cut]).finally(() => clearTimeout(timer));
      }),
    ]);
  }
}

/** A host that is neither ejected nor failing its health checks. */
function usable(host: UpstreamHost, now: number): boolean {
  return host.healthy && host.ejectedUntil <= now;
}

/** Outlier detection settings (Envoy's defaults filled in). */
export interface OutlierDetection {
  consecutive5xx: number;
  consecutiveGateway: number;
  baseEjectionMs: number;
  maxEjectionPercent: number;
}

/** How a cluster picks a host (Gloo's loadBalancerConfig). */
export type LoadBalancing =
  | { kind: 'round-robin' }
  | { kind: 'random' }
  | { kind: 'least-request'; choiceCount: number }
  | { kind: 'ring-hash'; minimumRingSize: number; maximumRingSize: number }
  | { kind: 'maglev' };

/**
 * Host indexes in a weighted round-robin order, spread out (smooth weighted round robin, as
 * nginx does): weights 3 and 1 give 0 0 1 0, not 0 0 0 1. Weights are reduced by their common
 * divisor first, and the cycle is bounded.
 */
function interleave(weights: readonly number[]): number[] {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  const divisor = weights.reduce(gcd);
  let reduced = weights.map((w) => w / divisor);
  const total = reduced.reduce((a, b) => a + b, 0);
  // A cycle longer than 10,000 slots is scaled down (shares stay within a fraction of a percent).
  if (total > 10_000) reduced = reduced.map((w) => Math.max(1, Math.round((w * 10_000) / total)));
  const sum = reduced.reduce((a, b) => a + b, 0);
  const current = reduced.map(() => 0);
  const out: number[] = [];
  for (let n = 0; n < sum; n++) {
    let best = 0;
    for (let i = 0; i < reduced.length; i++) {
      current[i]! += reduced[i]!;
      if (current[i]! > current[best]!) best = i;
    }
    current[best]! -= sum;
    out.push(best);
  }
  return out;
}

export interface UpstreamOptions {
  /** Host choice (default round robin). */
  loadBalancing?: LoadBalancing;
  outlier?: OutlierDetection;
  healthCheck?: HealthCheck;
  /** Gloo's `failover`: the hosts of each lower priority, in order (used when no host of the levels above is usable). */
  failover?: readonly (readonly { addr: string; port: number; loadBalancingWeight?: number | undefined }[])[];
  /** Dial TLS: `true` (system CAs, SNI = addr) or the material to use. */
  tls?: boolean | UpstreamTls;
  /** Speak HTTP/2 to the hosts (Gloo's `useHttp2`; gRPC upstreams need it). */
  http2?: boolean;
  connectTimeoutMs?: number;
  connections?: number;
  /** Requests that may wait for a connection per host (default {@link DEFAULT_MAX_PENDING_REQUESTS}). */
  maxPendingRequests?: number;
  /** Requests in flight to the cluster (default {@link DEFAULT_MAX_REQUESTS}). */
  maxRequests?: number;
  /** Retries in flight to the cluster (default {@link DEFAULT_MAX_RETRIES}). */
  maxRetries?: number;
  /** A connection is closed after this many requests. */
  maxRequestsPerConnection?: number;
  /** SO_KEEPALIVE with this idle time before the first probe. */
  tcpKeepaliveMs?: number;
  /** A connection without requests for this long is closed (0: never; default 30 s). */
  idleTimeoutMs?: number;
  /** Each try (response included) is cut after this long. */
  maxStreamDurationMs?: number;
  /** Response header fields at most. */
  maxHeadersCount?: number;
  /** Maps a host name to the address actually dialled (`--resolve`). */
  resolve?: (host: string) => string | undefined;
}

/**
 * undici's connector with the TLS server name fixed: SNI and certificate verification use the
 * Upstream's `sni` (or the host's name, or none for an IP address), never the client's Host,
 * which undici would otherwise take from the request.
 */
function pinnedServername(options: Record<string, unknown>): buildConnector.connector {
  // ALPN offers `http/1.1` only: the pool's own `allowH2: false` does not reach a connector built
  // here, and undici's connector offers h2 by default, so a server that also speaks h2 picked it
  // and WebSocket upgrades to it failed (Envoy offers only what the Upstream asks for).
  const connect = buildConnector({ ...options, allowH2: false } as buildConnector.BuildOptions);
  const servername = options.servername as string | undefined;
  return (opts, callback) => connect({ ...opts, servername: servername as string }, callback);
}

/** undici's `connect` TLS options for a host. An IP address is not a server name: no SNI then, the certificate is checked against the IP. */
function tlsConnect(addr: string, tls: true | UpstreamTls): { servername?: string; ca?: string; cert?: string; key?: string; ciphers?: string; ecdhCurve?: string; minVersion?: SecureVersion; maxVersion?: SecureVersion } {
  const material = tls === true ? {} : tls;
  const servername = material.servername ?? (isIP(addr) ? undefined : addr);
  return { ...(servername ? { servername } : {}), ...(material.ca ? { ca: material.ca } : {}), ...(material.cert ? { cert: material.cert, key: material.key } : {}), ...tlsParameters(material) };
}
