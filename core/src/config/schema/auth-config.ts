import Type from 'typebox';
import { Duration, Name, ResourceRef, Strict, exactlyOneOf } from './common.ts';

const HashedUsers = Type.Record(
  Type.String({ minLength: 1 }),
  Strict({
    salt: Type.String(),
    hashedPassword: Type.String({ minLength: 1 }),
  }),
);

/** SPEC 5.1: legacy (`apr.users`) and extended (`encryption` + `userList`) forms. */
const BasicAuth = Strict(
  {
    realm: Type.Optional(Type.String()),
    apr: Type.Optional(Strict({ users: HashedUsers })),
    encryption: Type.Optional(
      Strict(
        {
          apr: Type.Optional(Strict({})),
          sha1: Type.Optional(Strict({})),
        },
        exactlyOneOf(['apr', 'sha1']),
      ),
    ),
    userList: Type.Optional(Strict({ users: HashedUsers })),
  },
  {
    oneOf: [{ required: ['apr'], not: { anyOf: [{ required: ['encryption'] }, { required: ['userList'] }] } }, { required: ['encryption', 'userList'], not: { required: ['apr'] } }],
    'x-gatehouse-message': 'use either the legacy form (apr.users) or the extended form (encryption + userList)',
  },
);

/** SPEC 5.3 "Egress": one origin a plugin may fetch, by URL or as an Upstream. */
const EgressEntry = Strict(
  {
    url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, pattern: '^[Hh][Tt][Tt][Pp][Ss]?://', description: 'an http(s) URL; its origin may be fetched' })),
    upstreamRef: Type.Optional(ResourceRef),
  },
  exactlyOneOf(['url', 'upstreamRef']),
);

/** SPEC 5.2, 5.3. */
const PluginAuth = Strict({
  name: Type.String({ minLength: 1 }),
  pluginFileName: Type.Optional(Type.String({ minLength: 1 })),
  exportedSymbolName: Type.Optional(Type.String({ minLength: 1 })),
  config: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  egress: Type.Optional(Type.Array(EgressEntry, { maxItems: 64, description: 'where the plugin may fetch: URL origins and Upstreams (http://<name>.<namespace>.upstream)' })),
  secretRefs: Type.Optional(
    Type.Record(
      Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,63}$' }),
      Strict({
        name: Name,
        namespace: Type.Optional(Name),
        key: Type.String({ minLength: 1, maxLength: 253, pattern: '^[-._a-zA-Z0-9]+$' }),
      }),
      { maxProperties: 32, description: 'Secret values the plugin reads as ctx.secrets.<NAME>' },
    ),
  ),
});

/** Gloo's PassThroughGrpc. */
const PassThroughGrpc = Strict({
  address: Type.String({ pattern: '^[^:]+:[0-9]+$', description: 'host:port of an Envoy ext_authz v3 gRPC server' }),
  connectionTimeout: Type.Optional(Duration),
  tlsConfig: Type.Optional(Strict({}, { description: 'present: TLS to the server, verified against the system trust store (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH when set)' })),
  retryPolicy: Type.Optional(
    Strict({
      retryBackOff: Type.Optional(Strict({ baseInterval: Type.Optional(Duration), maxInterval: Type.Optional(Duration) })),
      numRetries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10 })),
    }),
  ),
});

/** Gloo's PassThroughHttp. */
const PassThroughHttp = Strict({
  url: Type.String({ minLength: 1, maxLength: 2048, pattern: '^[Hh][Tt][Tt][Pp][Ss]?://', description: 'the auth server; requests are POSTed here (its path is kept)' }),
  request: Type.Optional(
    Strict({
      allowedHeaders: Type.Optional(Type.Array(Type.String({ minLength: 1, pattern: '^[^:]' }), { maxItems: 128 })),
      headersToAdd: Type.Optional(Type.Record(Type.String({ minLength: 1, pattern: '^[^:]' }), Type.String())),
      passThroughState: Type.Optional(Type.Boolean()),
      passThroughFilterMetadata: Type.Optional(Type.Boolean()),
      passThroughBody: Type.Optional(Type.Boolean()),
    }),
  ),
  response: Type.Optional(
    Strict({
      allowedUpstreamHeaders: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 128 })),
      allowedClientHeadersOnDenied: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 128 })),
      readStateFromResponse: Type.Optional(Type.Boolean()),
    }),
  ),
  connectionTimeout: Type.Optional(Duration),
});

