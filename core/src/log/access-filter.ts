import { fullMatcher, re2Problem } from '../regex/re2.ts';
import { requestHeaderReader } from './access-format.ts';
import type { AccessEntry } from './access-log.ts';

/**
 * Gloo's access log `filter` (`als.options.gloo.solo.io.AccessLogFilter`, Envoy's
 * AccessLogFilter), compiled once when the Gateway loads into a predicate over an access entry:
 * a sink writes only the entries it passes (docs/gateway.md). The schema takes the filter as an
 * open object (it nests through `andFilter`/`orFilter`); this compiler checks it, reporting
 * problems and not-applied parts with their paths under the filter.
 */

/** Passes the entries to log. */
export type EntryFilter = (entry: AccessEntry) => boolean;

type Path = (string | number)[];

/** What compiling a filter found: `errors` reject the Gateway; `warnings` name what is not applied. */
export interface FilterNotes {
  readonly errors: { path: Path; message: string }[];
  readonly warnings: { path: Path; message: string }[];
}

type Obj = Record<string, unknown>;

const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The one filter kind of each AccessLogFilter (a protobuf oneof). */
const KINDS = ['statusCodeFilter', 'durationFilter', 'notHealthCheckFilter', 'traceableFilter', 'runtimeFilter', 'andFilter', 'orFilter', 'headerFilter', 'responseFlagFilter', 'grpcStatusFilter'] as const;

/** Nesting bound for and/or filters: a filter is configuration, not data. */
const MAX_DEPTH = 16;

/** `filter` with proto field names (`status_code_filter`, as Gloo's protojson takes them) renamed to JSON names, at every level. */
function jsonNames(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(jsonNames);
  if (!isObject(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()), jsonNames(v)]));
}

/** Compiles `filter` (at `path` in the Gateway, for the notes); a filter with errors passes everything (the Gateway is rejected anyway). */
export function compileAccessLogFilter(filter: unknown, path: Path, notes: FilterNotes): EntryFilter {
  return compileFilter(jsonNames(filter), path, notes, 0);
}

function compileFilter(filter: unknown, path: Path, notes: FilterNotes, depth: number): EntryFilter {
  const fail = (at: Path, message: string): EntryFilter => {
    notes.errors.push({ path: at, message });
    return () => true;
  };
  if (!isObject(filter)) return fail(path, 'an access log filter is an object with one filter kind');
  const kinds = Object.keys(filter);
  const unknown = kinds.find((k) => !(KINDS as readonly string[]).includes(k));
  if (unknown !== undefined) return fail([...path, unknown], `unknown access log filter ${unknown} (one of ${KINDS.join(', ')})`);
  if (kinds.length !== 1) return fail(path, `an access log filter has exactly one of ${KINDS.join(', ')}`);
  const kind = kinds[0] as (typeof KINDS)[number];
  const spec = filter[kind];
  const at = [...path, kind];
  if (spec !== undefined && spec !== null && !isObject(spec)) return fail(at, `${kind} is an object`);
  const body: Obj = (spec as Obj | null | undefined) ?? {};
  switch (kind) {
    case 'statusCodeFilter':
      return comparison(body, at, notes, (entry) => entry.status);
    case 'durationFilter':
      return comparison(body, at, notes, (entry) => entry.durationMs);
    case 'notHealthCheckFilter':
      // Envoy's health-check filter answers health checks itself; Gatehouse has none, so no logged request is one.
      return () => true;
    case 'traceableFilter':
      notes.warnings.push({ path: at, message: 'traceableFilter is not applied: every request passes it' });
      return () => true;
    case 'runtimeFilter':
      return runtime(body, at, notes);
    case 'andFilter':
    case 'orFilter': {
      if (depth + 1 >= MAX_DEPTH) return fail(at, `andFilter and orFilter nest at most ${MAX_DEPTH} deep`);
      const list = body.filters;
      if (!Array.isArray(list) || list.length < 2) return fail([...at, 'filters'], `${kind}.filters lists at least two filters`);
      const parts = list.map((f, i) => compileFilter(f, [...at, 'filters', i], notes, depth + 1));
      return kind === 'andFilter' ? (entry) => parts.every((p) => p(entry)) : (entry) => parts.some((p) => p(entry));
    }
    case 'headerFilter':
      if (!isObject(body.header)) return fail([...at, 'header'], 'headerFilter.header is a header matcher');
      return headerMatcher(body.header, [...at, 'header'], notes);
    case 'responseFlagFilter':
      notes.warnings.push({ path: at, message: 'responseFlagFilter is not applied: Gatehouse sets no Envoy response flags (it says why a request failed in x-gatehouse-error), so no request passes it' });
      return () => false;
    case 'grpcStatusFilter':
      notes.warnings.push({ path: at, message: 'grpcStatusFilter is not applied: every request passes it' });
      return () => true;
  }
}

