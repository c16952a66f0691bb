import { fullMatcher, re2Problem } from '../regex/re2.ts';
import { CONFIG_KEY, SET_DESCRIPTOR_VALUE, field, type CompileProblem } from './compile.ts';
import type { DescriptorEntry, RequestDescriptor } from './engine.ts';

/*
 * Rate-limit actions (Gloo's `RateLimitActions`, Envoy's `RateLimit.Action`): how a request
 * becomes the descriptors sent to the decision engine. Compiled once at load; evaluating them is
 * a few header lookups. Semantics are Envoy's (route_components.proto), checked against a real
 * Envoy in test/ratelimit/envoy-actions.test.ts:
 *
 * - each `rateLimits` entry yields at most one descriptor, its actions' entries in order;
 * - an action that cannot produce its entry (a missing header, a header_value_match that does not
 *   match as expected, missing metadata without default) drops the WHOLE descriptor, except a
 *   `request_headers` action with `skip_if_absent`, which only skips its own entry;
 * - `setActions` become a set-style descriptor as Gloo translates them: the entry
 *   `generic_key: solo.setDescriptor.uniqueValue` first, and every request header optional.
 * - with a RateLimitConfig, every descriptor starts with `generic_key: <namespace>.<name>`.
 */

/** What actions read from a request. */
export interface ActionRequest {
  /** The first value of a header (lowercase name), or undefined when absent. */
  header(name: string): string | undefined;
  /** Every value of a header joined with `,` (Envoy's header matchers see them so), or undefined. */
  headerJoined?(name: string): string | undefined;
  /** The client's IP address (no port), as `remote_address` sends it; undefined: no descriptor. */
  readonly remoteAddress?: string | undefined;
  /** The routed upstream (Envoy's cluster) for `destination_cluster`. */
  readonly destinationCluster?: string | undefined;
  /** This gateway's own name for `source_cluster`. */
  readonly sourceCluster?: string | undefined;
  /** A string from metadata (`source` DYNAMIC or ROUTE_ENTRY, filter `key`, `path`); undefined when absent. */
  metadata?(source: 'DYNAMIC' | 'ROUTE_ENTRY', key: string, path: readonly string[]): string | undefined;
}

/** One compiled action: its entry, `null` to drop the descriptor, or `undefined` to skip this entry only. */
type Action = (request: ActionRequest) => DescriptorEntry | null | undefined;

/** Compiled `rateLimits` of one RateLimitConfig or route. */
export interface CompiledActions {
  /** The descriptors of a request, in `rateLimits` order (those that could be built). */
  descriptors(request: ActionRequest): RequestDescriptor[];
  readonly problems: readonly CompileProblem[];
}

type Obj = Record<string, unknown>;

/**
 * Compiles Gloo/Envoy rate-limit actions (either spelling). `configKey` (`<namespace>.<name>`)
 * prefixes every descriptor with the RateLimitConfig's own entry, as Gloo does.
 */
export function compileRateLimitActions(rateLimits: readonly Obj[], options: { configKey?: string | undefined; path?: (string | number)[] } = {}): CompiledActions {
  const problems: CompileProblem[] = [];
  const base = options.path ?? [];
  const lists: Action[][] = [];
  const prefix: Action[] = options.configKey === undefined ? [] : [constant(CONFIG_KEY, options.configKey)];
  rateLimits.forEach((entry, index) => {
    const actions = (entry.actions as Obj[] | undefined) ?? [];
    const setActions = (field(entry, 'setActions', 'set_actions') as Obj[] | undefined) ?? [];
    const compileList = (list: Obj[], name: string, set: boolean) => list.map((a, i) => compileAction(a, set, [...base, index, name, i], problems));
    if (actions.length > 0) lists.push([...prefix, ...compileList(actions, 'actions', false)]);
    if (setActions.length > 0) lists.push([...prefix, constant(CONFIG_KEY, SET_DESCRIPTOR_VALUE), ...compileList(setActions, Object.hasOwn(entry, 'set_actions') ? 'set_actions' : 'setActions', true)]);
  });
  return {
    problems,
    descriptors(request) {
      const out: RequestDescriptor[] = [];
      for (const list of lists) {
        const entries: DescriptorEntry[] = [];
        let dropped = false;
        for (const action of list) {
          const entry = action(request);
          if (entry === null) {
            dropped = true;
            break;
          }
          if (entry) entries.push(entry);
        }
        if (!dropped && entries.length > 0) out.push({ entries });
      }
      return out;
    },
  };
}

function constant(key: string, value: string): Action {
  const entry = { key, value };
  return () => entry;
}

