import { createHash } from 'node:crypto';
import type { CounterChild, HistogramChild } from '../../admin/request-metrics.ts';
import { metrics } from '../../admin/metrics.ts';
import type { AnyResource, Resource } from '../../config/resource.ts';
import { durationMs } from '../../config/schema/common.ts';
import type { ResourceRef } from '../../config/schema/common.ts';
import { domainsOf, type RouteOptionsSpec, type RouteSpec } from '../../config/schema/virtual-service.ts';
import { lookup, referencesOf, type ConfigSnapshot } from '../../config/store.ts';
import { flattenRoutes, routeTablesOf } from '../../config/delegation.ts';
import { compileChain, type FilterChain } from '../filters/chain.ts';
import { routeAuthOf } from '../filters/extauth.ts';
import { FilterStage, type FilterBuildContext, type FilterServices, type HttpFilter, type HttpFilterFactory } from '../filters/http-filter.ts';
import { FILTER_FACTORIES } from '../filters/registry.ts';
import { effectiveVirtualHostOptions, lookupIn } from '../../config/options-refs.ts';
import { compileHeaderOps, type HeaderOps } from '../request/header-ops.ts';
import { HostTable } from './host-table.ts';
import { compileMatchers, firstSegment, type CompiledMatcher, type RequestLine } from './route-matcher.ts';
import { regexSubstitution } from './re2.ts';
import { compileHashPolicies, type HashKey } from '../upstream/consistent-hash.ts';
import { compileHostRewrite, type CompiledHostRewrite } from '../request/host-rewrite.ts';
import type { CompiledShadow } from '../request/shadow.ts';
import { EndpointSliceResolver, KubeDnsResolver, type KubeServiceResolver } from '../upstream/kube-resolver.ts';
import { pino } from 'pino';
import type { Logger } from '../../log/logger.ts';
import type { UpstreamCluster } from '../upstream/upstream-cluster.ts';
import type { UpstreamRegistry } from '../upstream/upstream-registry.ts';
import type { RouteTracingSpec } from '../../tracing/schema.ts';

/** `regexRewrite` on RE2: a `String.prototype.replace` pattern doing Envoy's substitution itself. */
export type RegexSubstitution = ReturnType<typeof regexSubstitution>;

/** The resource holding a route: a VirtualService, or a RouteTable delegated to. */
type RouteOwner = Resource<'VirtualService'> | Resource<'RouteTable'>;

/** Default route timeout (SPEC 3.2). */
export const DEFAULT_TIMEOUT_MS = 15_000;

export type Destination =
  | { readonly kind: 'upstream'; readonly cluster: UpstreamCluster; readonly latency: HistogramChild }
  | { readonly kind: 'graphql'; readonly apiKey: string }
  /** `routeAction.multi`: clusters with cumulative weights; a request picks one in proportion. */
  | {
      readonly kind: 'weighted';
      /** `headers`: the destination's own header changes merged after the route's (Gloo's per-destination headerManipulation). */
      readonly choices: readonly { readonly upTo: number; readonly cluster: UpstreamCluster; readonly latency: HistogramChild; readonly headers?: { readonly request: HeaderOps; readonly response: HeaderOps } | undefined }[];
      readonly total: number;
    }
  | { readonly kind: 'redirect'; readonly redirect: CompiledRedirect }
  | { readonly kind: 'direct'; readonly status: number; readonly body: string }
  /** The destination could not be built (a bug or a value validation missed): answered 503, never a crash or a stale table. */
  | { readonly kind: 'unavailable'; readonly reason: string };

/** The AuthConfig a route uses after inheritance (SPEC 3.2, 4 step 2). */
export interface RouteAuth {
  /** `namespace.name`: the ext_authz `context_extensions.config_id`. */
  readonly configId: string;
  readonly sourceType: 'virtual_host' | 'route';
  readonly sourceName: string;
  /** Buffer the body and send it with the check (route setting over the virtual host's). */
  readonly body?: { readonly maxBytes: number; readonly allowPartial: boolean; readonly packAsBytes: boolean };
}

