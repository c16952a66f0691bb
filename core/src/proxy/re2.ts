import { RE2JS } from 're2js';

/**
 * Route regexes on RE2, as Envoy and Gloo run them (`safe_regex`): RE2 syntax (`(?i)`, `(?s)`,
 * `\pL`, `[[:alpha:]]`, `(?P<name>…)`), no lookaround and no backreferences, and linear-time
 * matching, so no pattern can block the event loop whatever the input.
 *
 * The engine is re2js, a pure JavaScript port of RE2: measured per match it costs 4–11× a
 * JavaScript `RegExp` (60–260 ns on short paths and header values), where re2-wasm costs 65–80×
 * (every call copies the string into WebAssembly memory, and each pattern holds memory that must
 * be freed by hand) and the native `re2` binding has no prebuilt binary we can install (it would
 * build RE2 and Abseil from C++ source on every install). Route matchers test a regex only after
 * its literal start matched (./route-matcher.ts), so most requests never run one.
 */

/** Compiled patterns by flags and source: a reload recompiles only regexes it has not seen (RE2JS objects are immutable and shareable). */
const compiledCache = new Map<string, RE2JS>();
const COMPILED_CACHE_MAX = 50_000;

/** RE2JS.compile through {@link compiledCache}; throws as it does. */
function compile(source: string, flags = 0): RE2JS {
  const key = `${flags}:${source}`;
  let re = compiledCache.get(key);
  if (!re) {
    re = RE2JS.compile(source, flags);
    // Bounded: configuration churn must not grow it forever; starting over costs one recompile each.
    if (compiledCache.size >= COMPILED_CACHE_MAX) compiledCache.clear();
    compiledCache.set(key, re);
  }
  return re;
}

/** Why `source` is not an RE2 regex Gatehouse accepts, or undefined. Messages name the construct. */
export function re2Problem(source: string, options: { maxProgramSize?: number | undefined } = {}): string | undefined {
  const construct = unsupportedConstruct(source);
  if (construct) return `${construct} is not supported: regexes use RE2 syntax, as in Envoy and Gloo`;
  let compiled: RE2JS;
  try {
    compiled = compile(source);
  } catch (error) {
    return `invalid regular expression (RE2 syntax): ${(error as Error).message}`;
  }
  if (options.maxProgramSize !== undefined && compiled.programSize() > options.maxProgramSize) {
    return `the regex's RE2 program size is ${compiled.programSize()}, over googleRe2.maxProgramSize ${options.maxProgramSize}`;
  }
  return undefined;
}

/**
 * Lookaround and backreferences named as such (RE2's own messages say "invalid escape sequence:
 * `\1`", which does not tell a user coming from JavaScript or PCRE what to change).
 */
function unsupportedConstruct(source: string): string | undefined {
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '\\') {
      const next = source[i + 1];
      if (next !== undefined && next >= '1' && next <= '9') return `the backreference "\\${next}"`;
      if (next === 'k' && (source[i + 2] === '<' || source[i + 2] === '{' || source[i + 2] === "'")) return 'the named backreference "\\k<…>"';
      i++;
    } else if (c === '[') {
      // A class: `]` right after `[` or `[^` is literal; escapes inside are skipped.
      let j = i + 1;
      if (source[j] === '^') j++;
      if (source[j] === ']') j++;
      while (j < source.length && source[j] !== ']') j += source[j] === '\\' ? 2 : source.startsWith('[:', j) ? Math.max(2, source.indexOf(':]', j + 2) - j + 2) : 1;
      i = j;
    } else if (c === '(' && source[i + 1] === '?') {
      const kind = source.startsWith('(?=', i) ? 'lookahead "(?=…)"' : source.startsWith('(?!', i) ? 'negative lookahead "(?!…)"' : source.startsWith('(?<=', i) ? 'lookbehind "(?<=…)"' : source.startsWith('(?<!', i) ? 'negative lookbehind "(?<!…)"' : undefined;
      if (kind) return `the ${kind}`;
    }
  }
  return undefined;
}

/**
 * A full-match test (Envoy's `safe_regex` matches the whole value). Throws on a pattern
 * {@link re2Problem} refuses; load-time checks keep such patterns out of route tables.
 */
export function fullMatcher(source: string, options: { caseInsensitive?: boolean } = {}): (input: string) => boolean {
  const re = compile(source, options.caseInsensitive ? RE2JS.CASE_INSENSITIVE : 0);
  return (input) => re.testExact(input);
}

/**
 * Envoy's RegexMatchAndSubstitute: every match of `pattern` replaced by `substitution`, where
 * `\0`…`\9` insert capture groups (RE2's `GlobalReplace`). The object is a `String.prototype
 * .replace` pattern (`path.replace(rewrite, '')`), so callers written for a `RegExp` need no change.
 */
export function regexSubstitution(pattern: string, substitution: string): { [Symbol.replace](input: string, _unused: string): string } {
  const re = compile(pattern);
  // The substitution parsed once: literal text and group numbers, alternating.
  const parts: (string | number)[] = [];
  let literal = '';
  for (let i = 0; i < substitution.length; i++) {
    const c = substitution[i]!;
    const next = substitution[i + 1];
    if (c === '\\' && next !== undefined && next >= '0' && next <= '9') {
      parts.push(literal, Number(next));
      literal = '';
      i++;
    } else if (c === '\\' && next === '\\') {
      literal += '\\';
      i++;
    } else literal += c;
  }
  parts.push(literal);
  const render = (...args: unknown[]) => parts.map((p) => (typeof p === 'number' ? ((args[p] as string | undefined) ?? '') : p)).join('');
  return { [Symbol.replace]: (input: string) => re.matcher(input).replaceAll(render) };
}

/** A substitution naming a group the pattern does not have (RE2's `CheckRewriteString`), or undefined. */
export function substitutionProblem(pattern: string, substitution: string): string | undefined {
  const groups = compile(pattern).groupCount();
  for (const m of substitution.matchAll(/\\\\|\\([0-9])/g)) {
    if (m[1] !== undefined && Number(m[1]) > groups) return `the substitution uses \\${m[1]} but the pattern has ${groups} capture group${groups === 1 ? '' : 's'}`;
  }
  return undefined;
}
