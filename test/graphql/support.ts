import { pino } from 'pino';
import { stringify } from 'yaml';
import { parseManifests } from '../../core/src/config/manifest.ts';
import { ConfigStore, type ConfigSnapshot } from '../../core/src/config/store.ts';
import { checkGraphQLApi, createGraphQLEndpoints, type ExecutionEngine } from '../../core/src/graphql/index.ts';
import type { RequestContext } from '../../core/src/proxy/context.ts';
import type { GraphQLEndpoints } from '../../core/src/proxy/destinations.ts';
import { UpstreamRegistry } from '../../core/src/proxy/upstream-cluster.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

export { manifests } from '../support/config-dir.ts';

const silent = pino({ level: 'silent' });

/** Loads manifest objects through the real config store with the GraphQL check. */
export function loadSnapshot(docs: object[], store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev', checks: { GraphQLApi: checkGraphQLApi } })): ConfigSnapshot {
  const { documents, diagnostics } = parseManifests('test.yaml', docs.map((d) => stringify(d)).join('---\n'));
  if (diagnostics.length > 0) throw new Error(JSON.stringify(diagnostics));
  return store.load(documents);
}

export interface GraphQLServer extends TestServer {
  readonly endpoints: GraphQLEndpoints;
  readonly snapshot: ConfigSnapshot;
  /** POSTs `{query, variables}` as JSON; returns status and parsed body. */
  post(query: string, variables?: Record<string, unknown>, headers?: Record<string, string>): Promise<{ status: number; body: any; headers: Headers }>;
}

/**
 * Serves the GraphQLApi `api` from `docs` on a real node:http server, calling
 * `endpoints.handle()` as the gateway's `graphqlApiRef` destination does.
 */
export async function serveGraphQL(docs: object[], api: string, options: { engine?: ExecutionEngine } = {}): Promise<GraphQLServer> {
  const snapshot = loadSnapshot(docs);
  const rejected = snapshot.statuses.filter((s) => s.state === 'Rejected');
  if (rejected.length > 0) throw new Error(`rejected: ${JSON.stringify(rejected, null, 2)}`);
  const upstreams = new UpstreamRegistry();
  const endpoints = createGraphQLEndpoints({ upstreams, logger: silent, ...(options.engine ? { engine: options.engine } : {}) });
  endpoints.update(snapshot);
  const server = await startServer((req, res) => {
    const ctx: RequestContext = { requestId: 'test', start: performance.now(), virtualHost: 'default/test', route: 'default/test/0', headers: req.headers, logger: silent };
    void endpoints.handle(`GraphQLApi/default/${api}`, req, res, ctx);
  });
  return {
    ...server,
    endpoints,
    snapshot,
    async post(query, variables, headers = {}) {
      const response = await fetch(`${server.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
        body: JSON.stringify({ query, variables }),
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
    },
    async close() {
      await server.close();
      await endpoints.close();
      await upstreams.close();
    },
  };
}
