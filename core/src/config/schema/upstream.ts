import Type from 'typebox';
import { AnyValue, Duration, Ignored, Name, ResourceRef, Strict, atMostOneOf, exactlyOneOf } from './common.ts';

/** Gloo's function discovery (FDS) writes `serviceSpec` (REST/Swagger, gRPC, gRPC-JSON transcoding) on the Upstreams it discovers. */
const ServiceSpec = Ignored(AnyValue, 'function discovery specs (REST, gRPC, gRPC-JSON transcoding) are not used: routes reach the Upstream as plain HTTP');
const UInt = Type.Integer({ minimum: 0, maximum: 4_294_967_295 });

// A bare host: no scheme, path, query, userinfo or port (those made the pool constructor throw).
const HostAddress = Type.String({
  minLength: 1,
  maxLength: 253,
  pattern: '^(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?(?:\\.[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)*\\.?|[0-9A-Fa-f.]*:[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*)$',
  description: 'host name, IPv4 or IPv6 address (no scheme, port or path)',
});

/** Gloo's tcpKeepalive times: a duration, or whole seconds as Gloo's TCP keepalive guide writes them (`keepaliveTime: 60`). */
const KeepaliveDuration = Type.Union([Duration, Type.Integer({ minimum: 0, maximum: 2_147_483 })]);

/** A uint64 field: proto3 JSON writes these as strings (`maximumRingSize: "200"`, as Gloo's session-affinity guide does). */
const RingSize = Type.Union([Type.Integer({ minimum: 1, maximum: 8_388_608 }), Type.String({ pattern: '^[0-9]{1,7}$' })]);

/** Envoy's health check Payload: `text` in hex, or `binary` (proto3 JSON bytes: base64). */
const Payload = Strict(
  {
    text: Type.Optional(Type.String({ pattern: '^([0-9A-Fa-f]{2})*$', maxLength: 8192, description: 'bytes in hex' })),
    binary: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9+/]*={0,2}$', maxLength: 8192, description: 'bytes in base64' })),
  },
  exactlyOneOf(['text', 'binary']),
);

const TlsVersion = Type.Union([Type.Literal('TLS_AUTO'), Type.Literal('TLSv1_0'), Type.Literal('TLSv1_1'), Type.Literal('TLSv1_2'), Type.Literal('TLSv1_3')]);

/**
 * Gloo's kube Upstream: a Kubernetes service port. Resolved through cluster DNS
 * (`<serviceName>.<serviceNamespace>.svc.<cluster domain>`) unless another resolver is set
 * (../../proxy/upstream/kube-resolver.ts).
 */
export const KubeUpstreamSpec = Strict({
  serviceName: Name,
  serviceNamespace: Type.Optional(Name),
  servicePort: Type.Integer({ minimum: 1, maximum: 65535 }),
  selector: Type.Optional(Type.Record(Type.String(), Type.String(), { description: "pods of the service with these labels (honoured with EndpointSlice resolution; through DNS every pod of the service is used)" })),
  serviceSpec: Type.Optional(ServiceSpec),
  subsetSpec: Type.Optional(Ignored(AnyValue, 'subsets are not supported: every endpoint of the service gets traffic, whatever the route\'s subset')),
});
export type KubeUpstreamSpec = Type.Static<typeof KubeUpstreamSpec>;

