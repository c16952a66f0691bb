import Type from 'typebox';
import { Duration, Ignored, Name, ResourceRef, Strict, atMostOneOf, exactlyOneOf } from './common.ts';
import { JwtRouteOptions, JwtVirtualHostOptions } from './jwt.ts';
import { TransformationStages, Transformations } from '../../transform/schema.ts';
import { RateLimitOptions } from '../../ratelimit/options-schema.ts';
import { RouteTracingSettings } from '../../tracing/schema.ts';

/**
 * Gloo's DelegateOptionsRefs: VirtualHostOption (on a virtual host) or RouteOption (on a route)
 * resources whose options apply where the inline ones leave a field unset, earlier refs first
 * (config/options-refs.ts).
 */
export const OptionsConfigRefs = Strict({
  delegateOptions: Type.Optional(Type.Array(ResourceRef, { maxItems: 64, description: 'a missing namespace is the referring resource\'s' })),
});

const HeaderMatcher = Strict({
  name: Type.String({ minLength: 1 }),
  value: Type.Optional(Type.String()),
  regex: Type.Optional(Type.Boolean({ description: 'treat value as a regular expression (full match)' })),
  invertMatch: Type.Optional(Type.Boolean()),
});

const QueryParameterMatcher = Strict({
  name: Type.String({ minLength: 1 }),
  value: Type.Optional(Type.String()),
  regex: Type.Optional(Type.Boolean({ description: 'treat value as a regular expression (full match)' })),
});

/** SPEC 3.2 matchers: path (one of prefix/exact/regex), methods, headers, query parameters. */
const Matcher = Strict(
  {
    prefix: Type.Optional(Type.String()),
    exact: Type.Optional(Type.String()),
    regex: Type.Optional(Type.String({ minLength: 1 })),
    caseSensitive: Type.Optional(Type.Boolean({ description: 'path match is case-sensitive (default true)' })),
    methods: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    headers: Type.Optional(Type.Array(HeaderMatcher)),
    queryParameters: Type.Optional(Type.Array(QueryParameterMatcher)),
  },
  atMostOneOf(['prefix', 'exact', 'regex']),
);

const HeaderValue = Strict(
  {
    header: Type.Optional(Strict({ key: Type.String({ minLength: 1 }), value: Type.String({ description: "may hold Envoy's %VARIABLES% (the documented subset)" }) })),
    headerSecretRef: Type.Optional(ResourceRef),
    append: Type.Optional(Type.Boolean({ description: 'append to an existing header instead of replacing it (default true)' })),
  },
  exactlyOneOf(['header', 'headerSecretRef']),
);

export const HeaderManipulation = Strict({
  requestHeadersToAdd: Type.Optional(Type.Array(HeaderValue)),
  requestHeadersToRemove: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
  responseHeadersToAdd: Type.Optional(Type.Array(HeaderValue)),
  responseHeadersToRemove: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
});

export const CorsPolicy = Strict({
  allowOrigin: Type.Optional(Type.Array(Type.String())),
  allowOriginRegex: Type.Optional(Type.Array(Type.String())),
  allowMethods: Type.Optional(Type.Array(Type.String())),
  allowHeaders: Type.Optional(Type.Array(Type.String())),
  exposeHeaders: Type.Optional(Type.Array(Type.String())),
  // Envoy's (and Gloo's) max_age is a string of seconds ("86400"); a duration ("24h") is accepted too.
  maxAge: Type.Optional(Type.String({ pattern: '^([0-9]+|[0-9]+(\\.[0-9]+)?(ms|s|m|h|d))$', description: 'seconds ("86400", as Envoy writes it) or a duration ("24h", "1d" as Gloo\'s CORS guide writes it)' })),
  allowCredentials: Type.Optional(Type.Boolean()),
  disableForRoute: Type.Optional(Type.Boolean({ description: 'on a route: no CORS there, whatever the virtual host says (Gloo)' })),
});

/** The largest `requestBody.maxRequestBytes`: the body is held in memory while auth runs. */
export const MAX_REQUEST_BODY_BYTES = 64 * 1024 * 1024;

