import { GraphQLError } from 'graphql';

/** Load-time diagnostic codes of GraphQLApi resources (stable). */
export const GraphQLConfigCodes = {
  /** The SDL does not parse or does not build into a valid schema. */
  SCHEMA: 'GH_GRAPHQL_SCHEMA',
  /** The schema has no `Query` type. */
  NO_QUERY: 'GH_GRAPHQL_NO_QUERY',
  /** `@resolve(name:)` names a key missing from `resolutions`. */
  UNKNOWN_RESOLVER: 'GH_GRAPHQL_UNKNOWN_RESOLVER',
  /** A resolution no field uses (warning). */
  UNUSED_RESOLVER: 'GH_GRAPHQL_UNUSED_RESOLVER',
  /** A template (`{$args.id}`) that does not parse or uses a source not available there. */
  BAD_TEMPLATE: 'GH_GRAPHQL_BAD_TEMPLATE',
  /** A path (`a.b[0]`, `a[*].b`) that does not parse. */
  BAD_PATH: 'GH_GRAPHQL_BAD_PATH',
  /** `protoDescriptorBin` is not a base64 FileDescriptorSet. */
  BAD_DESCRIPTOR: 'GH_GRAPHQL_BAD_DESCRIPTOR',
  /** The gRPC service or method is not in the descriptor set, or the message has no such field. */
  UNKNOWN_GRPC_SYMBOL: 'GH_GRAPHQL_UNKNOWN_GRPC_SYMBOL',
  /** A setting the executor ignores (warning). */
  IGNORED: 'GH_GRAPHQL_IGNORED',
  /** A stitchedSchema whose subschemas or type merging cannot work (a missing type or query, a nested stitched API). */
  STITCHING: 'GH_GRAPHQL_STITCHING',
  /** A template or setter that can only ever resolve to nothing (warning): an argument the field lacks, a parent field the type lacks. */
  EMPTY_PATH: 'GH_GRAPHQL_EMPTY_PATH',
  /** A timeout that would never expire (0). */
  BAD_TIMEOUT: 'GH_GRAPHQL_BAD_TIMEOUT',
} as const;

/** `extensions.code` of field errors (SPEC 3.3, execution semantics). */
export const FieldErrorCodes = {
  UPSTREAM_ERROR: 'UPSTREAM_ERROR',
  UPSTREAM_TIMEOUT: 'UPSTREAM_TIMEOUT',
  BAD_UPSTREAM_RESPONSE: 'BAD_UPSTREAM_RESPONSE',
  /** A template in `:path` resolved to an empty path segment (SPEC 3.3, templates). */
  EMPTY_PATH_SEGMENT: 'EMPTY_PATH_SEGMENT',
  /** A template in `:path` resolved to a `.` or `..` segment, which would change the path's structure. */
  INVALID_PATH_SEGMENT: 'INVALID_PATH_SEGMENT',
  /** A `mockResolver.errorResponse`. */
  MOCK_ERROR: 'MOCK_ERROR',
} as const;

/** A field error with `extensions.code` (graphql-js adds `path` and `locations`). */
export function fieldError(code: string, message: string, extra?: Record<string, unknown>): GraphQLError {
  return new GraphQLError(message, { extensions: { code, ...extra } });
}

/** A load-time problem at a field path inside the GraphQLApi; turned into a Diagnostic by the check. */
export interface Problem {
  readonly path: readonly (string | number)[];
  readonly code: string;
  readonly message: string;
  readonly severity: 'error' | 'warning';
}
