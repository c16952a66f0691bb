import type { IncomingHttpHeaders } from 'node:http';
import type { MatcherSpec } from '../config/schema/virtual-service.ts';

/** The parts of a request that routes match on. */
export interface RequestLine {
  readonly method: string;
  /** Path without the query string. */
  readonly path: string;
  /** Raw query string without `?` ('' when absent). */
  readonly query: string;
  readonly headers: IncomingHttpHeaders;
}

/** A compiled matcher entry: `matches` tests the request, `rewrite` applies `prefixRewrite`. */
export interface CompiledMatcher {
  matches(req: RequestLine): boolean;
  /** Swaps the matched prefix (or, for exact and regex matchers, the whole path) for `replacement`. */
  rewrite(path: string, replacement: string): string;
}

/**
 * Compiles a route's matcher list (SPEC 3.2) once at load time. Any entry may match;
 * an empty list means prefix `/`. Regexes match the full path, as Envoy's `safe_regex` does.
 */
export function compileMatchers(specs: readonly MatcherSpec[] | undefined): CompiledMatcher[] {
  if (!specs || specs.length === 0) return [compileMatcher({ prefix: '/' })];
  return specs.map(compileMatcher);
}

function compileMatcher(spec: MatcherSpec): CompiledMatcher {
  const tests: ((req: RequestLine) => boolean)[] = [];
  const caseSensitive = spec.caseSensitive !== false;
  const norm = caseSensitive ? (s: string) => s : (s: string) => s.toLowerCase();
  let rewrite: CompiledMatcher['rewrite'] = (_path, replacement) => replacement;

  if (spec.exact !== undefined) {
    const exact = norm(spec.exact);
    tests.push((req) => norm(req.path) === exact);
  } else if (spec.regex !== undefined) {
    const re = new RegExp(`^(?:${spec.regex})$`, caseSensitive ? 'u' : 'iu');
    tests.push((req) => re.test(req.path));
  } else {
    const prefix = norm(spec.prefix ?? '/');
    if (prefix !== '/' || !caseSensitive) tests.push((req) => norm(req.path).startsWith(prefix));
    rewrite = (path, replacement) => replacement + path.slice(prefix.length);
  }

  if (spec.methods && spec.methods.length > 0) {
    const methods = new Set(spec.methods.map((m) => m.toUpperCase()));
    tests.push((req) => methods.has(req.method));
  }

  for (const h of spec.headers ?? []) {
    const name = h.name.toLowerCase();
    const valueTest = valueMatcher(h.value, h.regex);
    const invert = h.invertMatch === true;
    tests.push((req) => {
      const raw = req.headers[name];
      const value = Array.isArray(raw) ? raw.join(',') : raw;
      return valueTest(value) !== invert;
    });
  }

  const queryTests = (spec.queryParameters ?? []).map((q) => ({ name: q.name, test: valueMatcher(q.value, q.regex) }));
  if (queryTests.length > 0) {
    tests.push((req) => {
      const params = new URLSearchParams(req.query);
      return queryTests.every(({ name, test }) => test(params.has(name) ? params.get(name)! : undefined));
    });
  }

  const matches = tests.length === 0 ? () => true : tests.length === 1 ? tests[0]! : (req: RequestLine) => tests.every((t) => t(req));
  return { matches, rewrite };
}

/** No value: presence. `regex`: full match. Otherwise exact equality. */
function valueMatcher(value: string | undefined, regex: boolean | undefined): (actual: string | undefined) => boolean {
  if (value === undefined || value === '') return (actual) => actual !== undefined;
  if (regex) {
    const re = new RegExp(`^(?:${value})$`, 'u');
    return (actual) => actual !== undefined && re.test(actual);
  }
  return (actual) => actual === value;
}
