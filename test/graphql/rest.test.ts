import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../support/upstream.ts';
import { manifests, serveGraphQL, type GraphQLServer } from './support.ts';

/** A real REST API: users, companies, posts; it counts calls and in-flight requests. */
async function startRestApi() {
  const users: Record<string, object> = {
    u1: { id: 'u1', name: 'Ada', companyId: 'c1' },
    u2: { id: 'u2', name: 'Brian', companyId: 'c1' },
    u3: { id: 'u3', name: 'Cleo', companyId: 'c2' },
    'a/b': { id: 'a/b', name: 'Slashed', companyId: 'c2' },
  };
  const calls = new Map<string, number>();
  let inFlight = 0;
  let maxInFlight = 0;
  const server = await startServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const url = new URL(req.url!, 'http://x');
      calls.set(`${req.method} ${req.url}`, (calls.get(`${req.method} ${req.url}`) ?? 0) + 1);
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      const json = (status: number, body: unknown) => {
        inFlight--;
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      };
      const parts = url.pathname.split('/').slice(1).map(decodeURIComponent);
      if (parts[0] === 'users' && parts.length === 1) return json(200, { data: Object.values(users).slice(0, 3) });
      if (parts[0] === 'users' && parts.length === 2) {
        const user = users[parts[1]!];
        return user ? json(200, user) : json(404, { message: 'no such user' });
      }
      if (parts[0] === 'users' && parts[2] === 'posts') {
        return json(200, { items: [{ post_id: `${parts[1]}-p1`, body: { text: 'hello' } }, { post_id: `${parts[1]}-p2`, body: { text: 'again' } }] });
      }
      if (parts[0] === 'companies') {
        await new Promise((r) => setTimeout(r, 40));
        return json(200, { company: { id: parts[1], title: parts[1] === 'c1' ? 'Acme' : 'Globex' } });
      }
      if (parts[0] === 'search' && req.method === 'POST') {
        return json(200, { received: JSON.parse(Buffer.concat(chunks).toString()), auth: req.headers['authorization'] ?? null, tenant: req.headers['x-tenant'] ?? null, q: url.searchParams.get('q'), contentType: req.headers['content-type'] });
      }
      if (parts[0] === 'slow') {
        await new Promise((r) => setTimeout(r, 400));
        return json(200, 'late');
      }
      if (parts[0] === 'broken') return json(500, { error: 'boom' });
      if (parts[0] === 'text') {
        inFlight--;
        return res.writeHead(200, { 'content-type': 'text/plain' }).end('not json');
      }
      json(404, {});
    });
  });
  return { server, calls, maxInFlight: () => maxInFlight, reset: () => (calls.clear(), (maxInFlight = 0)) };
}

const SDL = /* GraphQL */ `
  type Query {
    user(id: ID): User @resolve(name: "Query|user")
    users: [User] @resolve(name: "Query|users")
    search(term: String!, limit: Int): SearchResult @resolve(name: "Query|search")
    slow: String @resolve(name: "Query|slow")
    broken: String @resolve(name: "Query|broken")
    notJson: String @resolve(name: "Query|notJson")
    greeting: String @resolve(name: "Query|greeting")
  }
  type User {
    id: ID!
    name: String
    company: Company @resolve(name: "User|company")
    posts: [Post] @resolve(name: "User|posts")
  }
  type Company { id: ID! title: String }
  type Post { id: ID! text: String author: String }
  type SearchResult { received: Received, auth: String, tenant: String, q: String, contentType: String }
  type Received { term: String, limit: Int, label: String, nested: [String] }
`;

function api(upstream: string) {
  const ref = { upstreamRef: { name: upstream } };
  return manifests.graphqlApi('rest-api', {
    schemaDefinition: SDL,
    executor: {
      local: {
        resolutions: {
          'Query|user': { restResolver: { ...ref, request: { headers: { ':path': '/users/{$args.id}' } } } },
          'Query|users': { restResolver: { ...ref, request: { headers: { ':path': '/users' } }, response: { resultRoot: 'data' } } },
          'User|company': { restResolver: { ...ref, request: { headers: { ':path': '/companies/{$parent.companyId}' } }, response: { resultRoot: 'company' } } },
          'User|posts': {
            restResolver: {
              ...ref,
              request: { headers: { ':path': '/users/{$parent.id}/posts' } },
              response: { resultRoot: 'items', setters: { id: '{$body.post_id}', text: '{$body.body.text}', author: 'by {$parent.name}' } },
            },
          },
          'Query|search': {
            restResolver: {
              ...ref,
              request: {
                headers: { ':method': 'POST', ':path': '/search', authorization: '{$headers.authorization}', 'x-tenant': 'tenant-{$args.term}' },
                queryParams: { q: '{$args.term}' },
                body: { term: '{$args.term}', limit: '{$args.limit}', label: 'term={$args.term}', nested: ['{$args.term}', 'static'] },
              },
            },
          },
          'Query|slow': { restResolver: { ...ref, request: { headers: { ':path': '/slow' } }, timeout: '100ms' } },
          'Query|broken': { restResolver: { ...ref, request: { headers: { ':path': '/broken' } } } },
          'Query|notJson': { restResolver: { ...ref, request: { headers: { ':path': '/text' } } } },
          'Query|greeting': { mockResolver: { syncResponse: 'hello from a mock' } },
        },
      },
    },
  });
}

