import Type from 'typebox';
import { Duration, ResourceRef, Strict, exactlyOneOf } from './common.ts';

const StringMap = Type.Record(Type.String(), Type.String());

const RestResolver = Strict({
  upstreamRef: ResourceRef,
  request: Type.Optional(
    Strict({
      headers: Type.Optional(StringMap),
      queryParams: Type.Optional(StringMap),
      body: Type.Optional(Type.Unknown()),
    }),
  ),
  response: Type.Optional(
    Strict({
      resultRoot: Type.Optional(Type.String()),
      setters: Type.Optional(StringMap),
    }),
  ),
  timeout: Type.Optional(Duration),
  spanName: Type.Optional(Type.String()),
});

const GrpcResolver = Strict({
  upstreamRef: ResourceRef,
  requestTransform: Strict({
    serviceName: Type.String({ minLength: 1 }),
    methodName: Type.String({ minLength: 1 }),
    outgoingMessageJson: Type.Optional(Type.Unknown()),
    requestMetadata: Type.Optional(StringMap),
  }),
  timeout: Type.Optional(Duration),
  spanName: Type.Optional(Type.String()),
});

const MockResolver = Strict(
  {
    syncResponse: Type.Optional(Type.Unknown()),
    errorResponse: Type.Optional(Type.String()),
  },
  exactlyOneOf(['syncResponse', 'errorResponse']),
);

const Resolution = Strict(
  {
    restResolver: Type.Optional(RestResolver),
    grpcResolver: Type.Optional(GrpcResolver),
    mockResolver: Type.Optional(MockResolver),
    statPrefix: Type.Optional(Type.String()),
  },
  exactlyOneOf(['restResolver', 'grpcResolver', 'mockResolver']),
);

/** SPEC 3.3.1 (extension): every field optional, each defaulting to core/src/graphql/limits/limits.ts DEFAULT_LIMITS. */
const Limits = Strict({
  maxDepth: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000, description: 'field nesting (default 15; executor.local.options.maxDepth, Gloo, is the same limit)' })),
  maxAliases: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, description: 'aliased fields, fragments expanded (default 30)' })),
  maxTokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'lexical tokens of the document (default 2000)' })),
  maxDirectives: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, description: 'directive uses, fragments expanded (default 50)' })),
  maxRootFields: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, description: 'fields at the top of an operation (default 20)' })),
  maxCost: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000_000, description: 'operation cost: each field 1, each resolver field 10, times list sizes (default 5000)' })),
  defaultListSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, description: 'items assumed for a list field without a first/last/limit/pageSize/count/take literal (default 10)' })),
  maxResponseBytes: Type.Optional(Type.Integer({ minimum: 1024, maximum: 1024 * 1024 * 1024, description: 'bytes of the JSON response (default 16 MiB)' })),
  maxUpstreamCalls: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000, description: 'upstream calls per operation, after dedup (default 100)' })),
  maxBufferedBytes: Type.Optional(Type.Integer({ minimum: 1024, maximum: 1024 * 1024 * 1024, description: 'bytes of upstream answers one operation holds (default 32 MiB)' })),
  maxOperationTime: Type.Optional(Duration),
  maxVariableDepth: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000, description: 'nesting of the JSON variables (default 32)' })),
  maxBatchSize: Type.Optional(Type.Integer({ minimum: 0, maximum: 100, description: 'operations in one batched request (a JSON array body; default 10; 0 refuses batches)' })),
  maxSubscriptionsPerConnection: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000, description: 'operations one graphql-ws connection runs at once (default 10)' })),
  maxMessageBytes: Type.Optional(Type.Integer({ minimum: 1024, maximum: 16 * 1024 * 1024, description: 'bytes of one message from a graphql-ws client (default 64 KiB)' })),
  subscriptionIdleTimeout: Type.Optional(Duration),
});

const LocalExecutor = Strict({
  enableIntrospection: Type.Optional(Type.Boolean()),
  options: Type.Optional(Strict({ maxDepth: Type.Optional(Type.Integer({ minimum: 1 })) })),
  resolutions: Type.Optional(Type.Record(Type.String(), Resolution)),
});

