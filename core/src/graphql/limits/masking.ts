import type { GraphQLError, GraphQLFormattedError } from 'graphql';
import { FieldErrorCodes } from '../compile/errors.ts';
import { LimitCodes } from './limits.ts';

/**
 * Error masking (SPEC 3.3.1, issue 25 finding 3): what an upstream said about itself (its
 * address, a query parameter holding a key, a gRPC status detail naming a database user) stays
 * in the gateway's log, with the request id; the client gets a generic message and a stable
 * `extensions.code`. `options.includeUpstreamErrors: true` turns masking off (development).
 */

/** Messages a client gets instead of an upstream's own words, by `extensions.code`. */
const GENERIC: Readonly<Record<string, string>> = {
  [FieldErrorCodes.UPSTREAM_ERROR]: 'the upstream service failed',
  [FieldErrorCodes.UPSTREAM_TIMEOUT]: 'the upstream service did not answer in time',
  [FieldErrorCodes.BAD_UPSTREAM_RESPONSE]: 'the upstream service answered with something the gateway cannot use',
};

/** Codes whose message the gateway wrote from configuration or the request only: never masked. */
const KEPT = new Set<string>([FieldErrorCodes.EMPTY_PATH_SEGMENT, FieldErrorCodes.MOCK_ERROR, FieldErrorCodes.INVALID_PATH_SEGMENT, ...Object.values(LimitCodes)]);

/** The generic message of an internal error (a resolver that threw something unexpected). */
export const INTERNAL_MESSAGE = 'internal error while resolving the field';

/**
 * The errors as the client sees them: upstream and unexpected errors with a generic message
 * (`path`, `locations`, `extensions.code` and `extensions.http.status` kept); `log` gets each
 * original. Errors without a code from a request with data are unexpected (resolver bugs), so
 * masked too; errors of a request without data (variable coercion) describe the request and stay.
 */
export function maskErrors(errors: readonly GraphQLError[], hasData: boolean, log: (original: GraphQLError) => void): GraphQLFormattedError[] | readonly GraphQLError[] {
  let masked: GraphQLFormattedError[] | undefined;
  for (let i = 0; i < errors.length; i++) {
    const error = errors[i]!;
    const code = typeof error.extensions?.code === 'string' ? error.extensions.code : undefined;
    if (code !== undefined ? KEPT.has(code) || !(code in GENERIC) : !hasData || error.path === undefined) continue;
    masked ??= errors.map((e) => (typeof e.toJSON === 'function' ? e.toJSON() : { message: String(e.message) }));
    log(error);
    const http = (error.extensions?.http as { status?: unknown } | undefined)?.status;
    const grpc = (error.extensions?.grpc as { status?: unknown } | undefined)?.status;
    masked[i] = {
      message: code !== undefined ? GENERIC[code]! : INTERNAL_MESSAGE,
      ...(error.locations ? { locations: error.locations } : {}),
      ...(error.path ? { path: error.path } : {}),
      extensions: {
        code: code ?? 'INTERNAL_ERROR',
        ...(typeof http === 'number' ? { http: { status: http } } : {}),
        ...(typeof grpc === 'number' ? { grpc: { status: grpc } } : {}),
      },
    };
  }
  return masked ?? errors;
}
