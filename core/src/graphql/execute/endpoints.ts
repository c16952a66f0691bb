import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { metrics } from '../../admin/metrics.ts';
import { OperationGate } from '../limits/operation-gate.ts';
import type { Resource } from '../../config/resource.ts';
import type { ResourceRef } from '../../config/schema/common.ts';
import { lookup, type ConfigSnapshot } from '../../config/store.ts';
import type { Logger } from '../../log/logger.ts';
import type { RequestContext } from '../../proxy/context.ts';
import type { GraphQLEndpoints } from '../../proxy/destinations.ts';
import type { UpstreamCluster } from '../../proxy/upstream/upstream-cluster.ts';
import type { UpstreamRegistry } from '../../proxy/upstream/upstream-registry.ts';
import { GraphQLEndpoint, type ExecutionEngine } from './endpoint.ts';
import { FieldErrorCodes, fieldError } from '../compile/errors.ts';
import { sendErrors } from './http.ts';
import { RemoteExecutor } from './remote.ts';
import { GrpcChannels, grpcResolver } from '../resolvers/grpc.ts';
import { mockResolver } from '../resolvers/mock.ts';
import { restResolver } from '../resolvers/rest.ts';
import type { FieldResolver, ResolverMetrics } from '../resolvers/types.ts';
import { compileApi, type CompiledApi } from '../compile/schema.ts';
import { withIncrementalDirectives } from './incremental.ts';
import { LIMITS_OFF, limitsOf, resolverFieldsOf } from '../limits/limits.ts';
import { validationRules } from '../limits/validation.ts';

export interface GraphQLEndpointsOptions {
  /** The gateway's upstream registry (shared, so GraphQL calls reuse its warm pools). */
  readonly upstreams: UpstreamRegistry;
  readonly logger: Logger;
  /** Local execution engine (default `jit`: graphql-jit, measured faster; see docs/graphql.md). */
  readonly engine?: ExecutionEngine;
}

/** The GraphQL servers of every served GraphQLApi (the `graphqlApiRef` route destination). */
export function createGraphQLEndpoints(options: GraphQLEndpointsOptions): GraphQLEndpoints {
  return new Endpoints(options);
}

class Endpoints implements GraphQLEndpoints {
  private endpoints = new Map<string, GraphQLEndpoint>();
  private used: ReadonlySet<UpstreamCluster> = new Set();
  private readonly channels = new GrpcChannels();
  private readonly options: GraphQLEndpointsOptions;

  constructor(options: GraphQLEndpointsOptions) {
    if (!options?.upstreams) throw new TypeError('createGraphQLEndpoints: options.upstreams (an UpstreamRegistry) is required');
    if (!options.logger) throw new TypeError('createGraphQLEndpoints: options.logger is required');
    this.options = options;
  }

  update(snapshot: ConfigSnapshot): void {
    const next = new Map<string, GraphQLEndpoint>();
    const grpcHosts = new Set<string>();
    const used = new Set<UpstreamCluster>();
    for (const resource of snapshot.resources.values()) {
      if (resource.kind !== 'GraphQLApi') continue;
      try {
        const endpoint = this.build(resource, snapshot, grpcHosts, used);
        if (endpoint) next.set(resource.key, endpoint);
      } catch (error) {
        // A served resource passed the load-time check, so this is a bug; keep the others serving.
        this.options.logger.error({ err: error, api: resource.key }, 'cannot build GraphQL endpoint');
      }
    }
    // WebSockets of a replaced endpoint (the API or its upstreams changed) are closed: clients
    // reconnect under the new configuration (its auth, limits and upstream) instead of keeping the old.
    const kept = new Set(next.values());
    for (const old of this.endpoints.values()) if (!kept.has(old)) old.close('the GraphQL API was reconfigured; reconnect');
    this.endpoints = next;
    this.used = used;
    this.channels.retainOnly(grpcHosts);
  }

  clusters(): ReadonlySet<UpstreamCluster> {
    return this.used;
  }

