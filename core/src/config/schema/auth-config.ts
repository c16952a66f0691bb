import Type from 'typebox';
import { Duration, Name, ResourceRef, Strict, exactlyOneOf } from './common.ts';
import { OAuth2 } from './oauth2.ts';

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

/**
 * SPEC 5.3 "Per-step store": where `ctx.store` keeps its data. Redis fields follow Gloo's
 * `RedisOptions` (`host` as host:port, `db`, `poolSize`, `socketType`) and its session store's `keyPrefix`.
 */
const PluginStoreRedis = Strict(
  {
    host: Type.Optional(Type.String({ minLength: 1, maxLength: 512, pattern: '^[^/]+:[0-9]+$', description: "Gloo's RedisOptions.host: host:port of the Redis server" })),
    url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, pattern: '^rediss?://', description: 'redis://host:port[/db] or rediss:// (TLS); instead of host' })),
    db: Type.Optional(Type.Integer({ minimum: 0, maximum: 15, description: 'database number (with host)' })),
    socketType: Type.Optional(Type.Union([Type.Literal('tcp'), Type.Literal('tls')], { description: "Gloo's socketType: tls connects with TLS (verified against the system trust store, or tls.caSecretRef)" })),
    tls: Type.Optional(
      Strict({
        serverName: Type.Optional(Type.String({ minLength: 1, maxLength: 253, description: 'the name the server certificate must carry (default: the host)' })),
        caSecretRef: Type.Optional(Strict({ name: Name, namespace: Type.Optional(Name), key: Type.Optional(Type.String({ minLength: 1, maxLength: 253 })) }, { description: 'a Secret holding the CA certificate in PEM (key ca.crt by default)' })),
      }),
    ),
    secretRef: Type.Optional(Strict({ name: Name, namespace: Type.Optional(Name) }, { description: 'a Secret with the Redis password (key password) and, for ACL users, username' })),
    poolSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 16, description: 'connections per auth-server process (default 1; each pipelines)' })),
    keyPrefix: Type.Optional(Type.String({ maxLength: 256, description: 'prepended to every key; default gatehouse:plugin:<namespace>/<AuthConfig>/<step index>/<plugin>:' })),
    timeout: Type.Optional(Duration),
    failOpen: Type.Optional(Type.Boolean({ description: 'allow a request whose plugin failed because Redis was unreachable (default false: deny)' })),
  },
  exactlyOneOf(['host', 'url']),
);

const PluginStore = Strict(
  {
    memory: Type.Optional(Strict({}, { description: 'one store per auth-server process, shared by its workers (the default)' })),
    redis: Type.Optional(PluginStoreRedis),
  },
  exactlyOneOf(['memory', 'redis']),
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
  store: Type.Optional(PluginStore),
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
      allowedClientHeadersOnSuccess: Type.Optional(
        Type.Array(Type.String({ minLength: 1 }), { maxItems: 128, description: "Gatehouse extension (Envoy's HTTP ext_authz allowed_client_headers_on_success): the 200 answer's headers set on the client's response" }),
      ),
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

/*
 * Gloo's protojson accepts a field's JSON name (camelCase) and its proto name (snake_case): fields
 * are declared by their JSON names, and proto names are renamed to them before validation
 * (../proto-names.ts), which rejects a field given in both spellings.
 */

/** Gloo's `Ldap.ConnectionPool` (the proto's own names are camelCase). */
const LdapPool = Strict({
  maxSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 1024, description: 'most connections kept open (default 5)' })),
  initialSize: Type.Optional(Type.Integer({ minimum: 0, maximum: 1024, description: 'connections opened when the step is built (default 2)' })),
});

const LDAP_ADDRESS = Type.String({ minLength: 1, maxLength: 2048, description: 'host:port, or an ldap:// or ldaps:// URL' });

/** The fields `ldap` and `ldapInternal` share (Gloo's `Ldap` / `ExtAuthConfig.LdapConfig`). */
const ldapFields = {
  address: LDAP_ADDRESS,
  userDnTemplate: Type.Optional(Type.String({ maxLength: 1024, description: 'the user\'s DN with one "%s" for the (escaped) username, e.g. uid=%s,ou=people,dc=solo,dc=io' })),
  membershipAttributeName: Type.Optional(Type.String({ maxLength: 256, description: 'the attribute listing the entry\'s groups (default memberOf)' })),
  allowedGroups: Type.Optional(Type.Array(Type.String({ maxLength: 1024 }), { maxItems: 256 })),
  pool: Type.Optional(LdapPool),
  searchFilter: Type.Optional(Type.String({ maxLength: 1024, description: 'the filter of the base-scope search of the user entry (default (uid=*))' })),
  disableGroupChecking: Type.Optional(Type.Boolean()),
};

/** Gloo's `LdapServiceAccount`: the service account's credentials in a Secret (`username`, `password`). */
const LdapServiceAccount = Strict({
  credentialsSecretRef: Type.Optional(ResourceRef),
  checkGroupsWithServiceAccount: Type.Optional(Type.Boolean()),
});

