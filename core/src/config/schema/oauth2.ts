import Type, { type TSchema } from 'typebox';
import { Duration, Ignored, ResourceRef, Strict } from './common.ts';

/*
 * Gloo's `OAuth2` AuthConfig step (extauth.proto: OidcAuthorizationCode, AccessTokenValidation,
 * UserSession, RedisOptions, HeaderConfiguration, DiscoveryOverride, ClaimToHeader, ...). Fields
 * are declared by their JSON names (camelCase); a manifest's proto names (snake_case), which Gloo's
 * protojson also reads, are renamed to them before validation (../proto-names.ts), which also
 * rejects a field given in both spellings. Fields Gatehouse does not honour are marked `Ignored`: setting one gives a
 * warning naming it (../checks/ignored-fields.ts).
 */

/** `fooBar` → `foo_bar`. */
export function protoName(jsonName: string): string {
  return jsonName.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** A closed object of optional fields, by their JSON names. */
function Proto(fields: Record<string, TSchema>, description?: string): TSchema {
  const props: Record<string, TSchema> = {};
  for (const [name, schema] of Object.entries(fields)) props[name] = Type.Optional(schema);
  return Strict(props, description ? { description } : {});
}

const Url = Type.String({ maxLength: 2048 });
const Text = Type.String({ maxLength: 1024 });
const HeaderName = Type.String({ maxLength: 256 });
const Params = Type.Record(Type.String({ minLength: 1, maxLength: 256 }), Type.String({ maxLength: 2048 }), { maxProperties: 64 });
const Strings = Type.Array(Text, { maxItems: 128 });
const Empty = Strict({});
const UInt32 = Type.Union([Type.Integer({ minimum: 0, maximum: 4_294_967_295 }), Type.String({ pattern: '^[0-9]{1,10}$' })]);

/** Gloo's `ClaimToHeader`. */
const ClaimToHeader = Strict({ claim: Type.String({ minLength: 1, maxLength: 256 }), header: HeaderName, append: Type.Optional(Type.Boolean()) });
const ClaimsToHeaders = Type.Array(ClaimToHeader, { maxItems: 64 });

/** Gloo's `RedisOptions`. */
const RedisOptions = Proto({
  host: Type.String({ minLength: 1, maxLength: 1024, description: 'host:port of the Redis server' }),
  db: Type.Integer({ minimum: 0, maximum: 15 }),
  poolSize: Type.Integer({ minimum: 0, maximum: 1024 }),
  tlsCertMountPath: Ignored(Text, 'TLS to Redis is verified against the system trust store'),
  socketType: Type.Union([Type.Literal('TCP'), Type.Literal('TLS'), Type.Integer({ minimum: 0, maximum: 1 })]),
});

const SameSite = Type.Union([Type.Literal('DefaultMode'), Type.Literal('LaxMode'), Type.Literal('StrictMode'), Type.Literal('NoneMode'), Type.Integer({ minimum: 0, maximum: 3 })]);

/** Gloo's `UserSession`. */
const UserSession = Proto({
  failOnFetchFailure: Type.Boolean(),
  cookieOptions: Proto({
    maxAge: UInt32,
    notSecure: Type.Boolean(),
    httpOnly: Type.Boolean(),
    path: Type.String({ maxLength: 1024 }),
    sameSite: SameSite,
    domain: Type.String({ maxLength: 253 }),
  }),
  cookie: Proto({ allowRefreshing: Type.Boolean(), keyPrefix: Type.String({ maxLength: 128, pattern: "^[!#$%&'*+.^`|~0-9A-Za-z_-]*$" }), targetDomain: Type.String({ maxLength: 253 }) }),
  redis: Proto({
    options: RedisOptions,
    keyPrefix: Type.String({ maxLength: 256 }),
    cookieName: Type.String({ maxLength: 128, pattern: "^[!#$%&'*+.^`|~0-9A-Za-z_-]*$" }),
    allowRefreshing: Type.Boolean(),
    preExpiryBuffer: Duration,
    targetDomain: Type.String({ maxLength: 253 }),
    headerName: Ignored(HeaderName, 'the session id is not sent to the token endpoint'),
  }),
  cipherConfig: Proto({ keyRef: ResourceRef }),
});

/** Gloo's `HeaderConfiguration`. */
const HeaderConfiguration = Proto({ idTokenHeader: HeaderName, accessTokenHeader: HeaderName, useBearerSchemaForAuthorization: Type.Boolean() });

/** Gloo's `DiscoveryOverride`. */
const DiscoveryOverride = Proto({
  authEndpoint: Url,
  tokenEndpoint: Url,
  jwksUri: Url,
  scopes: Ignored(Strings, 'informational'),
  responseTypes: Ignored(Strings, 'informational'),
  subjects: Ignored(Strings, 'informational'),
  idTokenAlgs: Ignored(Strings, 'ID tokens are verified with the algorithms of the JWKS keys'),
  authMethods: Strings,
  claims: Ignored(Strings, 'informational'),
  revocationEndpoint: Url,
  endSessionEndpoint: Url,
});

const Azure = Ignored(Proto({ clientId: Text, tenantId: Text, clientSecret: ResourceRef, claimsCachingOptions: RedisOptions }), 'Microsoft Entra distributed claims are not fetched');

/** Gloo's `OidcAuthorizationCode`. */
export const OidcAuthorizationCode = Proto({
  clientId: Type.String({ maxLength: 1024 }),
  clientSecretRef: ResourceRef,
  issuerUrl: Url,
  authEndpointQueryParams: Params,
  tokenEndpointQueryParams: Params,
  appUrl: Url,
  callbackPath: Type.String({ maxLength: 1024 }),
  logoutPath: Type.String({ maxLength: 1024 }),
  afterLogoutUrl: Url,
  scopes: Strings,
  session: UserSession,
  headers: HeaderConfiguration,
  discoveryOverride: DiscoveryOverride,
  discoveryPollInterval: Duration,
  jwksCacheRefreshPolicy: Proto({ never: Empty, always: Empty, maxIdpReqPerPollingInterval: UInt32 }),
  sessionIdHeaderName: Ignored(HeaderName, 'the session id is not sent to the token endpoint'),
  parseCallbackPathAsRegex: Ignored(Type.Boolean(), 'callbackPath is matched exactly'),
  autoMapFromMetadata: Ignored(Proto({ namespace: Text }), 'Gatehouse has no dynamic metadata'),
  endSessionProperties: Strict({ methodType: Type.Optional(Type.Union([Type.Literal('GetMethod'), Type.Literal('PostMethod'), Type.Integer({ minimum: 0, maximum: 1 })])) }),
  dynamicMetadataFromClaims: Ignored(Params, 'Gatehouse has no dynamic metadata; use identityToken.claimsToHeaders'),
  disableClientSecret: Type.Boolean(),
  accessToken: Proto({ claimsToHeaders: ClaimsToHeaders }),
  identityToken: Proto({ claimsToHeaders: ClaimsToHeaders }),
  clientAuthentication: Proto({
    clientSecret: Proto({ clientSecretRef: ResourceRef, disableClientSecret: Type.Boolean() }),
    privateKeyJwt: Proto({ signingKeyRef: ResourceRef, validFor: Duration }),
  }),
  default: Empty,
  azure: Azure,
  frontChannelLogout: Ignored(Proto({ path: Type.String({ maxLength: 1024 }) }), 'front-channel logout is not served; use logoutPath'),
});

/** Gloo's `AccessTokenValidation`. */
export const AccessTokenValidation = Proto({
  introspectionUrl: Url,
  jwt: Proto({
    remoteJwks: Proto({ url: Url, refreshInterval: Duration }),
    localJwks: Proto({ inlineString: Type.String({ maxLength: 262_144 }) }),
    issuer: Url,
    audiences: Strings,
  }),
  introspection: Proto({ introspectionUrl: Url, clientId: Text, clientSecretRef: ResourceRef, userIdAttributeName: Text, disableClientSecret: Type.Boolean() }),
  userinfoUrl: Url,
  cacheTimeout: Duration,
  requiredScopes: Strict({ scope: Type.Optional(Strings) }),
  dynamicMetadataFromClaims: Ignored(Params, 'Gatehouse has no dynamic metadata; use claimsToHeaders'),
  claimsToHeaders: ClaimsToHeaders,
  default: Empty,
  azure: Azure,
});

/** Gloo's `OAuth2` step: `oidcAuthorizationCode` or `accessTokenValidation` (exactly one). */
export const OAuth2 = Proto(
  { oidcAuthorizationCode: OidcAuthorizationCode, accessTokenValidation: AccessTokenValidation },
  'OIDC authorization code flow, or access-token validation (Gloo extauth.proto OAuth2)',
);

/** Every Secret an `oauth2` step references, with its path under `oauth2` (either spelling, as written). */
export function oauth2SecretRefs(spec: Record<string, unknown>): { ref: { name: string; namespace?: string }; path: string[] }[] {
  const out: { ref: { name: string; namespace?: string }; path: string[] }[] = [];
  const walk = (node: unknown, path: string[], names: string[][]) => {
    if (names.length === 0) {
      const ref = node as { name?: unknown; namespace?: string } | undefined;
      if (ref && typeof ref.name === 'string') out.push({ ref: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) }, path });
      return;
    }
    if (typeof node !== 'object' || node === null) return;
    const [first, ...rest] = names;
    const key = first![0]!;
    for (const spelling of [key, protoName(key)]) {
      if ((node as Record<string, unknown>)[spelling] !== undefined) walk((node as Record<string, unknown>)[spelling], [...path, spelling], rest);
      if (spelling === protoName(key)) break;
    }
  };
  const paths = [
    ['oidcAuthorizationCode', 'clientSecretRef'],
    ['oidcAuthorizationCode', 'clientAuthentication', 'clientSecret', 'clientSecretRef'],
    ['oidcAuthorizationCode', 'session', 'cipherConfig', 'keyRef'],
    ['accessTokenValidation', 'introspection', 'clientSecretRef'],
  ];
  for (const p of paths) walk(spec, [], p.map((n) => [n]));
  return out;
}
