import type { Resource } from '../config/resource.ts';

/*
 * RateLimitConfig → the rate-limit server's tables, built once at load (the request path only
 * looks things up). Semantics are those of Envoy's reference service (envoyproxy/ratelimit),
 * which Gloo's server extends with weights, `alwaysApply` and set-style descriptors:
 *
 * - A raw descriptor tree is matched entry by entry: at each level the entry's key with its
 *   exact value wins over the key alone (a key without `value` matches any value and counts
 *   each value separately). A request descriptor gets the limit of the node its LAST entry
 *   lands on; a descriptor that runs out of tree, or stops above a limit, has no limit.
 * - Set-style descriptors are an ordered list of rules: a rule matches when each of its
 *   `simpleDescriptors` is among the request descriptor's entries (any order, other entries
 *   ignored); the first matching rule applies, and every matching rule with `alwaysApply`.
 *
 * Gloo isolates RateLimitConfigs from each other by prefixing what Envoy sends with the entry
 * `generic_key: <namespace>.<name>`, in the domain `crd`; set-style descriptors also carry
 * `generic_key: solo.setDescriptor.uniqueValue`. The same convention is used here, so an Envoy
 * configured as Gloo configures it works against Gatehouse unchanged.
 */

/** The rate-limit domain RateLimitConfig resources are served in (Gloo's). */
export const CRD_DOMAIN = 'crd';
/** The descriptor key that carries a RateLimitConfig's `<namespace>.<name>` (Envoy's generic_key action). */
export const CONFIG_KEY = 'generic_key';
/** The generic_key value marking a set-style descriptor (Gloo's `SetDescriptorValue`). */
export const SET_DESCRIPTOR_VALUE = 'solo.setDescriptor.uniqueValue';

/** Window lengths of Envoy's RateLimitUnit (the reference service's dividers). */
export const UNIT_SECONDS = { SECOND: 1, MINUTE: 60, HOUR: 3600, DAY: 86_400, MONTH: 2_592_000, YEAR: 31_536_000 } as const;
export type RateLimitUnit = keyof typeof UNIT_SECONDS;
/** Envoy's `RateLimitUnit` / `RateLimitResponse.RateLimit.Unit` numbers. */
export const UNIT_NUMBERS: Readonly<Record<RateLimitUnit, number>> = { SECOND: 1, MINUTE: 2, HOUR: 3, DAY: 4, MONTH: 5, YEAR: 6 };
const UNIT_BY_NUMBER = new Map(Object.entries(UNIT_NUMBERS).map(([name, n]) => [n, name as RateLimitUnit]));

/** The unit named by a number or a name (as protojson reads enums), or undefined. */
export function unitOf(value: unknown): RateLimitUnit | undefined {
  if (typeof value === 'number') return UNIT_BY_NUMBER.get(value);
  if (typeof value === 'string' && Object.hasOwn(UNIT_SECONDS, value)) return value as RateLimitUnit;
  return undefined;
}

/** A compiled limit: one rule. */
export interface Limit {
  /** Stable identity of the rule (config and position): part of its counters' keys. */
  readonly id: string;
  /** What `x-ratelimit-limit`'s `name` and logs call it. */
  readonly name: string;
  readonly requestsPerUnit: number;
  readonly unit: RateLimitUnit;
  readonly unitSeconds: number;
  readonly weight: number;
  readonly alwaysApply: boolean;
  readonly shadowMode: boolean;
}

/** One level of a descriptor tree: by key, then by exact value or any value. */
export interface TreeLevel {
  readonly byKey: ReadonlyMap<string, { readonly exact: ReadonlyMap<string, TreeNode>; readonly any?: TreeNode | undefined }>;
}
export interface TreeNode {
  readonly limit?: Limit | undefined;
  readonly children?: TreeLevel | undefined;
}

/** A set-style rule. */
export interface SetRule {
  readonly entries: readonly { readonly key: string; readonly value?: string | undefined }[];
  readonly limit: Limit;
}

/** What one domain serves: raw trees and set rules (by RateLimitConfig `<namespace>.<name>`). */
export interface DomainTable {
  readonly tree: TreeLevel;
  readonly setRules: ReadonlyMap<string, readonly SetRule[]>;
}

/** Every domain the server answers for. */
export type RateLimitTables = ReadonlyMap<string, DomainTable>;

/** A problem found while compiling, located inside the resource. */
export interface CompileProblem {
  readonly path: (string | number)[];
  readonly message: string;
}

type Obj = Record<string, unknown>;

/** A proto field under its JSON name or its proto name (the schema allows one of the two). */
export function field(obj: Obj | undefined, jsonName: string, protoName: string): unknown {
  if (!obj) return undefined;
  return obj[jsonName] ?? obj[protoName];
}

/** The name a field was written with, for error paths. */
function spelled(obj: Obj, jsonName: string, protoName: string): string {
  return Object.hasOwn(obj, protoName) && !Object.hasOwn(obj, jsonName) ? protoName : jsonName;
}

