import { ConfigCodes, type PathSegment } from './diagnostic.ts';
import type { AnyResource, Resource } from './resource.ts';
import { configLimits } from './limits.ts';
import { effectiveRouteOptions, lookupIn, type ResourceLookup } from './options-refs.ts';
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
 *
 * Bounded whatever the tables (issue 24 finding 11: a 500-table chain stalled the process past
 * its watchdog, a selector fan-out overflowed the stack): chains are at most
 * GATEHOUSE_MAX_DELEGATION_DEPTH tables, expansions at most GATEHOUSE_MAX_ROUTES_PER_VIRTUAL_HOST
 * routes, and nothing here recurses or costs more than linear time in what it reads or produces.
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
  /** {@link selectTables}, remembered per delegateAction (the view does not change while it is used). */
  select?(delegate: DelegateActionSpec, fromNamespace: string): Selection;
  /** Any served resource by key: RouteOptions a route names are merged into its options when present. */
  resource?: ResourceLookup;
}

/** What a delegateAction selects. */
export interface Selection {
  readonly tables: Resource<'RouteTable'>[];
  readonly missing?: string;
  readonly ties: string[];
}

const views = new WeakMap<ReadonlyMap<string, AnyResource>, RouteTables>();

/**
 * The RouteTables of a resource map that no longer changes (a snapshot's served resources, or
 * one load's candidates): one view per map, so every walk over it shares the selector results.
 */
export function routeTablesOf(resources: ReadonlyMap<string, AnyResource>): RouteTables {
  let view = views.get(resources);
  if (!view) {
    let list: Resource<'RouteTable'>[] | undefined;
    // By content: a thousand tables with the same selector share one selection (and one node of the graph summarize() walks).
    const selected = new Map<string, Selection>();
    const tables: RouteTables = {
      get: (key) => {
        const r = resources.get(key);
        return r?.kind === 'RouteTable' ? r : undefined;
      },
      all: () => (list ??= [...resources.values()].filter((r): r is Resource<'RouteTable'> => r.kind === 'RouteTable')),
      select: (delegate, fromNamespace) => {
        const key = selectionKey(delegate, fromNamespace);
        let selection = selected.get(key);
        if (!selection) selected.set(key, (selection = selectTables(delegate, fromNamespace, tables)));
        return selection;
      },
      resource: lookupIn(resources),
    };
    view = tables;
    views.set(resources, view);
  }
  return view;
}

interface Parent {
  readonly prefixes: readonly string[];
  readonly matchers: readonly MatcherSpec[];
  readonly inheritable: boolean;
  readonly options: RouteSpec['options'];
}

