/**
 * The GraphQL clients people use, against a real `gatehouse gateway` (issue 25, items 7 and 9):
 * Apollo Client (queries, mutations, BatchHttpLink), urql, graphql-request (`batchRequests`),
 * batches under every limit, and the remote executor in front of a real graphql-yoga server
 * (response headers, timeout, introspection refused at the gateway).
 */
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { BatchHttpLink } from '@apollo/client/link/batch-http';
import { Defer20220824Handler } from '@apollo/client/incremental';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { createHash } from 'node:crypto';
import { cacheExchange, Client as UrqlClient, fetchExchange } from '@urql/core';
import { serverAudits } from 'graphql-http';
import { batchRequests, GraphQLClient } from 'graphql-request';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';
import { startYoga, type YogaUpstream } from './support.ts';

const SDL = /* GraphQL */ `
  type Query { book(id: ID!): Book @resolve(name: "book") greeting: String @resolve(name: "greet") }
  type Mutation { like(id: ID!): String @resolve(name: "like") }
  type Book { id: ID title: String }
`;

function localApi(name: string, limits?: object) {
  const resolutions = {
    book: { restResolver: { upstreamRef: { name: 'books' }, request: { headers: { ':path': '/books/{$args.id}' } } } },
    greet: { mockResolver: { syncResponse: 'hello' } },
    like: { restResolver: { upstreamRef: { name: 'books' }, request: { headers: { ':method': 'POST', ':path': '/likes/{$args.id}' } }, response: { resultRoot: 'status' } } },
  };
  const api = manifests.graphqlApi(name, { schemaDefinition: SDL, executor: { local: { resolutions } } });
  return limits ? { ...api, spec: { ...(api as { spec: object }).spec, limits } } : api;
}

const YOGA_SDL = /* GraphQL */ `
  type Query { hello(name: String!): String slow: String items: [String] ping: String boom: String }
  type Mutation { bump(by: Int!): Int }
  type Subscription { countdown(from: Int!): Int headerSeen: String }
`;

function remoteApi(name: string, remote: object) {
  return manifests.graphqlApi(name, { schemaDefinition: YOGA_SDL, executor: { remote: { upstreamRef: { name: 'yoga' }, ...remote } } });
}

let books: TestServer;
let yoga: YogaUpstream;
let dir: ConfigDir;
let gateway: GatehouseProcess;
let likes = 0;

beforeAll(async () => {
  books = await startServer((req, res) => {
    if (req.method === 'POST') {
      likes++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: `liked ${req.url!.split('/')[2]}` }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: req.url!.split('/')[2], title: `Title ${req.url!.split('/')[2]}` }));
  });
  yoga = await startYoga();
  const route = (prefix: string, name: string) => ({ matchers: [{ prefix }], graphqlApiRef: { name } });
  dir = await makeConfigDir({
    'config.yaml': [
      manifests.upstream('books', [{ addr: '127.0.0.1', port: books.port }]),
      manifests.upstream('yoga', [{ addr: '127.0.0.1', port: yoga.port }]),
      localApi('books'),
      localApi('small', { maxBatchSize: 2, maxDepth: 1 }),
      localApi('nobatch', { maxBatchSize: 0 }),
      { ...localApi('apq'), spec: { ...(localApi('apq') as { spec: object }).spec, persistedQueryCacheConfig: { cacheSize: 10 } } },
      remoteApi('remote', { responseHeaders: ['X-Custom'] }),
      remoteApi('remote-strict', { timeout: '300ms', enableIntrospection: false }),
      manifests.virtualService('graphql', {
        domains: ['*'],
        routes: [route('/apq', 'apq'), route('/books', 'books'), route('/small', 'small'), route('/nobatch', 'nobatch'), route('/remote-strict', 'remote-strict'), route('/remote', 'remote')],
      }),
    ],
  });
  gateway = await startGatehouse('gateway', ['--config-dir', dir.path]);
});

afterAll(async () => {
  await gateway?.stop();
  await books?.close();
  await yoga?.close();
  await dir?.cleanup();
});

/** A fetch that counts the HTTP requests a client makes. */
function countingFetch(): { fetch: typeof fetch; count: () => number } {
  let n = 0;
  return {
    fetch: ((input: Parameters<typeof fetch>[0], init?: RequestInit) => {
      n++;
      return fetch(input, init);
    }) as typeof fetch,
    count: () => n,
  };
}

async function postRaw(path: string, body: string, headers: Record<string, string> = {}) {
  const response = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json', ...headers }, body });
  return { status: response.status, headers: response.headers, body: (await response.json()) as any };
}