function compileAction(action: Obj, set: boolean, path: (string | number)[], problems: CompileProblem[]): Action {
  const [kind] = Object.keys(action);
  const body = (action[kind!] ?? {}) as Obj;
  switch (kind) {
    case 'sourceCluster':
    case 'source_cluster':
      return (r) => (r.sourceCluster === undefined ? null : { key: 'source_cluster', value: r.sourceCluster });
    case 'destinationCluster':
    case 'destination_cluster':
      return (r) => (r.destinationCluster === undefined ? null : { key: 'destination_cluster', value: r.destinationCluster });
    case 'remoteAddress':
    case 'remote_address':
      return (r) => (r.remoteAddress ? { key: 'remote_address', value: r.remoteAddress } : null);
    case 'genericKey':
    case 'generic_key': {
      const value = String(field(body, 'descriptorValue', 'descriptor_value') ?? '');
      const key = String(field(body, 'descriptorKey', 'descriptor_key') ?? '') || 'generic_key';
      return constant(key, value);
    }
    case 'requestHeaders':
    case 'request_headers': {
      const name = String(field(body, 'headerName', 'header_name') ?? '').toLowerCase();
      const key = String(field(body, 'descriptorKey', 'descriptor_key') ?? '');
      // Gloo makes every header of a set optional; Envoy's own field may say so for ordered ones.
      const skip = set || field(body, 'skipIfAbsent', 'skip_if_absent') === true;
      return (r) => {
        const value = r.header(name);
        return value === undefined ? (skip ? undefined : null) : { key, value };
      };
    }
    case 'headerValueMatch':
    case 'header_value_match': {
      const value = String(field(body, 'descriptorValue', 'descriptor_value') ?? '');
      const key = String(field(body, 'descriptorKey', 'descriptor_key') ?? '') || 'header_match';
      const expect = field(body, 'expectMatch', 'expect_match') !== false;
      const matchers = ((body.headers as Obj[] | undefined) ?? []).map((h, i) => compileHeaderMatcher(h, [...path, kind, 'headers', i], problems));
      const entry = { key, value };
      return (r) => (matchers.every((m) => m(r)) === expect ? entry : null);
    }
    case 'metadata': {
      const key = String(field(body, 'descriptorKey', 'descriptor_key') ?? '');
      const metadataKey = (field(body, 'metadataKey', 'metadata_key') ?? {}) as Obj;
      const filter = String(metadataKey.key ?? '');
      const segments = ((metadataKey.path as Obj[] | undefined) ?? []).map((s) => String(s.key));
      const fallback = field(body, 'defaultValue', 'default_value') as string | undefined;
      const source = body.source === 'ROUTE_ENTRY' || body.source === 1 ? 'ROUTE_ENTRY' : 'DYNAMIC';
      return (r) => {
        const found = r.metadata?.(source, filter, segments);
        const value = found === undefined || found === '' ? fallback || undefined : found;
        return value === undefined ? null : { key, value };
      };
    }
    default:
      problems.push({ path, message: `unknown action ${JSON.stringify(kind)}` });
      return () => null;
  }
}

/**
 * Envoy's HeaderMatcher as rate-limit actions use it: all values joined by `,`; an absent header
 * matches only `presentMatch: false` (or `presentMatch: true` inverted); a matcher without a
 * specifier tests presence; `invertMatch` inverts a present header's result.
 */
function compileHeaderMatcher(h: Obj, path: (string | number)[], problems: CompileProblem[]): (r: ActionRequest) => boolean {
  const name = String(h.name ?? '').toLowerCase();
  const invert = field(h, 'invertMatch', 'invert_match') === true;
  const exact = field(h, 'exactMatch', 'exact_match') as string | undefined;
  const regex = field(h, 'regexMatch', 'regex_match') as string | undefined;
  const range = field(h, 'rangeMatch', 'range_match') as Obj | undefined;
  const present = field(h, 'presentMatch', 'present_match') as boolean | undefined;
  const prefix = field(h, 'prefixMatch', 'prefix_match') as string | undefined;
  const suffix = field(h, 'suffixMatch', 'suffix_match') as string | undefined;
  const specifiers = [exact, regex, range, present, prefix, suffix].filter((s) => s !== undefined).length;
  if (specifiers > 1) problems.push({ path, message: 'a header matcher has at most one of exactMatch, regexMatch, rangeMatch, presentMatch, prefixMatch, suffixMatch' });
  let test: (value: string) => boolean;
  let presentType = false;
  let presentValue = true;
  if (exact !== undefined) test = (v) => v === exact;
  else if (regex !== undefined) {
    const problem = re2Problem(regex);
    if (problem) {
      problems.push({ path: [...path, Object.hasOwn(h, 'regex_match') ? 'regex_match' : 'regexMatch'], message: problem });
      test = () => false;
    } else test = fullMatcher(regex);
  } else if (range !== undefined) {
    const start = BigInt(String(range.start ?? 0));
    const end = BigInt(String(range.end ?? 0));
    test = (v) => /^[+-]?[0-9]{1,19}$/.test(v) && BigInt(v) >= start && BigInt(v) < end;
  } else if (prefix !== undefined) test = (v) => v.startsWith(prefix);
  else if (suffix !== undefined) test = (v) => v.endsWith(suffix);
  else {
    presentType = true;
    presentValue = present ?? true;
    test = () => presentValue;
  }
  return (r) => {
    const value = r.headerJoined ? r.headerJoined(name) : r.header(name);
    if (value === undefined) return presentType && (invert ? presentValue : !presentValue);
    return test(value) !== invert;
  };
}

