import Type, { type TProperties, type TSchema } from 'typebox';
import { Duration, Ignored, ResourceRef, Strict } from './common.ts';

/**
 * Gloo Enterprise's JWT and RBAC options (`jwt.options.gloo.solo.io`, `rbac.options.gloo.solo.io`)
 * by their JSON names; a manifest's proto names (`claims_to_headers`) are renamed to these before
 * validation (../proto-names.ts), so each field is declared once.
 */

/** `camel`, optional. */
function opt<S extends TSchema>(camel: string, schema: S): TProperties {
  return { [camel]: Type.Optional(schema) };
}

/** A protojson enum, by name (as manifests write them). */
function protoEnum(names: readonly string[]) {
  return Type.Union(names.map((n) => Type.Literal(n)));
}

const RemoteJwks = Strict({
  url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, description: 'where the JWKS is fetched; with upstreamRef, its path and Host' })),
  ...opt('upstreamRef', ResourceRef),
  ...opt('cacheDuration', Duration),
  ...opt('asyncFetch', Strict({ ...opt('fastListener', Ignored(Type.Boolean(), 'the listener never waits for the first JWKS fetch (as fastListener: true)')) })),
});

const Jwks = Strict({
  remote: Type.Optional(RemoteJwks),
  local: Type.Optional(Strict({ key: Type.String({ minLength: 1, maxLength: 1_048_576, description: 'a JWK, a JWKS or a PEM public key' }) })),
});

const TokenSource = Strict({
  headers: Type.Optional(Type.Array(Strict({ header: Type.String({ minLength: 1, maxLength: 256 }), prefix: Type.Optional(Type.String({ maxLength: 256 })) }), { maxItems: 32 })),
  ...opt('queryParams', Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 32 })),
});

const ClaimToHeader = Strict({
  claim: Type.String({ minLength: 1, maxLength: 256 }),
  header: Type.String({ minLength: 1, maxLength: 256 }),
  append: Type.Optional(Type.Boolean()),
});

/** Gloo's `jwt.options.gloo.solo.io.Provider`. */
export const JwtProvider = Strict({
  jwks: Jwks,
  audiences: Type.Optional(Type.Array(Type.String(), { maxItems: 256 })),
  issuer: Type.Optional(Type.String()),
  ...opt('tokenSource', TokenSource),
  ...opt('keepToken', Type.Boolean()),
  ...opt('claimsToHeaders', Type.Array(ClaimToHeader, { maxItems: 64 })),
  ...opt('clockSkewSeconds', Type.Integer({ minimum: 0, maximum: 4_294_967_295 })),
  ...opt('attachFailedStatusToMetadata', Ignored(Type.String(), 'the failure status is in the access log and the x-gatehouse-error header, not in dynamic metadata')),
});

/** Gloo's `VhostExtension`: named providers (any one may verify the request) and what a request without a valid token gets. */
export const JwtVhostExtension = Strict({
  providers: Type.Optional(Type.Record(Type.String({ minLength: 1, maxLength: 253 }), JwtProvider, { maxProperties: 64 })),
  ...opt('allowMissingOrFailedJwt', Type.Boolean()),
  ...opt('validationPolicy', protoEnum(['REQUIRE_VALID', 'ALLOW_MISSING', 'ALLOW_MISSING_OR_FAILED'])),
});

/** Gloo's route `RouteExtension`: `disable` turns the virtual host's JWT check off for the route. */
export const JwtRouteExtension = Strict({ disable: Type.Optional(Type.Boolean()) });

export const JwtStagedVhostExtension = Strict({ ...opt('beforeExtAuth', JwtVhostExtension), ...opt('afterExtAuth', JwtVhostExtension) });
export const JwtStagedRouteExtension = Strict({ ...opt('beforeExtAuth', JwtRouteExtension), ...opt('afterExtAuth', JwtRouteExtension) });

const Principal = Strict({
  ...opt(
    'jwtPrincipal',
    Strict({
      claims: Type.Optional(Type.Record(Type.String({ minLength: 1, maxLength: 256 }), Type.String({ maxLength: 4096 }), { maxProperties: 64 })),
      provider: Type.Optional(Type.String()),
      matcher: Type.Optional(protoEnum(['EXACT_STRING', 'BOOLEAN', 'LIST_CONTAINS', 'REGEX_MATCH'])),
    }),
  ),
});

/** Gloo's `rbac.options.gloo.solo.io.ExtensionSettings`. */
export const RbacSettings = Strict({
  disable: Type.Optional(Type.Boolean()),
  policies: Type.Optional(
    Type.Record(
      Type.String({ minLength: 1, maxLength: 253 }),
      Strict({
        principals: Type.Optional(Type.Array(Principal, { maxItems: 256 })),
        permissions: Type.Optional(Strict({ ...opt('pathPrefix', Type.String()), methods: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 32 })) })),
        ...opt('nestedClaimDelimiter', Type.String({ maxLength: 8 })),
      }),
      { maxProperties: 256 },
    ),
  ),
});

/** The virtual host options (`jwt`, `jwtStaged`, `rbac`). */
export const JwtVirtualHostOptions = {
  jwt: Type.Optional(JwtVhostExtension),
  jwtStaged: Type.Optional(JwtStagedVhostExtension),
  rbac: Type.Optional(RbacSettings),
};
/** The route options (`jwt`, `jwtStaged`, `jwtProvidersStaged`, `rbac`). */
export const JwtRouteOptions = {
  jwt: Type.Optional(JwtRouteExtension),
  jwtStaged: Type.Optional(JwtStagedRouteExtension),
  jwtProvidersStaged: Type.Optional(JwtStagedVhostExtension),
  rbac: Type.Optional(RbacSettings),
};

export type JwtProviderSpec = Type.Static<typeof JwtProvider>;
export type JwtVhostExtensionSpec = Type.Static<typeof JwtVhostExtension>;
export type RbacSettingsSpec = Type.Static<typeof RbacSettings>;