function uint(value: unknown): number {
  return typeof value === 'string' ? Number(value) : typeof value === 'number' ? value : 0;
}

/** `<namespace>.<name>`: the generic_key value that selects a RateLimitConfig. */
export function configKeyOf(resource: Pick<Resource<'RateLimitConfig'>, 'namespace' | 'name'>): string {
  return `${resource.namespace}.${resource.name}`;
}

/** The compiled rules of one RateLimitConfig. */
export interface CompiledConfig {
  /** `<namespace>.<name>`. */
  readonly key: string;
  /** Its raw descriptors (below the config's own generic_key entry). */
  readonly tree: TreeLevel;
  readonly setRules: readonly SetRule[];
  readonly problems: readonly CompileProblem[];
}

/** Compiles one RateLimitConfig; `problems` reject it (at load, SPEC 2.4). */
export function compileRateLimitConfig(resource: Pick<Resource<'RateLimitConfig'>, 'namespace' | 'name' | 'spec'>): CompiledConfig {
  const key = configKeyOf(resource);
  const problems: CompileProblem[] = [];
  const raw = (resource.spec as Obj).raw as Obj;
  const rawPath = ['spec', 'raw'];

  const limitOf = (holder: Obj, path: (string | number)[], id: string, name: string, weight: number, alwaysApply: boolean): Limit | undefined => {
    const rl = field(holder, 'rateLimit', 'rate_limit') as Obj | undefined;
    if (!rl) return undefined;
    const at = [...path, spelled(holder, 'rateLimit', 'rate_limit')];
    const unit = unitOf(rl.unit);
    if (!unit || !['SECOND', 'MINUTE', 'HOUR', 'DAY'].includes(unit)) {
      problems.push({ path: [...at, 'unit'], message: `unit ${JSON.stringify(rl.unit)} is not one of SECOND, MINUTE, HOUR, DAY` });
      return undefined;
    }
    const shadowMode = field(holder, 'shadowMode', 'shadow_mode') === true;
    const requestsPerUnit = uint(field(rl, 'requestsPerUnit', 'requests_per_unit'));
    // A decimal string passes the schema's pattern up to 10 digits: uint32 is checked here.
    if (requestsPerUnit > 4_294_967_295) {
      problems.push({ path: [...at, spelled(rl, 'requestsPerUnit', 'requests_per_unit')], message: `${requestsPerUnit} is larger than a uint32` });
      return undefined;
    }
    return { id, name, requestsPerUnit, unit, unitSeconds: UNIT_SECONDS[unit], weight, alwaysApply, shadowMode };
  };

  // Raw trees.
  const build = (list: readonly Obj[], path: (string | number)[], ids: string, names: string): TreeLevel => {
    const byKey = new Map<string, { exact: Map<string, TreeNode>; any?: TreeNode }>();
    list.forEach((d, index) => {
      const at = [...path, index];
      const dKey = d.key as string;
      const dValue = d.value as string | undefined;
      const label = dValue === undefined ? dKey : `${dKey}^${dValue}`;
      const name = names ? `${names}|${label}` : label;
      const id = `${ids}/${index}`;
      const weight = uint(d.weight);
      if (weight > 4_294_967_295) problems.push({ path: [...at, 'weight'], message: `${weight} is larger than a uint32` });
      const limit = limitOf(d, at, id, name, weight, field(d, 'alwaysApply', 'always_apply') === true);
      const nested = (d.descriptors as Obj[] | undefined) ?? [];
      const node: TreeNode = { limit, children: nested.length > 0 ? build(nested, [...at, 'descriptors'], id, name) : undefined };
      let slot = byKey.get(dKey);
      if (!slot) byKey.set(dKey, (slot = { exact: new Map() }));
      // The reference service keeps the last of two identical entries; a silent override hides a mistake.
      if (dValue === undefined ? slot.any : slot.exact.has(dValue)) {
        problems.push({ path: at, message: `descriptor ${JSON.stringify(label)} is listed twice at this level; merge the two` });
        return;
      }
      if (dValue === undefined) slot.any = node;
      else slot.exact.set(dValue, node);
    });
    return { byKey };
  };
  const descriptors = (raw.descriptors as Obj[] | undefined) ?? [];
  // Names as Gloo's server gives them (seen in its x-ratelimit-limit headers): the domain, then the entries.
  const tree = build(descriptors, [...rawPath, 'descriptors'], key, `${CRD_DOMAIN}|${CONFIG_KEY}^${key}`);

  // Set-style rules.
  const setList = (field(raw, 'setDescriptors', 'set_descriptors') as Obj[] | undefined) ?? [];
  const setName = spelled(raw, 'setDescriptors', 'set_descriptors');
  const setRules: SetRule[] = [];
  setList.forEach((sd, index) => {
    const at = [...rawPath, setName, index];
    const entries = ((field(sd, 'simpleDescriptors', 'simple_descriptors') as Obj[] | undefined) ?? []).map((e) => ({ key: e.key as string, value: e.value as string | undefined }));
    const seen = new Set<string>();
    for (const [i, e] of entries.entries()) {
      if (seen.has(e.key)) problems.push({ path: [...at, spelled(sd, 'simpleDescriptors', 'simple_descriptors'), i, 'key'], message: `key ${JSON.stringify(e.key)} appears twice in this set` });
      seen.add(e.key);
      if (e.key === CONFIG_KEY && e.value === SET_DESCRIPTOR_VALUE) problems.push({ path: [...at, spelled(sd, 'simpleDescriptors', 'simple_descriptors'), i], message: `generic_key ${SET_DESCRIPTOR_VALUE} is reserved (it marks set-style descriptors)` });
    }
    const label = `${CRD_DOMAIN}|${[...entries.map((e) => (e.value === undefined ? e.key : `${e.key}^${e.value}`)), `${CONFIG_KEY}^${SET_DESCRIPTOR_VALUE}`, `${CONFIG_KEY}^${key}`].sort().join('|')}`;
    const limit = limitOf(sd, at, `${key}/set/${index}`, label, 0, field(sd, 'alwaysApply', 'always_apply') === true);
    if (limit) setRules.push({ entries, limit });
  });

  // Actions are evaluated by the proxy side; here only what would make them unusable.
  const actionLists = (field(raw, 'rateLimits', 'rate_limits') as Obj[] | undefined) ?? [];
  actionLists.forEach((entry, index) => {
    const at = [...rawPath, spelled(raw, 'rateLimits', 'rate_limits'), index];
    const actions = (entry.actions as Obj[] | undefined) ?? [];
    const setActions = (field(entry, 'setActions', 'set_actions') as Obj[] | undefined) ?? [];
    if (actions.length === 0 && setActions.length === 0) problems.push({ path: at, message: 'has neither actions nor setActions' });
    for (const [list, listName] of [[actions, 'actions'], [setActions, spelled(entry, 'setActions', 'set_actions')]] as const) {
      list.forEach((action, i) => {
        const problem = actionProblem(action);
        if (problem) problems.push({ path: [...at, listName, i], message: problem });
      });
    }
  });

  return { key, tree, setRules, problems };
}

