import Type, { type TProperties, type TSchema } from 'typebox';
import { Duration, ResourceRef, Strict } from './common.ts';

/**
 * Gloo Edge's `Gateway` (`gateway.solo.io/v1`, projects/gateway/api/v1/gateway.proto): one
 * listener (bind address and port, TLS or not), which VirtualServices it serves, its access logs
 * and HTTP connection-manager settings. Field names are Gloo's JSON names (camelCase) and, as
 * Gloo's protojson accepts them, the proto names (snake_case). docs/gateway.md says what is
 * honoured; every other Gloo field loads with a Warning naming it (server/gateway-checks.ts).
 */

/** `props` with each camelCase field also accepted under its proto (snake_case) name. */
export function camelAndProto<P extends TProperties>(props: P): P {
  const out: TProperties = { ...props };
  for (const [key, schema] of Object.entries(props)) {
    const snake = protoName(key);
    if (snake !== key) out[snake] = schema as TSchema;
  }
  return out as P;
}

/** `bindAddress` → `bind_address`. */
export function protoName(camel: string): string {
  return camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** A field by its JSON name, or its proto name. */
export function field<T>(object: object | undefined, camel: string): T | undefined {
  if (!object) return undefined;
  const o = object as Record<string, unknown>;
  return (o[camel] ?? o[protoName(camel)]) as T | undefined;
}

/** A Gloo field Gatehouse accepts without honouring it (a Warning names it). */
const Accepted = Type.Unknown();

/** `als.options.gloo.solo.io.FileSink`. */
export const FileSink = Strict(
  camelAndProto({
    path: Type.String({ minLength: 1 }),
    stringFormat: Type.Optional(Type.String()),
    jsonFormat: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  }),
);

/** `als.options.gloo.solo.io.AccessLog`. */
export const AccessLog = Strict(
  camelAndProto({
    fileSink: Type.Optional(FileSink),
    grpcService: Type.Optional(Accepted),
    openTelemetryService: Type.Optional(Accepted),
    filter: Type.Optional(Accepted),
  }),
);

/** `als.options.gloo.solo.io.AccessLoggingService`. */
export const AccessLoggingService = Strict(camelAndProto({ accessLog: Type.Optional(Type.Array(AccessLog)) }));

/** `gloo.solo.io.ListenerOptions`. */
export const ListenerOptions = Strict(
  camelAndProto({
    accessLoggingService: Type.Optional(AccessLoggingService),
    extensions: Type.Optional(Accepted),
    perConnectionBufferLimitBytes: Type.Optional(Accepted),
    socketOptions: Type.Optional(Accepted),
    proxyProtocol: Type.Optional(Accepted),
    connectionBalanceConfig: Type.Optional(Accepted),
    listenerAccessLoggingService: Type.Optional(Accepted),
    tcpStats: Type.Optional(Accepted),
  }),
);

/** The HCM settings Gatehouse honours (docs/gateway.md); the rest of hcm.proto is accepted with a Warning. */
export const HONOURED_HCM_FIELDS = ['requestTimeout', 'requestHeadersTimeout', 'streamIdleTimeout', 'idleTimeout', 'maxHeadersCount', 'maxRequestHeadersKb', 'normalizePath', 'mergeSlashes', 'pathWithEscapedSlashesAction'] as const;

/** `hcm.options.gloo.solo.io.HttpConnectionManagerSettings`. */
export const HttpConnectionManagerSettings = Strict(
  camelAndProto({
    requestTimeout: Type.Optional(Duration),
    requestHeadersTimeout: Type.Optional(Duration),
    streamIdleTimeout: Type.Optional(Duration),
    idleTimeout: Type.Optional(Duration),
    maxHeadersCount: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
    maxRequestHeadersKb: Type.Optional(Type.Integer({ minimum: 1, maximum: 8192 })),
    normalizePath: Type.Optional(Type.Boolean()),
    mergeSlashes: Type.Optional(Type.Boolean()),
    pathWithEscapedSlashesAction: Type.Optional(Type.Union([Type.Literal('IMPLEMENTATION_SPECIFIC_DEFAULT'), Type.Literal('KEEP_UNCHANGED'), Type.Literal('REJECT_REQUEST'), Type.Literal('UNESCAPE_AND_REDIRECT'), Type.Literal('UNESCAPE_AND_FORWARD'), Type.Integer({ minimum: 0, maximum: 4 })])),
    skipXffAppend: Type.Optional(Accepted),
    via: Type.Optional(Accepted),
    xffNumTrustedHops: Type.Optional(Accepted),
    useRemoteAddress: Type.Optional(Accepted),
    generateRequestId: Type.Optional(Accepted),
    proxy100Continue: Type.Optional(Accepted),
    drainTimeout: Type.Optional(Accepted),
    delayedCloseTimeout: Type.Optional(Accepted),
    serverName: Type.Optional(Accepted),
    stripAnyHostPort: Type.Optional(Accepted),
    acceptHttp10: Type.Optional(Accepted),
    defaultHostForHttp10: Type.Optional(Accepted),
    allowChunkedLength: Type.Optional(Accepted),
    enableTrailers: Type.Optional(Accepted),
    properCaseHeaderKeyFormat: Type.Optional(Accepted),
    preserveCaseHeaderKeyFormat: Type.Optional(Accepted),
    tracing: Type.Optional(Accepted),
    forwardClientCertDetails: Type.Optional(Accepted),
    setCurrentClientCertDetails: Type.Optional(Accepted),
    preserveExternalRequestId: Type.Optional(Accepted),
    upgrades: Type.Optional(Accepted),
    maxConnectionDuration: Type.Optional(Accepted),
    maxStreamDuration: Type.Optional(Accepted),
    headersWithUnderscoresAction: Type.Optional(Accepted),
    maxRequestsPerConnection: Type.Optional(Accepted),
    serverHeaderTransformation: Type.Optional(Accepted),
    codecType: Type.Optional(Accepted),
    uuidRequestIdConfig: Type.Optional(Accepted),
    http2ProtocolOptions: Type.Optional(Accepted),
    internalAddressConfig: Type.Optional(Accepted),
    appendXForwardedPort: Type.Optional(Accepted),
    earlyHeaderManipulation: Type.Optional(Accepted),
  }),
);

/** `gloo.solo.io.HttpListenerOptions`: the connection-manager settings, and Gloo's other HTTP filters (accepted, warned). */
export const HttpListenerOptions = Strict(
  camelAndProto({
    httpConnectionManagerSettings: Type.Optional(HttpConnectionManagerSettings),
    ...Object.fromEntries(
      ['grpcWeb', 'healthCheck', 'extensions', 'waf', 'dlp', 'wasm', 'extauth', 'ratelimitServer', 'caching', 'disableExtProcEarly', 'extProcEarly', 'disableExtProc', 'extProc', 'disableExtProcLate', 'extProcLate', 'gzip', 'proxyLatency', 'buffer', 'csrf', 'grpcJsonTranscoder', 'sanitizeClusterHeader', 'leftmostXffAddress', 'dynamicForwardProxy', 'connectionLimit', 'networkLocalRatelimit', 'httpLocalRatelimit', 'router', 'tap', 'statefulSession', 'headerValidationSettings'].map((name) => [name, Type.Optional(Accepted)]),
    ),
  }),
);

/** `VirtualServiceSelectorExpressions.Expression` (Kubernetes-style label expressions). */
export const SelectorExpression = Strict({
  key: Type.String({ minLength: 1 }),
  operator: Type.Optional(Type.Union(['Equals', 'DoubleEquals', 'NotEquals', 'In', 'NotIn', 'Exists', 'DoesNotExist', 'GreaterThan', 'LessThan'].map((o) => Type.Literal(o)))),
  values: Type.Optional(Type.Array(Type.String())),
});

/** `gateway.solo.io.HttpGateway`. */
export const HttpGateway = Strict(
  camelAndProto({
    virtualServices: Type.Optional(Type.Array(ResourceRef)),
    virtualServiceSelector: Type.Optional(Type.Record(Type.String(), Type.String())),
    virtualServiceExpressions: Type.Optional(Strict({ expressions: Type.Optional(Type.Array(SelectorExpression)) })),
    virtualServiceNamespaces: Type.Optional(Type.Array(Type.String())),
    options: Type.Optional(HttpListenerOptions),
  }),
);

/** The Gateway spec (gateway.proto). */
export const GatewaySpec = Strict(
  camelAndProto({
    ssl: Type.Optional(Type.Boolean()),
    bindAddress: Type.Optional(Type.String()),
    bindPort: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
    options: Type.Optional(ListenerOptions),
    useProxyProto: Type.Optional(Accepted),
    httpGateway: Type.Optional(HttpGateway),
    tcpGateway: Type.Optional(Accepted),
    hybridGateway: Type.Optional(Accepted),
    proxyNames: Type.Optional(Type.Array(Type.String())),
    routeOptions: Type.Optional(Accepted),
    // Written by Gloo's controller, ignored when read back (as `status`).
    namespacedStatuses: Type.Optional(Accepted),
  }),
);
export type GatewaySpec = Type.Static<typeof GatewaySpec>;