/** Envoy's `with_request_body` / Gloo's `requestBody` (SPEC 5.3): the body goes to auth. */
export const RequestBodyOptions = Strict({
  maxRequestBytes: Type.Integer({ minimum: 1, maximum: MAX_REQUEST_BODY_BYTES, description: 'bytes of the body buffered and sent to auth' }),
  allowPartialMessage: Type.Optional(Type.Boolean({ description: 'send the first maxRequestBytes of a larger body instead of answering 413' })),
  packAsBytes: Type.Optional(Type.Boolean({ description: 'send the body as raw_body (bytes) instead of body (UTF-8)' })),
});

/**
 * Per-route or per-host external auth: a config to use, or `disable` (route only), and whether
 * the body goes with the check. `disable` excludes both others (auth off: no config, no body).
 */
export const ExtAuthOptions = Strict(
  {
    configRef: Type.Optional(ResourceRef),
    disable: Type.Optional(Type.Boolean()),
    requestBody: Type.Optional(RequestBodyOptions),
  },
  {
    not: { anyOf: [{ required: ['configRef', 'disable'] }, { required: ['requestBody', 'disable'] }] },
    'x-gatehouse-message': '"disable" turns auth off: it cannot be set with "configRef" or "requestBody"',
  },
);

/** The retry_on tokens Gatehouse honours (Envoy's meaning); others are rejected at load. */
export const RETRY_ON_TOKENS: ReadonlySet<string> = new Set(['5xx', 'gateway-error', 'reset', 'connect-failure', 'retriable-4xx', 'retriable-status-codes']);

/** Gloo's RetryPolicy (Envoy's retry_on tokens). */
export const RetryPolicySpec = Strict({
  retryOn: Type.Optional(Type.String({ description: 'comma-separated Envoy tokens: 5xx, gateway-error, reset, connect-failure, retriable-4xx, retriable-status-codes' })),
  numRetries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10 })),
  perTryTimeout: Type.Optional(Duration),
  retriableStatusCodes: Type.Optional(Type.Array(Type.Integer({ minimum: 100, maximum: 599 }), { maxItems: 64 })),
  retryBackOff: Type.Optional(Strict({ baseInterval: Type.Optional(Duration), maxInterval: Type.Optional(Duration) })),
});

/** Gloo's lbhash HashPolicy (Envoy's): where a ring hash or Maglev Upstream takes the request's key from. */
const HashPolicy = Strict(
  {
    header: Type.Optional(Type.String({ minLength: 1 })),
    cookie: Type.Optional(Strict({ name: Type.String({ minLength: 1 }), ttl: Type.Optional(Duration), path: Type.Optional(Type.String()) })),
    sourceIp: Type.Optional(Type.Boolean()),
    terminal: Type.Optional(Type.Boolean({ description: 'when this policy produced a key, skip the ones after it' })),
  },
  exactlyOneOf(['header', 'cookie', 'sourceIp']),
);

/** Gloo's RouteFaults (`faultinjection.options.gloo.solo.io`): abort and/or delay a percentage of requests. */
const Faults = Strict({
  abort: Type.Optional(Strict({ percentage: Type.Optional(Type.Number({ minimum: 0, maximum: 100 })), httpStatus: Type.Optional(Type.Integer({ minimum: 200, maximum: 599 })) })),
  delay: Type.Optional(Strict({ percentage: Type.Optional(Type.Number({ minimum: 0, maximum: 100 })), fixedDelay: Type.Optional(Duration) })),
});
export type FaultsSpec = Type.Static<typeof Faults>;

/**
 * Gloo's BufferPerRoute (Envoy's buffer filter per route): the request body is read whole (at
 * most `buffer.maxRequestBytes`, 413 beyond) before it goes on, or `disabled` turns a listener's
 * `buffer` off here (proxy/filters/buffer.ts).
 */
export const BufferPerRoute = Strict(
  {
    disabled: Type.Optional(Type.Boolean()),
    buffer: Type.Optional(Strict({ maxRequestBytes: Type.Integer({ minimum: 1, maximum: MAX_REQUEST_BODY_BYTES, description: 'bytes of the request body held before it is sent on (413 beyond)' }) })),
  },
  exactlyOneOf(['disabled', 'buffer']),
);

