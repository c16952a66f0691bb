import { buildSchema, graphql } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/upstream.ts';
import { manifests, serveGraphQL, type GraphQLServer } from './support.ts';

const UPSTREAM_SDL = /* GraphQL */ `
  type Query {
    hello(name: String!): String
    seen: Seen
    failing: String
    secret: String
  }
  type Mutation { bump(by: Int!): Int }
  type Seen { user: String, static: String, tenant: String, version: String, path: String }
`;

/** A real GraphQL server: graphql-js over node:http. It records what it received. */
async function startGraphQLUpstream() {
  const schema = buildSchema(UPSTREAM_SDL);
  let counter = 0;
  const received: { url: string; headers: Record<string, unknown>; body: any }[] = [];
  const server = await startServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = JSON.parse(Buffer.concat(chunks).toString());
      received.push({ url: req.url!, headers: req.headers, body });
      const url = new URL(req.url!, 'http://x');
      const rootValue = {
        hello: ({ name }: { name: string }) => `hello ${name}`,
        seen: { user: req.headers['x-user'] ?? null, static: req.headers['x-static'] ?? null, tenant: url.searchParams.get('tenant'), version: url.searchParams.get('v'), path: url.pathname },
        failing: () => {
          throw new Error('upstream says no');
        },
        bump: ({ by }: { by: number }) => (counter += by),
      };
      const result = await graphql({ schema, source: body.query, variableValues: body.variables, operationName: body.operationName, rootValue });
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'x-upstream': 'graphql' }).end(JSON.stringify(result));
    });
  });
  return { server, received };
}

// The gateway's copy of the schema omits `secret`: local validation must reject it.
const GATEWAY_SDL = UPSTREAM_SDL.replace('secret: String', '');

function remoteApi(extra: object = {}) {
  return manifests.graphqlApi('remote', {
    schemaDefinition: GATEWAY_SDL,
    executor: {
      remote: {
        upstreamRef: { name: 'graphql-upstream' },
        path: '/api/graphql',
        headers: { 'x-user': '{$headers.x-client-user}', 'x-static': 'yes' },
        queryParams: { tenant: '{$headers.x-tenant}', v: '1' },
        ...extra,
      },
    },
  });
}

