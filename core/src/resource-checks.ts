import type { ResourceChecks } from './config/check-context.ts';
import type { Kind } from './config/schema/kinds.ts';

/**
 * The load-time checks of every subsystem, gathered in one place so that the gateway,
 * the auth server and `gatehouse validate` reach the same verdicts. Each is imported only
 * when a document of its kind is present: the GraphQL engine alone costs ~17 MB of memory.
 */
const LOADERS: { [K in Kind]?: () => Promise<NonNullable<ResourceChecks[K]>> } = {
  GraphQLApi: async () => (await import('./graphql/index.ts')).checkGraphQLApi,
  AuthConfig: async () => (await import('./extauth/checks.ts')).checkAuthConfig,
  RateLimitConfig: async () => (await import('./ratelimit/checks.ts')).checkRateLimitConfig,
  // The per-route filters' option checks (transformations, JWT, rate limits…): the proxy's, not config's.
  VirtualService: async () => (await import('./proxy/filters/checks.ts')).checkFilterOptions,
  RouteTable: async () => (await import('./proxy/filters/checks.ts')).checkFilterOptions,
  VirtualHostOption: async () => (await import('./proxy/filters/checks.ts')).checkFilterOptions,
  RouteOption: async () => (await import('./proxy/filters/checks.ts')).checkFilterOptions,
  Gateway: async () => (await import('./server/gateway-checks.ts')).checkGateway,
};

/** The checks for the kinds present in a load. */
export async function resourceChecks(kinds: Iterable<string>): Promise<ResourceChecks> {
  const checks: Record<string, unknown> = {};
  for (const kind of new Set(kinds)) {
    const load = LOADERS[kind as Kind];
    if (load) checks[kind] = await load();
  }
  return checks as ResourceChecks;
}
