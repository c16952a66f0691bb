import { ConfigCodes, type PathSegment } from './diagnostic.ts';
import type { AnyResource, Resource } from './resource.ts';
import type { DelegateActionSpec, MatcherSpec, RouteSpec } from './schema/virtual-service.ts';

/**
 * Gloo's route delegation (`delegateAction` + RouteTable), flattened: the routes a virtual host
 * serves, in order, each with the resource it came from (its references resolve in that
 * resource's namespace). Shared by the load-time checks and the route table, so both see the
 * same tree.
 *
 * Rules (Gloo's): a delegating route matches on prefixes only; every path matcher of a delegated
 * route starts with each of those prefixes (a route without matchers takes the parent's); with
 * `inheritableMatchers` (inherited down the tree) delegated routes also get the parent's
 * headers, methods and query parameters; a delegated route without its own `options` field gets
 * the parent's, field by field. A selector takes tables in ascending `weight`, then by
 * namespace/name.
 */

/** One served route after delegation. */
export interface FlatRoute {
  /** The route with inherited matchers and options applied. */
  readonly spec: RouteSpec;
  /** The VirtualService or RouteTable that holds it. */
  readonly owner: Resource<'VirtualService'> | Resource<'RouteTable'>;
  /** Its index in the owner's routes. */
  readonly index: number;
}

export interface DelegationProblem {
  /** Path inside the resource being checked (the root of the walk). */
  readonly path: PathSegment[];
  readonly code: string;
  readonly severity: 'error' | 'warning';
  readonly message: string;
}

/** The RouteTables a walk can see. */
export interface RouteTables {
  get(key: string): Resource<'RouteTable'> | undefined;
  all(): Iterable<Resource<'RouteTable'>>;
}

/** The served RouteTables of a resource map, with `extra` (the table being checked) visible too. */
export function routeTablesOf(resources: ReadonlyMap<string, AnyResource>, extra?: Resource<'RouteTable'>): RouteTables {
  let list: Resource<'RouteTable'>[] | undefined;
  return {
    get: (key) => (extra && key === extra.key ? extra : (resources.get(key) as Resource<'RouteTable'> | undefined)),
    all: () => (list ??= [...resources.values()].filter((r): r is Resource<'RouteTable'> => r.kind === 'RouteTable' && r.key !== extra?.key).concat(extra ? [extra] : [])),
  };
}

interface Parent {
  readonly prefixes: readonly string[];
  readonly matchers: readonly MatcherSpec[];
  readonly inheritable: boolean;
  readonly options: RouteSpec['options'];
  /** `RouteTable ns/name` chain for messages. */
  readonly chain: readonly string[];
}

/**
 * Flattens the routes of `root` (a VirtualService's, or a RouteTable's checked on its own).
 * Problems are located at the root's delegating route (`…routes[i].delegateAction`), and name the
 * table and route they are about. Routes breaking the prefix rule are left out (warning); a
 * cycle is an error and the looping delegation contributes nothing.
 */
