import type { Diagnostic, PathSegment } from './diagnostic.ts';
import type { AnyResource, Resource } from './resource.ts';
import type { Kind } from './schema/kinds.ts';

/** Context given to a kind-specific check. */
export interface CheckContext {
  /** Served resources so far (kinds are checked in dependency order). */
  readonly resources: ReadonlyMap<string, AnyResource>;
  /**
   * Every RouteTable this load may serve (its new version, else its last accepted one), fixed for
   * the whole load: RouteTables are checked against it, so their verdicts do not depend on the
   * order they are checked in, and what is computed over it is computed once per load.
   */
  readonly routeTables?: ReadonlyMap<string, AnyResource>;
  /** A diagnostic located at `path` inside the checked resource. */
  at(path: readonly PathSegment[], code: string, message: string, severity?: 'error' | 'warning'): Diagnostic;
}

/**
 * Extra checks per kind, run at load time after schema and reference checks
 * (e.g. the GraphQL module compiles the schema; a failure rejects the resource).
 */
export type ResourceChecks = { [K in Kind]?: (resource: Resource<K>, ctx: CheckContext) => Diagnostic[] };