/** The resources a walk is inside, innermost last (a linked list: entering a table costs O(1), not a copy). */
interface Chain {
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
  /** The setting `maxRoutes` comes from, for messages (default GATEHOUSE_MAX_ROUTES_PER_VIRTUAL_HOST). */
  readonly routesSetting?: string;
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
export function flattenRoutes(root: Resource<'VirtualService'> | Resource<'RouteTable'>, tables: RouteTables, limits: DelegationLimits = delegationLimits()): { routes: FlatRoute[]; problems: DelegationProblem[]; exceeded?: boolean; expanded: number } {
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
  const selections = new Map<DelegateActionSpec, Selection>();
  const onChain = new Set<string>([root.key]);
  const stack: Frame[] = [{ list: rootRoutes, owner: root, parent: undefined, at: undefined, chain: { label: describe(root), up: undefined }, depth: 0, next: 0 }];
  let expanded = 0;
  const overLimit = (frame: Frame, index: number, message: string): { routes: FlatRoute[]; problems: DelegationProblem[]; exceeded: boolean; expanded: number } => {
    problems.push({ path: [...(frame.at ?? [...rootPath, index]), 'delegateAction'], code: ConfigCodes.DELEGATION_LIMIT, severity: 'error', message: `${message}: ${chainText(frame.chain)}` });
    return { routes, problems, exceeded: true, expanded };
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
    // The route's RouteOptions under its own options (Gloo merges them before the parent's).
    let spec = original.optionsConfigRefs?.delegateOptions?.length && tables.resource ? { ...original, options: effectiveRouteOptions(original, owner.namespace, tables.resource) } : original;
    if (parent) {
      const own: readonly MatcherSpec[] = spec.matchers && spec.matchers.length > 0 ? spec.matchers : parent.prefixes.map((prefix) => ({ prefix }));
      const outside = outsidePrefixes(own, parent.prefixes) ?? (parent.inheritable ? undefined : missingParentMatchers(own, parent.matchers));
      if (outside) {
        report({ path: [...here, 'delegateAction'], code: ConfigCodes.DELEGATION, severity: 'warning', message: `${where}: ${outside}` });
        continue;
      }
      // Inherited matchers multiply (each own matcher × each of the parent's): counted before they are built.
      const count = parent.inheritable ? own.length * parent.matchers.length : own.length;
      if (expanded + count > limits.maxRoutes) return overLimit(frame, index, `the delegation expands to more than ${limits.maxRoutes} routes (each matcher counts; limit ${limits.routesSetting ?? 'GATEHOUSE_MAX_ROUTES_PER_VIRTUAL_HOST'}) at ${where}`);
      const matchers = parent.inheritable ? own.flatMap((m) => parent.matchers.map((pm) => inheritMatcher(m, pm))) : own;
      // Gloo: a delegated route without options of its own inherits its parent's, field by field.
      const options = parent.options ? { ...parent.options, ...spec.options } : spec.options;
      spec = { ...spec, matchers: [...matchers], ...(options ? { options } : {}) };
    }
    expanded += Math.max(1, spec.matchers?.length ?? 0);
    if (expanded > limits.maxRoutes) return overLimit(frame, index, `the routes expand to more than ${limits.maxRoutes} (each matcher counts; limit ${limits.routesSetting ?? 'GATEHOUSE_MAX_ROUTES_PER_VIRTUAL_HOST'})${where ? ` at ${where}` : ''}`);
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
    if (!selected) selections.set(delegate, (selected = tables.select ? tables.select(delegate, owner.namespace) : selectTables(delegate, owner.namespace, tables)));
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
      children.push({ list: table.spec.routes, owner: table, parent: next, at: delegatePath, chain: { label: describe(table), up: frame.chain }, depth: frame.depth + 1, next: 0 });
    }
    // Walked in order: the last pushed is walked first.
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
  }
  return { routes, problems, expanded };
}

/** Why a delegated route's matchers are outside the delegating prefixes (it is then not served), or undefined. */
function outsidePrefixes(own: readonly MatcherSpec[], prefixes: readonly string[]): string | undefined {
  const outside: string[] = [];
  own.forEach((m, j) => {
    const path = m.prefix ?? m.exact ?? m.regex ?? '/';
    const bad = prefixes.find((p) => !path.startsWith(p));
    if (bad !== undefined) outside.push(`matchers[${j}] "${path}" does not start with the delegating prefix "${bad}"`);
  });
  return outside.length > 0 ? `${outside.join('; ')}: the route is not served (Gloo: routes of a RouteTable must start with the prefix that delegates to it)` : undefined;
}

/**
 * Gloo's rule for a delegating route's headers, query parameters and methods when they are not
 * inherited (no `inheritableMatchers`): every matcher of a delegated route must repeat each of
 * them (the same header or parameter, equal; a superset of the methods), else the route is not
 * served (Gloo's converter.go isRouteTableValidForDelegateMatcher: a warning, the route dropped).
 * Why a route breaks it, or undefined.
 */