/** What makes one action unusable (Gloo's `missingFieldError`s, and "one specifier"). */
function actionProblem(action: Obj): string | undefined {
  const kinds = Object.keys(action);
  if (kinds.length !== 1) return kinds.length === 0 ? 'an action needs one specifier (genericKey, requestHeaders, remoteAddress, headerValueMatch, metadata, sourceCluster, destinationCluster)' : `an action has exactly one specifier, not ${kinds.join(' and ')}`;
  const body = action[kinds[0]!] as Obj;
  switch (kinds[0]) {
    case 'requestHeaders':
    case 'request_headers':
      if (!field(body, 'headerName', 'header_name')) return 'requestHeaders needs headerName';
      if (!field(body, 'descriptorKey', 'descriptor_key')) return 'requestHeaders needs descriptorKey';
      return undefined;
    case 'genericKey':
    case 'generic_key':
      if (!field(body, 'descriptorValue', 'descriptor_value')) return 'genericKey needs descriptorValue';
      if (field(body, 'descriptorValue', 'descriptor_value') === SET_DESCRIPTOR_VALUE) return `genericKey ${SET_DESCRIPTOR_VALUE} is reserved (use setActions)`;
      return undefined;
    case 'headerValueMatch':
    case 'header_value_match':
      if (!field(body, 'descriptorValue', 'descriptor_value')) return 'headerValueMatch needs descriptorValue';
      if (!Array.isArray(body.headers) || body.headers.length === 0) return 'headerValueMatch needs at least one header';
      return undefined;
    case 'metadata':
      if (!field(body, 'descriptorKey', 'descriptor_key')) return 'metadata needs descriptorKey';
      if (!field(body, 'metadataKey', 'metadata_key')) return 'metadata needs metadataKey';
      return undefined;
    default:
      return undefined;
  }
}

/**
 * The server's tables for a set of accepted RateLimitConfigs: in the `crd` domain, each
 * config's tree hangs under its own `generic_key: <namespace>.<name>` entry.
 */
export function buildTables(configs: readonly CompiledConfig[]): RateLimitTables {
  const exact = new Map<string, TreeNode>();
  const setRules = new Map<string, readonly SetRule[]>();
  for (const config of configs) {
    exact.set(config.key, { children: config.tree });
    if (config.setRules.length > 0) setRules.set(config.key, config.setRules);
  }
  const tree: TreeLevel = { byKey: new Map([[CONFIG_KEY, { exact }]]) };
  return new Map([[CRD_DOMAIN, { tree, setRules }]]);
}
