import Type from 'typebox';
import { atMostOneOf, Duration, Ignored, ResourceRef, Strict } from './common.ts';
import { Destination, MAX_REQUEST_BODY_BYTES, SslConfig } from './virtual-service.ts';
import { ListenerTracingSettings } from '../../tracing/schema.ts';

/**
 * Gloo Edge's `Gateway` (`gateway.solo.io/v1`, projects/gateway/api/v1/gateway.proto): one
 * listener (bind address and port, TLS or not), which VirtualServices it serves, its access logs
 * and HTTP connection-manager settings. Field names are Gloo's JSON names (camelCase); the proto
 * names (snake_case) Gloo's protojson also takes are renamed to them before validation
 * (config/proto-names.ts). docs/gateway.md says what is honoured; every other Gloo field is
 * marked `Ignored` and loads with a Warning naming it (config/checks/ignored-fields.ts).
 */

/** A field of a resource (the spec is validated with JSON names only, so one spelling). */
export function field<T>(object: object | undefined, name: string): T | undefined {
  return object === undefined ? undefined : ((object as Record<string, unknown>)[name] as T | undefined);
}

/** A Gloo field Gatehouse accepts without applying: setting it gives a Warning naming it with `reason`. */
const NotApplied = (reason: string) => Type.Optional(Ignored(Type.Unknown(), reason));

/** Each of `names` as {@link NotApplied} with one reason. */
function notApplied<const K extends string>(names: readonly K[], reason: string): Record<K, ReturnType<typeof NotApplied>> {
  return Object.fromEntries(names.map((name) => [name, NotApplied(reason)])) as Record<K, ReturnType<typeof NotApplied>>;
}

