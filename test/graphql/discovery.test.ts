/**
 * `gatehouse graphql discover` (issue 25 item 13): a GraphQLApi from an OpenAPI 3 document (a
 * file and a URL) and from gRPC server reflection; `gatehouse validate` accepts the output
 * unchanged, and a real `gatehouse run` serves it against the real REST and gRPC servers.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { makeConfigDir, manifests } from '../support/config-dir.ts';
import { startGatehouse } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));

function gatehouse(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, ...args], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Validates the file, then serves it with a route to the API and runs `check` against the gateway. */
async function serveDiscovered(yaml: string, api: string, check: (post: (query: string) => Promise<any>) => Promise<void>): Promise<void> {
  const dir = await makeConfigDir({ 'api.yaml': yaml, 'route.yaml': [manifests.virtualService('discovered', { domains: ['*'], routes: [{ matchers: [{ prefix: '/graphql' }], graphqlApiRef: { name: api } }] })] });
  try {
    const validated = await gatehouse(['validate', join(dir.path, 'api.yaml')]);
    expect(validated.stdout).toMatch(/Accepted +GraphQLApi default\//);
    expect(validated.stdout).toMatch(/0 rejected/);
    expect(validated.stdout).not.toMatch(/Warning /);
    expect(validated.code).toBe(0);
    const gateway = await startGatehouse('run', ['--config-dir', dir.path]);
    try {
      await check(async (query) => {
        const response = await fetch(`${gateway.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
        return { status: response.status, body: await response.json() };
      });
    } finally {
      await gateway.stop();
    }
  } finally {
    await dir.cleanup();
  }
}

describe('--openapi', () => {
  let rest: TestServer;
  let tmp: string;
  const created: unknown[] = [];
  const openapi = (port: number) => ({
    openapi: '3.0.3',
    info: { title: 'Pet Store', version: '1' },
    servers: [{ url: `http://127.0.0.1:${port}/v1` }],
    paths: {
      '/pets': {
        get: { operationId: 'listPets', parameters: [{ name: 'limit', in: 'query', schema: { type: 'integer' } }, { name: 'page-token', in: 'query', schema: { type: 'string' } }], responses: { '200': { description: 'ok', content: { 'application/json': { schema: { type: 'array', items: { $ref: '#/components/schemas/Pet' } } } } } } },
        post: { operationId: 'createPet', requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/NewPet' } } } }, responses: { '201': { description: 'created', content: { 'application/json': { schema: { $ref: '#/components/schemas/Pet' } } } } } },
      },
      '/pets/{petId}': {
        parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'string' } }],
        get: { summary: 'One pet', responses: { '200': { description: 'ok', content: { 'application/json': { schema: { $ref: '#/components/schemas/Pet' } } } } } },
      },
    },
    components: {
      schemas: {
        NewPet: { type: 'object', required: ['name'], properties: { name: { type: 'string' }, tag: { type: 'string' } } },
        Pet: { allOf: [{ $ref: '#/components/schemas/NewPet' }, { type: 'object', properties: { id: { type: 'integer', format: 'int64' }, owner: { $ref: '#/components/schemas/Owner' }, 'x-internal-id': { type: 'string' }, extra: { oneOf: [{ type: 'string' }, { type: 'integer' }] } } }] },
        Owner: { type: 'object', properties: { name: { type: 'string' }, pets: { type: 'array', items: { $ref: '#/components/schemas/Pet' } } } },
      },
    },
  });

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'gatehouse-discover-'));
    const pets = [{ id: 1, name: 'Rex', tag: 'dog', owner: { name: 'Ada' }, 'x-internal-id': 'i1', extra: 7 }, { id: 2, name: 'Tom', tag: 'cat', extra: 'x' }];
    rest = await startServer((req, res) => {
      const url = new URL(req.url!, 'http://x');
      const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (url.pathname === '/openapi.json') return json(200, openapi(rest.port));
      if (url.pathname === '/v1/pets' && req.method === 'GET') return json(200, pets.slice(0, Number(url.searchParams.get('limit') ?? 10)).map((p) => ({ ...p, tag: url.searchParams.get('page-token') ?? p.tag })));
      if (url.pathname === '/v1/pets' && req.method === 'POST') {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const body = JSON.parse(Buffer.concat(chunks).toString());
          created.push(body);
          json(201, { id: 3, ...body });
        });
        return;
      }
      const match = /^\/v1\/pets\/([^/]+)$/.exec(url.pathname);
      if (match && req.method === 'GET') return json(200, pets.find((p) => String(p.id) === decodeURIComponent(match[1]!)) ?? { id: 0, name: decodeURIComponent(match[1]!) });
      json(404, { message: 'not found' });
    });
  });
  afterAll(async () => {
    await rest?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('from a file: validate accepts it unchanged; it serves queries (path and query parameters, nested types) and mutations (JSON body)', { timeout: 120_000 }, async () => {
    const file = join(tmp, 'petstore.yaml');
    await writeFile(file, JSON.stringify(openapi(rest.port)));
    const out = join(tmp, 'out.yaml');
    const discovered = await gatehouse(['graphql', 'discover', '--openapi', file, '--out', out]);
    expect(discovered.code).toBe(0);
    // What could not be mapped is said, not silently dropped.
    expect(discovered.stderr).toContain('x-internal-id: not a GraphQL name; left out');
    const yaml = await readFile(out, 'utf8');
    const docs = parseAllDocuments(yaml).map((d) => d.toJSON());
    expect(docs.map((d) => `${d.kind}/${d.metadata.name}`)).toEqual(['Upstream/pet-store-upstream', 'GraphQLApi/pet-store']);
    expect(docs[0].spec.static.hosts).toEqual([{ addr: '127.0.0.1', port: rest.port }]);
    const sdl: string = docs[1].spec.executableSchema.schemaDefinition;
    expect(sdl).toMatch(/listPets\(limit: Int, pageToken: String\): \[Pet\] @resolve/);
    expect(sdl).toMatch(/createPet\(input: NewPetInput!\): Pet @resolve/);
    await serveDiscovered(yaml, 'pet-store', async (post) => {
      const list = await post('{ listPets(limit: 1, pageToken: "t") { id name tag owner { name } extra } }');
      expect(list).toEqual({ status: 200, body: { data: { listPets: [{ id: 1, name: 'Rex', tag: 't', owner: { name: 'Ada' }, extra: 7 }] } } });
      const one = await post('{ getPetsByPetId(petId: "2") { id name } }');
      expect(one.body).toEqual({ data: { getPetsByPetId: { id: 2, name: 'Tom' } } });
      // A path parameter cannot change the path's structure.
      expect((await post('{ getPetsByPetId(petId: "../openapi.json") { name } }')).body.data.getPetsByPetId.name).toBe('../openapi.json');
      const created = await post('mutation { createPet(input: { name: "Kit", tag: "cat" }) { id name tag } }');
      expect(created.body).toEqual({ data: { createPet: { id: 3, name: 'Kit', tag: 'cat' } } });
    });
    expect(created).toEqual([{ name: 'Kit', tag: 'cat' }]);
  });

  it('from a URL, with --name and --upstream-address', { timeout: 60_000 }, async () => {
    const discovered = await gatehouse(['graphql', 'discover', '--openapi', `${rest.url}/openapi.json`, '--name', 'pets', '--upstream-address', `127.0.0.1:${rest.port}`]);
    expect(discovered.code).toBe(0);
    const docs = parseAllDocuments(discovered.stdout).map((d) => d.toJSON());
    expect(docs[1].metadata.name).toBe('pets');
    expect(docs[0].metadata.name).toBe('pets-upstream');
  });

  it('bad input gets a clear error and exit code 2', async () => {
    const notOpenApi = join(tmp, 'swagger.json');
    await writeFile(notOpenApi, JSON.stringify({ swagger: '2.0', paths: {} }));
    const swagger = await gatehouse(['graphql', 'discover', '--openapi', notOpenApi]);
    expect(swagger.code).toBe(2);
    expect(swagger.stderr).toMatch(/not an OpenAPI 3 document .*\[GH_BAD_ARGUMENT\]/);
    const garbage = join(tmp, 'garbage.yaml');
    await writeFile(garbage, '{{{: [');
    expect((await gatehouse(['graphql', 'discover', '--openapi', garbage])).stderr).toMatch(/not YAML or JSON/);
    expect((await gatehouse(['graphql', 'discover', '--openapi', join(tmp, 'missing.yaml')])).stderr).toMatch(/ENOENT/);
    const noServer = join(tmp, 'noserver.json');
    await writeFile(noServer, JSON.stringify({ ...openapi(1), servers: [{ url: '/v1' }] }));
    expect((await gatehouse(['graphql', 'discover', '--openapi', noServer])).stderr).toMatch(/--upstream-address/);
    expect((await gatehouse(['graphql', 'discover', '--openapi', noServer, '--grpc', '1.2.3.4:5'])).stderr).toMatch(/exactly one of --openapi or --grpc/);
    expect((await gatehouse(['graphql', 'discover', '--grpc', 'nohost'])).stderr).toMatch(/HOST:PORT/);
  });
});