const BOOK = gql`query Book($id: ID!) { book(id: $id) { id title } }`;

describe('Apollo Client', () => {
  it('queries and mutates through HttpLink', async () => {
    const client = new ApolloClient({ link: new HttpLink({ uri: `${gateway.url}/books` }), cache: new InMemoryCache() });
    const { data } = await client.query({ query: BOOK, variables: { id: '7' } });
    expect(data).toEqual({ book: { __typename: 'Book', id: '7', title: 'Title 7' } });
    const before = likes;
    const mutated = await client.mutate({ mutation: gql`mutation { like(id: "7") }` });
    expect(mutated.data).toEqual({ like: 'liked 7' });
    expect(likes).toBe(before + 1);
  });

  it('batches concurrent queries into one request with BatchHttpLink, each answered in order', async () => {
    const counter = countingFetch();
    const client = new ApolloClient({ link: new BatchHttpLink({ uri: `${gateway.url}/books`, batchMax: 10, batchInterval: 20, fetch: counter.fetch }), cache: new InMemoryCache() });
    const results = await Promise.all(['1', '2', '3'].map((id) => client.query({ query: BOOK, variables: { id } })));
    expect(results.map((r) => r.data)).toEqual(['1', '2', '3'].map((id) => ({ book: { __typename: 'Book', id, title: `Title ${id}` } })));
    expect(counter.count()).toBe(1);
  });

  it('batches through the remote executor to graphql-yoga', async () => {
    const counter = countingFetch();
    const client = new ApolloClient({ link: new BatchHttpLink({ uri: `${gateway.url}/remote`, batchInterval: 20, fetch: counter.fetch }), cache: new InMemoryCache() });
    const results = await Promise.all(['Ada', 'Grace'].map((name) => client.query({ query: gql`query Hello($name: String!) { hello(name: $name) }`, variables: { name } })));
    expect(results.map((r) => r.data)).toEqual([{ hello: 'hello Ada' }, { hello: 'hello Grace' }]);
    expect(counter.count()).toBe(1);
  });
});

describe('Apollo Client automatic persisted queries (PersistedQueryLink)', () => {
  it('sends the hash first, the query once on PersistedQueryNotFound, then the hash alone', async () => {
    const bodies: { query?: string; extensions?: { persistedQuery?: unknown } }[] = [];
    const recording = ((input: Parameters<typeof fetch>[0], init?: RequestInit) => {
      bodies.push(JSON.parse(String(init?.body)));
      return fetch(input, init);
    }) as typeof fetch;
    const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
    const link = new PersistedQueryLink({ sha256 }).concat(new HttpLink({ uri: `${gateway.url}/apq`, fetch: recording }));
    const query = gql`query Apq($id: ID!) { book(id: $id) { id title } }`;
    const first = new ApolloClient({ link, cache: new InMemoryCache() });
    expect((await first.query({ query, variables: { id: '5' } })).data).toEqual({ book: { __typename: 'Book', id: '5', title: 'Title 5' } });
    // The hash alone, then hash and query after PersistedQueryNotFound.
    expect(bodies.map((b) => b.query !== undefined)).toEqual([false, true]);
    const second = new ApolloClient({ link, cache: new InMemoryCache() });
    expect((await second.query({ query, variables: { id: '6' } })).data).toEqual({ book: { __typename: 'Book', id: '6', title: 'Title 6' } });
    // Cached: the hash alone was enough.
    expect(bodies.map((b) => b.query !== undefined)).toEqual([false, true, false]);
    expect(bodies.every((b) => b.extensions?.persistedQuery !== undefined)).toBe(true);
  });
});

describe('urql', () => {
  it('queries and mutates', async () => {
    const client = new UrqlClient({ url: `${gateway.url}/books`, exchanges: [cacheExchange, fetchExchange] });
    const result = await client.query('query Book($id: ID!) { book(id: $id) { id title } }', { id: '9' }).toPromise();
    expect(result.error).toBeUndefined();
    expect(result.data).toEqual({ book: { __typename: 'Book', id: '9', title: 'Title 9' } });
    const mutated = await client.mutation('mutation Like($id: ID!) { like(id: $id) }', { id: '9' }).toPromise();
    expect(mutated.data).toEqual({ like: 'liked 9' });
  });
});