function missingParentMatchers(own: readonly MatcherSpec[], parents: readonly MatcherSpec[]): string | undefined {
  const header = (h: NonNullable<MatcherSpec['headers']>[number]) => JSON.stringify([h.name, h.value ?? '', h.regex ?? false, h.invertMatch ?? false]);
  const query = (q: NonNullable<MatcherSpec['queryParameters']>[number]) => JSON.stringify([q.name, q.value ?? '', q.regex ?? false]);
  const missing: string[] = [];
  own.forEach((m, j) => {
    const headers = new Set((m.headers ?? []).map(header));
    const params = new Set((m.queryParameters ?? []).map(query));
    const methods = new Set((m.methods ?? []).map((x) => x.toUpperCase()));
    for (const parent of parents) {
      const lacks = [
        ...(parent.headers ?? []).filter((h) => !headers.has(header(h))).map((h) => `header "${h.name}"`),
        ...(parent.queryParameters ?? []).filter((q) => !params.has(query(q))).map((q) => `query parameter "${q.name}"`),
        ...(parent.methods ?? []).filter((x) => !methods.has(x.toUpperCase())).map((x) => `method ${x.toUpperCase()}`),
      ];
      if (lacks.length > 0) {
        missing.push(`matchers[${j}] lacks the delegating route's ${lacks.join(', ')}`);
        break;
      }
    }
  });
  return missing.length > 0 ? `${missing.join('; ')}: the route is not served (Gloo: without inheritableMatchers, a delegated route must repeat the delegating route's headers, query parameters and methods)` : undefined;
}

/** `VirtualService ns/a → RouteTable ns/b → …`: the chain a problem is on, outermost first. */
function chainText(chain: Chain): string {
  const labels: string[] = [];
  for (let c: Chain | undefined = chain; c; c = c.up) labels.push(c.label);
  return labels.reverse().join(' → ');
}

/** One RouteTable's delegation tree in a view, computed for every table of the view at once. */
interface TableSummary {
  /** The longest chain of RouteTables below it (0: it delegates to none). */
  readonly height: number;
  /** Routes it expands to (each matcher one; inherited matchers not multiplied), capped just above the limit. */
  readonly size: number;
  /** Its first step on the longest chain. */
  readonly deepest?: Step;
  /** Its first step towards a delegation cycle: `on` when it is on the cycle itself. */
  readonly cycle?: Step & { readonly on: boolean };
}

/** A delegating route (its index) and a table it selects. */
interface Step {
  readonly route: number;
  readonly table: Resource<'RouteTable'>;
}

/** A delegating route (prefix matchers only, as the walk) and what it selects. */
interface Delegation {
  readonly route: number;
  readonly selection: Selection;
}

/** What a selection leads to, as seen from a table in another component. */
interface SelectionSummary {
  readonly height: number;
  readonly size: number;
  readonly deepest?: Resource<'RouteTable'>;
  readonly cycle?: Resource<'RouteTable'>;
}

interface Summaries {
  readonly cap: number;
  readonly byKey: Map<string, TableSummary>;
  /** Strongly connected component of each table and selection. */
  readonly component: Map<object, number>;
  /** RouteTables of each component. */
  readonly sizes: Map<number, number>;
  /** {@link delegationsOf}, computed once per table. */
  readonly delegationsOf: (table: Resource<'RouteTable'>) => Delegation[];
}

const summaries = new WeakMap<RouteTables, Summaries>();

/** A table's delegations, each selection once per view (shared by every table that selects the same way). */
function delegationsOf(table: Resource<'RouteTable'>, tables: RouteTables): Delegation[] {
  const out: Delegation[] = [];
  table.spec.routes.forEach((route, index) => {
    const delegate = route.delegateAction;
    if (!delegate || route.matchers?.some((m) => m.exact !== undefined || m.regex !== undefined)) return;
    out.push({ route: index, selection: tables.select ? tables.select(delegate, table.namespace) : selectTables(delegate, table.namespace, tables) });
  });
  return out;
}