export interface RetryPolicy {
  readonly numRetries: number;
  /** Upstream statuses that are retried (5xx, gateway-error, retriable-4xx, retriable-status-codes). */
  readonly onStatus: (status: number) => boolean;
  /** A per-try timeout is retried (Envoy retries it under 5xx and gateway-error). */
  readonly onTimeout: boolean;
  readonly onConnectFailure: boolean;
  readonly onReset: boolean;
  readonly perTryTimeoutMs: number | undefined;
  /** Jittered exponential back-off between tries (Envoy: 25 ms base, 10x base at most). */
  readonly backoff: { readonly baseMs: number; readonly maxMs: number };
}


/** A route compiled for the request path: everything is looked up, nothing parsed. */
export interface CompiledRoute {
  readonly name: string;
  readonly virtualHost: string;
  readonly matchers: readonly CompiledMatcher[];
  readonly destination: Destination;
  readonly timeoutMs: number;
  readonly retry: RetryPolicy | undefined;
  readonly prefixRewrite: string | undefined;
  readonly autoHostRewrite: boolean;
  /** `hostRewrite`: the Host sent upstream. */
  readonly hostRewrite: string | undefined;
  /** `regexRewrite`: every match of the pattern in the path replaced (Envoy's RegexMatchAndSubstitute). */
  readonly regexRewrite: { readonly pattern: RegexSubstitution; readonly substitution: string } | undefined;
  readonly requestHeaders: HeaderOps;
  readonly responseHeaders: HeaderOps;
  /** The route's filters (CORS, auth, rate limits, transformations…), compiled at load; undefined when it has none. */
  readonly chain: FilterChain | undefined;
  /** The AuthConfig the route uses (also in its chain), for `admin:/config`. */
  readonly auth: RouteAuth | undefined;
  /** Request counter children by status, bound lazily (label hashing off the hot path). */
  readonly counters: Map<number, CounterChild>;
  /** Duration histogram children by status class (index 0: none, 1–5: 1xx–5xx), bound lazily. */
  readonly durations: (HistogramChild | undefined)[];
  /** `options.lbHash`: the request's key for ring hash and Maglev Upstreams. */
  readonly hashKey: HashKey | undefined;
  /** Every Host rewrite option (`hostRewrite`, `autoHostRewrite`, `hostRewriteHeader`, `hostRewritePathRegex`, `appendXForwardedHost`), compiled; undefined: the Host is passed on. */
  readonly hostRewriter?: CompiledHostRewrite | undefined;
  /** `options.shadowing`: where a copy of the requests goes (proxy/request/shadow.ts). */
  readonly shadow?: CompiledShadow | undefined;
  /** `options.tracing` (core/src/tracing): span name, sampling and propagation of the route's requests. */
  readonly tracing?: RouteTracingSpec | undefined;
}

export interface CompiledVirtualHost {
  readonly name: string;
  readonly routes: readonly CompiledRoute[];
  /**
   * Routes by the first path segment they can match (in route order, with the routes that can
   * match any segment merged in), so a request scans only routes that may match it; `other`
   * for segments no route names. Absent for short route lists (a scan is as cheap).
   */
  readonly index?: { readonly bySegment: ReadonlyMap<string, readonly CompiledRoute[]>; readonly other: readonly CompiledRoute[] } | undefined;
}

/** Below this many routes a virtual host is scanned without an index. */
const INDEX_MIN_ROUTES = 32;
/** Above this many list entries (segments × routes that match any) the index is not built. */
const INDEX_MAX_ENTRIES = 1_000_000;

/** The segment index of a route list (see {@link CompiledVirtualHost.index}); first-match order is kept. */
export function indexRoutes(routes: readonly CompiledRoute[]): CompiledVirtualHost['index'] {
  if (routes.length < INDEX_MIN_ROUTES) return undefined;
  const segmentsOf = routes.map((r) => (r.matchers.some((m) => m.segment === undefined) ? undefined : new Set(r.matchers.map((m) => m.segment!))));
  const other = routes.filter((_, i) => segmentsOf[i] === undefined);
  const keys = new Set<string>();
  for (const set of segmentsOf) if (set) for (const key of set) keys.add(key);
  if (keys.size * (other.length + 1) > INDEX_MAX_ENTRIES) return undefined;
  // One pass in route order, so first-match order is kept; O(routes + segments × routes that match any).
  const bySegment = new Map<string, CompiledRoute[]>();
  for (const key of keys) bySegment.set(key, []);
  routes.forEach((route, i) => {
    const set = segmentsOf[i];
    if (set === undefined) for (const list of bySegment.values()) list.push(route);
    else for (const key of set) bySegment.get(key)!.push(route);
  });
  return { bySegment, other };
}

