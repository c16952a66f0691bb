/**
 * GraphQL inside the gateway (SPEC 3.3): GraphQLApi resources compiled into executable
 * schemas at load time, served over HTTP with REST, gRPC and mock resolvers or forwarded
 * to a remote GraphQL server.
 */
import type { Diagnostic } from '../config/diagnostic.ts';
import type { Resource } from '../config/resource.ts';
import type { CheckContext } from '../config/store.ts';
import { compileApi } from './schema.ts';

export { createGraphQLEndpoints, type GraphQLEndpointsOptions } from './endpoints.ts';
export { GraphQLConfigCodes, FieldErrorCodes } from './errors.ts';
export type { ExecutionEngine } from './endpoint.ts';

/** The load-time check of a GraphQLApi (`ResourceChecks.GraphQLApi`): the schema builds, resolvers exist, templates and paths parse. */
export function checkGraphQLApi(resource: Resource<'GraphQLApi'>, ctx: CheckContext): Diagnostic[] {
  return compileApi(resource).problems.map((p) => ctx.at(p.path, p.code, p.message, p.severity));
}