describe('graphql-request', () => {
  it('request() and batchRequests() (answers in order)', async () => {
    const client = new GraphQLClient(`${gateway.url}/books`);
    expect(await client.request('{ greeting }')).toEqual({ greeting: 'hello' });
    const results = await batchRequests(`${gateway.url}/books`, [
      { document: '{ greeting }' },
      { document: 'query Book($id: ID!) { book(id: $id) { title } }', variables: { id: '4' } },
    ]);
    expect(results.map((r: { data: unknown }) => r.data)).toEqual([{ greeting: 'hello' }, { book: { title: 'Title 4' } }]);
  });
});

describe('batches (limits.maxBatchSize, every entry under every limit)', () => {
  it('answers a JSON array with a JSON array in order; a bad entry gets its own error, the others run', async () => {
    const { status, body } = await postRaw(
      '/books',
      JSON.stringify([{ query: '{ greeting }' }, { query: '{ book(id: "1") { title } }' }, 'not an object', [{ query: '{ greeting }' }], {}, { query: '{ nope }' }, { query: '{ greeting }', variables: 7 }]),
    );
    expect(status).toBe(200);
    expect(body).toHaveLength(7);
    expect(body[0]).toEqual({ data: { greeting: 'hello' } });
    expect(body[1]).toEqual({ data: { book: { title: 'Title 1' } } });
    expect(body[2].errors[0].message).toMatch(/each entry of a batch must be a JSON object/);
    expect(body[3].errors[0].message).toMatch(/each entry of a batch must be a JSON object/);
    expect(body[4].errors[0].message).toMatch(/missing "query"/);
    expect(body[5].errors[0].message).toMatch(/Cannot query field "nope"/);
    expect(body[6].errors[0].message).toMatch(/"variables" must be an object/);
  });

  it('every entry is checked against the limits: an entry over one is refused alone, with the limit\'s code', async () => {
    // This API's maxDepth is 1: the second entry (depth 2) is refused, the first runs.
    const { status, body } = await postRaw('/small', JSON.stringify([{ query: '{ greeting }' }, { query: '{ book(id: "1") { title } }' }]));
    expect(status).toBe(200);
    expect(body[0]).toEqual({ data: { greeting: 'hello' } });
    expect(body[1].errors[0].extensions.code).toBe('GRAPHQL_LIMIT_DEPTH');
    expect(body[1].data).toBeUndefined();
    // An alias bomb over the default 30 aliases.
    const aliases = Array.from({ length: 40 }, (_, i) => `a${i}: title`).join(' ');
    const bomb = await postRaw('/books', JSON.stringify([{ query: '{ greeting }' }, { query: `{ book(id: "1") { ${aliases} } }` }]));
    expect(bomb.status).toBe(200);
    expect(bomb.body[0]).toEqual({ data: { greeting: 'hello' } });
    expect(bomb.body[1].errors[0].extensions.code).toBe('GRAPHQL_LIMIT_ALIASES');
    expect(bomb.body[1].data).toBeUndefined();
    // Variables nested past maxVariableDepth, in one entry.
    let nested: unknown = 1;
    for (let i = 0; i < 100; i++) nested = { a: nested };
    const vars = await postRaw('/books', JSON.stringify([{ query: 'query B($id: ID!) { book(id: $id) { title } }', variables: { id: '2', x: nested } }, { query: '{ greeting }' }]));
    expect(vars.body[0].errors[0].extensions.code).toBe('GRAPHQL_LIMIT_VARIABLES_DEPTH');
    expect(vars.body[1]).toEqual({ data: { greeting: 'hello' } });
  });

  it('refuses a batch over maxBatchSize (400, GRAPHQL_LIMIT_BATCH_SIZE) without running any of it', async () => {
    const before = likes;
    const { status, body } = await postRaw('/small', JSON.stringify(Array.from({ length: 3 }, () => ({ query: 'mutation { like(id: "1") }' }))));
    expect(status).toBe(400);
    expect(body.errors[0].extensions.code).toBe('GRAPHQL_LIMIT_BATCH_SIZE');
    expect(body.errors[0].message).toMatch(/3 operations, more than the 2/);
    expect(likes).toBe(before);
    // The default is 10.
    const eleven = await postRaw('/books', JSON.stringify(Array.from({ length: 11 }, () => ({ query: '{ greeting }' }))));
    expect(eleven.status).toBe(400);
    expect(eleven.body.errors[0].extensions.code).toBe('GRAPHQL_LIMIT_BATCH_SIZE');
    const ten = await postRaw('/books', JSON.stringify(Array.from({ length: 10 }, () => ({ query: '{ greeting }' }))));
    expect(ten.status).toBe(200);
    expect(ten.body).toHaveLength(10);
  });

  it('refuses an empty batch, and every batch where maxBatchSize is 0', async () => {
    const empty = await postRaw('/books', '[]');
    expect(empty.status).toBe(400);
    expect(empty.body.errors[0].message).toMatch(/empty/);
    const off = await postRaw('/nobatch', JSON.stringify([{ query: '{ greeting }' }]));
    expect(off.status).toBe(400);
    expect(off.body.errors[0].extensions.code).toBe('GRAPHQL_LIMIT_BATCH_SIZE');
    // Single operations still work there.
    expect((await postRaw('/nobatch', JSON.stringify({ query: '{ greeting }' }))).body).toEqual({ data: { greeting: 'hello' } });
  });

  it('a huge array body is refused by size, and the gateway keeps answering', async () => {
    const huge = await postRaw('/books', `[${Array.from({ length: 200_000 }, () => '{"query":"{ greeting }"}').join(',')}]`).catch((e: Error) => ({ status: 0, body: e.message }));
    expect([413, 0]).toContain(huge.status);
    const many = await postRaw('/books', JSON.stringify(Array.from({ length: 20_000 }, () => 1)));
    expect(many.status).toBe(400);
    expect(many.body.errors[0].extensions.code).toBe('GRAPHQL_LIMIT_BATCH_SIZE');
    expect((await postRaw('/books', JSON.stringify({ query: '{ greeting }' }))).body).toEqual({ data: { greeting: 'hello' } });
  });

  it('a batch through the remote executor forwards each entry and passes every set-cookie', async () => {
    const before = yoga.requests.length;
    const { status, headers, body } = await postRaw('/remote', JSON.stringify([{ query: '{ hello(name: "a") }' }, { query: 'mutation { bump(by: 2) }' }, { query: '{ secret }' }]));
    expect(status).toBe(200);
    expect(body[0]).toEqual({ data: { hello: 'hello a' } });
    expect(body[1].data.bump).toBeGreaterThanOrEqual(2);
    // Validated at the gateway: never forwarded.
    expect(body[2].errors[0].message).toMatch(/Cannot query field "secret"/);
    expect(yoga.requests.length - before).toBe(2);
    expect(headers.getSetCookie()).toEqual(['session=abc; HttpOnly', 'session=abc; HttpOnly']);
    expect(headers.get('cache-control')).toBeNull();
  });
});