export interface RouteTable {
  readonly generation: number;
  /** Virtual hosts served on the HTTP listener. */
  readonly hosts: HostTable<CompiledVirtualHost>;
  /** Virtual hosts served on the HTTPS listener (VirtualServices with sslConfig). */
  readonly tlsHosts: HostTable<CompiledVirtualHost>;
  readonly virtualHosts: readonly CompiledVirtualHost[];
  /** Every upstream cluster in use, so unused ones can be closed. */
  readonly clusters: ReadonlySet<UpstreamCluster>;
  /** The effective routes, for `admin:/config`. */
  readonly description: unknown[];
}

export interface RouteTableOptions {
  upstreams: UpstreamRegistry;
  /** Kubernetes cluster domain for `routeAction.single.kube` and kube Upstreams (default `cluster.local`). */
  kubeClusterDomain?: string;
  /** How Kubernetes services become hosts (default: DNS under `kubeClusterDomain`); the seam for EndpointSlices. */
  kubeResolver?: KubeServiceResolver;
  /** Where a destination that cannot be built is reported. */
  logger?: Pick<Logger, 'error'>;
  /** What filters are compiled with: the process's services and logger (default: none, and a logger that drops lines). */
  filters?: { readonly services: FilterServices; readonly logger: Logger; readonly factories?: readonly HttpFilterFactory[] };
}

/** Finds the first route of a virtual host that matches, and which matcher matched. */
export function matchRoute(vhost: CompiledVirtualHost, req: RequestLine): { route: CompiledRoute; matcher: CompiledMatcher } | undefined {
  const index = vhost.index;
  const candidates = index ? (index.bySegment.get(firstSegment(req.path)) ?? index.other) : vhost.routes;
  for (const route of candidates) {
    for (const matcher of route.matchers) {
      if (matcher.matches(req)) return { route, matcher };
    }
  }
  return undefined;
}