/** Gloo's PassThroughAuth: the user's own auth server, over gRPC (ext_authz v3) or HTTP. */
const PassThroughAuth = Strict(
  {
    grpc: Type.Optional(PassThroughGrpc),
    http: Type.Optional(PassThroughHttp),
    config: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'passed with every check (gRPC: filter_metadata "solo.auth.passthrough.config"; HTTP: the body\'s "config")' })),
    failureModeAllow: Type.Optional(Type.Boolean({ description: 'allow the request when the server cannot be reached, times out or fails (default: deny)' })),
  },
  exactlyOneOf(['grpc', 'http']),
);

const HeaderName = Type.String({ minLength: 1, maxLength: 256, pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" });
const LabelSelector = Type.Record(Type.String({ minLength: 1 }), Type.String(), { description: 'Secrets whose labels include all of these' });
const ApiKeySecretRefs = Type.Array(ResourceRef, { maxItems: 1024, description: 'Secrets holding one API key each (key `api-key`; other keys are its metadata)' });

/** Gloo's ApiKeyAuth with Kubernetes Secret storage (its top-level form and k8sSecretApikeyStorage). */
const ApiKeyAuth = Strict({
  headerName: Type.Optional(HeaderName),
  labelSelector: Type.Optional(LabelSelector),
  apiKeySecretRefs: Type.Optional(ApiKeySecretRefs),
  k8sSecretApikeyStorage: Type.Optional(Strict({ labelSelector: Type.Optional(LabelSelector), apiKeySecretRefs: Type.Optional(ApiKeySecretRefs) })),
  headersFromMetadata: Type.Optional(Type.Record(HeaderName, Type.String({ minLength: 1 }), { description: "Gloo's older form: header name → metadata key" })),
  headersFromMetadataEntry: Type.Optional(Type.Record(HeaderName, Strict({ name: Type.String({ minLength: 1 }), required: Type.Optional(Type.Boolean()) }))),
});

const AuthStep = Strict(
  {
    name: Type.Optional(Type.String()),
    basicAuth: Type.Optional(BasicAuth),
    pluginAuth: Type.Optional(PluginAuth),
    passThroughAuth: Type.Optional(PassThroughAuth),
    apiKeyAuth: Type.Optional(ApiKeyAuth),
  },
  exactlyOneOf(['basicAuth', 'pluginAuth', 'passThroughAuth', 'apiKeyAuth']),
);

/** SPEC 3.4: ordered auth steps. */
export const AuthConfigSpec = Strict({
  configs: Type.Array(AuthStep, { minItems: 1 }),
  booleanExpr: Type.Optional(
    Type.String({ minLength: 1, maxLength: 4096, description: "Gloo's booleanExpr: which named steps must allow, e.g. `basic1 || (plugin2 && !plugin3)`; evaluated left to right with short-circuiting. Without it, every step must allow." }),
  ),
});
export type AuthConfigSpec = Type.Static<typeof AuthConfigSpec>;
export type AuthStepSpec = AuthConfigSpec['configs'][number];
export type BasicAuthSpec = NonNullable<AuthStepSpec['basicAuth']>;
export type PluginAuthSpec = NonNullable<AuthStepSpec['pluginAuth']>;
export type PassThroughAuthSpec = NonNullable<AuthStepSpec['passThroughAuth']>;
export type ApiKeyAuthSpec = NonNullable<AuthStepSpec['apiKeyAuth']>;