/**
 * Height, size and cycles of every table of a view, in time linear in the tables, their
 * delegating routes and what the distinct selections select: the graph has a node per table
 * and per selection (a thousand tables selecting the same thousand are 2,000 edges, not a
 * million), and Tarjan's strongly connected components (iteratively) summarise each component
 * when it is complete, which is after every component it reaches.
 */
function summarize(tables: RouteTables, cap: number): Summaries {
  const cached = summaries.get(tables);
  if (cached && cached.cap === cap) return cached;
  type GraphNode = Resource<'RouteTable'> | Selection;
  const isTable = (n: GraphNode): n is Resource<'RouteTable'> => (n as Resource<'RouteTable'>).kind === 'RouteTable';
  const delegations = new Map<Resource<'RouteTable'>, Delegation[]>();
  const delegationsFor = (t: Resource<'RouteTable'>) => {
    let d = delegations.get(t);
    if (!d) delegations.set(t, (d = delegationsOf(t, tables)));
    return d;
  };
  const successors = (n: GraphNode): readonly GraphNode[] => (isTable(n) ? delegationsFor(n).map((d) => d.selection) : n.tables);
  const byKey = new Map<string, TableSummary>();
  const bySelection = new Map<Selection, SelectionSummary>();
  const component = new Map<object, number>();
  const sizes = new Map<number, number>();
  const order = new Map<GraphNode, number>();
  const low = new Map<GraphNode, number>();
  const onStack = new Set<GraphNode>();
  const stack: GraphNode[] = [];
  let counter = 0;
  let components = 0;
  const finish = (root: GraphNode) => {
    const members: GraphNode[] = [];
    let member: GraphNode;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.set(member, components);
      members.push(member);
    } while (member !== root);
    sizes.set(components, members.filter(isTable).length);
    const cyclic = members.length > 1;
    for (const node of members) {
      if (isTable(node)) continue;
      if (cyclic) {
        bySelection.set(node, { height: 0, size: cap, cycle: node.tables.find((t) => component.get(t) === components)! });
        continue;
      }
      let height = 0;
      let size = 0;
      let deepest: Resource<'RouteTable'> | undefined;
      let cycle: Resource<'RouteTable'> | undefined;
      for (const t of node.tables) {
        const child = byKey.get(t.key)!;
        size = Math.min(cap, size + child.size);
        if (deepest === undefined || child.height > height) {
          height = child.height;
          deepest = t;
        }
        if (child.cycle && !cycle) cycle = t;
      }
      bySelection.set(node, { height, size, ...(deepest ? { deepest } : {}), ...(cycle ? { cycle } : {}) });
    }
    for (const node of members) {
      if (!isTable(node)) continue;
      let size = 0;
      let height = 0;
      let deepest: Step | undefined;
      let cycle: TableSummary['cycle'];
      for (const route of node.spec.routes) size += Math.max(1, route.matchers?.length ?? 0);
      for (const { route, selection } of delegationsFor(node)) {
        if (component.get(selection) === components) {
          cycle ??= { route, table: selection.tables.find((t) => component.get(t) === components)!, on: true };
          continue;
        }
        const child = bySelection.get(selection)!;
        size = Math.min(cap, size + child.size);
        if (child.deepest && child.height + 1 > height) {
          height = child.height + 1;
          deepest = { route, table: child.deepest };
        }
        if (child.cycle && !cycle) cycle = { route, table: child.cycle, on: false };
      }
      byKey.set(node.key, { height, size: Math.min(cap, size), ...(deepest ? { deepest } : {}), ...(cycle ? { cycle } : {}) });
    }
    components++;
  };
  for (const start of tables.all()) {
    if (order.has(start)) continue;
    // The call stack of the recursive algorithm, made explicit: a deep chain cannot overflow it.
    const work: { node: GraphNode; next: readonly GraphNode[]; at: number }[] = [];
    const enter = (node: GraphNode) => {
      order.set(node, counter);
      low.set(node, counter++);
      stack.push(node);
      onStack.add(node);
      work.push({ node, next: successors(node), at: 0 });
    };
    enter(start);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      if (top.at < top.next.length) {
        const child = top.next[top.at++]!;
        if (!order.has(child)) enter(child);
        else if (onStack.has(child)) low.set(top.node, Math.min(low.get(top.node)!, order.get(child)!));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(top.node)!));
      if (low.get(top.node) === order.get(top.node)) finish(top.node);
    }
  }
  const result: Summaries = { cap, byKey, component, sizes, delegationsOf: delegationsFor };
  summaries.set(tables, result);
  return result;
}