/**
 * Gloo's RouteOptions `host_rewrite_type` oneof (beyond `hostRewrite`/`autoHostRewrite`) and
 * `appendXForwardedHost` (Envoy's host_rewrite_specifier and append_x_forwarded_host), applied by
 * proxy/request/host-rewrite.ts.
 */
const HostRewriteFields = {
  hostRewriteHeader: Type.Optional(Type.String({ minLength: 1, pattern: '^[^:]', description: 'the Host sent upstream is this request header\'s value (unchanged when the header is absent or empty); not a pseudo-header' })),
  hostRewritePathRegex: Type.Optional(
    Strict({
      pattern: Strict({ regex: Type.String({ minLength: 1, description: 'RE2 syntax' }), googleRe2: Type.Optional(Strict({ maxProgramSize: Type.Optional(Type.Integer({ minimum: 1 })) })) }),
      substitution: Type.String({ description: 'the Host sent upstream: the path (without query) with this substitution; \\1 … \\9 insert groups' }),
    }),
  ),
  appendXForwardedHost: Type.Optional(Type.Boolean({ description: 'a Host rewrite appends the original Host to x-forwarded-host' })),
};

/** Gloo's RouteShadowing (`shadowing.options.gloo.solo.io`): a copy of a percentage of the requests to another Upstream, fire and forget (proxy/request/shadow.ts). */
const Shadowing = Strict({
  upstream: ResourceRef,
  percentage: Type.Optional(Type.Number({ minimum: 0, maximum: 100, description: 'percent of requests copied (default 0, as Gloo)' })),
});

/** Gloo's RouteOptions: inline on a route, or in a RouteOption resource. */
export const RouteOptions = Strict({
  faults: Type.Optional(Faults),
  lbHash: Type.Optional(Strict({ hashPolicies: Type.Array(HashPolicy, { maxItems: 16 }) })),
  autoHostRewrite: Type.Optional(Type.Boolean()),
  hostRewrite: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'the Host sent upstream' })),
  ...HostRewriteFields,
  shadowing: Type.Optional(Shadowing),
  prefixRewrite: Type.Optional(Type.String()),
  regexRewrite: Type.Optional(
    Strict({
      pattern: Strict({
        regex: Type.String({ minLength: 1, description: 'RE2 syntax' }),
        // Gloo's RegexMatcher.GoogleRE2: a pattern whose RE2 program is larger is refused at load (Envoy).
        googleRe2: Type.Optional(Strict({ maxProgramSize: Type.Optional(Type.Integer({ minimum: 1 })) })),
      }),
      substitution: Type.String({ description: 'replacement; \\1 … \\9 insert capture groups (Envoy)' }),
    }),
  ),
  timeout: Type.Optional(Duration),
  retries: Type.Optional(RetryPolicySpec),
  headerManipulation: Type.Optional(HeaderManipulation),
  cors: Type.Optional(CorsPolicy),
  extauth: Type.Optional(ExtAuthOptions),
  // Gloo Enterprise's JWT filter and RBAC on claims (core/src/jwt).
  ...JwtRouteOptions,
  bufferPerRoute: Type.Optional(BufferPerRoute),
  transformations: Type.Optional(Transformations),
  stagedTransformations: Type.Optional(TransformationStages),
  ...RateLimitOptions,
  tracing: Type.Optional(RouteTracingSettings),
  // Gloo's websockets guide enables upgrades per route; Gatehouse takes a websocket upgrade on every route (docs/virtual-service.md).
  upgrades: Type.Optional(Ignored(Type.Array(Type.Unknown(), { maxItems: 16 }), 'upgrades are not configured per route: every route takes websocket upgrades (enabled: false is not applied)')),
});

/** Gloo's Destination: an Upstream, or a Kubernetes service port. */
export const Destination = Strict(
  {
    upstream: Type.Optional(ResourceRef),
    kube: Type.Optional(
      Strict({
        ref: ResourceRef,
        port: Type.Integer({ minimum: 1, maximum: 65535 }),
      }),
    ),
  },
  exactlyOneOf(['upstream', 'kube']),
);

