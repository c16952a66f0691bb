import type { IncomingHttpHeaders } from 'node:http';
import type { MatcherSpec } from '../../config/schema/virtual-service.ts';
import { fullMatcher } from './re2.ts';

/** The parts of a request that routes match on. */
export interface RequestLine {
  readonly method: string;
  /** Path without the query string. */
  readonly path: string;
  /** Raw query string without `?` ('' when absent). */
  readonly query: string;
  readonly headers: IncomingHttpHeaders;
  /** `https` on a TLS connection, else `http` (absent: `http`): what a `:scheme` header matcher sees. */
  readonly scheme?: string;
}

/** A compiled matcher entry: `matches` tests the request, `rewrite` applies `prefixRewrite`. */
export interface CompiledMatcher {
  matches(req: RequestLine): boolean;
  /** Swaps the matched prefix (or, for exact and regex matchers, the whole path) for `replacement`. */
  rewrite(path: string, replacement: string): string;
  /** The first path segment every matching request has (`/a/…` → `a`), or undefined when it can vary (route index). */
  readonly segment: string | undefined;
}

/** A path's first segment: `/a/b` → `a`, `/a` → `a`, `/` → ''. */
export function firstSegment(path: string): string {
  const end = path.indexOf('/', 1);
  return end === -1 ? path.slice(1) : path.slice(1, end);
}

/** The first segment of every path that starts with `literal`, when `literal` already holds all of it. */
function segmentOfLiteral(literal: string): string | undefined {
  const end = literal.indexOf('/', 1);
  return literal.charCodeAt(0) === 47 && end !== -1 ? literal.slice(1, end) : undefined;
}

/**
 * Compiles a route's matcher list (SPEC 3.2) once at load time. Any entry may match;
 * an empty list means prefix `/`. Regexes are RE2 (./re2.ts) and match the full path, as Envoy's
 * `safe_regex` does.
 */
export function compileMatchers(specs: readonly MatcherSpec[] | undefined): CompiledMatcher[] {
  if (!specs || specs.length === 0) return [compileMatcher({ prefix: '/' })];
  return specs.map(compileMatcher);
}

/** Rough cost of a test: cheap ones run first, so most non-matching routes never run a regex. */
const CHEAP = 0;
const REGEX = 1;
const QUERY = 2;

function compileMatcher(spec: MatcherSpec): CompiledMatcher {
  const ranked: { cost: number; test: (req: RequestLine) => boolean }[] = [];
  const add = (test: (req: RequestLine) => boolean, cost = CHEAP) => ranked.push({ cost, test });
  const caseSensitive = spec.caseSensitive !== false;
  const norm = caseSensitive ? (s: string) => s : (s: string) => s.toLowerCase();
  let rewrite: CompiledMatcher['rewrite'] = (_path, replacement) => replacement;
  let segment: string | undefined;

  if (spec.exact !== undefined) {
    const exact = norm(spec.exact);
    add((req) => norm(req.path) === exact);
    if (caseSensitive && exact.charCodeAt(0) === 47) segment = firstSegment(exact);
  } else if (spec.regex !== undefined) {
    const full = fullMatcher(spec.regex, { caseInsensitive: !caseSensitive });
    // The regex's literal start, checked first: `/tenant-[0-9]+` needs `/tenant-`.
    const literal = caseSensitive ? literalPrefix(spec.regex) : '';
    if (literal !== '') add((req) => req.path.startsWith(literal));
    // A literal every match contains (`/[a-z]+-7/[0-9]+` needs `-7/`): a substring search spares most RE2 runs.
    const needed = caseSensitive ? requiredLiteral(spec.regex) : '';
    if (needed.length > 1 && !literal.includes(needed)) add((req) => req.path.includes(needed));
    add((req) => full(req.path), REGEX);
    segment = segmentOfLiteral(literal);
  } else {
    const prefix = norm(spec.prefix ?? '/');
    if (!caseSensitive) add((req) => req.path.toLowerCase().startsWith(prefix));
    else if (prefix !== '/') add((req) => req.path.startsWith(prefix));
    if (caseSensitive) segment = segmentOfLiteral(prefix);
    // Gloo: `prefixRewrite: ""` removes the prefix; a result without a leading slash gets one ("/foo" on "/foo" → "/").
    rewrite = (path, replacement) => {
      const out = replacement + path.slice(prefix.length);
      return out.charCodeAt(0) === 47 ? out : `/${out}`;
    };
  }

  if (spec.methods && spec.methods.length > 0) {
    const methods = new Set(spec.methods.map((m) => m.toUpperCase()));
    add((req) => methods.has(req.method));
  }

  for (const h of spec.headers ?? []) {
    const name = h.name.toLowerCase();
    const valueTest = valueMatcher(h.value, h.regex);
    const invert = h.invertMatch === true;
    const pseudo = Object.hasOwn(PSEUDO_HEADERS, name) ? PSEUDO_HEADERS[name] : undefined;
    add(
      (req) => {
        const raw = pseudo ? pseudo(req) : req.headers[name];
        // Envoy: an absent header fails every matcher except an inverted presence check
        // (`invertMatch` with a value does not match a request without the header).
        if (raw === undefined) return invert && h.value === undefined;
        const value = Array.isArray(raw) ? raw.join(',') : raw;
        return valueTest(value) !== invert;
      },
      h.regex ? REGEX : CHEAP,
    );
  }

  const queryTests = (spec.queryParameters ?? []).map((q) => ({ name: q.name, test: valueMatcher(q.value, q.regex) }));
  if (queryTests.length > 0) {
    add((req) => {
      const params = queryParams(req);
      return queryTests.every(({ name, test }) => test(params.has(name) ? params.get(name)! : undefined));
    }, QUERY);
  }

  // Stable sort: equal costs keep the spec's order.
  const tests = ranked.sort((a, b) => a.cost - b.cost).map((r) => r.test);
  return { matches: allOf(tests), rewrite, segment };
}