describe('--grpc (server reflection)', () => {
  const PROTO = `
syntax = "proto3";
package shop.v1;
enum Status { UNKNOWN = 0; ACTIVE = 1; RETIRED = 2; }
message GetItemRequest { string id = 1; }
message Item { string id = 1; string name = 2; int64 stock = 3; Status status = 4; repeated string tags = 5; Price price = 6; }
message Price { double amount = 1; string currency = 2; }
message RenameRequest { string id = 1; string name = 2; }
message WatchRequest {}
service Catalog {
  rpc GetItem(GetItemRequest) returns (Item);
  rpc RenameItem(RenameRequest) returns (Item);
  rpc Watch(WatchRequest) returns (stream Item);
}
`;
  let server: grpc.Server;
  let port: number;
  let dir: string;
  const items: Record<string, { id: string; name: string; stock: number; status: number; tags: string[]; price: { amount: number; currency: string } }> = {
    a1: { id: 'a1', name: 'Anvil', stock: 12, status: 1, tags: ['heavy'], price: { amount: 9.5, currency: 'EUR' } },
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gatehouse-discover-grpc-'));
    await writeFile(join(dir, 'shop.proto'), PROTO);
    const definition = protoLoader.loadSync(join(dir, 'shop.proto'), { keepCase: true });
    const pkg = grpc.loadPackageDefinition(definition) as any;
    server = new grpc.Server();
    server.addService(pkg.shop.v1.Catalog.service, {
      GetItem(call: grpc.ServerUnaryCall<{ id: string }, object>, callback: grpc.sendUnaryData<object>) {
        const item = items[call.request.id];
        if (!item) return callback({ code: grpc.status.NOT_FOUND, details: 'no such item' });
        callback(null, item);
      },
      RenameItem(call: grpc.ServerUnaryCall<{ id: string; name: string }, object>, callback: grpc.sendUnaryData<object>) {
        items[call.request.id]!.name = call.request.name;
        callback(null, items[call.request.id]!);
      },
      Watch(call: grpc.ServerWritableStream<unknown, object>) {
        call.end();
      },
    });
    new ReflectionService(definition).addToServer(server);
    port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  });
  afterAll(async () => {
    server?.forceShutdown();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('writes a GraphQLApi that validate accepts unchanged and that serves queries and mutations', { timeout: 120_000 }, async () => {
    const discovered = await gatehouse(['graphql', 'discover', '--grpc', `127.0.0.1:${port}`]);
    expect(discovered.stderr).toContain('shop.v1.Catalog/Watch: streaming; left out');
    expect(discovered.code).toBe(0);
    const docs = parseAllDocuments(discovered.stdout).map((d) => d.toJSON());
    expect(docs.map((d) => `${d.kind}/${d.metadata.name}`)).toEqual(['Upstream/catalog-upstream', 'GraphQLApi/catalog']);
    const sdl: string = docs[1].spec.executableSchema.schemaDefinition;
    expect(sdl).toMatch(/type Query \{\n {2}getItem\(input: GetItemRequestInput\): Item @resolve\(name: "shop\.v1\.Catalog\|GetItem"\)/);
    expect(sdl).toMatch(/type Mutation \{\n {2}renameItem\(input: RenameRequestInput\): Item/);
    expect(sdl).toMatch(/enum Status \{/);
    await serveDiscovered(discovered.stdout, 'catalog', async (post) => {
      const got = await post('{ getItem(input: { id: "a1" }) { id name stock status tags price { amount currency } } }');
      expect(got).toEqual({ status: 200, body: { data: { getItem: { id: 'a1', name: 'Anvil', stock: '12', status: 'ACTIVE', tags: ['heavy'], price: { amount: 9.5, currency: 'EUR' } } } } });
      const renamed = await post('mutation { renameItem(input: { id: "a1", name: "Big Anvil" }) { name } }');
      expect(renamed.body).toEqual({ data: { renameItem: { name: 'Big Anvil' } } });
      const missing = await post('{ getItem(input: { id: "zz" }) { id } }');
      expect(missing.body.data).toEqual({ getItem: null });
      expect(missing.body.errors[0].extensions.code).toBe('UPSTREAM_ERROR');
    });
  });

  it('a server that does not answer reflection is a clear error', { timeout: 60_000 }, async () => {
    const plain = await startServer((_req, res) => res.end('not grpc'));
    try {
      const result = await gatehouse(['graphql', 'discover', '--grpc', `127.0.0.1:${plain.port}`]);
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/--grpc 127\.0\.0\.1:\d+: .*\[GH_BAD_ARGUMENT\]/);
    } finally {
      await plain.close();
    }
  });
});
