import Type from 'typebox';
import { Duration, Name, ResourceRef, Strict, atMostOneOf, exactlyOneOf } from './common.ts';

/** Gloo's tcpKeepalive times: a duration, or whole seconds as Gloo's TCP keepalive guide writes them (`keepaliveTime: 60`). */
const KeepaliveDuration = Type.Union([Duration, Type.Integer({ minimum: 0, maximum: 2_147_483 })]);

/** A uint64 field: proto3 JSON writes these as strings (`maximumRingSize: "200"`, as Gloo's session-affinity guide does). */
const RingSize = Type.Union([Type.Integer({ minimum: 1, maximum: 8_388_608 }), Type.String({ pattern: '^[0-9]{1,7}$' })]);

const TlsVersion = Type.Union([Type.Literal('TLS_AUTO'), Type.Literal('TLSv1_0'), Type.Literal('TLSv1_1'), Type.Literal('TLSv1_2'), Type.Literal('TLSv1_3')]);

/**
 * Gloo's kube Upstream: a Kubernetes service port. Resolved through cluster DNS
 * (`<serviceName>.<serviceNamespace>.svc.<cluster domain>`) unless another resolver is set
 * (../../proxy/kube-resolver.ts).
 */
export const KubeUpstreamSpec = Strict({
  serviceName: Name,
  serviceNamespace: Type.Optional(Name),
  servicePort: Type.Integer({ minimum: 1, maximum: 65535 }),
  selector: Type.Optional(Type.Record(Type.String(), Type.String(), { description: "pods of the service with these labels (honoured with EndpointSlice resolution; through DNS every pod of the service is used)" })),
});
export type KubeUpstreamSpec = Type.Static<typeof KubeUpstreamSpec>;