/** `als.options.gloo.solo.io.FileSink`. */
export const FileSink = Strict({
  path: Type.String({ minLength: 1 }),
  stringFormat: Type.Optional(Type.String()),
  jsonFormat: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

/** `als.options.gloo.solo.io.AccessLog`. */
export const AccessLog = Strict({
  fileSink: Type.Optional(FileSink),
  grpcService: NotApplied('gRPC access log services are not sent to (fileSink is written)'),
  openTelemetryService: NotApplied('OpenTelemetry access log services are not sent to (fileSink is written)'),
  /** `als.options.gloo.solo.io.AccessLogFilter`: open here (it nests through andFilter/orFilter); log/access-filter.ts checks and compiles it. */
  filter: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

/** `als.options.gloo.solo.io.AccessLoggingService`. */
export const AccessLoggingService = Strict({ accessLog: Type.Optional(Type.Array(AccessLog)) });

/** `gloo.solo.io.ListenerOptions`. */
export const ListenerOptions = Strict({
  accessLoggingService: Type.Optional(AccessLoggingService),
  extensions: NotApplied('Gloo listener extensions are not run'),
  perConnectionBufferLimitBytes: NotApplied("connection buffers are Node's defaults"),
  socketOptions: NotApplied('no socket options are set on the listener'),
  /** `proxy_protocol.options.gloo.solo.io.ProxyProtocol`: set (even empty), the listener reads a PROXY header first (docs/proxy-protocol.md). */
  proxyProtocol: Type.Optional(
    Strict({
      rules: NotApplied('PROXY protocol v2 TLVs are not turned into metadata (the header is read, its TLVs skipped)'),
      allowRequestsWithoutProxyProtocol: Type.Optional(Type.Boolean()),
    }),
  ),
  connectionBalanceConfig: NotApplied('connections are not balanced across workers beyond what the kernel does'),
  listenerAccessLoggingService: NotApplied('listener (connection) access logs are not written; accessLoggingService is'),
  tcpStats: NotApplied('TCP statistics are not collected'),
});

const HCM_NOT_APPLIED = 'this connection-manager setting is not applied by Gatehouse (docs/gateway.md lists those it honours)';

/** `hcm.options.gloo.solo.io.HttpConnectionManagerSettings`: the settings docs/gateway.md lists are honoured, the rest of hcm.proto is accepted with a Warning. */
export const HttpConnectionManagerSettings = Strict({
  requestTimeout: Type.Optional(Duration),
  requestHeadersTimeout: Type.Optional(Duration),
  streamIdleTimeout: Type.Optional(Duration),
  idleTimeout: Type.Optional(Duration),
  maxHeadersCount: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
  maxRequestHeadersKb: Type.Optional(Type.Integer({ minimum: 1, maximum: 8192 })),
  normalizePath: Type.Optional(Type.Boolean()),
  mergeSlashes: Type.Optional(Type.Boolean()),
  tracing: Type.Optional(ListenerTracingSettings),
  pathWithEscapedSlashesAction: Type.Optional(Type.Union([Type.Literal('IMPLEMENTATION_SPECIFIC_DEFAULT'), Type.Literal('KEEP_UNCHANGED'), Type.Literal('REJECT_REQUEST'), Type.Literal('UNESCAPE_AND_REDIRECT'), Type.Literal('UNESCAPE_AND_FORWARD'), Type.Integer({ minimum: 0, maximum: 4 })])),
  // Header values: visible characters and spaces only (no CR/LF a response could be split on).
  serverName: Type.Optional(Type.String({ minLength: 1, maxLength: 256, pattern: '^[\\x20-\\x7e]+$' })),
  serverHeaderTransformation: Type.Optional(Type.Union([Type.Literal('OVERWRITE'), Type.Literal('APPEND_IF_ABSENT'), Type.Literal('PASS_THROUGH'), Type.Integer({ minimum: 0, maximum: 2 })])),
  via: Type.Optional(Type.String({ minLength: 1, maxLength: 256, pattern: '^[\\x20-\\x7e]+$' })),
  ...notApplied(
    ['skipXffAppend', 'xffNumTrustedHops', 'useRemoteAddress', 'generateRequestId', 'proxy100Continue', 'drainTimeout', 'delayedCloseTimeout', 'stripAnyHostPort', 'acceptHttp10', 'defaultHostForHttp10', 'allowChunkedLength', 'enableTrailers', 'properCaseHeaderKeyFormat', 'preserveCaseHeaderKeyFormat', 'forwardClientCertDetails', 'setCurrentClientCertDetails', 'preserveExternalRequestId', 'upgrades', 'maxConnectionDuration', 'maxStreamDuration', 'headersWithUnderscoresAction', 'maxRequestsPerConnection', 'codecType', 'uuidRequestIdConfig', 'http2ProtocolOptions', 'internalAddressConfig', 'appendXForwardedPort', 'earlyHeaderManipulation'],
    HCM_NOT_APPLIED,
  ),
});

const enumOf = (names: readonly string[]) => Type.Union([...names.map((n) => Type.Literal(n)), Type.Integer({ minimum: 0, maximum: names.length - 1 })]);

/** `solo.io.envoy.config.filter.http.gzip.v2.Gzip` (Envoy's compressor, as Gloo configures it; proxy/filters/compression.ts). */
export const Gzip = Strict({
  memoryLevel: Type.Optional(Type.Integer({ minimum: 1, maximum: 9 })),
  contentLength: Type.Optional(Type.Integer({ minimum: 30, maximum: 4294967295 })),
  compressionLevel: Type.Optional(enumOf(['DEFAULT', 'BEST', 'SPEED'])),
  compressionStrategy: Type.Optional(enumOf(['DEFAULT', 'FILTERED', 'HUFFMAN', 'RLE'])),
  contentType: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 50 })),
  disableOnEtagHeader: Type.Optional(Type.Boolean()),
  removeAcceptEncodingHeader: Type.Optional(Type.Boolean()),
  windowBits: Type.Optional(Type.Integer({ minimum: 9, maximum: 15 })),
});

/** `grpc_web.options.gloo.solo.io.GrpcWeb`: on unless `disable` (proxy/filters/grpc-web.ts). */
export const GrpcWeb = Strict({ disable: Type.Optional(Type.Boolean()) });

/** `envoy.extensions.filters.http.buffer.v3.Buffer` (Gloo's copy): the request body is read whole before it goes on (proxy/filters/buffer.ts). */
export const BufferFilter = Strict({ maxRequestBytes: Type.Integer({ minimum: 1, maximum: MAX_REQUEST_BODY_BYTES }) });

/** `gloo.solo.io.HttpListenerOptions`: the connection-manager settings, and Gloo's other HTTP filters (accepted, warned). */
export const HttpListenerOptions = Strict({
  httpConnectionManagerSettings: Type.Optional(HttpConnectionManagerSettings),
  gzip: Type.Optional(Gzip),
  grpcWeb: Type.Optional(GrpcWeb),
  buffer: Type.Optional(BufferFilter),
  ...notApplied(
    ['healthCheck', 'extensions', 'waf', 'dlp', 'wasm', 'extauth', 'ratelimitServer', 'caching', 'disableExtProcEarly', 'extProcEarly', 'disableExtProc', 'extProc', 'disableExtProcLate', 'extProcLate', 'proxyLatency', 'csrf', 'grpcJsonTranscoder', 'sanitizeClusterHeader', 'leftmostXffAddress', 'dynamicForwardProxy', 'connectionLimit', 'networkLocalRatelimit', 'httpLocalRatelimit', 'router', 'tap', 'statefulSession', 'headerValidationSettings'],
    "this listener-level option of Gloo's HTTP filters is not applied by Gatehouse",
  ),
});

/** `VirtualServiceSelectorExpressions.Expression` (Kubernetes-style label expressions). */
export const SelectorExpression = Strict({
  key: Type.String({ minLength: 1 }),
  operator: Type.Optional(Type.Union(['Equals', 'DoubleEquals', 'NotEquals', 'In', 'NotIn', 'Exists', 'DoesNotExist', 'GreaterThan', 'LessThan'].map((o) => Type.Literal(o)))),
  values: Type.Optional(Type.Array(Type.String())),
});

/** `gateway.solo.io.HttpGateway`. */
export const HttpGateway = Strict({
  virtualServices: Type.Optional(Type.Array(ResourceRef)),
  virtualServiceSelector: Type.Optional(Type.Record(Type.String(), Type.String())),
  virtualServiceExpressions: Type.Optional(Strict({ expressions: Type.Optional(Type.Array(SelectorExpression)) })),
  virtualServiceNamespaces: Type.Optional(Type.Array(Type.String())),
  options: Type.Optional(HttpListenerOptions),
});

const NOT_HTTP = 'Gatehouse binds HTTP and TCP gateways only: this Gateway binds no listener';

/** A TCP host's `sslConfig`: `sniDomains` route by SNI; with a certificate (`secretRef`/`sslFiles`) TLS is terminated, without one the encrypted bytes pass through. */
export const TcpSslConfig = Strict(
  {
    ...SslConfig.properties,
    secretRef: Type.Optional(ResourceRef),
    sslFiles: Type.Optional(SslConfig.properties.sslFiles),
  },
  atMostOneOf(['secretRef', 'sslFiles']),
);

/** `MultiDestination` for a TCP host: weights choose the upstream per connection; per-destination HTTP options do not apply. */
const TcpMultiDestination = Strict({
  destinations: Type.Array(
    Strict({
      weight: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
      destination: Destination,
      options: NotApplied('per-destination options are HTTP options: a TCP proxy forwards bytes'),
    }),
    { minItems: 1, maxItems: 256 },
  ),
});

/** `gloo.solo.io.TcpHost.TcpAction` (proxy.proto). */
export const TcpAction = Strict({
  single: Type.Optional(Destination),
  multi: Type.Optional(TcpMultiDestination),
  upstreamGroup: Type.Optional(ResourceRef),
  forwardSniClusterName: Type.Optional(Strict({})),
});

/** `gloo.solo.io.TcpHost`: one route of a TCP listener (docs/tcp-proxy.md). */
export const TcpHost = Strict({
  name: Type.String({ minLength: 1 }),
  sslConfig: Type.Optional(TcpSslConfig),
  destination: TcpAction,
});

/** `gloo.solo.io.TcpListenerOptions`. */
export const TcpListenerOptions = Strict({
  tcpProxySettings: Type.Optional(
    Strict({
      maxConnectAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
      idleTimeout: Type.Optional(Duration),
      ...notApplied(['tunnelingConfig', 'accessLogFlushInterval', 'accessLogOptions'], 'this TCP proxy setting is not applied by Gatehouse'),
    }),
  ),
  connectionLimit: Type.Optional(
    Strict({
      maxActiveConnections: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
      delayBeforeClose: NotApplied('connections over the limit are closed at once'),
    }),
  ),
  localRatelimit: NotApplied('TCP connections are not rate limited (connectionLimit caps them)'),
});

/** `gateway.solo.io.TcpGateway`: a TCP proxy listener (docs/tcp-proxy.md). */
export const TcpGateway = Strict({
  tcpHosts: Type.Optional(Type.Array(TcpHost, { maxItems: 1000 })),
  options: Type.Optional(TcpListenerOptions),
});

/** The Gateway spec (gateway.proto). */
export const GatewaySpec = Strict({
  ssl: Type.Optional(Type.Boolean()),
  bindAddress: Type.Optional(Type.String()),
  bindPort: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
  options: Type.Optional(ListenerOptions),
  useProxyProto: Type.Optional(Type.Boolean()),
  httpGateway: Type.Optional(HttpGateway),
  tcpGateway: Type.Optional(TcpGateway),
  hybridGateway: NotApplied(NOT_HTTP),
  proxyNames: Type.Optional(Type.Array(Type.String())),
  routeOptions: NotApplied('Gateway-level route configuration options are not applied'),
  // Written by Gloo's controller; Gatehouse reports status itself and does not read it back.
  namespacedStatuses: NotApplied("Gloo's controller writes it; Gatehouse reports each resource's status itself"),
});
export type GatewaySpec = Type.Static<typeof GatewaySpec>;
