import type { ResourceChecks } from './store.ts';

/**
 * The load-time checks of every subsystem, gathered in one place so that the gateway,
 * the auth server and `gatehouse validate` reach the same verdicts.
 */
export async function resourceChecks(): Promise<ResourceChecks> {
  const { checkGraphQLApi } = await import('../graphql/index.ts');
  return { GraphQLApi: checkGraphQLApi };
}
