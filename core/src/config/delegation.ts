import { ConfigCodes, type PathSegment } from './diagnostic.ts';
import type { AnyResource, Resource } from './resource.ts';
import { configLimits } from './limits.ts';
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
}

/** The resources a walk is inside, innermost last (a linked list: entering a table costs O(1), not a copy). */
interface Chain {
  readonly key: string;
  readonly label: string;
  readonly up: Chain | undefined;
}

/** One routes list being walked: the root's, or a delegated table's. */
interface Frame {
  readonly list: readonly RouteSpec[];
  readonly owner: FlatRoute['owner'];
  readonly parent: Parent | undefined;
  /** The root's delegating route this frame is under (undefined for the root's own list). */
  readonly at: PathSegment[] | undefined;
  readonly chain: Chain;
  readonly depth: number;
  next: number;
  entered?: boolean;
}

/** Limits on one walk (defaults: this process's {@link configLimits}). */
export interface DelegationLimits {
  /** RouteTables one chain may pass through. */
  readonly maxDepth: number;
  /** Routes (each matcher one) the walk may expand to, delegating routes included. */
  readonly maxRoutes: number;
}

/** The limits this process applies (docs/configuration.md). */
export function delegationLimits(): DelegationLimits {
  const limits = configLimits();
  return { maxDepth: limits.maxDelegationDepth, maxRoutes: limits.maxRoutesPerVirtualHost };
}

/**
 * Flattens the routes of `root` (a VirtualService's, or a RouteTable's checked on its own).
 * Problems are located at the root's delegating route (`…routes[i].delegateAction`), and name the
 * table and route they are about. Routes breaking the prefix rule are left out (warning); a
 * cycle is an error and the looping delegation contributes nothing.
 *
 * The walk is a loop over an explicit stack (a deep chain cannot overflow the call stack) and
 * costs O(1) per route it produces or passes: cycles are found with a set of the tables on the
 * current chain, and selectors are evaluated once per delegating route. A chain deeper than
 * `limits.maxDepth` or an expansion past `limits.maxRoutes` routes (a selector fan-out multiplies
 * routes at every level) stops the walk with an error naming the chain (GH_CONFIG_DELEGATION_LIMIT):
 * the resource is rejected, and what was produced so far is not served.
 */
