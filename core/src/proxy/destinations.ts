import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ConfigSnapshot } from '../config/store.ts';
import type { RequestContext } from './context.ts';
import type { UpstreamCluster } from './upstream/upstream-cluster.ts';
import type { PendingUpgrade } from './request/upgrade.ts';

/**
 * The GraphQL servers of every served GraphQLApi, as a route destination
 * (`graphqlApiRef`). Implemented by `core/src/graphql`.
 */
export interface GraphQLEndpoints {
  /** Rebuilds endpoints for a new snapshot, reusing those whose GraphQLApi and upstreams did not change. */
  update(snapshot: ConfigSnapshot): void;
  /**
   * Serves one request for the GraphQLApi with key `Kind/namespace/name`. Must answer
   * every request (including malformed ones, with a 4xx) and never throw.
   */
  handle(apiKey: string, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void>;
  /**
   * Takes over a WebSocket upgrade (graphql-ws) routed and authorized for the GraphQLApi `apiKey`;
   * `res` is the listener's response on the client's socket (for refusals), `done` runs once when
   * the connection is over (the access log line).
   */
  upgrade?(apiKey: string, req: IncomingMessage, res: ServerResponse, pending: PendingUpgrade, ctx: RequestContext, done: () => void): void;
  /** Upstream clusters the current endpoints use, so a reload does not close their pools. */
  clusters(): ReadonlySet<UpstreamCluster>;
  close(): Promise<void>;
}
