import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ConfigSnapshot } from '../../config/store.ts';
import type { Logger } from '../../log/logger.ts';
import type { RequestContext } from '../../proxy/context.ts';
import type { GraphQLEndpoints } from '../../proxy/destinations.ts';
import type { UpstreamCluster } from '../../proxy/upstream/upstream-cluster.ts';
import type { UpstreamRegistry } from '../../proxy/upstream/upstream-registry.ts';

const NONE: ReadonlySet<UpstreamCluster> = new Set();

/**
 * {@link GraphQLEndpoints} that load the GraphQL engine (graphql-js, graphql-jit, gRPC;
 * ~17 MB) only once a GraphQLApi is served, so a gateway that only proxies never pays for it.
 */
export function lazyGraphQLEndpoints(deps: { upstreams: UpstreamRegistry; logger: Logger }): GraphQLEndpoints {
  let inner: GraphQLEndpoints | undefined;
  let loading: Promise<GraphQLEndpoints> | undefined;
  let latest: ConfigSnapshot | undefined;
  const load = () =>
    (loading ??= import('./endpoints.ts').then(({ createGraphQLEndpoints }) => {
      inner = createGraphQLEndpoints(deps);
      if (latest) inner.update(latest);
      return inner;
    }));
  return {
    update(snapshot) {
      latest = snapshot;
      if (inner) inner.update(snapshot);
      else if ([...snapshot.resources.values()].some((r) => r.kind === 'GraphQLApi')) void load();
    },
    handle(apiKey: string, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
      // Once loaded, the call goes straight through (no extra promise per request).
      if (inner) return inner.handle(apiKey, req, res, ctx);
      return load().then((loaded) => loaded.handle(apiKey, req, res, ctx));
    },
    upgrade(apiKey, req, res, pending, ctx, done) {
      const take = (endpoints: GraphQLEndpoints) => endpoints.upgrade!(apiKey, req, res, pending, ctx, done);
      if (inner) take(inner);
      else void load().then(take, () => pending.socket.destroy());
    },
    clusters: () => inner?.clusters() ?? NONE,
    close: async () => {
      await inner?.close();
    },
  };
}