/** Gloo's `routeAction.multi`: destinations picked per request in proportion to their weights. */
const MultiDestination = Strict({
  destinations: Type.Array(
    Strict({
      weight: Type.Integer({ minimum: 0, maximum: 1_000_000 }),
      destination: Destination,
      /** Gloo's WeightedDestinationOptions: header changes for requests sent to this destination (applied after the route's). */
      options: Type.Optional(Strict({ headerManipulation: Type.Optional(HeaderManipulation) })),
    }),
    { minItems: 1, maxItems: 256 },
  ),
});

/** Gloo's (Envoy's) RedirectAction: answer with a redirect built from the request. */
const RedirectAction = Strict(
  {
    hostRedirect: Type.Optional(Type.String({ minLength: 1 })),
    pathRedirect: Type.Optional(Type.String({ pattern: '^/' })),
    prefixRewrite: Type.Optional(Type.String()),
    httpsRedirect: Type.Optional(Type.Boolean()),
    portRedirect: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
    responseCode: Type.Optional(Type.Union([Type.Literal('MOVED_PERMANENTLY'), Type.Literal('FOUND'), Type.Literal('SEE_OTHER'), Type.Literal('TEMPORARY_REDIRECT'), Type.Literal('PERMANENT_REDIRECT')])),
    stripQuery: Type.Optional(Type.Boolean()),
  },
  atMostOneOf(['pathRedirect', 'prefixRewrite']),
);

/** Gloo's DirectResponseAction: answer with this status and body, no upstream. */
const DirectResponseAction = Strict({
  status: Type.Integer({ minimum: 200, maximum: 599 }),
  body: Type.Optional(Type.String({ maxLength: 4096 })),
});

/** Gloo's RouteTableSelector: RouteTables by namespace (default: the selector's own; `*` all) and labels. */
const RouteTableSelector = Strict({
  namespaces: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'default: the namespace of the resource holding the selector; "*" selects every namespace' })),
  labels: Type.Optional(Type.Record(Type.String(), Type.String())),
  expressions: Type.Optional(
    Type.Array(
      Strict({
        key: Type.String({ minLength: 1 }),
        operator: Type.Optional(Type.Union(['Equals', 'DoubleEquals', 'NotEquals', 'In', 'NotIn', 'Exists', 'DoesNotExist', 'GreaterThan', 'LessThan'].map((o) => Type.Literal(o)), { description: 'default Equals' })),
        values: Type.Optional(Type.Array(Type.String())),
      }),
    ),
  ),
});

/**
 * Gloo's DelegateAction: the routes under this route's prefix come from RouteTables, one by
 * `ref` (or the deprecated top-level `name`/`namespace`) or every one a `selector` picks.
 */
const DelegateAction = Strict(
  {
    name: Type.Optional(Name),
    namespace: Type.Optional(Name),
    ref: Type.Optional(ResourceRef),
    selector: Type.Optional(RouteTableSelector),
  },
  exactlyOneOf(['name', 'ref', 'selector']),
);

const Route = Strict(
  {
    name: Type.Optional(Type.String()),
    matchers: Type.Optional(Type.Array(Matcher)),
    inheritableMatchers: Type.Optional(Type.Boolean({ description: "delegated routes add this route's headers, methods and query parameter matchers to theirs (default: the parent's setting, else false)" })),
    delegateAction: Type.Optional(DelegateAction),
    routeAction: Type.Optional(Strict({ single: Type.Optional(Destination), multi: Type.Optional(MultiDestination), upstreamGroup: Type.Optional(ResourceRef) }, exactlyOneOf(['single', 'multi', 'upstreamGroup']))),
    graphqlApiRef: Type.Optional(ResourceRef),
    redirectAction: Type.Optional(RedirectAction),
    directResponseAction: Type.Optional(DirectResponseAction),
    options: Type.Optional(RouteOptions),
    optionsConfigRefs: Type.Optional(OptionsConfigRefs),
  },
  exactlyOneOf(['routeAction', 'graphqlApiRef', 'redirectAction', 'directResponseAction', 'delegateAction']),
);

/** TLS protocol versions as Gloo names them (`sslConfig.parameters`). */
const TlsVersion = Type.Union([Type.Literal('TLS_AUTO'), Type.Literal('TLSv1_0'), Type.Literal('TLSv1_1'), Type.Literal('TLSv1_2'), Type.Literal('TLSv1_3')]);

