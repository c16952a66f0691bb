import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSnapshot, manifests, serveGraphQL, type GraphQLServer } from './support.ts';

const COMMON_PROTO = `
syntax = "proto3";
package common.v1;
message Money { string currency = 1; int64 units = 2; }
`;

const USERS_PROTO = `
syntax = "proto3";
package users.v1;
import "common/v1/common.proto";
enum Tier { TIER_UNSPECIFIED = 0; SILVER = 1; GOLD = 2; }
message GetUserRequest { string user_id = 1; }
message User {
  string user_id = 1;
  string display_name = 2;
  int64 karma = 3;
  common.v1.Money balance = 4;
  repeated string tags = 5;
  Tier tier = 6;
  string friend_id = 7;
}
service UserService {
  rpc GetUser(GetUserRequest) returns (User);
  rpc SlowUser(GetUserRequest) returns (User);
  rpc WatchUsers(GetUserRequest) returns (stream User);
}
`;

const USERS: Record<string, object> = {
  u1: { user_id: 'u1', display_name: 'Ada', karma: '9007199254740993', balance: { currency: 'EUR', units: 42 }, tags: ['admin', 'ops'], tier: 'GOLD', friend_id: 'u2' },
  u2: { user_id: 'u2', display_name: 'Brian', karma: 0, tags: [], tier: 'TIER_UNSPECIFIED', friend_id: '' },
};

