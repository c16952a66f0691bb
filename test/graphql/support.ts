import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { parseManifests } from '../../core/src/config/manifest.ts';
import { ConfigStore, type ConfigSnapshot } from '../../core/src/config/store.ts';
import { checkGraphQLApi, createGraphQLEndpoints, type ExecutionEngine } from '../../core/src/graphql/index.ts';
import type { RequestContext } from '../../core/src/proxy/context.ts';
import type { GraphQLEndpoints } from '../../core/src/proxy/destinations.ts';
import { UpstreamRegistry } from '../../core/src/proxy/upstream/upstream-cluster.ts';
import { makeConfigDir, manifests } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer } from '../support/upstream.ts';

export { manifests };

const silent = pino({ level: 'silent' });

/** Loads manifest objects through the real config store with the GraphQL check. */
export function loadSnapshot(docs: object[], store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev', checks: { GraphQLApi: checkGraphQLApi } })): ConfigSnapshot {
  const { documents, diagnostics } = parseManifests('test.yaml', docs.map((d) => stringify(d)).join('---\n'));
  if (diagnostics.length > 0) throw new Error(JSON.stringify(diagnostics));
  return store.load(documents);
}

export interface GraphQLServer {
  readonly url: string;
  close(): Promise<void>;
  /** Only when served in-process. */
  readonly endpoints?: GraphQLEndpoints;
  /** Only when served by a gateway process. */
  readonly gateway?: GatehouseProcess;
  readonly snapshot: ConfigSnapshot;
  /** POSTs `{query, variables}` as JSON; returns status and parsed body. */
  post(query: string, variables?: Record<string, unknown>, headers?: Record<string, string>): Promise<{ status: number; body: any; headers: Headers }>;
}

/**
 * Serves the GraphQLApi `api` from `docs`: by default through a real `gatehouse gateway`
 * process whose only route sends everything to the API (`graphqlApiRef`); with `inProcess`
 * (or a non-default engine) on a node:http server calling `endpoints.handle()` directly.
 */
export async function serveGraphQL(docs: object[], api: string, options: { engine?: ExecutionEngine; inProcess?: boolean } = {}): Promise<GraphQLServer> {
  const snapshot = loadSnapshot(docs);
  const rejected = snapshot.statuses.filter((s) => s.state === 'Rejected');
  if (rejected.length > 0) throw new Error(`rejected: ${JSON.stringify(rejected, null, 2)}`);
  if (!options.inProcess && (options.engine ?? 'jit') === 'jit') {
    const route = manifests.virtualService('graphql-test', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], graphqlApiRef: { name: api } }] });
    const dir = await makeConfigDir({ 'config.yaml': [...docs, route] });
    const gateway = await startGatehouse('gateway', ['--config-dir', dir.path]);
    return {
      url: gateway.url,
      gateway,
      snapshot,
      post: (query, variables, headers) => post(gateway.url, query, variables, headers),
      async close() {
        await gateway.stop();
        await dir.cleanup();
      },
    };
  }
  const upstreams = new UpstreamRegistry();
  const endpoints = createGraphQLEndpoints({ upstreams, logger: silent, ...(options.engine ? { engine: options.engine } : {}) });
  endpoints.update(snapshot);
  const server = await startServer((req, res) => {
    const ctx: RequestContext = { requestId: 'test', start: performance.now(), virtualHost: 'default/test', route: 'default/test/0', headers: req.headers, logger: silent };
    void endpoints.handle(`GraphQLApi/default/${api}`, req, res, ctx);
  });
  return {
    url: server.url,
    endpoints,
    snapshot,
    post: (query, variables, headers) => post(server.url, query, variables, headers),
    async close() {
      await server.close();
      await endpoints.close();
      await upstreams.close();
    },
  };
}

async function post(url: string, query: string, variables?: Record<string, unknown>, headers: Record<string, string> = {}) {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
    body: JSON.stringify({ query, variables }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

/** The graphql-yoga upstream process (./yoga-upstream.mjs): its address and the POST bodies it received. */
export interface YogaUpstream {
  readonly url: string;
  readonly port: number;
  readonly requests: { body: string; headers: Record<string, string> }[];
  close(): Promise<void>;
}

/** Starts ./yoga-upstream.mjs (a real graphql-yoga server) on 127.0.0.1, port 0. */
export async function startYoga(): Promise<YogaUpstream> {
  const child = spawn(process.execPath, [fileURLToPath(new URL('./yoga-upstream.mjs', import.meta.url))], { stdio: ['ignore', 'pipe', 'inherit'] });
  const requests: { body: string; headers: Record<string, string> }[] = [];
  const lines = createInterface({ input: child.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`yoga-upstream.mjs exited with ${code}`)));
    lines.on('line', (line) => {
      const message = JSON.parse(line) as { port?: number; body?: string; headers?: Record<string, string> };
      if (message.port !== undefined) resolve(message.port);
      else requests.push({ body: message.body!, headers: message.headers! });
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