/**
 * Gloo's SslConfig for a VirtualService (SPEC 3.2.1): the certificate from a
 * `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`, optional `ca.crt`) or from files; `rootCa`
 * turns client-certificate verification on (unless `oneWayTls`).
 */
export const SslConfig = Strict(
  {
    secretRef: Type.Optional(ResourceRef),
    sslFiles: Type.Optional(Strict({ tlsCert: Type.String({ minLength: 1 }), tlsKey: Type.String({ minLength: 1 }), rootCa: Type.Optional(Type.String({ minLength: 1 })) })),
    sniDomains: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 1000 })),
    oneWayTls: Type.Optional(Type.Boolean({ description: 'with a rootCa: do not ask clients for a certificate' })),
    /** Gloo's SslParameters: protocol versions, TLS 1.2 cipher suites (OpenSSL/Envoy names, Envoy's `[A|B]` groups allowed) and curves; default Mozilla "intermediate". */
    parameters: Type.Optional(
      Strict({
        minimumProtocolVersion: Type.Optional(TlsVersion),
        maximumProtocolVersion: Type.Optional(TlsVersion),
        cipherSuites: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 128 })),
        ecdhCurves: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 32 })),
      }),
    ),
  },
  exactlyOneOf(['secretRef', 'sslFiles']),
);

/** Gloo's VirtualHostOptions: inline on a virtual host, or in a VirtualHostOption resource. */
export const VirtualHostOptions = Strict({
  extauth: Type.Optional(ExtAuthOptions),
  cors: Type.Optional(CorsPolicy),
  headerManipulation: Type.Optional(HeaderManipulation),
  retries: Type.Optional(RetryPolicySpec),
  ...JwtVirtualHostOptions,
  bufferPerRoute: Type.Optional(BufferPerRoute),
  transformations: Type.Optional(Transformations),
  stagedTransformations: Type.Optional(TransformationStages),
  ...RateLimitOptions,
});

/** SPEC 3.2. */
export const VirtualServiceSpec = Strict({
  // Gloo's display name (UI only): accepted, not used.
  displayName: Type.Optional(Type.String()),
  sslConfig: Type.Optional(SslConfig),
  virtualHost: Strict({
    domains: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { description: 'hosts this virtual host serves; none (or absent) means "*" (Gloo, Envoy)' })),
    routes: Type.Array(Route),
    options: Type.Optional(VirtualHostOptions),
    optionsConfigRefs: Type.Optional(OptionsConfigRefs),
  }),
});
export type VirtualServiceSpec = Type.Static<typeof VirtualServiceSpec>;

/**
 * Gloo's RouteTable: routes a `delegateAction` hands a prefix to. Tables a selector picks are
 * taken in ascending `weight` (default 0).
 */
export const RouteTableSpec = Strict({
  routes: Type.Array(Route),
  weight: Type.Optional(Type.Integer({ minimum: -2147483648, maximum: 2147483647, description: 'order among the tables one selector picks: ascending (default 0)' })),
});
export type RouteTableSpec = Type.Static<typeof RouteTableSpec>;
export type DelegateActionSpec = NonNullable<RouteSpec['delegateAction']>;
export type RouteSpec = VirtualServiceSpec['virtualHost']['routes'][number];
export type MatcherSpec = NonNullable<RouteSpec['matchers']>[number];
export type RouteOptionsSpec = NonNullable<RouteSpec['options']>;
export type VirtualHostOptionsSpec = Type.Static<typeof VirtualHostOptions>;
export type HeaderManipulationSpec = Type.Static<typeof HeaderManipulation>;
export type CorsPolicySpec = Type.Static<typeof CorsPolicy>;
export type ExtAuthOptionsSpec = Type.Static<typeof ExtAuthOptions>;

/** A virtual host's domains: Gloo and Envoy read none (or an absent list) as `*`. */
export function domainsOf(virtualHost: { domains?: readonly string[] | undefined }): readonly string[] {
  return virtualHost.domains && virtualHost.domains.length > 0 ? virtualHost.domains : ['*'];
}