export function flattenRoutes(root: Resource<'VirtualService'> | Resource<'RouteTable'>, tables: RouteTables, limits: DelegationLimits = delegationLimits()): { routes: FlatRoute[]; problems: DelegationProblem[]; exceeded?: boolean } {
  const routes: FlatRoute[] = [];
  const problems: DelegationProblem[] = [];
  // A fan-out reaches the same table many times: each problem is reported once.
  const reported = new Set<string>();
  const report = (problem: DelegationProblem) => {
    const id = `${problem.path.join('.')}|${problem.code}|${problem.message}`;
    if (reported.has(id)) return;
    reported.add(id);
    problems.push(problem);
  };
  const rootRoutes = root.kind === 'VirtualService' ? root.spec.virtualHost.routes : root.spec.routes;
  const rootPath: PathSegment[] = root.kind === 'VirtualService' ? ['spec', 'virtualHost', 'routes'] : ['spec', 'routes'];
  const selections = new Map<DelegateActionSpec, ReturnType<typeof selectTables>>();
  const onChain = new Set<string>([root.key]);
  const stack: Frame[] = [{ list: rootRoutes, owner: root, parent: undefined, at: undefined, chain: { key: root.key, label: describe(root), up: undefined }, depth: 0, next: 0 }];
  let expanded = 0;
  const overLimit = (frame: Frame, index: number, message: string): { routes: FlatRoute[]; problems: DelegationProblem[]; exceeded: boolean } => {
    problems.push({ path: [...(frame.at ?? [...rootPath, index]), 'delegateAction'], code: ConfigCodes.DELEGATION_LIMIT, severity: 'error', message: `${message}: ${chainText(frame.chain)}` });
    return { routes, problems, exceeded: true };
  };

  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    if (!frame.entered) {
      // A table is on the chain from when its routes are walked until its frame is done.
      frame.entered = true;
      if (frame.owner !== root) onChain.add(frame.owner.key);
    }
    if (frame.next >= frame.list.length) {
      stack.pop();
      if (frame.owner !== root) onChain.delete(frame.owner.key);
      continue;
    }
    const index = frame.next++;
    const { owner, parent, at } = frame;
    const original = frame.list[index]!;
    // Problems inside a delegated table are reported at the root's delegating route.
    const here = at ?? [...rootPath, index];
    const where = parent ? `${describe(owner)} routes[${index}]` : undefined;
    let spec = original;
    if (parent) {
      const own: readonly MatcherSpec[] = spec.matchers && spec.matchers.length > 0 ? spec.matchers : parent.prefixes.map((prefix) => ({ prefix }));
      const outside: string[] = [];
      own.forEach((m, j) => {
        const path = m.prefix ?? m.exact ?? m.regex ?? '/';
        const bad = parent.prefixes.find((p) => !path.startsWith(p));
        if (bad !== undefined) outside.push(`matchers[${j}] "${path}" does not start with the delegating prefix "${bad}"`);
      });
      if (outside.length > 0) {
        report({ path: [...here, 'delegateAction'], code: ConfigCodes.DELEGATION, severity: 'warning', message: `${where}: ${outside.join('; ')}: the route is not served (Gloo: routes of a RouteTable must start with the prefix that delegates to it)` });
        continue;
      }
      // Inherited matchers multiply (each own matcher × each of the parent's): counted before they are built.
      const count = parent.inheritable ? own.length * parent.matchers.length : own.length;
      if (expanded + count > limits.maxRoutes) return overLimit(frame, index, `the delegation expands to more than ${limits.maxRoutes} routes (each matcher counts; limit GATEHOUSE_MAX_ROUTES_PER_VIRTUAL_HOST) at ${where}`);
      const matchers = parent.inheritable ? own.flatMap((m) => parent.matchers.map((pm) => inheritMatcher(m, pm))) : own;
      // Gloo: a delegated route without options of its own inherits its parent's, field by field.
      const options = parent.options ? { ...parent.options, ...spec.options } : spec.options;
      spec = { ...spec, matchers: [...matchers], ...(options ? { options } : {}) };
    }
    expanded += Math.max(1, spec.matchers?.length ?? 0);
    if (expanded > limits.maxRoutes) return overLimit(frame, index, `the routes expand to more than ${limits.maxRoutes} (each matcher counts; limit GATEHOUSE_MAX_ROUTES_PER_VIRTUAL_HOST)${where ? ` at ${where}` : ''}`);
    const delegate = spec.delegateAction;
    if (!delegate) {
      routes.push({ spec, owner, index });
      continue;
    }
    const matchers: readonly MatcherSpec[] = spec.matchers && spec.matchers.length > 0 ? spec.matchers : [{ prefix: '/' }];
    // Delegating matchers are checked on their own resource (checkDelegatingRoute); here, only prefixes count.
    if (matchers.some((m) => m.exact !== undefined || m.regex !== undefined)) continue;
    const next: Parent = {
      prefixes: matchers.map((m) => m.prefix ?? '/'),
      matchers,
      inheritable: spec.inheritableMatchers ?? parent?.inheritable ?? false,
      options: spec.options,
    };
    const delegatePath = here;
    let selected = selections.get(delegate);
    if (!selected) selections.set(delegate, (selected = selectTables(delegate, owner.namespace, tables)));
    const label = where ? `${where}: ` : '';
    if (selected.missing) {
      report({ path: [...delegatePath, 'delegateAction'], code: ConfigCodes.MISSING_REF, severity: 'warning', message: `${label}${selected.missing}: no routes are served under ${next.prefixes.map((p) => `"${p}"`).join(', ')}` });
    }
    for (const tie of selected.ties) {
      report({ path: [...delegatePath, 'delegateAction', 'selector'], code: ConfigCodes.IGNORED, severity: 'warning', message: `${label}RouteTables ${tie} have the same weight: their routes are taken in namespace/name order (Gloo sorts such routes by path specificity instead)` });
    }
    const children: Frame[] = [];
    for (const table of selected.tables) {
      if (onChain.has(table.key)) {
        const loop = `${chainText(frame.chain)} → ${describe(table)}`;
        report({ path: [...delegatePath, 'delegateAction'], code: ConfigCodes.DELEGATION_CYCLE, severity: 'error', message: `${label}delegation cycle: ${loop}` });
        continue;
      }
      if (frame.depth + 1 > limits.maxDepth) {
        return overLimit(frame, index, `the delegation is deeper than ${limits.maxDepth} RouteTables (limit GATEHOUSE_MAX_DELEGATION_DEPTH) at ${where ?? describe(owner)} → ${describe(table)}`);
      }
      children.push({ list: table.spec.routes, owner: table, parent: next, at: delegatePath, chain: { key: table.key, label: describe(table), up: frame.chain }, depth: frame.depth + 1, next: 0 });
    }
    // Walked in order: the last pushed is walked first.
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return { routes, problems };
}

/** `VirtualService ns/a → RouteTable ns/b → …`: the chain a problem is on, outermost first. */
function chainText(chain: Chain): string {
  const labels: string[] = [];
  for (let c: Chain | undefined = chain; c; c = c.up) labels.push(c.label);
  return labels.reverse().join(' → ');
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