/** Problems reported per delegating route about the tables it selects, at most (the rest counted). */
const MAX_CHILD_PROBLEMS = 20;

const childProblems = new WeakMap<RouteTables, Map<Selection, Map<string, string[]>>>();

/**
 * A RouteTable's own delegation, checked against a view of the load's RouteTables in time linear
 * in the view however the tables select each other: a cycle it is on or delegates into, a chain
 * below it deeper than the limit and an expansion past the route limit are errors (from
 * {@link summarize}); missing tables, equal weights, and routes of the tables it selects outside
 * its prefixes are warnings. Deeper levels are each table's own check (and the walk of the
 * VirtualService that serves them, which follows every chain with its inherited matchers).
 */
export function checkTableDelegation(table: Resource<'RouteTable'>, tables: RouteTables, limits: DelegationLimits = delegationLimits()): DelegationProblem[] {
  const problems: DelegationProblem[] = [];
  const summary = summarize(tables, limits.maxRoutes + 1);
  const { byKey } = summary;
  const own = byKey.get(table.key);
  const at = (route: number): PathSegment[] => ['spec', 'routes', route, 'delegateAction'];
  if (own?.cycle) {
    const cycle = cycleText(table, summary, limits.maxDepth);
    // Named as the walk names it: the route that closes the loop, when it is not the table's own.
    const closing = cycle.closing && cycle.closing.table !== table ? `${describe(cycle.closing.table)} routes[${cycle.closing.route}]: ` : '';
    problems.push({ path: at(own.cycle.route), code: ConfigCodes.DELEGATION_CYCLE, severity: 'error', message: `${closing}delegation cycle: ${cycle.text}` });
  } else if (own && own.height + 1 > limits.maxDepth) {
    // The table and the longest chain below it: what a VirtualService delegating to it would pass through.
    const labels = [describe(table)];
    for (let t: Resource<'RouteTable'> | undefined = table; t && labels.length <= limits.maxDepth; ) {
      t = byKey.get(t.key)?.deepest?.table;
      if (t) labels.push(describe(t));
    }
    problems.push({ path: at(own.deepest!.route), code: ConfigCodes.DELEGATION_LIMIT, severity: 'error', message: `the delegation is deeper than ${limits.maxDepth} RouteTables (limit GATEHOUSE_MAX_DELEGATION_DEPTH): ${labels.join(' → ')} → …` });
  } else if (own && own.size > limits.maxRoutes) {
    problems.push({ path: ['spec', 'routes'], code: ConfigCodes.DELEGATION_LIMIT, severity: 'error', message: `the delegation expands to more than ${limits.maxRoutes} routes (each matcher counts; limit GATEHOUSE_MAX_ROUTES_PER_VIRTUAL_HOST)` });
  }
  let memo = childProblems.get(tables);
  if (!memo) childProblems.set(tables, (memo = new Map()));
  for (const { route: index, selection } of summary.delegationsOf(table)) {
    const route = table.spec.routes[index]!;
    const matchers: readonly MatcherSpec[] = route.matchers && route.matchers.length > 0 ? route.matchers : [{ prefix: '/' }];
    const prefixes = matchers.map((m) => m.prefix ?? '/');
    if (selection.missing) problems.push({ path: at(index), code: ConfigCodes.MISSING_REF, severity: 'warning', message: `${selection.missing}: no routes are served under ${prefixes.map((p) => `"${p}"`).join(', ')}` });
    for (const tie of selection.ties) {
      problems.push({ path: [...at(index), 'selector'], code: ConfigCodes.IGNORED, severity: 'warning', message: `RouteTables ${tie} have the same weight: their routes are taken in namespace/name order (Gloo sorts such routes by path specificity instead)` });
    }
    // Many tables select the same tables under the same prefixes: each pair is checked once per view.
    let byPrefixes = memo.get(selection);
    if (!byPrefixes) memo.set(selection, (byPrefixes = new Map()));
    const id = prefixes.join('\0');
    let found = byPrefixes.get(id);
    if (!found) {
      found = [];
      let more = 0;
      for (const child of selection.tables) {
        for (const [j, r] of child.spec.routes.entries()) {
          const ownMatchers: readonly MatcherSpec[] = r.matchers && r.matchers.length > 0 ? r.matchers : prefixes.map((prefix) => ({ prefix }));
          const outside = outsidePrefixes(ownMatchers, prefixes);
          if (!outside) continue;
          if (found.length < MAX_CHILD_PROBLEMS) found.push(`${describe(child)} routes[${j}]: ${outside}`);
          else more++;
        }
      }
      if (more > 0) found.push(`and ${more} more routes of the selected RouteTables outside the delegating prefix: they are not served`);
      byPrefixes.set(id, found);
    }
    for (const message of found) {
      if (message.startsWith(`${describe(table)} routes[`)) continue;
      problems.push({ path: at(index), code: ConfigCodes.DELEGATION, severity: 'warning', message });
    }
  }
  return problems;
}