/** Errors in a stable order (concurrent resolvers may fail in any order). */
function sortErrors(body: { errors?: { path?: unknown[] }[] }) {
  body.errors?.sort((a, b) => JSON.stringify(a.path).localeCompare(JSON.stringify(b.path)));
  return body;
}

describe.each(['jit', 'graphql-js'] as const)('restResolver (%s engine)', (engine) => {
  let rest: Awaited<ReturnType<typeof startRestApi>>;
  let gql: GraphQLServer;

  beforeAll(async () => {
    rest = await startRestApi();
    gql = await serveGraphQL([manifests.upstream('users', [{ addr: '127.0.0.1', port: rest.server.port }]), api('users')], 'rest-api', { engine });
  });
  afterAll(async () => {
    await gql?.close();
    await rest?.server.close();
  });

  it('resolves nested fields through REST calls, with resultRoot and setters', async () => {
    const { status, body } = await gql.post('{ user(id: "u1") { id name company { id title } posts { id text author } } }');
    expect(status).toBe(200);
    expect(body).toEqual({
      data: {
        user: {
          id: 'u1',
          name: 'Ada',
          company: { id: 'c1', title: 'Acme' },
          posts: [
            { id: 'u1-p1', text: 'hello', author: 'by Ada' },
            { id: 'u1-p2', text: 'again', author: 'by Ada' },
          ],
        },
      },
    });
  });

  it('makes identical calls once per operation and resolves list items concurrently', async () => {
    rest.reset();
    const { body } = await gql.post('{ users { name company { title } } again: users { id } }');
    expect(body).toEqual({
      data: {
        users: [
          { name: 'Ada', company: { title: 'Acme' } },
          { name: 'Brian', company: { title: 'Acme' } },
          { name: 'Cleo', company: { title: 'Globex' } },
        ],
        again: [{ id: 'u1' }, { id: 'u2' }, { id: 'u3' }],
      },
    });
    expect(Object.fromEntries(rest.calls)).toEqual({ 'GET /users': 1, 'GET /companies/c1': 1, 'GET /companies/c2': 1 });
    expect(rest.maxInFlight()).toBe(2);
  });

  it('sends a templated JSON body, headers and URL-encoded query parameters', async () => {
    const { body } = await gql.post('query($t: String!) { search(term: $t, limit: 5) { received { term limit label nested } auth tenant q contentType } }', { t: 'a b&c' }, { authorization: 'Bearer xyz' });
    expect(body).toEqual({
      data: {
        search: {
          received: { term: 'a b&c', limit: 5, label: 'term=a b&c', nested: ['a b&c', 'static'] },
          auth: 'Bearer xyz',
          tenant: 'tenant-a b&c',
          q: 'a b&c',
          contentType: 'application/json',
        },
      },
    });
    expect([...rest.calls.keys()].at(-1)).toBe('POST /search?q=a%20b%26c');
  });

  it('URL-encodes values in :path', async () => {
    const { body } = await gql.post('{ user(id: "a/b") { id name } }');
    expect(body).toEqual({ data: { user: { id: 'a/b', name: 'Slashed' } } });
    expect(rest.calls.get('GET /users/a%2Fb')).toBe(1);
  });

  it('returns partial data with one error per failed field: path, locations, code and upstream status', async () => {
    const { status, body } = await gql.post('{\n  greeting\n  slow\n  broken\n  notJson\n  user(id: "nobody") { id }\n  missing: user { id }\n}');
    expect(status).toBe(200);
    const port = rest.server.port;
    void port;
    expect(sortErrors(body)).toEqual({
      data: { greeting: 'hello from a mock', slow: null, broken: null, notJson: null, user: null, missing: null },
      errors: [
        {
          message: 'the upstream service failed',
          locations: [{ line: 4, column: 3 }],
          path: ['broken'],
          extensions: { code: 'UPSTREAM_ERROR', http: { status: 500 } },
        },
        {
          message: '"/users/{$args.id}": {$args.id} is empty or missing, which leaves an empty path segment',
          locations: [{ line: 7, column: 3 }],
          path: ['missing'],
          extensions: { code: 'EMPTY_PATH_SEGMENT' },
        },
        {
          message: 'the upstream service answered with something the gateway cannot use',
          locations: [{ line: 5, column: 3 }],
          path: ['notJson'],
          extensions: { code: 'BAD_UPSTREAM_RESPONSE', http: { status: 200 } },
        },
        {
          message: 'the upstream service did not answer in time',
          locations: [{ line: 3, column: 3 }],
          path: ['slow'],
          extensions: { code: 'UPSTREAM_TIMEOUT' },
        },
        {
          message: 'the upstream service failed',
          locations: [{ line: 6, column: 3 }],
          path: ['user'],
          extensions: { code: 'UPSTREAM_ERROR', http: { status: 404 } },
        },
      ],
    });
  });

  it('reports a refused upstream as UPSTREAM_ERROR on the field', async () => {
    const refused = await startServer(() => {});
    await refused.close();
    const down = await serveGraphQL([manifests.upstream('users', [{ addr: '127.0.0.1', port: refused.port }]), api('users')], 'rest-api', { engine });
    try {
      const { status, body } = await down.post('{ user(id: "u1") { id } }');
      expect(status).toBe(200);
      expect(body).toEqual({
        data: { user: null },
        errors: [{ message: 'the upstream service failed', locations: [{ line: 1, column: 3 }], path: ['user'], extensions: { code: 'UPSTREAM_ERROR' } }],
      });
    } finally {
      await down.close();
    }
  });
});