/**
 * The pseudo-headers a header matcher may name, read as Envoy's router sees them (issue 31): the
 * same over HTTP/1.1 and HTTP/2, since an HTTP/2 request's `:authority` is its `host` here
 * (server/http2.ts). `:path` is the normalised path with its query; `:authority` the Host the
 * virtual host was chosen by (as sent, port included). Other `:` names are refused at load
 * (config/checks/virtual-service.ts).
 */
export const PSEUDO_HEADERS: Readonly<Record<string, (req: RequestLine) => string | undefined>> = {
  ':authority': (req) => {
    const host = req.headers.host;
    return Array.isArray(host) ? host[0] : host;
  },
  ':method': (req) => req.method,
  ':path': (req) => (req.query === '' ? req.path : `${req.path}?${req.query}`),
  ':scheme': (req) => req.scheme ?? 'http',
};

/** Every test passes, in order. Short lists get their own closures: this runs for each candidate route of each request. */
function allOf(tests: readonly ((req: RequestLine) => boolean)[]): (req: RequestLine) => boolean {
  const [a, b, c] = tests;
  switch (tests.length) {
    case 0:
      return () => true;
    case 1:
      return a!;
    case 2:
      return (req) => a!(req) && b!(req);
    case 3:
      return (req) => a!(req) && b!(req) && c!(req);
    default:
      return (req) => {
        for (let i = 0; i < tests.length; i++) if (!tests[i]!(req)) return false;
        return true;
      };
  }
}

/** The last request whose query was parsed: route matching runs one request at a time, so one entry is a full cache. */
let parsedFor: RequestLine | undefined;
let parsed: URLSearchParams | undefined;

/** The request's query parameters, parsed once however many routes test them. */
function queryParams(req: RequestLine): URLSearchParams {
  if (parsedFor !== req) {
    parsed = new URLSearchParams(req.query);
    parsedFor = req;
  }
  return parsed!;
}

/**
 * The longest run of literal characters every match of `source` contains ('' when unsure):
 * top-level characters only (not in groups or classes), cut where `?`, `*` or `{` makes the
 * previous one optional and ended by `+` (repeats). Any `|` or inline flag gives up.
 */
export function requiredLiteral(source: string): string {
  if (source.includes('|') || source.includes('(?')) return '';
  let best = '';
  let run = '';
  let depth = 0;
  const end = () => {
    if (run.length > best.length) best = run;
    run = '';
  };
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (c === '[') {
      end();
      // Skip the class: `]` first in it is a member; escapes inside are skipped whole.
      i++;
      if (source[i] === '^') i++;
      if (source[i] === ']') i++;
      while (i < source.length && source[i] !== ']') i += source[i] === '\\' ? 2 : 1;
      continue;
    }
    if (c === '(') {
      end();
      depth++;
      continue;
    }
    if (c === ')') {
      depth--;
      end();
      continue;
    }
    if (depth > 0) continue;
    if (c === '?' || c === '*' || c === '{') {
      // The previous atom may be absent (or, for `{`, repeated a counted number of times).
      run = run.slice(0, -1);
      end();
      if (c === '{') while (i < source.length && source[i] !== '}') i++;
      continue;
    }
    if (c === '+') {
      end();
      continue;
    }
    if (c === '\\') {
      const next = source[i + 1];
      i++;
      // `\d`, `\w`, `\b`, `\pL`…: classes and assertions; `\.`, `\/`: the character itself.
      if (next === undefined || /[A-Za-z0-9]/.test(next)) end();
      else run += next;
      continue;
    }
    if (c === '.' || c === '^' || c === '$') {
      end();
      continue;
    }
    run += c;
  }
  end();
  return best;
}

/** No value: presence. `regex`: full match. Otherwise exact equality. */
function valueMatcher(value: string | undefined, regex: boolean | undefined): (actual: string | undefined) => boolean {
  if (value === undefined || value === '') return (actual) => actual !== undefined;
  if (regex) {
    const full = fullMatcher(value);
    return (actual) => actual !== undefined && full(actual);
  }
  return (actual) => actual === value;
}

/**
 * The literal text every match of `source` starts with ('' when unsure): characters up to
 * the first regex syntax, minus the last one when a quantifier that allows zero follows.
 * Any `|` gives up, since an alternative may start differently; so does a leading `(?i)` or group.
 */
export function literalPrefix(source: string): string {
  if (source.includes('|')) return '';
  let end = 0;
  while (end < source.length && !'\\^$.|?*+()[]{}'.includes(source[end]!)) end++;
  const next = source[end];
  return next === '?' || next === '*' || next === '{' ? source.slice(0, Math.max(0, end - 1)) : source.slice(0, end);
}
