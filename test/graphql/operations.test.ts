/**
 * GraphQLApi operation options (Gloo's GraphQLApi spec) through a real `gatehouse gateway`:
 * Apollo's automatic persisted queries, the allowedQueryHashes safelist, statPrefix in
 * metrics, logSensitiveInfo, and the load-time warning for maxDepth (a resolver's spanName names its span: test/tracing). Hashes come
 * from the openssl CLI.
 */
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';
import { loadSnapshot } from './support.ts';

const sha256 = (text: string) => /([0-9a-f]{64})/.exec(execFileSync('openssl', ['dgst', '-sha256'], { input: text, encoding: 'utf8' }))![1]!;

const SDL = 'type Query { greeting: String @resolve(name: "greet") book(id: ID!): Book @resolve(name: "book") } type Book { id: ID title: String }';
const GREETING = '{ greeting }';
const BOOK = 'query Book($id: ID!) { book(id: $id) { id title } }';

function api(name: string, spec: object) {
  const resolutions = {
    greet: { mockResolver: { syncResponse: 'hello' } },
    book: { statPrefix: 'book-lookups', restResolver: { upstreamRef: { name: 'books' }, request: { headers: { ':path': '/books/{$args.id}' } }, spanName: 'books' } },
  };
  return { ...manifests.graphqlApi(name, { schemaDefinition: SDL, executor: { local: { resolutions } } }), spec: { executableSchema: { schemaDefinition: SDL, executor: { local: { resolutions } } }, ...spec } };
}

let books: TestServer;
let dir: ConfigDir;
let gateway: GatehouseProcess;

beforeAll(async () => {
  books = await startServer((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: req.url!.split('/')[2], title: 'The Comedy of Errors' })));
  const route = (prefix: string, name: string) => ({ matchers: [{ prefix }], graphqlApiRef: { name } });
  dir = await makeConfigDir({
    'config.yaml': [
      manifests.upstream('books', [{ addr: '127.0.0.1', port: books.port }]),
      api('apq', { persistedQueryCacheConfig: { cacheSize: 10 }, statPrefix: 'bookstore', options: { logSensitiveInfo: true } }),
      api('safelist', { allowedQueryHashes: [sha256(GREETING), sha256(BOOK)], persistedQueryCacheConfig: {} }),
      api('plain', {}),
      manifests.virtualService('graphql', { domains: ['*'], routes: [route('/apq', 'apq'), route('/safelist', 'safelist'), route('/plain', 'plain')] }),
    ],
  });
  gateway = await startGatehouse('gateway', ['--config-dir', dir.path], { env: { GATEHOUSE_LOG_LEVEL: 'debug' } });
});

afterAll(async () => {
  await gateway?.stop();
  await books?.close();
  await dir?.cleanup();
});

async function post(path: string, body: object) {
  const response = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as { data?: unknown; errors?: { message: string; extensions?: { code?: string } }[] } };
}

