import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

/** End to end: a real `gatehouse gateway` process routes `graphqlApiRef` to the GraphQL engine. */
describe('GraphQL through the gateway process', () => {
  let rest: TestServer;
  let dir: ConfigDir;
  let gateway: GatehouseProcess;

  beforeAll(async () => {
    rest = await startServer((req, res) => {
      const id = req.url!.split('/').pop();
      res.writeHead(id === 'u1' ? 200 : 404, { 'content-type': 'application/json' }).end(JSON.stringify(id === 'u1' ? { id, name: 'Ada', auth: req.headers['x-token'] ?? null } : {}));
    });
    dir = await makeConfigDir({
      'graphql.yaml': [
        manifests.upstream('users', [{ addr: '127.0.0.1', port: rest.port }]),
        manifests.graphqlApi('users', {
          schemaDefinition: 'type Query { user(id: ID!): User @resolve(name: "Query|user") }\ntype User { id: ID! name: String auth: String }',
          executor: {
            local: {
              resolutions: { 'Query|user': { restResolver: { upstreamRef: { name: 'users' }, request: { headers: { ':path': '/users/{$args.id}', 'x-token': '{$headers.x-token}' } } } } },
            },
          },
        }),
        manifests.virtualService('api', { domains: ['*'], routes: [{ matchers: [{ prefix: '/graphql' }], graphqlApiRef: { name: 'users' } }] }),
      ],
      // Rejected at load time: @resolve names a resolver that does not exist.
      'broken.yaml': [
        manifests.graphqlApi('broken', {
          schemaDefinition: 'type Query { a: String @resolve(name: "nope") }',
          executor: { local: { resolutions: {} } },
        }),
      ],
    });
    gateway = await startGatehouse('gateway', ['--config-dir', dir.path]);
  });
  afterAll(async () => {
    await gateway?.stop();
    await dir?.cleanup();
    await rest?.close();
  });

  it('serves the GraphQLApi on its route, with request headers available to templates', async () => {
    const response = await fetch(`${gateway.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-token': 't-1' },
      body: JSON.stringify({ query: '{ user(id: "u1") { id name auth } missing: user(id: "u9") { id } }' }),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      data: { user: { id: 'u1', name: 'Ada', auth: 't-1' }, missing: null },
      errors: [
        {
          message: 'the upstream service failed',
          locations: [{ line: 1, column: 35 }],
          path: ['missing'],
          extensions: { code: 'UPSTREAM_ERROR', http: { status: 404 } },
        },
      ],
    });
  });

  it('rejects a GraphQLApi with an unknown resolver at load time, naming the field path', async () => {
    const config = (await (await fetch(`${gateway.adminUrl}/config`)).json()) as { resources?: { kind: string; name: string; state: string; reasons: { path?: string; code: string }[] }[] };
    const broken = JSON.stringify(config).includes('GH_GRAPHQL_UNKNOWN_RESOLVER');
    expect(broken).toBe(true);
    const line = await gateway.waitForLog((l) => JSON.stringify(l).includes('GH_GRAPHQL_UNKNOWN_RESOLVER'));
    expect(JSON.stringify(line)).toContain('spec.executableSchema.schemaDefinition');
  });
});