export function flattenRoutes(root: Resource<'VirtualService'> | Resource<'RouteTable'>, tables: RouteTables): { routes: FlatRoute[]; problems: DelegationProblem[] } {
  const routes: FlatRoute[] = [];
  const problems: DelegationProblem[] = [];
  const rootRoutes = root.kind === 'VirtualService' ? root.spec.virtualHost.routes : root.spec.routes;
  const rootPath: PathSegment[] = root.kind === 'VirtualService' ? ['spec', 'virtualHost', 'routes'] : ['spec', 'routes'];
  const walk = (list: readonly RouteSpec[], owner: FlatRoute['owner'], parent: Parent | undefined, at: PathSegment[] | undefined, stack: readonly string[]) => {
    list.forEach((original, index) => {
      // Problems inside a delegated table are reported at the root's delegating route.
      const here = at ?? [...rootPath, index];
      const where = parent ? `${describe(owner)} routes[${index}]` : undefined;
      let spec = original;
      if (parent) {
        const own: readonly MatcherSpec[] = spec.matchers && spec.matchers.length > 0 ? spec.matchers : parent.prefixes.map((prefix) => ({ prefix }));
        const outside = own.flatMap((m, j) => {
          const path = m.prefix ?? m.exact ?? m.regex ?? '/';
          const bad = parent.prefixes.find((p) => !path.startsWith(p));
          return bad === undefined ? [] : [`matchers[${j}] "${path}" does not start with the delegating prefix "${bad}"`];
        });
        if (outside.length > 0) {
          problems.push({ path: [...here, 'delegateAction'], code: ConfigCodes.DELEGATION, severity: 'warning', message: `${where}: ${outside.join('; ')}: the route is not served (Gloo: routes of a RouteTable must start with the prefix that delegates to it)` });
          return;
        }
        const matchers = parent.inheritable ? own.flatMap((m) => parent.matchers.map((pm) => inheritMatcher(m, pm))) : own;
        // Gloo: a delegated route without options of its own inherits its parent's, field by field.
        const options = parent.options ? { ...parent.options, ...spec.options } : spec.options;
        spec = { ...spec, matchers: [...matchers], ...(options ? { options } : {}) };
      }
      const delegate = spec.delegateAction;
      if (!delegate) {
        routes.push({ spec, owner, index });
        return;
      }
      const matchers: readonly MatcherSpec[] = spec.matchers && spec.matchers.length > 0 ? spec.matchers : [{ prefix: '/' }];
      // Delegating matchers are checked on their own resource (checkDelegatingRoute); here, only prefixes count.
      if (matchers.some((m) => m.exact !== undefined || m.regex !== undefined)) return;
      const next: Parent = {
        prefixes: matchers.map((m) => m.prefix ?? '/'),
        matchers,
        inheritable: spec.inheritableMatchers ?? parent?.inheritable ?? false,
        options: spec.options,
        chain: [...(parent?.chain ?? [describe(owner)])],
      };
      const delegatePath = at ?? [...rootPath, index];
      const selected = selectTables(delegate, owner.namespace, tables);
      const label = where ? `${where}: ` : '';
      if (selected.missing) {
        problems.push({ path: [...delegatePath, 'delegateAction'], code: ConfigCodes.MISSING_REF, severity: 'warning', message: `${label}${selected.missing}: no routes are served under ${next.prefixes.map((p) => `"${p}"`).join(', ')}` });
      }
      for (const tie of selected.ties) {
        problems.push({ path: [...delegatePath, 'delegateAction', 'selector'], code: ConfigCodes.IGNORED, severity: 'warning', message: `${label}RouteTables ${tie} have the same weight: their routes are taken in namespace/name order (Gloo sorts such routes by path specificity instead)` });
      }
      for (const table of selected.tables) {
        if (table.key === root.key || stack.includes(table.key)) {
          const loop = [...stack.map((k) => k.replace('/', ' ')), table.key.replace('/', ' ')].join(' → ');
          problems.push({ path: [...delegatePath, 'delegateAction'], code: ConfigCodes.DELEGATION_CYCLE, severity: 'error', message: `${label}delegation cycle: ${loop}` });
          continue;
        }
        walk(table.spec.routes, table, { ...next, chain: [...next.chain, describe(table)] }, delegatePath, [...stack, table.key]);
      }
    });
  };
  walk(rootRoutes, root, undefined, undefined, [root.key]);
  return { routes, problems };
}

/** A delegating route's own matchers: prefixes only, and headers/methods/query only with inheritableMatchers (Gloo). */
export function checkDelegatingRoute(route: RouteSpec, inheritable: boolean): { path: PathSegment[]; message: string }[] {
  if (!route.delegateAction) return [];
  const out: { path: PathSegment[]; message: string }[] = [];
  route.matchers?.forEach((m, j) => {
    const kind = m.exact !== undefined ? 'exact' : m.regex !== undefined ? 'regex' : undefined;
    if (kind) out.push({ path: ['matchers', j, kind], message: `a route with delegateAction must match on a prefix, not ${kind} (Gloo)` });
    const extra = (['headers', 'methods', 'queryParameters'] as const).filter((f) => m[f] !== undefined && m[f]!.length > 0);
    if (extra.length > 0 && !(route.inheritableMatchers ?? inheritable)) {
      out.push({ path: ['matchers', j, extra[0]!], message: `${extra.join(', ')} on a delegating route apply only with inheritableMatchers: true (then the delegated routes must match them too)` });
    }
  });
  return out;
}