/** Compiles the served VirtualServices of a snapshot into a route table. */
export function compileRouteTable(snapshot: ConfigSnapshot, given: RouteTableOptions): RouteTable {
  // --kube: services resolve to their ready endpoints (EndpointSlices in the snapshot).
  const options = snapshot.endpoints && !given.kubeResolver ? { ...given, kubeResolver: new EndpointSliceResolver(snapshot.endpoints, kubeResolverOf(given)) } : given;
  const hosts = new HostTable<CompiledVirtualHost>();
  // SPEC 3.2.1: a VirtualService with sslConfig is served on the HTTPS listener only, the others on HTTP only.
  const tlsHosts = new HostTable<CompiledVirtualHost>();
  const clusters = new Set<UpstreamCluster>();
  const virtualHosts: CompiledVirtualHost[] = [];
  const description: unknown[] = [];
  const vss = [...snapshot.resources.values()].filter((r): r is Resource<'VirtualService'> => r.kind === 'VirtualService');
  const tables = routeTablesOf(snapshot.resources);
  const cache = compiledCache(options.upstreams);
  const used = new Map<string, CachedVirtualHost>();
  // Endpoints as content: a worker's copy is a new map with every snapshot.
  // (hashed: compared once per virtual host).
  const endpoints = snapshot.endpoints ? createHash('sha256').update(JSON.stringify([...snapshot.endpoints])).digest('hex') : '';
  for (const vs of vss) {
    const vh = vs.spec.virtualHost;
    const vhostName = `${vs.namespace}/${vs.name}`;
    // Delegated routes (RouteTables) in place of their delegating route; the store only serves a tree without cycles.
    const flat = flattenRoutes(vs, tables).routes;
    const deps = dependenciesOf(snapshot, vs, flat, [endpoints, given.kubeResolver, given.kubeClusterDomain, given.filters?.services, given.filters?.factories, snapshot.listenerHttp?.key]);
    const cached = cache.entries.get(vs.key);
    if (cached && sameDependencies(cached.deps, deps)) {
      used.set(vs.key, cached);
      // Nothing this virtual host is built from changed: a reload costs what changed, not every route again.
      for (const c of cached.clusters) clusters.add(c);
      virtualHosts.push(cached.compiled);
      for (const domain of domainsOf(vh)) (vs.spec.sslConfig ? tlsHosts : hosts).add(domain, cached.compiled);
      description.push(cached.description);
      continue;
    }
    const own = new Set<UpstreamCluster>();
    // The virtual host's options with its VirtualHostOptions merged in (config/options-refs.ts): once per virtual host.
    const hostOptions = effectiveVirtualHostOptions(vs, lookupIn(snapshot.resources));
    const routes = flat.map(({ spec, owner, index }) => {
      const route = compileRoute(snapshot, vs, owner, spec, index, options, hostOptions);
      if (route.destination.kind === 'upstream') own.add(route.destination.cluster);
      if (route.destination.kind === 'weighted') for (const choice of route.destination.choices) own.add(choice.cluster);
      if (route.shadow) own.add(route.shadow.cluster);
      return route;
    });
    for (const c of own) clusters.add(c);
    const compiled: CompiledVirtualHost = { name: vhostName, routes, index: indexRoutes(routes) };
    virtualHosts.push(compiled);
    for (const domain of domainsOf(vh)) (vs.spec.sslConfig ? tlsHosts : hosts).add(domain, compiled);
    const described = {
      virtualService: vhostName,
      listener: vs.spec.sslConfig ? 'https' : 'http',
      domains: domainsOf(vh),
      routes: routes.map((r, i) => ({
        name: r.name,
        matchers: flat[i]!.spec.matchers ?? [{ prefix: '/' }],
        ...(flat[i]!.owner.kind === 'RouteTable' ? { routeTable: `${flat[i]!.owner.namespace}/${flat[i]!.owner.name}` } : {}),
        destination:
          r.destination.kind === 'upstream'
            ? { upstream: r.destination.cluster.name, hosts: r.destination.cluster.hosts.map((h) => h.origin) }
            : r.destination.kind === 'graphql'
              ? { graphqlApi: r.destination.apiKey }
              : r.destination.kind === 'weighted'
                ? { weighted: r.destination.choices.map((c, i, all) => ({ upstream: c.cluster.name, weight: c.upTo - (i > 0 ? all[i - 1]!.upTo : 0) })) }
                : r.destination.kind === 'redirect'
                  ? { redirect: r.destination.redirect }
                  : r.destination.kind === 'direct'
                    ? { directResponse: { status: r.destination.status } }
                    : { unavailable: r.destination.reason },
        timeoutMs: r.timeoutMs,
        auth: r.auth ?? null,
      })),
    };
    description.push(described);
    used.set(vs.key, { deps, compiled, clusters: [...own], description: described });
  }
  // Only what this table uses stays cached: removed VirtualServices are forgotten.
  cache.entries = used;
  return { generation: snapshot.generation, hosts, tlsHosts, virtualHosts, clusters, description };
}

/** A compiled virtual host and what it was built from. */
interface CachedVirtualHost {
  readonly deps: readonly unknown[];
  readonly compiled: CompiledVirtualHost;
  readonly clusters: readonly UpstreamCluster[];
  readonly description: unknown;
}

/**
 * Compiled virtual hosts per upstream registry (their routes hold that registry's clusters), by
 * VirtualService key. Keyed by content (resource keys and versions), not object identity, so a
 * traffic worker, which receives every snapshot as new objects, reuses them too.
 */
const compiledCaches = new WeakMap<UpstreamRegistry, { entries: Map<string, CachedVirtualHost> }>();

function compiledCache(upstreams: UpstreamRegistry): { entries: Map<string, CachedVirtualHost> } {
  let cache = compiledCaches.get(upstreams);
  if (!cache) compiledCaches.set(upstreams, (cache = { entries: new Map() }));
  return cache;
}

/** Small ids for non-resource inputs (resolvers), so dependencies compare as strings and numbers. */
const objectIds = new WeakMap<object, number>();
let nextObjectId = 0;
function idOf(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  let id = objectIds.get(value);
  if (id === undefined) objectIds.set(value, (id = ++nextObjectId));
  return `#${id}`;
}

/** A served resource as a dependency: its key and content hash ('-' when absent). */
function versionOf(resource: { key: string; version: string } | undefined): string {
  return resource ? `${resource.key}@${resource.version}` : '-';
}