/**
 * The Envoy route `rate_limits` Gloo generates for these actions (what an Envoy in front of
 * Gatehouse-as-rate-limit-server is configured with): the config's generic_key first, set-style
 * lists marked and their headers `skip_if_absent`.
 */
export function toEnvoyRateLimits(rateLimits: readonly Obj[], configKey?: string): object[] {
  const prefix = configKey === undefined ? [] : [{ generic_key: { descriptor_value: configKey } }];
  const out: object[] = [];
  for (const entry of rateLimits) {
    const actions = (entry.actions as Obj[] | undefined) ?? [];
    const setActions = (field(entry, 'setActions', 'set_actions') as Obj[] | undefined) ?? [];
    if (actions.length > 0) out.push({ actions: [...prefix, ...actions.map((a) => envoyAction(a, false))] });
    if (setActions.length > 0) out.push({ actions: [...prefix, { generic_key: { descriptor_value: SET_DESCRIPTOR_VALUE } }, ...setActions.map((a) => envoyAction(a, true))] });
  }
  return out;
}

function envoyAction(action: Obj, set: boolean): object {
  const [kind] = Object.keys(action);
  const body = (action[kind!] ?? {}) as Obj;
  const s = (json: string, proto: string) => field(body, json, proto);
  switch (kind) {
    case 'sourceCluster':
    case 'source_cluster':
      return { source_cluster: {} };
    case 'destinationCluster':
    case 'destination_cluster':
      return { destination_cluster: {} };
    case 'remoteAddress':
    case 'remote_address':
      return { remote_address: {} };
    case 'genericKey':
    case 'generic_key':
      return { generic_key: { descriptor_value: s('descriptorValue', 'descriptor_value') } };
    case 'requestHeaders':
    case 'request_headers':
      return { request_headers: { header_name: s('headerName', 'header_name'), descriptor_key: s('descriptorKey', 'descriptor_key'), ...(set || s('skipIfAbsent', 'skip_if_absent') === true ? { skip_if_absent: true } : {}) } };
    case 'headerValueMatch':
    case 'header_value_match': {
      const expect = s('expectMatch', 'expect_match');
      return {
        header_value_match: {
          descriptor_value: s('descriptorValue', 'descriptor_value'),
          ...(expect === false ? { expect_match: false } : {}),
          headers: ((body.headers as Obj[] | undefined) ?? []).map(envoyHeaderMatcher),
        },
      };
    }
    case 'metadata': {
      const key = (s('metadataKey', 'metadata_key') ?? {}) as Obj;
      const fallback = s('defaultValue', 'default_value');
      return {
        metadata: {
          descriptor_key: s('descriptorKey', 'descriptor_key'),
          metadata_key: { key: key.key, path: ((key.path as Obj[] | undefined) ?? []).map((p) => ({ key: p.key })) },
          ...(fallback ? { default_value: fallback } : {}),
          source: body.source === 'ROUTE_ENTRY' || body.source === 1 ? 'ROUTE_ENTRY' : 'DYNAMIC',
        },
      };
    }
    default:
      return {};
  }
}

function envoyHeaderMatcher(h: Obj): object {
  const f = (json: string, proto: string) => field(h, json, proto);
  const out: Record<string, unknown> = { name: h.name };
  if (f('invertMatch', 'invert_match') === true) out.invert_match = true;
  if (f('exactMatch', 'exact_match') !== undefined) out.string_match = { exact: f('exactMatch', 'exact_match') };
  else if (f('regexMatch', 'regex_match') !== undefined) out.string_match = { safe_regex: { regex: f('regexMatch', 'regex_match') } };
  else if (f('prefixMatch', 'prefix_match') !== undefined) out.string_match = { prefix: f('prefixMatch', 'prefix_match') };
  else if (f('suffixMatch', 'suffix_match') !== undefined) out.string_match = { suffix: f('suffixMatch', 'suffix_match') };
  else if (f('rangeMatch', 'range_match') !== undefined) {
    const r = f('rangeMatch', 'range_match') as Obj;
    out.range_match = { start: String(r.start ?? 0), end: String(r.end ?? 0) };
  } else out.present_match = f('presentMatch', 'present_match') ?? true;
  return out;
}