/** `ComparisonFilter` (`op`: EQ, GE, LE; `value`: a RuntimeUInt32). */
function comparison(body: Obj, at: Path, notes: FilterNotes, measure: (entry: AccessEntry) => number): EntryFilter {
  const c = body.comparison;
  if (!isObject(c)) {
    notes.errors.push({ path: [...at, 'comparison'], message: 'comparison is required ({ op, value })' });
    return () => true;
  }
  const ops = ['EQ', 'GE', 'LE'];
  const op = typeof c.op === 'number' ? ops[c.op] : c.op === undefined ? 'EQ' : c.op;
  if (typeof op !== 'string' || !ops.includes(op)) {
    notes.errors.push({ path: [...at, 'comparison', 'op'], message: 'op is EQ, GE or LE' });
    return () => true;
  }
  const value = runtimeUint(c.value, [...at, 'comparison', 'value'], notes);
  if (op === 'GE') return (entry) => measure(entry) >= value;
  if (op === 'LE') return (entry) => measure(entry) <= value;
  return (entry) => measure(entry) === value;
}

/** A `RuntimeUInt32`: Gatehouse has no runtime layer, so `defaultValue` applies (as in Envoy when the key is not set). */
function runtimeUint(v: unknown, at: Path, notes: FilterNotes): number {
  if (v === undefined) return 0;
  if (!isObject(v)) {
    notes.errors.push({ path: at, message: 'value is { defaultValue, runtimeKey }' });
    return 0;
  }
  const n = v.defaultValue === undefined ? 0 : Number(v.defaultValue);
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) notes.errors.push({ path: [...at, 'defaultValue'], message: 'defaultValue is an unsigned 32-bit integer' });
  if (v.runtimeKey !== undefined) notes.warnings.push({ path: [...at, 'runtimeKey'], message: `runtimeKey is not applied: Gatehouse has no runtime layer, so defaultValue (${n}) applies, as in Envoy when the key is not set` });
  return n;
}

/** `RuntimeFilter`: `percentSampled` of the requests (Gatehouse has no runtime layer for `runtimeKey`). */
function runtime(body: Obj, at: Path, notes: FilterNotes): EntryFilter {
  const percent = body.percentSampled;
  let share = 0;
  if (isObject(percent)) {
    const denominators: Record<string, number> = { HUNDRED: 100, TEN_THOUSAND: 10_000, MILLION: 1_000_000 };
    const d = typeof percent.denominator === 'number' ? [100, 10_000, 1_000_000][percent.denominator] : denominators[String(percent.denominator ?? 'HUNDRED')];
    if (d === undefined) notes.errors.push({ path: [...at, 'percentSampled', 'denominator'], message: 'denominator is HUNDRED, TEN_THOUSAND or MILLION' });
    share = Math.min(1, Number(percent.numerator ?? 0) / (d ?? 100));
  }
  notes.warnings.push({ path: [...at, 'runtimeKey'], message: `runtimeKey is not applied: Gatehouse has no runtime layer, so percentSampled (${share * 100}%) of requests are logged, chosen at random` });
  return () => Math.random() < share;
}

/**
 * Envoy's route `HeaderMatcher` over the request's headers as logged (`:path` after rewrites,
 * `x-envoy-original-path` set when a rewrite changed it). An absent header matches only
 * `presentMatch` (false, or true inverted): inverting another matcher does not make an absent
 * header match (Envoy's HeaderUtility, without `treat_missing_header_as_empty`).
 */
