import { RE2JS } from 're2js';
import { configLimits } from '../config/limits.ts';

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

/**
 * Why `source` is not an RE2 regex Gatehouse accepts, or undefined. Messages name the construct.
 *
 * Program size, as Envoy: a regex whose compiled RE2 program has more instructions than
 * `maxProgramSize` (given: the field's own `googleRe2.maxProgramSize`; else this process's
 * GATEHOUSE_REGEX_MAX_PROGRAM_SIZE, default 100 like Envoy's `re2.max_program_size.error_level`)
 * is refused: matching costs time in proportion to program size × input length (a program of
 * 20,008 took 2 s per 15,000-character path). The size is re2js's `programSize()`, the number of
 * instructions of its compiled program, which counts as RE2 does except that RE2 compiles
 * character classes to UTF-8 byte ranges (a Unicode class such as `\pL` is one instruction here
 * and dozens in Envoy) and adds a few instructions for unanchored search: Gatehouse's sizes are
 * the same or smaller. Compiling itself costs time in proportion to the program (`a{1000}`
 * repeated 200 times is 200,000 instructions and 0.8 s): a pattern whose size bound
 * ({@link programSizeBound}) is far over the limit is refused before it is compiled.
 */
export function re2Problem(source: string, options: { maxProgramSize?: number | undefined } = {}): string | undefined {
  const construct = unsupportedConstruct(source);
  if (construct) return `${construct} is not supported: regexes use RE2 syntax, as in Envoy and Gloo`;
  const own = options.maxProgramSize;
  const limit = own ?? configLimits().regexMaxProgramSize;
  const setting = own !== undefined ? `googleRe2.maxProgramSize ${own}` : `the limit of ${limit} (GATEHOUSE_REGEX_MAX_PROGRAM_SIZE; Envoy's re2.max_program_size.error_level, Gloo's regexMaxProgramSize)`;
  const bound = programSizeBound(source);
  if (bound > Math.max(10 * limit, 10_000)) return `the regex's RE2 program is far larger than ${setting}: not compiled (repeats such as {n,m} copy what they repeat; simplify the regex, or raise the limit)`;
  let compiled: RE2JS;
  try {
    compiled = compile(source);
  } catch (error) {
    return `invalid regular expression (RE2 syntax): ${(error as Error).message}`;
  }
  if (compiled.programSize() > limit) return `the regex's RE2 program size is ${compiled.programSize()}, over ${setting}`;
  return undefined;
}

/**
 * An upper bound on the RE2 program size of `source`, read from the text in one pass without
 * compiling: each literal, class or assertion one instruction, a capture two, each `|` two, each `*`,
 * `+` and `?` one, and `x{n,m}` m copies of x (RE2 expands counted repeats) with one more each. A
 * pattern that does not parse gets some bound; compiling it reports the syntax error.
 */
export function programSizeBound(source: string): number {
  interface Group {
    done: number;
    current: number;
    last: number;
    capture: boolean;
  }
  const stack: Group[] = [{ done: 0, current: 0, last: 0, capture: false }];
  let top = stack[0]!;
  const atom = (size: number) => {
    top.current += size;
    top.last = size;
  };
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (c === '\\') {
      const next = source[i + 1];
      if (next === 'Q') {
        // \Q…\E: every character a literal.
        const end = source.indexOf('\\E', i + 2);
        const stop = end === -1 ? source.length : end;
        for (let j = i + 2; j < stop; j++) atom(1);
        i = end === -1 ? source.length : end + 1;
        continue;
      }
      if ((next === 'p' || next === 'P' || next === 'x') && source[i + 2] === '{') i = Math.max(i + 1, source.indexOf('}', i + 3));
      else i++;
      atom(1);
    } else if (c === '[') {
      let j = i + 1;
      if (source[j] === '^') j++;
      if (source[j] === ']') j++;
      while (j < source.length && source[j] !== ']') j += source[j] === '\\' ? 2 : source.startsWith('[:', j) ? Math.max(2, source.indexOf(':]', j + 2) - j + 2) : 1;
      i = j;
      atom(1);
    } else if (c === '(') {
      let capture = true;
      if (source[i + 1] === '?') {
        const close = source.indexOf(')', i);
        const colon = source.indexOf(':', i);
        const named = source[i + 2] === 'P' || source[i + 2] === '<';
        if (!named && close !== -1 && (colon === -1 || close < colon)) {
          // A flag group `(?i)`: no instructions.
          i = close;
          continue;
        }
        capture = named;
        if (!named) i = colon;
      }
      top = { done: 0, current: 0, last: 0, capture };
      stack.push(top);
    } else if (c === ')') {
      if (stack.length === 1) continue;
      const group = stack.pop()!;
      top = stack[stack.length - 1]!;
      atom(group.done + group.current + (group.capture ? 2 : 0));
    } else if (c === '|') {
      // The alternation instruction, and a no-op for an empty alternative.
      top.done += top.current + 2;
      top.current = 0;
      top.last = 0;
    } else if (c === '*' || c === '+' || c === '?') {
      top.current += 1;
      top.last += 1;
    } else if (c === '{') {
      const m = /^\{(\d{1,6})(,(\d{0,6}))?\}/.exec(source.slice(i, i + 16));
      if (!m) {
        atom(1);
        continue;
      }
      const min = Number(m[1]);
      const max = m[2] === undefined ? min : m[3] === '' ? min + 1 : Number(m[3]);
      const copies = Math.max(min, max, 1);
      const repeated = copies * (top.last + 1) + 1;
      top.current += repeated - top.last;
      top.last = repeated;
      i += m[0].length - 1;
    } else atom(1);
  }
  while (stack.length > 1) {
    const group = stack.pop()!;
    stack[stack.length - 1]!.current += group.done + group.current + (group.capture ? 2 : 0);
  }
  return stack[0]!.done + stack[0]!.current + 3;
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