/** SPEC 3.1: static hosts (or a Kubernetes service), load-balanced round-robin with passive health. */
export const UpstreamSpec = Strict({
  kube: Type.Optional(KubeUpstreamSpec),
  static: Type.Optional(Strict({
    hosts: Type.Array(
      Strict({
        addr: HostAddress,
        port: Type.Integer({ minimum: 1, maximum: 65535 }),
        loadBalancingWeight: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'share of the traffic relative to the other hosts (default 1)' })),
        sniAddr: Type.Optional(Type.String({ minLength: 1, maxLength: 253, description: 'TLS server name for this host (default: sslConfig.sni, then addr)' })),
        healthCheckConfig: Type.Optional(Ignored(AnyValue, "a host's own health check path and method are not used: every host is checked with the Upstream's healthChecks")),
        metadata: Type.Optional(Ignored(AnyValue, 'host metadata (subset matching) is not used')),
      }),
      { minItems: 1 },
    ),
    useTls: Type.Optional(Type.Boolean({ description: 'connect with TLS (SNI = addr); default: true for port 443 or with sslConfig' })),
    serviceSpec: Type.Optional(ServiceSpec),
    autoSniRewrite: Type.Optional(Ignored(Type.Boolean(), "the SNI is not taken from the request's Host: it is the host's sniAddr, sslConfig.sni, or its addr")),
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
      interval: Type.Optional(Ignored(Duration, 'hosts are ejected as the errors arrive, not at interval sweeps')),
      baseEjectionTime: Type.Optional(Duration),
      maxEjectionPercent: Type.Optional(Type.Integer({ minimum: 0, maximum: 100, description: 'default 10 (at least one host may always be ejected)' })),
      // Envoy's other OutlierDetection fields, as Gloo's discovery and guides may write them: accepted, not applied.
      ...Object.fromEntries(
        (['enforcingConsecutive5xx', 'enforcingSuccessRate', 'successRateMinimumHosts', 'successRateRequestVolume', 'successRateStdevFactor', 'enforcingConsecutiveGatewayFailure', 'consecutiveLocalOriginFailure', 'enforcingConsecutiveLocalOriginFailure', 'enforcingLocalOriginSuccessRate'] as const).map((f) => [f, Type.Optional(Ignored(UInt, 'only consecutive5xx and consecutiveGatewayFailure eject hosts here, always enforced (100%); success-rate and local-origin detection are not implemented'))]),
      ) as Record<'enforcingConsecutive5xx' | 'enforcingSuccessRate' | 'successRateMinimumHosts' | 'successRateRequestVolume' | 'successRateStdevFactor' | 'enforcingConsecutiveGatewayFailure' | 'consecutiveLocalOriginFailure' | 'enforcingConsecutiveLocalOriginFailure' | 'enforcingLocalOriginSuccessRate', Type.TOptional<Type.TInteger>>,
      splitExternalLocalOriginErrors: Type.Optional(Ignored(Type.Boolean(), 'local-origin errors (connect failures) and upstream 5xx are counted together')),
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
          initialJitter: Type.Optional(Ignored(Duration, 'checks start at once, without jitter')),
          intervalJitter: Type.Optional(Ignored(Duration, 'checks run every interval, without jitter')),
          intervalJitterPercent: Type.Optional(Ignored(UInt, 'checks run every interval, without jitter')),
          unhealthyInterval: Type.Optional(Ignored(Duration, 'unhealthy hosts are checked every interval')),
          unhealthyEdgeInterval: Type.Optional(Ignored(Duration, 'a host that just turned unhealthy is checked every interval')),
          healthyEdgeInterval: Type.Optional(Ignored(Duration, 'a host that just turned healthy is checked every interval')),
          eventLogPath: Type.Optional(Ignored(Type.String(), 'health check events go to the gateway log, not to a file')),
          alwaysLogHealthCheckFailures: Type.Optional(Ignored(Type.Boolean(), 'health check transitions are logged; single failures are not')),
          reuseConnection: Type.Optional(Type.Boolean({ description: 'checks go over the host pool connections (true); false is accepted with a warning' })),
          httpHealthCheck: Type.Optional(
            Strict({
              path: Type.String({ pattern: '^/' }),
              host: Type.Optional(Type.String({ minLength: 1 })),
              expectedStatuses: Type.Optional(Type.Array(Strict({ start: Type.Integer({ minimum: 100, maximum: 599 }), end: Type.Integer({ minimum: 101, maximum: 600 }) }), { maxItems: 16 })),
              serviceName: Type.Optional(Ignored(Type.String(), 'the x-envoy-upstream-healthchecked-cluster check is not made')),
              requestHeadersToAdd: Type.Optional(Ignored(AnyValue, 'health check requests carry no extra headers')),
              requestHeadersToRemove: Type.Optional(Ignored(Type.Array(Type.String()), 'health check requests carry no extra headers to remove')),
              useHttp2: Type.Optional(Ignored(Type.Boolean(), "checks speak the Upstream's protocol (useHttp2 on the Upstream)")),
              responseAssertions: Type.Optional(Ignored(AnyValue, 'only the status is checked (expectedStatuses)')),
              method: Type.Optional(Ignored(Type.String(), 'health checks are GET requests')),
            }),
          ),
          grpcHealthCheck: Type.Optional(
            Strict({
              serviceName: Type.Optional(Type.String({ description: 'the service asked about ("" or absent: the server as a whole)' })),
              authority: Type.Optional(Type.String({ minLength: 1, description: ':authority of the check (default: the host addr)' })),
            }),
          ),
          /** Envoy's TcpHealthCheck (proxy/upstream/tcp-health-check.ts): connect, send, expect bytes back. */
          tcpHealthCheck: Type.Optional(
            Strict({
              send: Type.Optional(Payload),
              receive: Type.Optional(Type.Array(Payload, { maxItems: 16, description: 'each expected in order (anything between); none: a connection that opens passes' })),
            }),
          ),
        },
        exactlyOneOf(['httpHealthCheck', 'grpcHealthCheck', 'tcpHealthCheck']),
      ),
      { maxItems: 1, description: 'one health check, HTTP, gRPC or TCP (Gatehouse runs one per Upstream)' },
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
      trackRemaining: Type.Optional(Ignored(Type.Boolean(), 'the remaining-capacity gauges are not published')),
    }),
  ),
  // HTTP/2 and DNS settings Gloo's discovery copies from a Service's upstream_config annotation.
  initialStreamWindowSize: Type.Optional(Ignored(UInt, "HTTP/2 windows to the hosts are Node's defaults")),
  initialConnectionWindowSize: Type.Optional(Ignored(UInt, "HTTP/2 windows to the hosts are Node's defaults")),
  maxConcurrentStreams: Type.Optional(Ignored(UInt, 'the HTTP/2 stream limit is the one each host announces')),
  respectDnsTtl: Type.Optional(Ignored(Type.Boolean(), 'host names are resolved per connection by the system resolver')),
  dnsRefreshRate: Type.Optional(Ignored(Duration, 'host names are resolved per connection by the system resolver')),
  disableIstioAutoMtls: Type.Optional(Ignored(Type.Boolean(), 'there is no Istio integration')),
  /** Gloo's Failover: lower priorities used when no host of the priorities above is usable (proxy/upstream/upstream-cluster.ts). */
  failover: Type.Optional(
    Strict({
      prioritizedLocalities: Type.Array(
        Strict({
          localityEndpoints: Type.Array(
            Strict({
              locality: Type.Optional(Strict({ region: Type.Optional(Type.String()), zone: Type.Optional(Type.String()), subZone: Type.Optional(Type.String()) })),
              lbEndpoints: Type.Array(
                Strict({
                  address: HostAddress,
                  port: Type.Integer({ minimum: 1, maximum: 65535 }),
                  loadBalancingWeight: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
                  healthCheckConfig: Type.Optional(Ignored(AnyValue, "an endpoint's own health check settings are not used: it is checked with the Upstream's healthChecks")),
                  upstreamSslConfig: Type.Optional(Ignored(AnyValue, "an endpoint's own TLS settings are not used: it is reached with the Upstream's sslConfig")),
                }),
                { minItems: 1, maxItems: 1000 },
              ),
              loadBalancingWeight: Type.Optional(Ignored(UInt, "localities of one priority are not weighted: their endpoints share its traffic by their own weights")),
            }),
            { minItems: 1, maxItems: 100 },
          ),
        }),
        { maxItems: 16 },
      ),
      policy: Type.Optional(Strict({ overprovisioningFactor: Type.Optional(Ignored(UInt, 'traffic moves to the next priority only once no endpoint of the one above is usable (Envoy spills over gradually, by this factor)')) })),
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