/** SPEC 3.1: static hosts (or a Kubernetes service), load-balanced round-robin with passive health. */
export const UpstreamSpec = Strict({
  kube: Type.Optional(KubeUpstreamSpec),
  static: Type.Optional(Strict({
    hosts: Type.Array(
      Strict({
        // A bare host: no scheme, path, query, userinfo or port (those made the pool constructor throw).
        addr: Type.String({
          minLength: 1,
          maxLength: 253,
          pattern: '^(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?(?:\\.[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)*\\.?|[0-9A-Fa-f.]*:[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*)$',
          description: 'host name, IPv4 or IPv6 address (no scheme, port or path)',
        }),
        port: Type.Integer({ minimum: 1, maximum: 65535 }),
        loadBalancingWeight: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'share of the traffic relative to the other hosts (default 1)' })),
        sniAddr: Type.Optional(Type.String({ minLength: 1, maxLength: 253, description: 'TLS server name for this host (default: sslConfig.sni, then addr)' })),
      }),
      { minItems: 1 },
    ),
    useTls: Type.Optional(Type.Boolean({ description: 'connect with TLS (SNI = addr); default: true for port 443 or with sslConfig' })),
  })),
  /**
   * Gloo's UpstreamSslConfig: TLS to the hosts, verified against `rootCa` (or the system's CAs);
   * a client certificate from the Secret (`tls.crt`/`tls.key`, with `ca.crt` as root CA) or files.
   */
  sslConfig: Type.Optional(
    Strict(
      {
        secretRef: Type.Optional(ResourceRef),
        sslFiles: Type.Optional(Strict({ tlsCert: Type.Optional(Type.String({ minLength: 1 })), tlsKey: Type.Optional(Type.String({ minLength: 1 })), rootCa: Type.Optional(Type.String({ minLength: 1 })) })),
        sni: Type.Optional(Type.String({ minLength: 1, maxLength: 253, description: 'server name sent and verified (default: the host addr)' })),
        /** Gloo's SslParameters: protocol versions, cipher suites (Envoy's `[A|B]` groups allowed) and curves offered. */
        parameters: Type.Optional(
          Strict({
            minimumProtocolVersion: Type.Optional(TlsVersion),
            maximumProtocolVersion: Type.Optional(TlsVersion),
            cipherSuites: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 128 })),
            ecdhCurves: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 32 })),
          }),
        ),
      },
      atMostOneOf(['secretRef', 'sslFiles']),
    ),
  ),
  /** Gloo's `useHttp2`: HTTP/2 to the hosts (h2c, or ALPN `h2` with TLS); gRPC upstreams need it. */
  useHttp2: Type.Optional(Type.Boolean({ description: 'speak HTTP/2 to the hosts (h2c, or h2 over TLS); needed for gRPC' })),
  /** Envoy's ignore_health_on_host_removal: a host removed from the Upstream stops getting traffic at once, healthy or not (always so here). */
  ignoreHealthOnHostRemoval: Type.Optional(Type.Boolean()),
  // Gloo's discovery writes it; nothing in Gatehouse reads it (kubectl output loads unchanged).
  discoveryMetadata: Type.Optional(Strict({ labels: Type.Optional(Type.Record(Type.String(), Type.String())) })),
  /** Gloo's ConnectionConfig: how connections to the hosts are made, kept and reused (Envoy's cluster settings). */
  connectionConfig: Type.Optional(
    Strict({
      connectTimeout: Type.Optional(Duration),
      maxRequestsPerConnection: Type.Optional(Type.Integer({ minimum: 0, maximum: 4_294_967_295, description: 'a connection is closed after this many requests (0 or absent: no limit)' })),
      tcpKeepalive: Type.Optional(
        Strict({
          keepaliveProbes: Type.Optional(Type.Integer({ minimum: 0, maximum: 4_294_967_295, description: 'not settable from Node (the OS default applies; warning)' })),
          keepaliveTime: Type.Optional(KeepaliveDuration),
          keepaliveInterval: Type.Optional(KeepaliveDuration),
        }),
      ),
      perConnectionBufferLimitBytes: Type.Optional(Type.Integer({ minimum: 0, maximum: 4_294_967_295, description: 'accepted with a warning: bodies stream with backpressure' })),
      commonHttpProtocolOptions: Type.Optional(
        Strict({
          idleTimeout: Type.Optional(Duration),
          maxHeadersCount: Type.Optional(Type.Integer({ minimum: 0, maximum: 4_294_967_295 })),
          maxStreamDuration: Type.Optional(Duration),
          headersWithUnderscoresAction: Type.Optional(Type.Union([Type.Literal('ALLOW'), Type.Literal('REJECT_REQUEST'), Type.Literal('DROP_HEADER'), Type.Integer({ minimum: 0, maximum: 2 })])),
        }),
      ),
      http1ProtocolOptions: Type.Optional(
        Strict(
          {
            enableTrailers: Type.Optional(Type.Boolean()),
            properCaseHeaderKeyFormat: Type.Optional(Type.Boolean()),
            preserveCaseHeaderKeyFormat: Type.Optional(Type.Boolean()),
            overrideStreamErrorOnInvalidHttpMessage: Type.Optional(Type.Boolean()),
          },
          atMostOneOf(['properCaseHeaderKeyFormat', 'preserveCaseHeaderKeyFormat']),
        ),
      ),
    }),
  ),
  /** Gloo's LoadBalancerConfig: how a host is picked. Ring hash and Maglev hash on the route's `options.lbHash`. */
  loadBalancerConfig: Type.Optional(
    Strict(
      {
        roundRobin: Type.Optional(Strict({})),
        leastRequest: Type.Optional(Strict({ choiceCount: Type.Optional(Type.Integer({ minimum: 2, maximum: 100 })) })),
        random: Type.Optional(Strict({})),
        ringHash: Type.Optional(
          Strict({
            ringHashConfig: Type.Optional(
              Strict({
                minimumRingSize: Type.Optional({ ...RingSize, description: 'points on the ring at least (default 1024)' }),
                maximumRingSize: Type.Optional({ ...RingSize, description: 'points on the ring at most (default and limit 8M, as Envoy)' }),
              }),
            ),
          }),
        ),
        maglev: Type.Optional(Strict({})),
      },
      atMostOneOf(['roundRobin', 'leastRequest', 'random', 'ringHash', 'maglev']),
    ),
  ),
  /** Gloo's (Envoy's) OutlierDetection: hosts answering errors in a row are ejected for a while. */
  outlierDetection: Type.Optional(
    Strict({
      consecutive5xx: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: 'default 5' })),
      consecutiveGatewayFailure: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: '502/503/504 and connect failures in a row (default 5)' })),
      interval: Type.Optional(Duration),
      baseEjectionTime: Type.Optional(Duration),
      maxEjectionPercent: Type.Optional(Type.Integer({ minimum: 0, maximum: 100, description: 'default 10 (at least one host may always be ejected)' })),
    }),
  ),
  /** Gloo's (Envoy's) active health checks: HTTP, or gRPC's grpc.health.v1 Check (HTTP/2 Upstreams). */
  healthChecks: Type.Optional(
    Type.Array(
      Strict(
        {
          timeout: Duration,
          interval: Duration,
          healthyThreshold: Type.Integer({ minimum: 1, maximum: 100 }),
          unhealthyThreshold: Type.Integer({ minimum: 1, maximum: 100 }),
          noTrafficInterval: Type.Optional({ ...Duration, description: 'accepted with a warning: hosts are checked every interval, traffic or not' }),
          reuseConnection: Type.Optional(Type.Boolean({ description: 'checks go over the host pool connections (true); false is accepted with a warning' })),
          httpHealthCheck: Type.Optional(
            Strict({
              path: Type.String({ pattern: '^/' }),
              host: Type.Optional(Type.String({ minLength: 1 })),
              expectedStatuses: Type.Optional(Type.Array(Strict({ start: Type.Integer({ minimum: 100, maximum: 599 }), end: Type.Integer({ minimum: 101, maximum: 600 }) }), { maxItems: 16 })),
            }),
          ),
          grpcHealthCheck: Type.Optional(
            Strict({
              serviceName: Type.Optional(Type.String({ description: 'the service asked about ("" or absent: the server as a whole)' })),
              authority: Type.Optional(Type.String({ minLength: 1, description: ':authority of the check (default: the host addr)' })),
            }),
          ),
        },
        exactlyOneOf(['httpHealthCheck', 'grpcHealthCheck']),
      ),
      { maxItems: 1, description: 'one health check, HTTP or gRPC (Gatehouse runs one per Upstream)' },
    ),
  ),
  /**
   * Gloo's CircuitBreakerConfig (Envoy's thresholds): maxConnections and maxPendingRequests per
   * host (each host has its own pool), maxRequests and maxRetries per Upstream, as Envoy counts them.
   */
  circuitBreakers: Type.Optional(
    Strict({
      maxConnections: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000 })),
      maxPendingRequests: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
      maxRequests: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'requests in flight to the Upstream at once (default 1024); beyond it 503 with x-envoy-overloaded' })),
      maxRetries: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, description: 'retries in flight to the Upstream at once (default 3, as Envoy); beyond it the failure is returned unretried' })),
    }),
  ),
}, exactlyOneOf(['static', 'kube']));
export type UpstreamSpec = Type.Static<typeof UpstreamSpec>;

/**
 * Gloo's UpstreamGroup: weighted destinations shared by routes (`routeAction.upstreamGroup`),
 * e.g. a canary split changed in one place for every route that uses it.
 */
export const UpstreamGroupSpec = Strict({
  destinations: Type.Array(
    Strict({
      weight: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
      destination: Strict({ upstream: ResourceRef }),
    }),
    { minItems: 1, maxItems: 256 },
  ),
});
export type UpstreamGroupSpec = Type.Static<typeof UpstreamGroupSpec>;
