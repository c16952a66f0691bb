/**
 * stitchedSchema (Gloo's schema stitching guide, shape unchanged): two GraphQLApis backed by
 * real gRPC services (users, reviews), stitched into one, with User merged by key across
 * them; served by a real `gatehouse gateway`.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serverAudits } from 'graphql-http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSnapshot, manifests, serveGraphQL, type GraphQLServer } from './support.ts';

const USERS_PROTO = `
syntax = "proto3";
package users;
message GetUserRequest { string username = 1; }
message User { string username = 1; string first_name = 2; string last_name = 3; }
service UserService { rpc GetUser(GetUserRequest) returns (User); }
`;
const REVIEWS_PROTO = `
syntax = "proto3";
package reviews;
message ReviewsRequest { int32 product_id = 1; }
message Author { string username = 1; }
message Review { string text = 1; Author author = 2; }
message ReviewList { repeated Review reviews = 1; }
service ReviewService { rpc GetProductReviews(ReviewsRequest) returns (ReviewList); }
`;

const PEOPLE: Record<string, { first_name: string; last_name: string }> = { akeith: { first_name: 'Adam', last_name: 'Keith' }, sam: { first_name: 'Sam', last_name: 'Hale' } };

/** Both services on one real gRPC server; counts GetUser calls. */
async function startServices() {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-stitch-'));
  await writeFile(join(dir, 'users.proto'), USERS_PROTO);
  await writeFile(join(dir, 'reviews.proto'), REVIEWS_PROTO);
  const load = (file: string) => grpc.loadPackageDefinition(protoLoader.loadSync(file, { includeDirs: [dir], keepCase: true, defaults: true })) as any;
  const server = new grpc.Server();
  const lookups: string[] = [];
  server.addService(load('users.proto').users.UserService.service, {
    GetUser(call: grpc.ServerUnaryCall<{ username: string }, object>, callback: grpc.sendUnaryData<object>) {
      lookups.push(call.request.username);
      const person = PEOPLE[call.request.username];
      callback(null, person ? { username: call.request.username, ...person } : { username: call.request.username });
    },
  });
  server.addService(load('reviews.proto').reviews.ReviewService.service, {
    GetProductReviews(call: grpc.ServerUnaryCall<{ product_id: number }, object>, callback: grpc.sendUnaryData<object>) {
      callback(null, { reviews: [{ text: `great product ${call.request.product_id}`, author: { username: 'akeith' } }, { text: 'meh', author: { username: 'sam' } }] });
    },
  });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  return {
    port,
    lookups,
    async close() {
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

const protoMap = (name: string, file: string, text: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { [file]: text } });
const grpcCall = (serviceName: string, methodName: string, outgoingMessageJson: object) => ({ grpcResolver: { upstreamRef: { name: 'services' }, requestTransform: { serviceName, methodName, outgoingMessageJson } } });

function usersApi() {
  return manifests.graphqlApi('users-api', {
    schemaDefinition: 'type Query { GetUser(username: String): User @resolve(name: "getUser") } type User { username: String first_name: String last_name: String }',
    executor: { local: { resolutions: { getUser: grpcCall('users.UserService', 'GetUser', { username: '{$args.username}' }) } } },
    grpcDescriptorRegistry: { protoRefsList: { protoRefs: [{ name: 'users-proto' }] } },
  });
}
function reviewsApi() {
  return manifests.graphqlApi('reviews-api', {
    schemaDefinition: 'type Query { productReviews(product_id: Int): ReviewList @resolve(name: "reviews") } type ReviewList { reviews: [Review] } type Review { text: String author: User } type User { username: String }',
    executor: { local: { resolutions: { reviews: grpcCall('reviews.ReviewService', 'GetProductReviews', { product_id: '{$args.product_id}' }) } } },
    grpcDescriptorRegistry: { protoRefsList: { protoRefs: [{ name: 'reviews-proto' }] } },
  });
}
/** Gloo's guide: the users subschema provides the full User, merged by username. */
function stitchedApi(usersTypeMerge: object = { User: { selectionSet: '{ username }', queryName: 'GetUser', args: { username: 'username' } } }) {
  return {
    apiVersion: 'graphql.gloo.solo.io/v1beta1',
    kind: 'GraphQLApi',
    metadata: { name: 'stitched-gql' },
    spec: { stitchedSchema: { subschemas: [{ name: 'users-api', namespace: 'default', typeMerge: usersTypeMerge }, { name: 'reviews-api', namespace: 'default' }] } },
  };
}

let services: Awaited<ReturnType<typeof startServices>>;
let gql: GraphQLServer;
const common = () => [manifests.upstream('services', [{ addr: '127.0.0.1', port: services.port }]), protoMap('users-proto', 'users.proto', USERS_PROTO), protoMap('reviews-proto', 'reviews.proto', REVIEWS_PROTO), usersApi(), reviewsApi()];

beforeAll(async () => {
  services = await startServices();
  gql = await serveGraphQL([...common(), stitchedApi()], 'stitched-gql');
});
afterAll(async () => {
  await gql?.close();
  await services?.close();
});

describe('stitchedSchema (Gloo) through gatehouse gateway', () => {
  it('a query across both subschemas: reviews from one, each author completed from the other by username', async () => {
    const before = services.lookups.length;
    const { status, body } = await gql.post('{ productReviews(product_id: 1) { reviews { text author { username first_name last_name } } } }');
    expect(status).toBe(200);
    expect(body).toEqual({
      data: {
        productReviews: {
          reviews: [
            { text: 'great product 1', author: { username: 'akeith', first_name: 'Adam', last_name: 'Keith' } },
            { text: 'meh', author: { username: 'sam', first_name: 'Sam', last_name: 'Hale' } },
          ],
        },
      },
    });
    expect(services.lookups.slice(before).sort()).toEqual(['akeith', 'sam']);
  });

  it('fields of one subschema only cost no call to the other', async () => {
    const before = services.lookups.length;
    const { body } = await gql.post('{ productReviews(product_id: 2) { reviews { text author { username } } } }');
    expect(body.data.productReviews.reviews[0]).toEqual({ text: 'great product 2', author: { username: 'akeith' } });
    expect(services.lookups.length).toBe(before);
    expect((await gql.post('{ GetUser(username: "sam") { first_name } }')).body).toEqual({ data: { GetUser: { first_name: 'Sam' } } });
  });
});

describe('stitchedSchema introspection (issue 25 item 10)', () => {
  it('is off by default (the subschemas do not enable it)', async () => {
    const { status, body } = await gql.post('{ __schema { queryType { name } } }');
    expect(status).toBe(400);
    expect(body.data).toBeUndefined();
  });

  it('with enableIntrospection: the merged schema is introspected, and the graphql-http audit has 0 MUST failures', async () => {
    const api = stitchedApi();
    const open = await serveGraphQL([...common(), { ...api, spec: { stitchedSchema: { ...api.spec.stitchedSchema, enableIntrospection: true } } }], 'stitched-gql');
    try {
      const { status, body } = await open.post('{ __type(name: "User") { fields { name } } }');
      expect(status).toBe(200);
      // User merged from both subschemas.
      expect(body.data.__type.fields.map((f: { name: string }) => f.name).sort()).toEqual(['first_name', 'last_name', 'username']);
      const results = await Promise.all(serverAudits({ url: `${open.url}/graphql` }).map((audit) => audit.fn()));
      expect(results.filter((r) => r.status !== 'ok' && r.name.startsWith('MUST')).map((r) => `${r.name}: ${r.status === 'ok' ? '' : r.reason}`)).toEqual([]);
      expect(results.filter((r) => r.name.startsWith('MUST')).length).toBeGreaterThan(10);
    } finally {
      await open.close();
    }
  });
});

describe('stitchedSchema at load time', () => {
  const reasons = (docs: object[]) => loadSnapshot(docs).statuses.find((s) => s.name === 'stitched-gql')!.reasons.map((r) => `${r.path} ${r.code} ${r.message}`);

  it('a queryName or type the subschema lacks, an argument the query lacks: rejected at the typeMerge field', () => {
    expect(reasons([...common(), stitchedApi({ User: { selectionSet: '{ username }', queryName: 'GetUsr', args: { username: 'username' } } })])).toEqual([
      'spec.stitchedSchema.subschemas[0].typeMerge.User.queryName GH_GRAPHQL_STITCHING Query.GetUsr is not in GraphQLApi default/users-api',
    ]);
    expect(reasons([...common(), stitchedApi({ Person: { queryName: 'GetUser', args: { login: 'username' } } })])).toEqual([
      'spec.stitchedSchema.subschemas[0].typeMerge.Person GH_GRAPHQL_STITCHING type Person is not in GraphQLApi default/users-api',
      'spec.stitchedSchema.subschemas[0].typeMerge.Person.args.login GH_GRAPHQL_STITCHING Query.GetUser has no argument "login"',
    ]);
  });

  it('a missing subschema API is a missing reference; a stitched API cannot be a subschema', () => {
    const missing = reasons([manifests.upstream('services', [{ addr: '127.0.0.1', port: 1 }]), reviewsApi(), protoMap('reviews-proto', 'reviews.proto', REVIEWS_PROTO), stitchedApi()]);
    expect(missing).toEqual([expect.stringMatching(/^spec\.stitchedSchema\.subschemas\[0\] GH_CONFIG_MISSING_REF references GraphQLApi default\/users-api/)]);
    const nested = { ...stitchedApi(), metadata: { name: 'outer' }, spec: { stitchedSchema: { subschemas: [{ name: 'stitched-gql' }] } } };
    const statuses = loadSnapshot([...common(), stitchedApi(), nested]).statuses;
    expect(statuses.find((s) => s.name === 'outer')!.reasons.map((r) => r.message)).toEqual(['GraphQLApi default/stitched-gql is itself stitched; stitch its subschemas here instead']);
  });
});