/** Gloo's internal `LdapServiceAccountConfig`: the credentials inline. */
const LdapServiceAccountInline = Strict({
  username: Type.String({ minLength: 1, maxLength: 1024 }),
  password: Type.String({ minLength: 1, maxLength: 1024 }),
  checkGroupsWithServiceAccount: Type.Optional(Type.Boolean()),
});

/** Gloo's `Ldap`: Basic credentials checked by binding to an LDAP server, then group membership. */
const Ldap = Strict({
  ...ldapFields,
  groupLookupSettings: Type.Optional(LdapServiceAccount),
});

/** Gloo's `ExtAuthConfig.LdapConfig` (`ldapInternal`): as `ldap`, with the service account's credentials inline. */
const LdapInternal = Strict({
  ...ldapFields,
  groupLookupSettings: Type.Optional(LdapServiceAccountInline),
});

/** Gloo's `SecretRefList`. */
const SecretRefList = Strict({
  secretRefs: Type.Array(ResourceRef, { minItems: 1, maxItems: 1024 }),
});

/** Gloo's `HmacAuth`: request signatures (draft-cavage HTTP signatures, HMAC) with keys from credentials Secrets. */
const HmacAuth = Strict({
  secretRefs: SecretRefList,
  parametersInHeaders: Type.Optional(Strict({})),
});

/** Gloo's `OpaAuthOptions`. */
const OpaAuthOptions = Strict({
  fastInputConversion: Type.Optional(Type.Boolean()),
  returnDecisionReason: Type.Optional(Type.Boolean()),
});

/** Gloo's `OpaAuth`: Rego modules from ConfigMaps, evaluated in the auth server. */
const OpaAuth = Strict({
  modules: Type.Optional(Type.Array(ResourceRef, { maxItems: 64 })),
  query: Type.String({ minLength: 1, maxLength: 4096, description: 'e.g. data.test.allow == true' }),
  options: Type.Optional(OpaAuthOptions),
});

/** Gloo's `OpaServerAuth`: a decision from an OPA server's Data API. */
const OpaServerAuth = Strict({
  package: Type.String({ minLength: 1, maxLength: 1024, description: 'the Rego package, e.g. test or authz.http' }),
  ruleName: Type.Optional(Type.String({ maxLength: 1024 })),
  serverAddr: Type.Optional(Type.String({ maxLength: 2048, description: 'host:port or an http(s) URL of the OPA server (default http://localhost:8181, the sidecar)' })),
  options: Type.Optional(OpaAuthOptions),
});

const AuthStep = Strict(
  {
    name: Type.Optional(Type.String()),
    basicAuth: Type.Optional(BasicAuth),
    pluginAuth: Type.Optional(PluginAuth),
    passThroughAuth: Type.Optional(PassThroughAuth),
    apiKeyAuth: Type.Optional(ApiKeyAuth),
    ldap: Type.Optional(Ldap),
    ldapInternal: Type.Optional(LdapInternal),
    hmacAuth: Type.Optional(HmacAuth),
    opaAuth: Type.Optional(OpaAuth),
    opaServerAuth: Type.Optional(OpaServerAuth),
    // Gloo's `jwt: {}`: allows when the JWT filter (jwtStaged.beforeExtAuth) verified a token (core/src/extauth/jwt).
    jwt: Type.Optional(Strict({})),
    oauth2: Type.Optional(OAuth2),
  },
  exactlyOneOf(['basicAuth', 'pluginAuth', 'passThroughAuth', 'apiKeyAuth', 'ldap', 'ldapInternal', 'hmacAuth', 'opaAuth', 'opaServerAuth', 'jwt', 'oauth2']),
);

/** SPEC 3.4: ordered auth steps. */
export const AuthConfigSpec = Strict({
  configs: Type.Array(AuthStep, { minItems: 1 }),
  booleanExpr: Type.Optional(
    Type.String({ minLength: 1, maxLength: 4096, description: "Gloo's booleanExpr: which named steps must allow, e.g. `basic1 || (plugin2 && !plugin3)`; evaluated left to right with short-circuiting. Without it, every step must allow." }),
  ),
  failOnRedirect: Type.Optional(Type.Boolean({ description: "Gloo's failOnRedirect: an OIDC step answers 401 instead of redirecting to the provider's login" })),
});
export type AuthConfigSpec = Type.Static<typeof AuthConfigSpec>;
export type AuthStepSpec = AuthConfigSpec['configs'][number];
export type BasicAuthSpec = NonNullable<AuthStepSpec['basicAuth']>;
export type PluginAuthSpec = NonNullable<AuthStepSpec['pluginAuth']>;
export type PassThroughAuthSpec = NonNullable<AuthStepSpec['passThroughAuth']>;
export type ApiKeyAuthSpec = NonNullable<AuthStepSpec['apiKeyAuth']>;
export type LdapSpec = NonNullable<AuthStepSpec['ldap']>;
export type LdapInternalSpec = NonNullable<AuthStepSpec['ldapInternal']>;
export type HmacAuthSpec = NonNullable<AuthStepSpec['hmacAuth']>;
export type OpaAuthSpec = NonNullable<AuthStepSpec['opaAuth']>;
export type OpaServerAuthSpec = NonNullable<AuthStepSpec['opaServerAuth']>;
export type OAuth2Spec = NonNullable<AuthStepSpec['oauth2']>;