  private build(resource: Resource<'GraphQLApi'>, snapshot: ConfigSnapshot, grpcHosts: Set<string>, used: Set<UpstreamCluster>): GraphQLEndpoint | undefined {
    const inputs = {
      file: resource.source.file,
      configMap: (ref: { name: string; namespace?: string }) => lookup(snapshot, 'ConfigMap', ref, resource.namespace),
      api: (ref: { name: string; namespace?: string }) => lookup(snapshot, 'GraphQLApi', ref, resource.namespace),
    };
    const compiled = compileApi(resource, inputs);
    if (!compiled.schema) {
      this.options.logger.error({ api: resource.key, problems: compiled.problems }, 'GraphQLApi is served but its schema does not build');
      return undefined;
    }
    // statPrefix (Gloo) names the API in metrics.
    const name = resource.spec.statPrefix ?? `${resource.namespace}/${resource.name}`;
    // What the endpoint was built from: a change in any of it builds a new one.
    const inputVersions: string[] = [];
    const clusterOf = (ref: ResourceRef, namespace: string): UpstreamCluster | undefined => {
      const upstream = lookup(snapshot, 'Upstream', ref, namespace);
      if (!upstream) return undefined;
      inputVersions.push(`${upstream.key}@${upstream.version}`);
      // Reported through clusters(), so the gateway keeps these pools open across reloads.
      const cluster = this.options.upstreams.forUpstream(upstream, (secretRef) => lookup(snapshot, 'Secret', secretRef, upstream.namespace));
      used.add(cluster);
      return cluster;
    };

    let remote: RemoteExecutor | undefined;
    let resolvers: Record<string, FieldResolver> = {};
    let subschemas: Record<string, FieldResolver>[] | undefined;
    /** Stitched: whether every subschema enables introspection (the default of stitchedSchema.enableIntrospection). */
    let subschemaIntrospection = false;
    const spec = resource.spec.executableSchema;
    if (spec) {
      if (spec.executor.remote && compiled.remote) {
        const cluster = clusterOf(spec.executor.remote.upstreamRef, resource.namespace);
        if (!cluster) return undefined;
        remote = new RemoteExecutor(compiled.remote, cluster);
      }
      resolvers = this.bind(compiled, resource.namespace, name, clusterOf, grpcHosts);
      // The .proto ConfigMaps too: a changed one must replace the endpoint, not keep the old descriptors.
      for (const ref of spec.grpcDescriptorRegistry?.protoRefsList?.protoRefs ?? []) {
        const found = lookup(snapshot, 'ConfigMap', ref, resource.namespace);
        inputVersions.push(`${found?.key ?? ref.name}@${found?.version ?? '-'}`);
      }
    } else {
      // Stitched: each subschema's resolutions bound to its own upstreams, handed to its executor through the context.
      subschemaIntrospection = true;
      subschemas = (compiled.subschemas ?? []).map((sub) => {
        const api = lookup(snapshot, 'GraphQLApi', sub.ref, resource.namespace);
        if (api?.spec.executableSchema?.executor.local?.enableIntrospection !== true) subschemaIntrospection = false;
        inputVersions.push(`${api?.key ?? sub.ref.name}@${api?.version ?? '-'}`);
        return this.bind(sub.api, sub.ref.namespace, name, clusterOf, grpcHosts);
      });
    }

    const fingerprint = `${resource.version} ${inputVersions.sort().join(' ')}`;
    const existing = this.endpoints.get(resource.key);
    if (existing && existing.fingerprint === fingerprint) return existing;
    const local = spec?.executor.local;
    const stitched = resource.spec.stitchedSchema;
    const introspection = stitched ? (stitched.enableIntrospection ?? subschemaIntrospection) : (local?.enableIntrospection ?? false);
    // The remote executor's upstream decides about introspection unless it is refused here.
    const remoteIntrospection = spec?.executor.remote?.enableIntrospection ?? true;
    const endpoint = new GraphQLEndpoint({
      key: resource.key,
      name,
      version: resource.version,
      // The remote executor forwards @defer/@stream: its copy of the schema declares them for validation.
      schema: remote ? withIncrementalDirectives(compiled.schema) : compiled.schema,
      // Locally introspection is off by default.
      rules: validationRules({ introspection: remote ? remoteIntrospection : introspection }),
      // Gloo's executor.local.options.maxDepth is the depth limit (spec.limits.maxDepth wins when both are set).
      limits: limitsOf(resource.spec.limits, local?.options?.maxDepth),
      resolverFields: resolverFieldsOf(compiled.schema),
      includeUpstreamErrors: resource.spec.options?.includeUpstreamErrors === true,
      introspection: !remote && introspection,
      ...(remote ? { remote } : { resolvers }),
      ...(subschemas ? { subschemas } : {}),
      engine: this.options.engine ?? 'jit',
      gate: new OperationGate({ persistedQueries: resource.spec.persistedQueryCacheConfig, allowedQueryHashes: resource.spec.allowedQueryHashes }),
      logSensitiveInfo: resource.spec.options?.logSensitiveInfo === true,
    });
    endpoint.fingerprint = fingerprint;
    if (LIMITS_OFF) this.options.logger.warn({ api: resource.key }, 'GATEHOUSE_GRAPHQL_LIMITS=off: this API runs without its operation limits (for benchmarks only; one hostile operation can now stall the gateway)');
    return endpoint;
  }