describe('remote executor', () => {
  let upstream: Awaited<ReturnType<typeof startGraphQLUpstream>>;
  let gql: GraphQLServer;

  beforeAll(async () => {
    upstream = await startGraphQLUpstream();
    gql = await serveGraphQL([manifests.upstream('graphql-upstream', [{ addr: '127.0.0.1', port: upstream.server.port }]), remoteApi()], 'remote');
  });
  afterAll(async () => {
    await gql?.close();
    await upstream?.server.close();
  });

  it('forwards query, variables and operationName and returns the upstream result, its errors masked', async () => {
    const payload = { query: 'query A { a: seen { path } } query Greet($n: String!) { hello(name: $n) failing }', variables: { n: 'Ada' }, operationName: 'Greet' };
    const viaGateway = await fetch(`${gql.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) });
    const direct = await fetch(`${upstream.server.url}/api/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) });
    const text = await viaGateway.text();
    expect(viaGateway.status).toBe(200);
    const original = JSON.parse(await direct.text());
    expect(original.errors[0].message).toBe('upstream says no');
    // The data as the upstream sent it; its error's words stay in the gateway's log (issue 25 finding 3).
    expect(JSON.parse(text)).toEqual({
      data: { hello: 'hello Ada', failing: null },
      errors: [{ message: 'the upstream GraphQL server reported an error', locations: [{ line: 1, column: 73 }], path: ['failing'], extensions: { code: 'UPSTREAM_ERROR' } }],
    });
    expect(viaGateway.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(upstream.received.at(-2)!.body).toEqual(payload);
  });

  it('sets headers and query parameters from static values and {$headers.x} templates', async () => {
    const { body } = await gql.post('{ seen { user static tenant version path } }', undefined, { 'x-client-user': 'u-42', 'x-tenant': 'acme corp' });
    expect(body).toEqual({ data: { seen: { user: 'u-42', static: 'yes', tenant: 'acme corp', version: '1', path: '/api/graphql' } } });
    expect(upstream.received.at(-1)!.url).toBe('/api/graphql?tenant=acme%20corp&v=1');
  });

  it('forwards GET queries and POST mutations, but never a mutation over GET', async () => {
    const get = await fetch(`${gql.url}/graphql?query=${encodeURIComponent('query($n: String!) { hello(name: $n) }')}&variables=${encodeURIComponent('{"n":"Bo"}')}`);
    expect(await get.json()).toEqual({ data: { hello: 'hello Bo' } });
    const calls = upstream.received.length;
    const mutationOverGet = await fetch(`${gql.url}/graphql?query=${encodeURIComponent('mutation { bump(by: 1) }')}`);
    expect(mutationOverGet.status).toBe(405);
    expect(mutationOverGet.headers.get('allow')).toBe('POST');
    expect(upstream.received.length).toBe(calls);
    expect((await gql.post('mutation { bump(by: 2) }')).body).toEqual({ data: { bump: 2 } });
  });

  it('validates against the local schemaDefinition before forwarding (400, upstream not called)', async () => {
    const calls = upstream.received.length;
    const { status, body } = await gql.post('{ secret }');
    expect(status).toBe(400);
    expect(body).toEqual({ errors: [{ message: 'Cannot query field "secret" on type "Query". Did you mean "seen"?', locations: [{ line: 1, column: 3 }] }] });
    const parseError = await gql.post('{ hello(');
    expect(parseError.status).toBe(400);
    expect(parseError.body).toEqual({ errors: [{ message: 'Syntax Error: Expected Name, found <EOF>.', locations: [{ line: 1, column: 9 }] }] });
    expect(upstream.received.length).toBe(calls);
  });

  it('answers 503 with a GraphQL error when the upstream refuses connections', async () => {
    const refused: TestServer = await startServer(() => {});
    await refused.close();
    const down = await serveGraphQL([manifests.upstream('graphql-upstream', [{ addr: '127.0.0.1', port: refused.port }]), remoteApi()], 'remote');
    try {
      const { status, body, headers } = await down.post('{ hello(name: "x") }');
      expect(status).toBe(503);
      expect(headers.get('x-gatehouse-error')).toBe('GH_UPSTREAM_UNAVAILABLE');
      expect(body).toEqual({ errors: [{ message: 'the upstream GraphQL server is unavailable', extensions: { code: 'UPSTREAM_ERROR' } }] });
    } finally {
      await down.close();
    }
  });

  it('a client that leaves cancels the upstream call, which is not logged as an upstream failure', async () => {
    let arrived!: () => void;
    let upstreamClosed!: () => void;
    const requestArrived = new Promise<void>((r) => (arrived = r));
    const closed = new Promise<void>((r) => (upstreamClosed = r));
    // An upstream that takes the request and never answers.
    const hanging = await startServer((req) => {
      req.resume();
      req.socket.once('close', () => upstreamClosed());
      arrived();
    });
    const gw = await serveGraphQL([manifests.upstream('graphql-upstream', [{ addr: '127.0.0.1', port: hanging.port }]), remoteApi()], 'remote');
    try {
      const client = new AbortController();
      const pending = fetch(`${gw.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': 'leaving' }, body: JSON.stringify({ query: '{ hello(name: "x") }' }), signal: client.signal }).catch((e: unknown) => e);
      await requestArrived;
      client.abort();
      expect(await pending).toMatchObject({ name: 'AbortError' });
      // The gateway gives up its upstream request at once, not after the 15 s upstream timeout.
      const first = await Promise.race([closed.then(() => 'upstream call cancelled'), new Promise((r) => setTimeout(r, 5_000, 'still waiting after 5 s'))]);
      expect(first).toBe('upstream call cancelled');
      const access = await gw.gateway!.waitForLog((l) => l.msg === 'access' && l.reqId === 'leaving');
      expect(access).toMatchObject({ status: 0, upstream: 'default/graphql-upstream' });
      expect(gw.gateway!.logs.filter((l) => l.reqId === 'leaving' && l.level !== 'info' && l.level !== 30)).toEqual([]);
    } finally {
      await gw.close();
      await hanging.close();
    }
  });
});