/** Selected tables a search around a loop looks at before naming the loop by its size. */
const LOOP_SEARCH_STEPS = 64;

/** `A → B → A` for a table on a cycle; `X → Y → A → B → A` for one that delegates into one (long loops shortened); and the route that closes the loop. */
function cycleText(table: Resource<'RouteTable'>, summary: Summaries, maxLabels: number): { text: string; closing?: { table: Resource<'RouteTable'>; route: number } } {
  const { byKey, component, sizes } = summary;
  const labels: string[] = [];
  let t = table;
  // Down the first steps towards the cycle, to a table on it.
  while (!byKey.get(t.key)!.cycle!.on && labels.length <= maxLabels) {
    labels.push(describe(t));
    t = byKey.get(t.key)!.cycle!.table;
  }
  // Around the loop: a shortest path back to `t` inside its component (breadth first), with a
  // bounded number of steps: every table of a loop of thousands is checked, and a full search
  // from each would cost the square of the loop (a 5,000-table loop took 9 s).
  const home = component.get(t);
  const from = new Map<string, Resource<'RouteTable'> | undefined>([[t.key, undefined]]);
  const queue = [t];
  let steps = 0;
  let closing: { table: Resource<'RouteTable'>; route: number } | undefined;
  search: for (let i = 0; i < queue.length; i++) {
    for (const { route, selection } of summary.delegationsOf(queue[i]!)) {
      for (const next of selection.tables) {
        if (++steps > LOOP_SEARCH_STEPS) break search;
        if (next.key === t.key) {
          closing = { table: queue[i]!, route };
          break search;
        }
        if (component.get(next) !== home || from.has(next.key)) continue;
        from.set(next.key, queue[i]!);
        queue.push(next);
      }
    }
  }
  if (!closing) return { text: [...labels, describe(t), `… (a loop through ${sizes.get(home!)} RouteTables) …`, describe(t)].join(' → ') };
  const loop: string[] = [];
  for (let c: Resource<'RouteTable'> | undefined = closing.table; c; c = from.get(c.key)) loop.push(describe(c));
  loop.reverse();
  const half = Math.floor(maxLabels / 2);
  const shown = loop.length > maxLabels ? [...loop.slice(0, half), `… (${loop.length - 2 * half} more)`, ...loop.slice(-half)] : loop;
  return { text: [...labels, ...shown, describe(t)].join(' → '), closing };
}