  /** A compiled API's resolutions bound to their upstreams (as seen from `namespace`), counted under `api`. */
  private bind(
    compiled: CompiledApi,
    namespace: string,
    api: string,
    clusterOf: (ref: ResourceRef, namespace: string) => UpstreamCluster | undefined,
    grpcHosts: Set<string>,
  ): Record<string, FieldResolver> {
    const resolvers: Record<string, FieldResolver> = {};
    for (const [key, resolution] of compiled.resolutions) {
      const label = resolution.spec.statPrefix ?? key;
      const ok = metrics.graphqlResolverCalls.labels(api, label, 'ok');
      const error = metrics.graphqlResolverCalls.labels(api, label, 'error');
      const counters: ResolverMetrics = { ok: () => ok.inc(), error: () => error.inc() };
      if (resolution.kind === 'mock') {
        resolvers[key] = mockResolver(resolution.spec.mockResolver!);
        continue;
      }
      const ref = resolution.kind === 'rest' ? resolution.spec.restResolver!.upstreamRef : resolution.spec.grpcResolver!.upstreamRef;
      const cluster = clusterOf(ref, namespace);
      if (!cluster) {
        resolvers[key] = () => {
          throw fieldError(FieldErrorCodes.UPSTREAM_ERROR, `upstream ${ref.namespace ?? namespace}/${ref.name} is not served`);
        };
        continue;
      }
      if (resolution.kind === 'rest') {
        resolvers[key] = restResolver(resolution.rest, cluster, counters);
      } else {
        for (const host of cluster.hosts) grpcHosts.add(GrpcChannels.idOf(host));
        resolvers[key] = grpcResolver(resolution.grpc, cluster, this.channels, counters);
      }
    }
    return resolvers;
  }

  handle(apiKey: string, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
    const endpoint = this.endpoints.get(apiKey);
    if (!endpoint) {
      req.resume();
      sendErrors(res, 404, 'application/json', [{ message: `GraphQLApi ${apiKey.replace(/^GraphQLApi\//, '')} is not served` }]);
      return Promise.resolve();
    }
    // No async wrapper: one promise less per request.
    return endpoint.serve(req, res, ctx).catch((error: unknown) => {
      ctx.logger.error({ err: error, api: apiKey }, 'GraphQL request failed');
      if (!res.headersSent) sendErrors(res, 500, 'application/json', [{ message: 'internal error' }]);
      else res.destroy();
    });
  }

  /** Takes over a WebSocket upgrade on a GraphQL route (graphql-ws); answers 404 when the API is not served. */
  upgrade(apiKey: string, req: IncomingMessage, res: ServerResponse, pending: { socket: Duplex; head: Buffer; protocol: string; status?: number }, ctx: RequestContext, done: () => void): void {
    const endpoint = this.endpoints.get(apiKey);
    if (!endpoint) {
      sendErrors(res, 404, 'application/json', [{ message: `GraphQLApi ${apiKey.replace(/^GraphQLApi\//, '')} is not served` }]);
      return;
    }
    try {
      endpoint.upgrade(req, res, pending, ctx, done);
    } catch (error) {
      ctx.logger.error({ err: error, api: apiKey }, 'GraphQL upgrade failed');
      pending.socket.destroy();
    }
  }

  async close(): Promise<void> {
    for (const endpoint of this.endpoints.values()) endpoint.close('the gateway is shutting down');
    this.endpoints = new Map();
    this.channels.close();
  }
}
