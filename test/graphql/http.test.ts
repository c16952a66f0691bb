import { createHash } from 'node:crypto';
import { serverAudits } from 'graphql-http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/upstream.ts';
import { manifests, serveGraphQL, type GraphQLServer } from './support.ts';

const SDL = /* GraphQL */ `
  type Query {
    hello: String @resolve(name: "hello")
    fails: String @resolve(name: "fails")
    node: Node @resolve(name: "node")
  }
  type Mutation { noop: Boolean @resolve(name: "noop") }
  type Node { id: ID, child: Node @resolve(name: "child") }
`;

function api(name: string, local: object, upstream = 'counter') {
  return manifests.graphqlApi(name, {
    schemaDefinition: SDL,
    executor: {
      local: {
        resolutions: {
          hello: { mockResolver: { syncResponse: 'world' } },
          fails: { mockResolver: { errorResponse: 'this field always fails' } },
          noop: { mockResolver: { syncResponse: true } },
          node: { mockResolver: { syncResponse: { id: 'n1' } } },
          child: { restResolver: { upstreamRef: { name: upstream }, request: { headers: { ':path': '/child/{$parent.id}' } } } },
        },
        ...local,
      },
    },
  });
}

describe('GraphQL over HTTP', () => {
  let counter: TestServer & { calls: () => number };
  let closed: GraphQLServer;
  let open: GraphQLServer;

  beforeAll(async () => {
    let calls = 0;
    const server = await startServer((req, res) => {
      calls++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `${req.url!.split('/').pop()}-child` }));
    });
    counter = Object.assign(server, { calls: () => calls });
    const upstream = manifests.upstream('counter', [{ addr: '127.0.0.1', port: counter.port }]);
    closed = await serveGraphQL([upstream, api('closed', {})], 'closed', { inProcess: true });
    open = await serveGraphQL([upstream, api('open', { enableIntrospection: true, options: { maxDepth: 3 } })], 'open');
  });
  afterAll(async () => {
    await closed?.close();
    await open?.close();
    await counter?.close();
  });

  // The audits query `__type`, so they run against the API with introspection on.
  it('passes every MUST of the graphql-http audit suite', async () => {
    const results = await Promise.all(serverAudits({ url: `${open.url}/graphql` }).map((audit) => audit.fn()));
    const mustFailures = results.filter((r) => r.status !== 'ok' && r.name.startsWith('MUST')).map((r) => `${r.name}: ${r.status === 'ok' ? '' : r.reason}`);
    expect(mustFailures).toEqual([]);
    expect(results.filter((r) => r.name.startsWith('MUST')).length).toBeGreaterThan(10);
  });

  it('serves GET queries and negotiates application/graphql-response+json', async () => {
    const get = await fetch(`${closed.url}/graphql?query=${encodeURIComponent('{ hello }')}`, { headers: { accept: 'application/graphql-response+json' } });
    expect(get.status).toBe(200);
    expect(get.headers.get('content-type')).toBe('application/graphql-response+json; charset=utf-8');
    expect(await get.json()).toEqual({ data: { hello: 'world' } });
    const json = await fetch(`${closed.url}/graphql?query=${encodeURIComponent('{ hello }')}`, { headers: { accept: 'application/json' } });
    expect(json.headers.get('content-type')).toBe('application/json; charset=utf-8');
  });

  it('refuses what is not a GraphQL request: 405 (method, mutation over GET), 406, 415, 400', async () => {
    const put = await fetch(`${closed.url}/graphql`, { method: 'PUT' });
    expect([put.status, put.headers.get('allow')]).toEqual([405, 'GET, POST']);
    const mutation = await fetch(`${closed.url}/graphql?query=${encodeURIComponent('mutation { noop }')}`);
    expect([mutation.status, mutation.headers.get('allow')]).toEqual([405, 'POST']);
    expect((await closed.post('mutation { noop }')).body).toEqual({ data: { noop: true } });
    const xml = await fetch(`${closed.url}/graphql?query=${encodeURIComponent('{ hello }')}`, { headers: { accept: 'application/xml' } });
    expect(xml.status).toBe(406);
    const form = await fetch(`${closed.url}/graphql`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{ hello }' });
    expect(form.status).toBe(415);
    const badJson = await fetch(`${closed.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query": ' });
    expect([badJson.status, await badJson.json()]).toEqual([400, { errors: [{ message: 'the request body is not valid JSON' }] }]);
    const badVariables = await closed.post('query($n: Boolean!) { hello @include(if: $n) }', { n: 'x' });
    expect(badVariables.status).toBe(400);
    expect(badVariables.body).toEqual({ errors: [{ message: 'Variable "$n" got invalid value "x"; Expected type Boolean; Boolean cannot represent a non boolean value: "x"', locations: [{ line: 1, column: 7 }] }] });
  });

  it('answers introspection with an error and no data when enableIntrospection is off (the default)', async () => {
    const { status, body } = await closed.post('{ __schema { queryType { name } } }');
    expect(status).toBe(400);
    expect(body).toEqual({
      errors: [
        { message: 'GraphQL introspection has been disabled, but the requested query contained the field "__schema".', locations: [{ line: 1, column: 3 }] },
        { message: 'GraphQL introspection has been disabled, but the requested query contained the field "queryType".', locations: [{ line: 1, column: 14 }] },
      ],
    });
    expect((await closed.post('{ __type(name: "Query") { name } }')).status).toBe(400);
    expect((await open.post('{ __schema { queryType { name } } }')).body).toEqual({ data: { __schema: { queryType: { name: 'Query' } } } });
  });

  it('rejects operations deeper than options.maxDepth before any resolver runs', async () => {
    const before = counter.calls();
    expect((await open.post('{ node { child { id } } }')).body).toEqual({ data: { node: { child: { id: 'n1-child' } } } });
    expect(counter.calls()).toBe(before + 1);
    const { status, body } = await open.post('query Deep { node { child { child { id } } } }');
    expect(status).toBe(400);
    expect(body).toEqual({ errors: [{ message: 'operation "Deep" is nested 4 levels deep, more than the 3 this API allows (limits.maxDepth)', extensions: { code: 'GRAPHQL_LIMIT_DEPTH' } }] });
    const viaFragment = await open.post('{ ...F } fragment F on Query { node { child { child { id } } } }');
    expect(viaFragment.status).toBe(400);
    expect(counter.calls()).toBe(before + 1);
  });

  it('serves GraphiQL to a browser GET only when introspection is on', async () => {
    const browser = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' };
    const page = await fetch(`${open.url}/graphql`, { headers: browser });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await page.text()).toContain('GraphiQL.createFetcher');
    const none = await fetch(`${closed.url}/graphql`, { headers: browser });
    expect(none.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(none.status).toBe(400);
  });

  it('GraphiQL works offline: every asset comes from the gateway (no other origin) and matches its integrity hash', async () => {
    const page = await (await fetch(`${open.url}/graphql`, { headers: { accept: 'text/html' } })).text();
    // No CDN: nothing in the page names another origin.
    expect(page).not.toMatch(/(src|href)="(https?:)?\/\//);
    const refs = [...page.matchAll(/(?:src|href)="([^"]+)" integrity="(sha384-[^"]+)"/g)].map((m) => ({ url: m[1]!, integrity: m[2]! }));
    expect(refs.map((r) => r.url).sort()).toEqual(['?graphiql-asset=graphiql.css', '?graphiql-asset=graphiql.js', '?graphiql-asset=react-dom.js', '?graphiql-asset=react.js']);
    for (const { url, integrity } of refs) {
      const asset = await fetch(new URL(url, `${open.url}/graphql`), { headers: { accept: '*/*' } });
      expect(asset.status).toBe(200);
      expect(asset.headers.get('content-type')).toMatch(url.endsWith('.css') ? /^text\/css/ : /^text\/javascript/);
      const body = Buffer.from(await asset.arrayBuffer());
      expect(`sha384-${createHash('sha384').update(body).digest('base64')}`).toBe(integrity);
    }
    // The bundle is GraphiQL's own UMD build (it defines the global the page renders).
    const bundle = await (await fetch(`${open.url}/graphql?graphiql-asset=graphiql.js`)).text();
    expect(bundle.length).toBeGreaterThan(1_000_000);
    expect(bundle).toContain('createFetcher');
    // Unknown names are a 404; with introspection off there are no assets.
    expect((await fetch(`${open.url}/graphql?graphiql-asset=../../package.json`)).status).toBe(404);
    expect((await fetch(`${closed.url}/graphql?graphiql-asset=graphiql.js`)).status).toBe(400);
  });

  it('turns a mockResolver errorResponse into a field error next to the other fields', async () => {
    expect((await closed.post('{ hello fails }')).body).toEqual({
      data: { hello: 'world', fails: null },
      errors: [{ message: 'this field always fails', locations: [{ line: 1, column: 9 }], path: ['fails'], extensions: { code: 'MOCK_ERROR' } }],
    });
  });

  it('answers 404 for a GraphQLApi that is not served', async () => {
    const ctx = { requestId: 'r', start: 0, virtualHost: 'v', route: 'r', headers: {}, logger: (await import('pino')).pino({ level: 'silent' }) };
    const server = await startServer((req, res) => void closed.endpoints!.handle('GraphQLApi/default/nope', req, res, ctx));
    try {
      const response = await fetch(`${server.url}/graphql?query=%7Bhello%7D`);
      expect([response.status, await response.json()]).toEqual([404, { errors: [{ message: 'GraphQLApi default/nope is not served' }] }]);
    } finally {
      await server.close();
    }
  });
});