/** The parent's headers, methods and query parameters added to a delegated route's matcher. */
function inheritMatcher(child: MatcherSpec, parent: MatcherSpec): MatcherSpec {
  const headers = [...(parent.headers ?? []), ...(child.headers ?? [])];
  const queryParameters = [...(parent.queryParameters ?? []), ...(child.queryParameters ?? [])];
  const methods = child.methods ?? parent.methods;
  return { ...child, ...(headers.length ? { headers } : {}), ...(queryParameters.length ? { queryParameters } : {}), ...(methods ? { methods } : {}) };
}

function describe(r: { kind: string; namespace: string; name: string }): string {
  return `${r.kind} ${r.namespace}/${r.name}`;
}

/** The tables a delegateAction names or selects, in Gloo's order. */
export function selectTables(delegate: DelegateActionSpec, fromNamespace: string, tables: RouteTables): { tables: Resource<'RouteTable'>[]; missing?: string; ties: string[] } {
  if (delegate.ref || delegate.name) {
    const name = delegate.ref?.name ?? delegate.name!;
    const namespace = delegate.ref ? (delegate.ref.namespace ?? fromNamespace) : (delegate.namespace ?? fromNamespace);
    const table = tables.get(`RouteTable/${namespace}/${name}`);
    return table ? { tables: [table], ties: [] } : { tables: [], missing: `references RouteTable ${namespace}/${name}, which does not exist or is not accepted`, ties: [] };
  }
  const selector = delegate.selector!;
  const namespaces = selector.namespaces && selector.namespaces.length > 0 ? selector.namespaces : [fromNamespace];
  const picked = [...tables.all()]
    .filter((t) => namespaces.includes('*') || namespaces.includes(t.namespace))
    .filter((t) => Object.entries(selector.labels ?? {}).every(([k, v]) => t.labels[k] === v))
    .filter((t) => (selector.expressions ?? []).every((e) => expressionHolds(e, t.labels)))
    .sort((a, b) => (a.spec.weight ?? 0) - (b.spec.weight ?? 0) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const ties: string[] = [];
  for (let i = 1; i < picked.length; i++) {
    if ((picked[i]!.spec.weight ?? 0) === (picked[i - 1]!.spec.weight ?? 0)) ties.push(`${picked[i - 1]!.namespace}/${picked[i - 1]!.name} and ${picked[i]!.namespace}/${picked[i]!.name}`);
  }
  return picked.length > 0 ? { tables: picked, ties } : { tables: [], missing: 'the selector matches no accepted RouteTable', ties };
}

/** Gloo's RouteTableSelector.Expression (Kubernetes label requirements). */
function expressionHolds(e: { key: string; operator?: string | undefined; values?: readonly string[] | undefined }, labels: Readonly<Record<string, string>>): boolean {
  const value = labels[e.key];
  const values = e.values ?? [];
  switch (e.operator ?? 'Equals') {
    case 'Equals':
    case 'DoubleEquals':
      return value !== undefined && value === values[0];
    case 'NotEquals':
      return value !== values[0];
    case 'In':
      return value !== undefined && values.includes(value);
    case 'NotIn':
      return value === undefined || !values.includes(value);
    case 'Exists':
      return value !== undefined;
    case 'DoesNotExist':
      return value === undefined;
    case 'GreaterThan':
      return value !== undefined && Number(value) > Number(values[0]);
    case 'LessThan':
      return value !== undefined && Number(value) < Number(values[0]);
    default:
      return false;
  }
}