/** Writes the protos, runs protoc (--include_imports) and starts a real gRPC server with reflection. */
async function startUserService() {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-grpc-'));
  await mkdir(join(dir, 'common/v1'), { recursive: true });
  await writeFile(join(dir, 'common/v1/common.proto'), COMMON_PROTO);
  await writeFile(join(dir, 'users.proto'), USERS_PROTO);
  execFileSync('protoc', [`-I${dir}`, '--include_imports', `--descriptor_set_out=${join(dir, 'users.pb')}`, 'users.proto'], { cwd: dir });
  const descriptorBase64 = (await readFile(join(dir, 'users.pb'))).toString('base64');

  const definition = protoLoader.loadSync('users.proto', { includeDirs: [dir], keepCase: true, longs: String, enums: String, defaults: true });
  const service = (grpc.loadPackageDefinition(definition) as any).users.v1.UserService.service as grpc.ServiceDefinition;
  const metadataSeen: string[] = [];
  const server = new grpc.Server();
  server.addService(service, {
    GetUser(call: grpc.ServerUnaryCall<{ user_id: string }, object>, callback: grpc.sendUnaryData<object>) {
      metadataSeen.push(String(call.metadata.get('x-caller')[0] ?? ''));
      const user = USERS[call.request.user_id];
      if (!user) return callback({ code: grpc.status.NOT_FOUND, details: `no user ${call.request.user_id}` });
      callback(null, user);
    },
    SlowUser(_call: unknown, callback: grpc.sendUnaryData<object>) {
      setTimeout(() => callback(null, USERS.u1!), 500);
    },
    WatchUsers(call: grpc.ServerWritableStream<unknown, object>) {
      call.end();
    },
  });
  new ReflectionService(definition).addToServer(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, p) => (error ? reject(error) : resolve(p))),
  );
  return {
    port,
    descriptorBase64,
    descriptorFile: join(dir, 'users.pb'),
    metadataSeen,
    async close() {
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

const SDL = /* GraphQL */ `
  type Query {
    user(id: ID!): User @resolve(name: "user")
    slowUser: User @resolve(name: "slow")
  }
  type User {
    user_id: ID!
    display_name: String
    karma: String
    balance: Money
    tags: [String]
    tier: String
    friend: User @resolve(name: "friend")
  }
  type Money { currency: String units: String }
`;

/** A GraphQLApi over the user service; `registry` is its grpcDescriptorRegistry (a base64 descriptor set for short), none for reflection. */
function grpcApi(name: string, registry: string | object | undefined, overrides: Record<string, unknown> = {}) {
  const call = (methodName: string, outgoingMessageJson: object, extra: object = {}) => ({
    grpcResolver: { upstreamRef: { name: 'users-grpc' }, requestTransform: { serviceName: 'users.v1.UserService', methodName, outgoingMessageJson, requestMetadata: { 'x-caller': 'gatehouse' } }, ...extra },
  });
  return manifests.graphqlApi(name, {
    schemaDefinition: SDL,
    executor: {
      local: {
        resolutions: {
          user: call('GetUser', { user_id: '{$args.id}' }),
          friend: call('GetUser', { user_id: '{$parent.friend_id}' }),
          slow: call('SlowUser', { user_id: 'u1' }, { timeout: '100ms' }),
          ...overrides,
        },
      },
    },
    ...(registry ? { grpcDescriptorRegistry: typeof registry === 'string' ? { protoDescriptorBin: registry } : registry } : {}),
  });
}

const ADA = {
  user_id: 'u1',
  display_name: 'Ada',
  karma: '9007199254740993',
  balance: { currency: 'EUR', units: '42' },
  tags: ['admin', 'ops'],
  tier: 'GOLD',
};

describe('grpcResolver', () => {
  let users: Awaited<ReturnType<typeof startUserService>>;
  const upstream = () => manifests.upstream('users-grpc', [{ addr: '127.0.0.1', port: users.port }]);

  beforeAll(async () => {
    users = await startUserService();
  });
  afterAll(async () => {
    await users?.close();
  });

  // The .proto sources in a ConfigMap (Gloo's protoRefsList), keys as Kubernetes allows them.
  const protoConfigMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'user-protos' }, data: { 'users.proto': USERS_PROTO, 'common.proto': COMMON_PROTO } };
  describe.each([
    ['descriptor set from protoc (protoDescriptorBin)', 'bin'],
    ['descriptor set file from protoc (protoDescriptor)', 'file'],
    ['.proto sources in a ConfigMap (protoRefsList)', 'configmap'],
    ['server reflection', 'reflection'],
  ] as const)('with %s', (_label, source) => {
    let gql: GraphQLServer;
    beforeAll(async () => {
      const registry =
        source === 'bin' ? users.descriptorBase64 : source === 'file' ? { protoDescriptor: users.descriptorFile } : source === 'configmap' ? { protoRefsList: { protoRefs: [{ name: 'user-protos' }] } } : undefined;
      gql = await serveGraphQL([upstream(), ...(source === 'configmap' ? [protoConfigMap] : []), grpcApi('users', registry)], 'users');
    });
    afterAll(async () => {
      await gql?.close();
    });

    it('calls the method with the templated message and metadata; the response is proto3 JSON with proto field names', async () => {
      const before = users.metadataSeen.length;
      const { status, body } = await gql.post('{ user(id: "u1") { user_id display_name karma balance { currency units } tags tier friend { user_id display_name karma balance { currency } tags tier } } }');
      expect(status).toBe(200);
      expect(body).toEqual({
        data: { user: { ...ADA, friend: { user_id: 'u2', display_name: 'Brian', karma: '0', balance: null, tags: [], tier: 'TIER_UNSPECIFIED' } } },
      });
      expect(users.metadataSeen.slice(before)).toEqual(['gatehouse', 'gatehouse']);
    });

    it('turns gRPC status errors and deadlines into field errors', async () => {
      const { status, body } = await gql.post('{\n  user(id: "nobody") { user_id }\n  slowUser { user_id }\n}');
      expect(status).toBe(200);
      body.errors.sort((a: { path: string[] }, b: { path: string[] }) => a.path[0]!.localeCompare(b.path[0]!));
      expect(body).toEqual({
        data: { user: null, slowUser: null },
        errors: [
          {
            message: 'the upstream service did not answer in time',
            locations: [{ line: 3, column: 3 }],
            path: ['slowUser'],
            extensions: { code: 'UPSTREAM_TIMEOUT', grpc: { status: 4 } },
          },
          {
            message: 'the upstream service failed',
            locations: [{ line: 2, column: 3 }],
            path: ['user'],
            extensions: { code: 'UPSTREAM_ERROR', grpc: { status: 5 } },
          },
        ],
      });
      // The status detail is the upstream's own text: masked for the client, logged with the request id (issue 25 finding 3).
      const logged = await gql.gateway!.waitForLog((l) => l.msg === 'GraphQL field error (masked for the client)' && String(l.detail).includes('NOT_FOUND: no user nobody'), 10_000);
      expect(logged.reqId).toBeTruthy();
    });
  });

  it('rejects at load time a descriptor file that cannot be read, a .proto source that does not parse and a missing ConfigMap, naming the field', () => {
    const reasons = (docs: object[], name: string) => loadSnapshot([upstream(), ...docs]).statuses.find((s) => s.name === name)!.reasons.map((r) => `${r.path} ${r.code} ${r.message}`);
    expect(reasons([grpcApi('nofile', { protoDescriptor: '/nonexistent/users.pb' })], 'nofile')).toEqual([
      'spec.executableSchema.grpcDescriptorRegistry.protoDescriptor GH_GRAPHQL_BAD_DESCRIPTOR cannot read /nonexistent/users.pb: ENOENT',
    ]);
    const broken = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'broken' }, data: { 'users.proto': 'syntax = "proto3"; message {' } };
    expect(reasons([broken, grpcApi('badproto', { protoRefsList: { protoRefs: [{ name: 'broken' }] } })], 'badproto')).toEqual([
      expect.stringMatching(/^spec\.executableSchema\.grpcDescriptorRegistry\.protoRefsList GH_GRAPHQL_BAD_DESCRIPTOR broken\/users\.proto does not parse: /),
    ]);
    expect(reasons([grpcApi('nomap', { protoRefsList: { protoRefs: [{ name: 'ghost' }] } })], 'nomap')).toEqual([
      expect.stringMatching(/^spec\.executableSchema\.grpcDescriptorRegistry\.protoRefsList\.protoRefs\[0\] GH_CONFIG_MISSING_REF references ConfigMap default\/ghost/),
    ]);
  });

  it('rejects at load time an unknown method, a streaming method and an unknown message field, with their paths', () => {
    const snapshot = loadSnapshot([
      upstream(),
      grpcApi('bad', users.descriptorBase64, {
        user: { grpcResolver: { upstreamRef: { name: 'users-grpc' }, requestTransform: { serviceName: 'users.v1.UserService', methodName: 'GetUsr' } } },
        friend: { grpcResolver: { upstreamRef: { name: 'users-grpc' }, requestTransform: { serviceName: 'users.v1.UserService', methodName: 'WatchUsers' } } },
        slow: { grpcResolver: { upstreamRef: { name: 'users-grpc' }, requestTransform: { serviceName: 'users.v1.UserService', methodName: 'GetUser', outgoingMessageJson: { userId: '{$args.id}' } } } },
      }),
    ]);
    const status = snapshot.statuses.find((s) => s.name === 'bad')!;
    expect(status.state).toBe('Rejected');
    expect(status.reasons.map((r) => [r.path, r.code, r.message])).toEqual([
      ['spec.executableSchema.executor.local.resolutions.user.grpcResolver.requestTransform.methodName', 'GH_GRAPHQL_UNKNOWN_GRPC_SYMBOL', 'service "users.v1.UserService" has no method "GetUsr"; it has GetUser, SlowUser, WatchUsers'],
      ['spec.executableSchema.executor.local.resolutions.friend.grpcResolver.requestTransform.methodName', 'GH_GRAPHQL_UNKNOWN_GRPC_SYMBOL', 'users.v1.UserService/WatchUsers is a streaming method; only unary methods can resolve a field'],
      ['spec.executableSchema.executor.local.resolutions.slow.grpcResolver.requestTransform.outgoingMessageJson.userId', 'GH_GRAPHQL_UNKNOWN_GRPC_SYMBOL', 'users.v1.GetUserRequest has no field "userId"; its fields are user_id'],
    ]);
  });

  it('rejects a protoDescriptorBin that is not a FileDescriptorSet', () => {
    const snapshot = loadSnapshot([upstream(), grpcApi('garbage', Buffer.from('definitely not protobuf').toString('base64'))]);
    const status = snapshot.statuses.find((s) => s.name === 'garbage')!;
    expect(status.state).toBe('Rejected');
    expect(status.reasons.map((r) => [r.path, r.code])).toEqual([['spec.executableSchema.grpcDescriptorRegistry.protoDescriptorBin', 'GH_GRAPHQL_BAD_DESCRIPTOR']]);
  });
});
