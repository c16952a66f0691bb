import type { ResourceChecks } from './store.ts';

/**
 * The load-time checks of every subsystem, gathered in one place so that the gateway,
 * the auth server and `gatehouse validate` reach the same verdicts.
 */
export async function resourceChecks(): Promise<ResourceChecks> {
  const [{ checkGraphQLApi }, { checkAuthConfig }] = await Promise.all([import('../graphql/index.ts'), import('../extauth/checks.ts')]);
  return { GraphQLApi: checkGraphQLApi, AuthConfig: checkAuthConfig };
}
