/**
 * GraphQL inside the gateway (SPEC 3.3): GraphQLApi resources compiled into executable
 * schemas at load time, served over HTTP with REST, gRPC and mock resolvers or forwarded
 * to a remote GraphQL server.
 */
import type { Diagnostic } from '../config/diagnostic.ts';
import type { Resource } from '../config/resource.ts';
import type { CheckContext } from '../config/store.ts';
import { GraphQLConfigCodes } from './compile/errors.ts';
import { compileApi } from './compile/schema.ts';

export { createGraphQLEndpoints, type GraphQLEndpointsOptions } from './execute/endpoints.ts';
export { GraphQLConfigCodes, FieldErrorCodes } from './compile/errors.ts';
export type { ExecutionEngine } from './execute/endpoint.ts';

/** The load-time check of a GraphQLApi (`ResourceChecks.GraphQLApi`): the schema builds, resolvers exist, templates and paths parse. */
export function checkGraphQLApi(resource: Resource<'GraphQLApi'>, ctx: CheckContext): Diagnostic[] {
  const configMap = (ref: { name: string; namespace?: string }) => ctx.resources.get(`ConfigMap/${ref.namespace ?? resource.namespace}/${ref.name}`) as Resource<'ConfigMap'> | undefined;
  const api = (ref: { name: string; namespace?: string }) => ctx.resources.get(`GraphQLApi/${ref.namespace ?? resource.namespace}/${ref.name}`) as Resource<'GraphQLApi'> | undefined;
  const out = compileApi(resource, { file: resource.source.file, configMap, api }).problems.map((p) => ctx.at(p.path, p.code, p.message, p.severity));
  // A manifest written for Gloo is told where Gatehouse behaves differently.
  const maxDepth = resource.spec.executableSchema?.executor.local?.options?.maxDepth;
  if (maxDepth !== undefined && resource.apiVersion.includes('.solo.io/')) {
    out.push(
      ctx.at(
        ['spec', 'executableSchema', 'executor', 'local', 'options', 'maxDepth'],
        GraphQLConfigCodes.IGNORED,
        `an operation nested deeper than ${maxDepth} is refused as a whole (400, before any resolver runs), where Gloo runs it and answers null with an error for each field past the depth`,
        'warning',
      ),
    );
  }
  return out;
}