/**
 * Everything a virtual host is compiled from: the VirtualService, the RouteTables its routes come
 * from, every resource they reference (Upstreams, UpstreamGroups and their Upstreams, Secrets,
 * AuthConfigs, GraphQLApis; '-' when absent), the Kubernetes endpoints and the table's own
 * settings (cluster domain, resolver).
 */
function dependenciesOf(snapshot: ConfigSnapshot, vs: Resource<'VirtualService'>, flat: readonly { owner: Resource<'VirtualService'> | Resource<'RouteTable'> }[], settings: readonly unknown[]): unknown[] {
  const deps: unknown[] = settings.map(idOf);
  const owners = new Set<Resource<'VirtualService'> | Resource<'RouteTable'>>([vs]);
  for (const route of flat) owners.add(route.owner);
  for (const owner of owners) {
    deps.push(versionOf(owner));
    for (const ref of referencesOf(owner)) {
      const found = lookup(snapshot, ref.kind, ref.ref, owner.namespace);
      deps.push(versionOf(found));
      // An options resource's own references (Secrets of its headers) are compiled into this virtual host too.
      if ((ref.kind === 'VirtualHostOption' || ref.kind === 'RouteOption') && found) for (const r of referencesOf(found as AnyResource)) deps.push(versionOf(lookup(snapshot, r.kind, r.ref, found.namespace)));
      // A group's destinations resolve in its own namespace.
      if (ref.kind === 'UpstreamGroup' && found) {
        const group = found as Resource<'UpstreamGroup'>;
        for (const d of group.spec.destinations) deps.push(versionOf(lookup(snapshot, 'Upstream', d.destination.upstream, group.namespace)));
      }
    }
  }
  return deps;
}