/**
 * A delegating route's own matchers: prefixes only (Gloo). Its headers, methods and query
 * parameters are accepted with or without inheritableMatchers, as Gloo accepts them: inherited, or
 * required of each delegated route ({@link missingParentMatchers}).
 */
export function checkDelegatingRoute(route: RouteSpec): { path: PathSegment[]; message: string }[] {
  if (!route.delegateAction) return [];
  const out: { path: PathSegment[]; message: string }[] = [];
  route.matchers?.forEach((m, j) => {
    const kind = m.exact !== undefined ? 'exact' : m.regex !== undefined ? 'regex' : undefined;
    if (kind) out.push({ path: ['matchers', j, kind], message: `a route with delegateAction must match on a prefix, not ${kind} (Gloo)` });
  });
  return out;
}

/**
 * The parent's headers, methods and query parameters added to a delegated route's matcher, as
 * Gloo adds them: each list is the parent's followed by the child's (methods too: a child's
 * `[PUT]` under a parent's `[GET]` matches either, Gloo's `:method` regex `GET|PUT`).
 */
function inheritMatcher(child: MatcherSpec, parent: MatcherSpec): MatcherSpec {
  const headers = [...(parent.headers ?? []), ...(child.headers ?? [])];
  const queryParameters = [...(parent.queryParameters ?? []), ...(child.queryParameters ?? [])];
  const methods = parent.methods || child.methods ? [...new Set([...(parent.methods ?? []), ...(child.methods ?? [])])] : undefined;
  return { ...child, ...(headers.length ? { headers } : {}), ...(queryParameters.length ? { queryParameters } : {}), ...(methods ? { methods } : {}) };
}

function describe(r: { kind: string; namespace: string; name: string }): string {
  return `${r.kind} ${r.namespace}/${r.name}`;
}

/** What decides a delegateAction's selection, as a string: equal keys select the same tables. */
function selectionKey(delegate: DelegateActionSpec, fromNamespace: string): string {
  if (delegate.ref || delegate.name) {
    const name = delegate.ref?.name ?? delegate.name!;
    const namespace = delegate.ref ? (delegate.ref.namespace ?? fromNamespace) : (delegate.namespace ?? fromNamespace);
    return `ref\0${namespace}\0${name}`;
  }
  const selector = delegate.selector!;
  return `selector\0${fromNamespace}\0${JSON.stringify([selector.namespaces ?? [], selector.labels ?? {}, selector.expressions ?? []])}`;
}

/** Equal weights reported per selection, at most (the rest counted). */
const MAX_TIES = 3;

/** The tables a delegateAction names or selects, in Gloo's order. */
export function selectTables(delegate: DelegateActionSpec, fromNamespace: string, tables: RouteTables): Selection {
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
  let moreTies = 0;
  for (let i = 1; i < picked.length; i++) {
    if ((picked[i]!.spec.weight ?? 0) !== (picked[i - 1]!.spec.weight ?? 0)) continue;
    if (ties.length < MAX_TIES) ties.push(`${picked[i - 1]!.namespace}/${picked[i - 1]!.name} and ${picked[i]!.namespace}/${picked[i]!.name}`);
    else moreTies++;
  }
  if (moreTies > 0) ties.push(`(${moreTies} more pairs)`);
  return picked.length > 0 ? { tables: picked, ties } : { tables: [], missing: 'the selector matches no accepted RouteTable', ties };
}

/** Gloo's selector expressions (RouteTableSelector, Gateway virtualServiceExpressions: Kubernetes label requirements). */
export function expressionHolds(e: { key: string; operator?: string | undefined; values?: readonly string[] | undefined }, labels: Readonly<Record<string, string>>): boolean {
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