describe('remote executor fidelity', () => {
  it('passes set-cookie, cache-control and the configured headers; not the others', async () => {
    const { status, headers, body } = await postRaw('/remote', JSON.stringify({ query: '{ hello(name: "b") }' }));
    expect(status).toBe(200);
    expect(body).toEqual({ data: { hello: 'hello b' } });
    expect(headers.getSetCookie()).toEqual(['session=abc; HttpOnly']);
    expect(headers.get('cache-control')).toBe('private, max-age=5');
    expect(headers.get('x-custom')).toBe('passed');
    expect(headers.get('x-internal')).toBeNull();
    // Not configured on this API: only the defaults pass.
    const strict = await postRaw('/remote-strict', JSON.stringify({ query: '{ hello(name: "c") }' }));
    expect(strict.headers.get('cache-control')).toBe('private, max-age=5');
    expect(strict.headers.get('x-custom')).toBeNull();
  });

  it('enableIntrospection: false refuses introspection at the gateway; true (the default) forwards it', async () => {
    const before = yoga.requests.length;
    const refused = await postRaw('/remote-strict', JSON.stringify({ query: '{ __schema { queryType { name } } }' }));
    expect(refused.status).toBe(400);
    expect(refused.body.data).toBeUndefined();
    expect(JSON.stringify(refused.body.errors)).toMatch(/introspection/i);
    const typeQuery = await postRaw('/remote-strict', JSON.stringify({ query: '{ __type(name: "Query") { name } }' }));
    expect(typeQuery.status).toBe(400);
    expect(yoga.requests.length).toBe(before);
    const allowed = await postRaw('/remote', JSON.stringify({ query: '{ __schema { queryType { name } } }' }));
    expect(allowed.body).toEqual({ data: { __schema: { queryType: { name: 'Query' } } } });
  });

  it('the graphql-http audit: 0 MUST failures through the remote executor (introspection forwarded)', async () => {
    const results = await Promise.all(serverAudits({ url: `${gateway.url}/remote` }).map((audit) => audit.fn()));
    expect(results.filter((r) => r.status !== 'ok' && r.name.startsWith('MUST')).map((r) => `${r.name}: ${r.status === 'ok' ? '' : r.reason}`)).toEqual([]);
    expect(results.filter((r) => r.name.startsWith('MUST')).length).toBeGreaterThan(10);
  });

  it('its upstream timeout is configurable (executor.remote.timeout)', async () => {
    const { status, headers, body } = await postRaw('/remote-strict', JSON.stringify({ query: '{ slow }' }));
    expect(status).toBe(504);
    expect(headers.get('x-gatehouse-error')).toBe('GH_UPSTREAM_TIMEOUT');
    expect(body.errors[0].message).toBe('the upstream GraphQL server did not answer within 300ms');
    // The upstream does answer (after 3 s, with 200): only the 300 ms timeout makes this a 504.
  });
});

