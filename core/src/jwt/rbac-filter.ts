import type { Diagnostic, PathSegment } from '../config/diagnostic.ts';
import { FilterStage, type FilterRequest, type FilterVerdict, type HttpFilter, type HttpFilterFactory } from '../proxy/filters/http-filter.ts';
import { fullMatcher, re2Problem } from '../proxy/routing/re2.ts';
import { claimValue } from './claims.ts';
import { JwtCodes } from './codes.ts';
import { field, fieldName } from './fields.ts';
import { JWT_METADATA, type JwtMetadata } from './jwt-filter.ts';

type Matcher = 'EXACT_STRING' | 'BOOLEAN' | 'LIST_CONTAINS' | 'REGEX_MATCH';

/** One compiled `jwtPrincipal`: every claim must match (Gloo ANDs them). */
interface Principal {
  readonly provider: string | undefined;
  readonly claims: readonly { name: string; test: (value: unknown) => boolean }[];
}

/** One compiled policy: any principal, and every permission set. */
interface Policy {
  readonly name: string;
  readonly principals: readonly Principal[];
  readonly delimiter: string | undefined;
  readonly pathPrefix: string | undefined;
  readonly methods: ReadonlySet<string> | undefined;
}

function claimTest(matcher: Matcher, expected: string): (value: unknown) => boolean {
  switch (matcher) {
    case 'BOOLEAN':
      return (value) => typeof value === 'boolean' && String(value) === expected;
    case 'LIST_CONTAINS':
      return (value) => Array.isArray(value) && value.includes(expected);
    case 'REGEX_MATCH': {
      const matches = fullMatcher(expected);
      return (value) => typeof value === 'string' && matches(value);
    }
    default:
      return (value) => value === expected;
  }
}

/**
 * Gloo's RBAC on JWT claims (Envoy's RBAC filter with an ALLOW policy set): the request passes
 * when any policy allows it; otherwise 403 `RBAC: access denied`. A policy allows when one of
 * its principals matches the verified claims (of its `provider`, or of any verified provider)
 * and the request's path and method are within its permissions.
 */
export class RbacFilter implements HttpFilter {
  readonly name = 'rbac';
  readonly stage = FilterStage.rbac;
  readonly policies: readonly Policy[];

  constructor(policies: readonly Policy[]) {
    this.policies = policies;
  }

  onRequest(request: FilterRequest): FilterVerdict {
    const claims = request.metadata.get(JWT_METADATA) as JwtMetadata | undefined;
    const url = request.req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    for (const policy of this.policies) {
      if (policy.pathPrefix !== undefined && !path.startsWith(policy.pathPrefix)) continue;
      if (policy.methods !== undefined && !policy.methods.has(request.method)) continue;
      if (policy.principals.some((p) => principalMatches(p, claims, policy.delimiter))) return undefined;
    }
    return { status: 403, code: JwtCodes.RBAC_DENIED, body: 'RBAC: access denied' };
  }
}

function principalMatches(principal: Principal, claims: JwtMetadata | undefined, delimiter: string | undefined): boolean {
  if (!claims) return false;
  const payloads = principal.provider !== undefined ? [claims[principal.provider]] : Object.values(claims);
  return payloads.some((payload) => payload !== undefined && principal.claims.every((c) => c.test(claimValue(payload, c.name, delimiter))));
}

type Settings = Record<string, unknown>;

/** Route settings replace the host's entirely (Gloo: "If provided on a route, all route settings override any vhost settings"). */
export function effectiveRbac(routeOptions: Readonly<Settings> | undefined, hostOptions: Readonly<Settings> | undefined): Settings | undefined {
  const settings = (routeOptions?.rbac ?? hostOptions?.rbac) as Settings | undefined;
  return settings && settings.disable !== true ? settings : undefined;
}

const MATCHERS = new Set(['EXACT_STRING', 'BOOLEAN', 'LIST_CONTAINS', 'REGEX_MATCH']);

/** Compiles Gloo's ExtensionSettings (already checked). */
export function compileRbac(settings: Settings): Policy[] {
  return Object.entries((settings.policies as Record<string, Settings> | undefined) ?? {}).map(([name, spec]) => {
    const permissions = spec.permissions as Settings | undefined;
    const methods = permissions?.methods as string[] | undefined;
    const delimiter = field<string>(spec, 'nestedClaimDelimiter');
    return {
      name,
      delimiter: delimiter === '' ? undefined : delimiter,
      pathPrefix: field<string>(permissions, 'pathPrefix') || undefined,
      methods: methods && methods.length > 0 ? new Set(methods.map((m) => m.toUpperCase())) : undefined,
      principals: ((spec.principals as Settings[] | undefined) ?? []).map((p) => {
        const jwt = field<Settings>(p, 'jwtPrincipal') ?? {};
        const matcher = (jwt.matcher as Matcher | undefined) ?? 'EXACT_STRING';
        return {
          provider: typeof jwt.provider === 'string' && jwt.provider !== '' ? jwt.provider : undefined,
          claims: Object.entries((jwt.claims as Record<string, string> | undefined) ?? {}).map(([claim, value]) => ({ name: claim, test: claimTest(matcher, value) })),
        };
      }),
    };
  });
}

/** Load-time checks of `rbac` on a route or virtual host. */
function checkRbac(options: Readonly<Settings>, at: (path: PathSegment[], code: string, message: string, severity?: 'error' | 'warning') => Diagnostic, path: PathSegment[]): Diagnostic[] {
  const settings = options.rbac as Settings | undefined;
  if (!settings) return [];
  const out: Diagnostic[] = [];
  const policies = (settings.policies as Record<string, Settings> | undefined) ?? {};
  if (settings.disable !== true && Object.keys(policies).length === 0) out.push(at([...path, 'rbac'], JwtCodes.CONFIG, 'no policies: every request is denied (403), as Envoy\'s RBAC with an empty ALLOW policy set', 'warning'));
  for (const [name, spec] of Object.entries(policies)) {
    ((spec.principals as Settings[] | undefined) ?? []).forEach((p, i) => {
      const jwt = field<Settings>(p, 'jwtPrincipal');
      const where = [...path, 'rbac', 'policies', name, 'principals', i, fieldName(p, 'jwtPrincipal')];
      if (!jwt) return void out.push(at(where, JwtCodes.CONFIG, 'a principal needs jwtPrincipal (the only principal Gloo supports)'));
      const matcher = (jwt.matcher as string | undefined) ?? 'EXACT_STRING';
      if (!MATCHERS.has(matcher)) return;
      for (const [claim, value] of Object.entries((jwt.claims as Record<string, string> | undefined) ?? {})) {
        if (matcher === 'BOOLEAN' && value !== 'true' && value !== 'false') out.push(at([...where, 'claims', claim], JwtCodes.CONFIG, 'with matcher BOOLEAN the value must be "true" or "false"'));
        if (matcher === 'REGEX_MATCH') {
          const problem = re2Problem(value);
          if (problem) out.push(at([...where, 'claims', claim], JwtCodes.CONFIG, `not an RE2 regular expression: ${problem}`));
        }
      }
    });
  }
  return out;
}

/** The RBAC filter factory. */
export const rbacFilterFactory: HttpFilterFactory = {
  name: 'rbac',
  check: checkRbac,
  create(context) {
    const settings = effectiveRbac(context.routeOptions, context.virtualHostOptions);
    return settings ? new RbacFilter(compileRbac(settings)) : undefined;
  },
};