const RemoteExecutor = Strict({
  upstreamRef: ResourceRef,
  headers: Type.Optional(StringMap),
  queryParams: Type.Optional(StringMap),
  path: Type.Optional(Type.String({ pattern: '^/' })),
  spanName: Type.Optional(Type.String()),
  timeout: Type.Optional(Duration),
  responseHeaders: Type.Optional(Type.Array(Type.String({ pattern: '^[!#$%&\'*+.^_`|~0-9A-Za-z-]+$', description: 'an upstream response header name' }), { maxItems: 64, description: 'upstream response headers passed to the client besides set-cookie and cache-control' })),
  enableIntrospection: Type.Optional(Type.Boolean({ description: 'forward __schema/__type queries to the upstream (default true); false refuses them at the gateway' })),
  subscriptionProtocol: Type.Optional(Type.Union([Type.Literal('sse'), Type.Literal('graphql-ws')], { description: 'how subscriptions reach the upstream: GraphQL over SSE (default) or graphql-ws over WebSocket, at the same path' })),
});

/** SPEC 3.3. */
export const GraphQLApiSpec = Strict({
  statPrefix: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'the `api` label of this API\'s metrics (default namespace/name)' })),
  persistedQueryCacheConfig: Type.Optional(Strict({ cacheSize: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, description: 'queries kept (default 1000)' })) })),
  allowedQueryHashes: Type.Optional(Type.Array(Type.String({ pattern: '^[0-9a-fA-F]{64}$', description: 'SHA-256 of an allowed query text, hex' }), { maxItems: 100_000 })),
  options: Type.Optional(
    Strict({
      logSensitiveInfo: Type.Optional(Type.Boolean({ description: 'log each operation\'s query and variables at debug level (off by default: they may hold personal data)' })),
      includeUpstreamErrors: Type.Optional(Type.Boolean({ description: 'send upstream error details to clients unmasked (off by default; for development)' })),
    }),
  ),
  limits: Type.Optional(Limits),
  stitchedSchema: Type.Optional(
    Strict({
      enableIntrospection: Type.Optional(Type.Boolean({ description: 'answer __schema/__type on the stitched API (default: true when every subschema enables introspection)' })),
      subschemas: Type.Array(
        Strict({
          name: Type.String({ minLength: 1 }),
          namespace: Type.Optional(Type.String({ minLength: 1 })),
          typeMerge: Type.Optional(
            Type.Record(
              Type.String({ minLength: 1 }),
              Strict({
                selectionSet: Type.Optional(Type.String({ description: 'key fields needed from other subschemas, e.g. "{ username }"' })),
                queryName: Type.String({ minLength: 1, description: 'the root Query field of this subschema that returns the type' }),
                args: Type.Optional(Type.Record(Type.String({ minLength: 1 }), Type.String({ minLength: 1 }), { description: 'argument path → path in the object to merge' })),
              }),
            ),
          ),
        }),
        { minItems: 1, maxItems: 64 },
      ),
    }),
  ),
  executableSchema: Type.Optional(Strict({
    schemaDefinition: Type.String({ minLength: 1 }),
    executor: Strict(
      {
        local: Type.Optional(LocalExecutor),
        remote: Type.Optional(RemoteExecutor),
      },
      exactlyOneOf(['local', 'remote']),
    ),
    grpcDescriptorRegistry: Type.Optional(
      Strict(
        {
          protoDescriptorBin: Type.Optional(Type.String({ minLength: 1, description: 'base64 FileDescriptorSet' })),
          protoDescriptor: Type.Optional(Type.String({ minLength: 1, description: 'path of a FileDescriptorSet file (protoc --include_imports --descriptor_set_out); relative paths from the manifest\'s directory' })),
          protoRefsList: Type.Optional(Strict({ protoRefs: Type.Array(ResourceRef, { minItems: 1, maxItems: 256, description: 'ConfigMaps whose values are .proto sources' }) })),
        },
        exactlyOneOf(['protoDescriptorBin', 'protoDescriptor', 'protoRefsList']),
      ),
    ),
  })),
}, exactlyOneOf(['executableSchema', 'stitchedSchema']));
export type GraphQLApiSpec = Type.Static<typeof GraphQLApiSpec>;
export type ResolutionSpec = Type.Static<typeof Resolution>;
export type RestResolverSpec = Type.Static<typeof RestResolver>;
export type GrpcResolverSpec = Type.Static<typeof GrpcResolver>;
export type MockResolverSpec = Type.Static<typeof MockResolver>;
export type GraphQLLimitsSpec = Type.Static<typeof Limits>;
export type LocalExecutorSpec = Type.Static<typeof LocalExecutor>;
export type RemoteExecutorSpec = Type.Static<typeof RemoteExecutor>;
export type StitchedSchemaSpec = NonNullable<GraphQLApiSpec['stitchedSchema']>;
export type ExecutableSchemaSpec = NonNullable<GraphQLApiSpec['executableSchema']>;
