import type { AuthDecision, AuthStep, CheckRequest } from '../step.ts';

/** Envoy's name for the JWT filter's dynamic metadata (where the verified claims ride in the CheckRequest). */
export const JWT_FILTER_METADATA = 'envoy.filters.http.jwt_authn';

/**
 * Gloo's `jwt: {}` AuthConfig step: a placeholder for "the JWT filter verified a token", so JWT
 * can take part in a chain or `booleanExpr` (e.g. `jwt || basic`). It reads what the filter
 * left in the CheckRequest (`metadata_context.filter_metadata["envoy.filters.http.jwt_authn"]`,
 * claims by provider): allowed when at least one provider verified, 401 otherwise. The filter
 * must run before external auth with failures allowed through (`jwtStaged.beforeExtAuth` with
 * `allowMissingOrFailedJwt` or `validationPolicy: ALLOW_MISSING_OR_FAILED`), as Gloo requires.
 */
export class JwtStep implements AuthStep {
  readonly type = 'jwt';
  readonly name: string;

  constructor(options: { name: string }) {
    this.name = options.name;
  }

  async authorize(request: CheckRequest): Promise<AuthDecision> {
    const verified = request.attributes.metadata_context?.filter_metadata?.[JWT_FILTER_METADATA];
    if (verified && typeof verified === 'object' && Object.values(verified).some((claims) => claims && typeof claims === 'object')) {
      return { allowed: true, headersToSet: [], headersToRemove: [] };
    }
    return { allowed: false, status: 401, headers: [], body: '' };
  }
}