function sameDependencies(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Whether every host of `cluster` is reached over HTTP/2 (gRPC-Web needs that to become gRPC). */
function speaksHttp2(cluster: UpstreamCluster): boolean {
  return cluster.hosts.length > 0 && cluster.hosts.every((h) => h.http2);
}

/**
 * One route of `vs`, held by `owner` (the VirtualService itself or a RouteTable it delegates to):
 * the route's own references resolve in the owner's namespace, the virtual host's in the VirtualService's.
 */
function compileRoute(snapshot: ConfigSnapshot, vs: Resource<'VirtualService'>, owner: Resource<'VirtualService'> | Resource<'RouteTable'>, spec: RouteSpec, index: number, options: RouteTableOptions, hostOptions: ReturnType<typeof effectiveVirtualHostOptions>): CompiledRoute {
  const vh = { options: hostOptions };
  const name = spec.name ?? `${owner.namespace}/${owner.name}/${index}`;
  const o = spec.options ?? {};
  const secretOf = (ref: ResourceRef) => lookup(snapshot, 'Secret', ref, owner.namespace);
  const destination = safeDestination(snapshot, owner, spec, { ...options, headerSpecs: [vh.options?.headerManipulation, o.headerManipulation], secretOf });
  const filterContext: FilterBuildContext = {
    routeOptions: spec.options as Record<string, unknown> | undefined,
    virtualHostOptions: vh.options as Record<string, unknown> | undefined,
    namespace: owner.namespace,
    virtualHost: `${vs.namespace}/${vs.name}`,
    route: name,
    snapshot,
    logger: options.filters?.logger ?? SILENT,
    destinationKind: destination.kind,
    upstreamHttp2: destination.kind === 'upstream' ? speaksHttp2(destination.cluster) : destination.kind === 'weighted' ? destination.choices.every((c) => speaksHttp2(c.cluster)) : false,
    listenerOptions: snapshot.listenerHttp?.httpOptions,
    services: options.filters?.services ?? {},
  };
  return {
    name,
    virtualHost: `${vs.namespace}/${vs.name}`,
    matchers: compileMatchers(spec.matchers),
    destination,
    timeoutMs: o.timeout ? durationMs(o.timeout) : DEFAULT_TIMEOUT_MS,
    // A route's retries replace the virtual host's (Gloo).
    retry: (o.retries ?? vh.options?.retries) ? compileRetry((o.retries ?? vh.options?.retries)!) : undefined,
    prefixRewrite: o.prefixRewrite,
    autoHostRewrite: o.autoHostRewrite === true,
    hostRewrite: o.hostRewrite,
    // RE2 with Envoy's \1 groups; the pattern does the whole substitution when the gateway calls path.replace(pattern, substitution).
    regexRewrite: o.regexRewrite ? { pattern: regexSubstitution(o.regexRewrite.pattern.regex, o.regexRewrite.substitution), substitution: o.regexRewrite.substitution } : undefined,
    requestHeaders: compileHeaderOps([vh.options?.headerManipulation, o.headerManipulation], 'request', secretOf),
    responseHeaders: compileHeaderOps([vh.options?.headerManipulation, o.headerManipulation], 'response', secretOf),
    chain: compileChain(compileFilters(filterContext, options.filters?.factories ?? FILTER_FACTORIES)),
    auth: routeAuthOf(filterContext),
    counters: new Map(),
    durations: [],
    hashKey: compileHashPolicies(o.lbHash?.hashPolicies),
    hostRewriter: compileHostRewrite(o),
    shadow: compileShadow(snapshot, owner, o.shadowing, options),
    tracing: o.tracing,
  };
}

/**
 * `options.shadowing` (the shadow Upstream resolves in the route owner's namespace); undefined
 * when nothing is copied or the Upstream cannot be used (logged: the route itself still serves).
 */
function compileShadow(snapshot: ConfigSnapshot, owner: RouteOwner, spec: RouteOptionsSpec['shadowing'], options: RouteTableOptions): CompiledShadow | undefined {
  if (!spec || !(spec.percentage! > 0)) return undefined;
  try {
    const upstream = lookup(snapshot, 'Upstream', spec.upstream, owner.namespace);
    if (!upstream) throw new Error(`Upstream ${spec.upstream.namespace ?? owner.namespace}/${spec.upstream.name} is not served`);
    const cluster = options.upstreams.forUpstream(upstream, (ref) => lookup(snapshot, 'Secret', ref, upstream.namespace), kubeResolverOf(options));
    return { cluster, fraction: Math.min(spec.percentage!, 100) / 100 };
  } catch (error) {
    options.logger?.error({ code: 'GH_ROUTE_DESTINATION', [owner.kind === 'RouteTable' ? 'routeTable' : 'virtualService']: `${owner.namespace}/${owner.name}`, cause: error instanceof Error ? error.message : String(error) }, 'route shadowing Upstream could not be used; requests are not shadowed');
    return undefined;
  }
}

/**
 * A route's destination, or `unavailable` when building it throws: one bad destination must
 * not make the whole table fail to build, which silently kept the previous table serving while
 * status showed the new configuration (issue 17 finding 4).
 */
/** What a destination needs beyond the table's options: the route's header changes, for per-destination ones to extend. */
type DestinationOptions = RouteTableOptions & { headerSpecs?: Parameters<typeof compileHeaderOps>[0]; secretOf?: Parameters<typeof compileHeaderOps>[2] };

function safeDestination(snapshot: ConfigSnapshot, vs: RouteOwner, spec: RouteSpec, options: DestinationOptions): Destination {
  try {
    return compileDestination(snapshot, vs, spec, options);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    options.logger?.error({ code: 'GH_ROUTE_DESTINATION', [vs.kind === 'RouteTable' ? 'routeTable' : 'virtualService']: `${vs.namespace}/${vs.name}`, route: spec.name, cause: reason }, 'route destination could not be built; the route answers 503');
    return { kind: 'unavailable', reason };
  }
}

function compileDestination(snapshot: ConfigSnapshot, vs: RouteOwner, spec: RouteSpec, options: DestinationOptions): Destination {
  if (spec.graphqlApiRef) return { kind: 'graphql', apiKey: refKeyOf('GraphQLApi', spec.graphqlApiRef, vs.namespace) };
  if (spec.directResponseAction) return { kind: 'direct', status: spec.directResponseAction.status, body: spec.directResponseAction.body ?? '' };
  if (spec.redirectAction) return { kind: 'redirect', redirect: compileRedirect(spec.redirectAction) };
  const group = spec.routeAction!.upstreamGroup;
  // An UpstreamGroup is a shared multi: its destinations, as seen from its own namespace.
  const groupResource = group ? lookup(snapshot, 'UpstreamGroup', group, vs.namespace) : undefined;
  const multi = groupResource ? { destinations: groupResource.spec.destinations.map((d) => ({ weight: d.weight, destination: { upstream: { name: d.destination.upstream.name, namespace: d.destination.upstream.namespace ?? groupResource.namespace } } })) } : spec.routeAction!.multi;
  if (group && !groupResource) return { kind: 'unavailable', reason: `UpstreamGroup ${group.namespace ?? vs.namespace}/${group.name} is not served` };
  if (multi) {
    let total = 0;
    const choices = multi.destinations
      .filter((d) => d.weight > 0)
      .map((d) => {
        const one = clusterFor(snapshot, vs, d.destination, options);
        total += d.weight;
        const own = 'options' in d ? d.options?.headerManipulation : undefined;
        const specs = [...(options.headerSpecs ?? []), own];
        const headers = own ? { request: compileHeaderOps(specs, 'request', options.secretOf), response: compileHeaderOps(specs, 'response', options.secretOf) } : undefined;
        return { upTo: total, cluster: one, latency: metrics.upstreamLatency.labels(one.name), headers };
      });
    if (choices.length === 0) return { kind: 'unavailable', reason: 'every destination of routeAction.multi has weight 0' };
    return { kind: 'weighted', choices, total };
  }
  const cluster = clusterFor(snapshot, vs, spec.routeAction!.single!, options);
  return { kind: 'upstream', cluster, latency: metrics.upstreamLatency.labels(cluster.name) };
}

/** The cluster of one destination (an Upstream, or a Kubernetes service). */
function clusterFor(snapshot: ConfigSnapshot, vs: RouteOwner, single: NonNullable<NonNullable<RouteSpec['routeAction']>['single']>, options: RouteTableOptions): UpstreamCluster {
  let cluster: UpstreamCluster;
  if (single.upstream) {
    // The store only serves a VirtualService whose references resolve.
    const upstream = lookup(snapshot, 'Upstream', single.upstream, vs.namespace)!;
    cluster = options.upstreams.forUpstream(upstream, (ref) => lookup(snapshot, 'Secret', ref, upstream.namespace), kubeResolverOf(options));
  } else {
    const { ref, port } = single.kube!;
    // One host per service through DNS; its ready endpoints with --kube (round robin).
    const namespace = ref.namespace ?? vs.namespace;
    const hosts = kubeResolverOf(options).hosts({ name: ref.name, namespace, port });
    if (hosts.length === 0) throw new Error(`Kubernetes service ${namespace}/${ref.name} port ${port} has no ready endpoints`);
    cluster = hosts.length === 1 ? options.upstreams.forHost(hosts[0]!.addr, hosts[0]!.port) : options.upstreams.forHosts(hosts);
  }
  return cluster;
}

const dnsResolvers = new Map<string, KubeDnsResolver>();

function kubeResolverOf(options: RouteTableOptions): KubeServiceResolver {
  if (options.kubeResolver) return options.kubeResolver;
  const domain = options.kubeClusterDomain ?? 'cluster.local';
  let resolver = dnsResolvers.get(domain);
  if (!resolver) dnsResolvers.set(domain, (resolver = new KubeDnsResolver(domain)));
  return resolver;
}

/** Envoy's redirect response codes by Gloo's names. */
const REDIRECT_CODES: Record<string, number> = { MOVED_PERMANENTLY: 301, FOUND: 302, SEE_OTHER: 303, TEMPORARY_REDIRECT: 307, PERMANENT_REDIRECT: 308 };

/** A `redirectAction`, ready for the request path. */
export interface CompiledRedirect {
  readonly status: number;
  readonly host: string | undefined;
  readonly path: string | undefined;
  readonly prefixRewrite: string | undefined;
  readonly https: boolean;
  readonly port: number | undefined;
  readonly stripQuery: boolean;
}

function compileRedirect(spec: NonNullable<RouteSpec['redirectAction']>): CompiledRedirect {
  return {
    status: REDIRECT_CODES[spec.responseCode ?? 'MOVED_PERMANENTLY']!,
    host: spec.hostRedirect,
    path: spec.pathRedirect,
    prefixRewrite: spec.prefixRewrite,
    https: spec.httpsRedirect === true,
    port: spec.portRedirect,
    stripQuery: spec.stripQuery === true,
  };
}

/**
 * The `location` of a redirect (Envoy's rules): scheme https when asked (the port then goes
 * unless `portRedirect` sets one), the host replaced or kept, the path replaced, or its matched
 * prefix rewritten; the query kept unless `stripQuery` (a `pathRedirect` with its own query
 * replaces it).
 */
export function redirectLocation(redirect: CompiledRedirect, request: { scheme: string; host: string; path: string; query: string }, rewritePrefix: (prefix: string) => string): string {
  const scheme = redirect.https ? 'https' : request.scheme;
  const colon = request.host.lastIndexOf(':');
  const bracket = request.host.lastIndexOf(']');
  let hostname = colon > bracket ? request.host.slice(0, colon) : request.host;
  let port = colon > bracket ? request.host.slice(colon + 1) : '';
  if (redirect.host !== undefined) {
    const c = redirect.host.lastIndexOf(':');
    const b = redirect.host.lastIndexOf(']');
    hostname = c > b ? redirect.host.slice(0, c) : redirect.host;
    if (c > b) port = redirect.host.slice(c + 1);
  }
  if (redirect.https && redirect.port === undefined) port = '';
  if (redirect.port !== undefined) port = String(redirect.port);
  let path = request.path;
  let query = redirect.stripQuery ? '' : request.query;
  if (redirect.path !== undefined) {
    const q = redirect.path.indexOf('?');
    path = q === -1 ? redirect.path : redirect.path.slice(0, q);
    if (q !== -1) query = redirect.path.slice(q + 1);
  } else if (redirect.prefixRewrite !== undefined) {
    path = rewritePrefix(redirect.prefixRewrite);
  }
  return `${scheme}://${hostname}${port ? `:${port}` : ''}${path}${query ? `?${query}` : ''}`;
}

function refKeyOf(kind: string, ref: ResourceRef, fromNamespace: string): string {
  return `${kind}/${ref.namespace ?? fromNamespace}/${ref.name}`;
}

/**
 * The filters every factory makes for one route. A factory that throws (a bug: its options
 * passed its check) gives the route a filter answering 500: the route fails closed, never
 * without a filter it should have (an auth filter skipped would open it).
 */
function compileFilters(context: FilterBuildContext, factories: readonly HttpFilterFactory[]): HttpFilter[] {
  const out: HttpFilter[] = [];
  for (const factory of factories) {
    let made: HttpFilter | readonly HttpFilter[] | undefined;
    try {
      made = factory.create(context);
    } catch (error) {
      context.logger.error({ code: 'GH_FILTER_BUILD', filter: factory.name, virtualService: context.virtualHost, route: context.route, err: error }, 'a filter could not be built; the route answers 500');
      made = { name: factory.name, stage: FilterStage.fault, onRequest: () => ({ status: 500, code: 'GH_FILTER_BUILD', body: 'internal error' }) };
    }
    if (made === undefined) continue;
    if (Array.isArray(made)) out.push(...(made as readonly HttpFilter[]));
    else out.push(made as HttpFilter);
  }
  return out;
}

/** A logger for route tables compiled without one (tests, the admin view): filters may log freely. */
const SILENT: Logger = pino({ enabled: false });

/** Envoy's retry semantics for Gloo's RetryPolicy (tokens checked at load: {@link RETRY_ON_TOKENS}). */
function compileRetry(spec: NonNullable<NonNullable<RouteSpec['options']>['retries']>): RetryPolicy {
  const on = new Set((spec.retryOn ?? '5xx,connect-failure,reset').split(',').map((s) => s.trim()).filter(Boolean));
  const all5xx = on.has('5xx');
  const gateway = on.has('gateway-error');
  const codes = new Set(on.has('retriable-status-codes') ? (spec.retriableStatusCodes ?? []) : []);
  const conflict = on.has('retriable-4xx');
  const baseMs = spec.retryBackOff?.baseInterval ? durationMs(spec.retryBackOff.baseInterval) : 25;
  return {
    numRetries: spec.numRetries ?? 1,
    onStatus: (status) => (all5xx && status >= 500) || (gateway && (status === 502 || status === 503 || status === 504)) || (conflict && status === 409) || codes.has(status),
    onTimeout: all5xx || gateway,
    onConnectFailure: on.has('connect-failure') || all5xx || gateway,
    onReset: on.has('reset') || all5xx || gateway,
    perTryTimeoutMs: spec.perTryTimeout ? durationMs(spec.perTryTimeout) : undefined,
    backoff: { baseMs, maxMs: spec.retryBackOff?.maxInterval ? durationMs(spec.retryBackOff.maxInterval) : 10 * baseMs },
  };
}