function headerMatcher(h: Obj, at: Path, notes: FilterNotes): EntryFilter {
  if (typeof h.name !== 'string' || h.name === '') {
    notes.errors.push({ path: [...at, 'name'], message: 'the header name is required' });
    return () => true;
  }
  const read = requestHeaderReader(h.name.toLowerCase());
  const invert = h.invertMatch === true;
  const specifiers = ['exactMatch', 'safeRegexMatch', 'rangeMatch', 'presentMatch', 'prefixMatch', 'suffixMatch', 'containsMatch', 'stringMatch'].filter((k) => h[k] !== undefined);
  if (specifiers.length > 1) notes.errors.push({ path: at, message: `a header matcher has at most one of its match kinds (got ${specifiers.join(', ')})` });
  const kind = specifiers[0];
  let test: (value: string) => boolean;
  if (kind === undefined || kind === 'presentMatch') {
    const present = kind === undefined ? true : h.presentMatch === true;
    return (entry) => (read(entry) !== undefined) === present !== invert;
  }
  const text = (key: string): string => {
    const v = h[key];
    if (typeof v !== 'string') notes.errors.push({ path: [...at, key], message: `${key} is a string` });
    return String(v);
  };
  const regex = (source: unknown, path: Path): ((v: string) => boolean) => {
    const problem = typeof source === 'string' ? re2Problem(source) : 'regex is a string';
    if (problem) {
      notes.errors.push({ path, message: problem });
      return () => false;
    }
    return fullMatcher(source as string);
  };
  switch (kind) {
    case 'exactMatch': {
      const v = text(kind);
      test = (value) => value === v;
      break;
    }
    case 'prefixMatch': {
      const v = text(kind);
      test = (value) => value.startsWith(v);
      break;
    }
    case 'suffixMatch': {
      const v = text(kind);
      test = (value) => value.endsWith(v);
      break;
    }
    case 'containsMatch': {
      const v = text(kind);
      test = (value) => value.includes(v);
      break;
    }
    case 'safeRegexMatch': {
      const r = h.safeRegexMatch;
      test = regex(isObject(r) ? r.regex : undefined, [...at, kind, 'regex']);
      break;
    }
    case 'rangeMatch': {
      const r = isObject(h.rangeMatch) ? h.rangeMatch : {};
      const start = Number(r.start ?? 0);
      const end = Number(r.end ?? 0);
      test = (value) => /^[+-]?[0-9]{1,15}$/.test(value) && Number(value) >= start && Number(value) < end;
      break;
    }
    default:
      test = stringMatcher(h.stringMatch, [...at, 'stringMatch'], notes, regex);
  }
  return (entry) => {
    const value = read(entry);
    return value !== undefined && test(value) !== invert;
  };
}

/** Envoy's `StringMatcher` (`exact`, `prefix`, `suffix`, `contains`, `safeRegex`; `ignoreCase`). */
function stringMatcher(m: unknown, at: Path, notes: FilterNotes, regex: (source: unknown, path: Path) => (v: string) => boolean): (value: string) => boolean {
  if (!isObject(m)) {
    notes.errors.push({ path: at, message: 'stringMatch is { exact | prefix | suffix | contains | safeRegex, ignoreCase }' });
    return () => false;
  }
  const fold = m.ignoreCase === true ? (s: string) => s.toLowerCase() : (s: string) => s;
  for (const key of ['exact', 'prefix', 'suffix', 'contains'] as const) {
    if (typeof m[key] !== 'string') continue;
    const v = fold(m[key]);
    if (key === 'exact') return (value) => fold(value) === v;
    if (key === 'prefix') return (value) => fold(value).startsWith(v);
    if (key === 'suffix') return (value) => fold(value).endsWith(v);
    return (value) => fold(value).includes(v);
  }
  if (isObject(m.safeRegex)) return regex(m.safeRegex.regex, [...at, 'safeRegex', 'regex']);
  notes.errors.push({ path: at, message: 'stringMatch has one of exact, prefix, suffix, contains, safeRegex' });
  return () => false;
}