/** The JSON parts of a multipart/mixed body (the incremental delivery format). */
function multipartParts(contentType: string, body: string): any[] {
  const boundary = /boundary="?([^";]+)"?/.exec(contentType)![1]!;
  return body
    .split(`\r\n--${boundary}`)
    .slice(1)
    .filter((p) => !p.startsWith('--'))
    .map((p) => JSON.parse(p.slice(p.indexOf('\r\n\r\n') + 4)));
}

describe('incremental delivery (@defer, @stream)', () => {
  const postMultipart = async (path: string, query: string) => {
    const response = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'multipart/mixed; deferSpec=20220824, application/json' }, body: JSON.stringify({ query }) });
    return { status: response.status, type: response.headers.get('content-type') ?? '', body: await response.text(), headers: response.headers };
  };

  it('the remote executor forwards @defer to graphql-yoga and streams its multipart/mixed parts back', async () => {
    const { status, type, body, headers } = await postMultipart('/remote', '{ hello(name: "d") ... @defer { ping } }');
    expect(status).toBe(200);
    expect(type).toMatch(/^multipart\/mixed/);
    expect(headers.get('set-cookie')).toBe('session=abc; HttpOnly');
    const parts = multipartParts(type, body);
    expect(parts[0]).toEqual({ data: { hello: 'hello d' }, hasNext: true });
    expect(parts.at(-1).hasNext).toBe(false);
    expect(parts.flatMap((p) => p.incremental ?? [])).toEqual([{ data: { ping: 'pong' }, path: [] }]);
  });

  it('masks upstream errors inside deferred parts', async () => {
    const { type, body } = await postMultipart('/remote', '{ hello(name: "m") ... @defer { boom } }');
    expect(body).not.toContain('10.1.2.3');
    const deferred = multipartParts(type, body).flatMap((p) => p.incremental ?? []);
    expect(deferred[0].errors).toEqual([{ message: 'the upstream GraphQL server reported an error', locations: expect.any(Array), path: ['boom'], extensions: { code: 'UPSTREAM_ERROR' } }]);
  });

  it('forwards @stream', async () => {
    const { type, body } = await postMultipart('/remote', '{ items @stream(initialCount: 1) }');
    const parts = multipartParts(type, body);
    expect(parts[0]).toEqual({ data: { items: ['a'] }, hasNext: true });
    expect(parts.flatMap((p) => (p.incremental ?? []).flatMap((i: { items: string[] }) => i.items))).toEqual(['b', 'c']);
  });

  it('Apollo Client receives deferred fields (HttpLink, Defer20220824Handler)', async () => {
    const client = new ApolloClient({ link: new HttpLink({ uri: `${gateway.url}/remote` }), cache: new InMemoryCache(), incrementalHandler: new Defer20220824Handler() });
    const { data } = await client.query({ query: gql`query D { hello(name: "apollo") ... @defer { ping } }` });
    expect(data).toMatchObject({ hello: 'hello apollo', ping: 'pong' });
  });

  it('the local executor refuses @defer/@stream with a clear error (400, GRAPHQL_INCREMENTAL_DELIVERY_UNSUPPORTED)', async () => {
    for (const query of ['{ greeting ... @defer { book(id: "1") { title } } }', '{ book(id: "1") { ... on Book @defer { title } } }']) {
      const { status, body } = await postRaw('/books', JSON.stringify({ query }));
      expect(status).toBe(400);
      expect(body.errors[0].extensions.code).toBe('GRAPHQL_INCREMENTAL_DELIVERY_UNSUPPORTED');
      expect(body.errors[0].message).toMatch(/@defer and @stream are not supported/);
    }
  });

  it('without @defer, a client accepting multipart/mixed gets plain JSON', async () => {
    const { status, type, body } = await postMultipart('/remote', '{ hello(name: "plain") }');
    expect(status).toBe(200);
    expect(type).toMatch(/json/);
    expect(JSON.parse(body)).toEqual({ data: { hello: 'hello plain' } });
  });
});