describe('automatic persisted queries (Apollo protocol, Gloo persistedQueryCacheConfig)', () => {
  it('hash only → PersistedQueryNotFound; hash + query → runs and is cached; hash only again (POST and GET) → runs', async () => {
    const persistedQuery = { version: 1, sha256Hash: sha256(BOOK) };
    const miss = await post('/apq', { extensions: { persistedQuery }, variables: { id: '7' } });
    expect(miss.status).toBe(200);
    expect(miss.body.errors).toEqual([{ message: 'PersistedQueryNotFound', extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' } }]);
    const register = await post('/apq', { query: BOOK, extensions: { persistedQuery }, variables: { id: '7' } });
    expect(register).toEqual({ status: 200, body: { data: { book: { id: '7', title: 'The Comedy of Errors' } } } });
    const hit = await post('/apq', { extensions: { persistedQuery }, variables: { id: '8' } });
    expect(hit).toEqual({ status: 200, body: { data: { book: { id: '8', title: 'The Comedy of Errors' } } } });
    const get = await fetch(`${gateway.url}/apq?${new URLSearchParams({ extensions: JSON.stringify({ persistedQuery }), variables: JSON.stringify({ id: '9' }) })}`, { headers: { accept: 'application/json' } });
    expect(await get.json()).toEqual({ data: { book: { id: '9', title: 'The Comedy of Errors' } } });
  });

  it('a hash that does not match the query is a 400; a hash-only request to an API without APQ is PersistedQueryNotSupported', async () => {
    const wrong = await post('/apq', { query: GREETING, extensions: { persistedQuery: { version: 1, sha256Hash: sha256('{ other }') } } });
    expect(wrong.status).toBe(400);
    expect(wrong.body.errors?.[0]).toEqual({ message: 'provided sha does not match query', extensions: { code: 'BAD_PERSISTED_QUERY' } });
    const unsupported = await post('/plain', { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(GREETING) } } });
    expect(unsupported.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_SUPPORTED');
  });
});

describe('allowedQueryHashes (safelist)', () => {
  it('runs listed operations (by text or by persisted hash) and refuses others with 403 OPERATION_NOT_ALLOWED', async () => {
    expect(await post('/safelist', { query: GREETING })).toEqual({ status: 200, body: { data: { greeting: 'hello' } } });
    const other = await post('/safelist', { query: '{greeting}' });
    expect(other.status).toBe(403);
    expect(other.body.errors).toEqual([{ message: "this operation is not in the API's allowedQueryHashes", extensions: { code: 'OPERATION_NOT_ALLOWED' } }]);
    // A listed operation registered through APQ runs by its hash alone.
    expect((await post('/safelist', { query: BOOK, variables: { id: '1' }, extensions: { persistedQuery: { version: 1, sha256Hash: sha256(BOOK) } } })).status).toBe(200);
    expect((await post('/safelist', { variables: { id: '2' }, extensions: { persistedQuery: { version: 1, sha256Hash: sha256(BOOK) } } })).body.data).toEqual({ book: { id: '2', title: 'The Comedy of Errors' } });
  });
});

describe('statPrefix and logSensitiveInfo', () => {
  it('statPrefix names the API and the resolver in metrics', async () => {
    expect((await post('/apq', { query: BOOK, variables: { id: '3' } })).status).toBe(200);
    const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/gatehouse_graphql_operations_total\{api="bookstore",operation="query",result="ok"\} [1-9]/);
    expect(metrics).toMatch(/gatehouse_graphql_resolver_calls_total\{api="bookstore",resolver="book-lookups",result="ok"\} [1-9]/);
    // Without the API's statPrefix: namespace/name; without a resolution's: its key.
    expect((await post('/plain', { query: BOOK, variables: { id: '3' } })).status).toBe(200);
    expect((await post('/plain', { query: GREETING })).status).toBe(200);
    const after = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
    expect(after).toMatch(/gatehouse_graphql_resolver_calls_total\{api="default\/plain",resolver="book-lookups",result="ok"\} [1-9]/);
    expect(after).toMatch(/gatehouse_graphql_operations_total\{api="default\/plain",operation="query",result="ok"\} [1-9]/);
    expect(after).toMatch(/gatehouse_graphql_resolver_calls_total\{api="default\/plain",resolver="greet",result="ok"\} 0/);
  });

  it('logSensitiveInfo logs the query and variables at debug level; other APIs never do', async () => {
    await post('/apq', { query: BOOK, variables: { id: 'secret-apq' } });
    await post('/plain', { query: BOOK, variables: { id: 'secret-plain' } });
    const line = await gateway.waitForLog((l) => l.msg === 'graphql operation' && JSON.stringify(l).includes('secret-apq'));
    expect(line).toMatchObject({ api: 'bookstore', query: BOOK, variables: { id: 'secret-apq' } });
    // A marker operation after the plain one: the log is one ordered stream, so once the marker's
    // line is there, a line the plain operation wrote would be there too.
    await post('/apq', { query: BOOK, variables: { id: 'marker-after-plain' } });
    await gateway.waitForLog((l) => l.msg === 'graphql operation' && JSON.stringify(l).includes('marker-after-plain'));
    expect(gateway.logs.some((l) => JSON.stringify(l).includes('secret-plain'))).toBe(false);
  });
});

describe('load-time warnings', () => {
  it('a resolver\'s spanName names its span (no warning); maxDepth on a Gloo manifest is a warning naming the difference', () => {
    const gloo = { ...api('g', {}), apiVersion: 'graphql.gloo.solo.io/v1beta1' };
    (gloo.spec.executableSchema.executor.local as Record<string, unknown>).options = { maxDepth: 5 };
    const warnings = loadSnapshot([manifests.upstream('books', [{ addr: '127.0.0.1', port: 1 }]), gloo]).diagnostics.map((d) => `${d.severity} ${d.path}: ${d.message}`);
    expect(warnings).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^warning .*options\.maxDepth: an operation nested deeper than 5 is refused as a whole \(400, before any resolver runs\), where Gloo runs it/),
      ]),
    );
    expect(warnings.filter((w) => w.includes('spanName'))).toEqual([]);
  });
});
