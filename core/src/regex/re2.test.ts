import { describe, expect, test } from 'vitest';
import { RE2JS } from 're2js';
import { fullMatcher, programSizeBound, re2Problem, regexSubstitution, substitutionProblem } from './re2.ts';

describe('RE2 regexes (Envoy safe_regex)', () => {
  test.each([
    ['(?=a)b', 'lookahead'],
    ['/x(?!y)', 'negative lookahead'],
    ['(?<=a)b', 'lookbehind'],
    ['(?<!a)b', 'negative lookbehind'],
    ['(a)\\1', 'backreference "\\1"'],
    ['(?<n>a)\\k<n>', 'named backreference'],
  ])('%s is refused naming the %s', (source, named) => {
    expect(re2Problem(source)).toContain(named);
    expect(re2Problem(source)).toContain('RE2');
  });

  test('escaped and bracketed look-alikes are not lookaround or backreferences', () => {
    for (const source of ['\\(?=x', '[(?=]x', '\\\\1?', '[[:alpha:]]+(?:x)']) expect(re2Problem(source), source).toBeUndefined();
    // Inside a class RE2 has no backreference: `\1` there is an invalid escape, said as such.
    expect(re2Problem('[\\1]')).toContain('invalid escape sequence');
  });

  test('RE2 syntax JavaScript lacks is accepted and honoured: (?i), (?P<name>), POSIX classes, \\pL', () => {
    expect(fullMatcher('(?i)/API/v[0-9]+')('/api/V2')).toBe(true);
    expect(fullMatcher('/(?P<id>[0-9]+)')('/42')).toBe(true);
    expect(fullMatcher('[[:alpha:]]+')('abc')).toBe(true);
    expect(fullMatcher('\\pL+')('été')).toBe(true);
    expect(fullMatcher('a{2}')('aaa')).toBe(false);
  });

  test('a syntax error is reported in RE2 terms; programs larger than maxProgramSize are refused', () => {
    expect(re2Problem('/(unclosed')).toMatch(/^invalid regular expression \(RE2 syntax\): .*missing closing \)/);
    expect(re2Problem('a{1001}')).toContain('invalid repeat count');
    expect(re2Problem('/[a-z]+/[0-9]+', { maxProgramSize: 5 })).toMatch(/program size is \d+, over googleRe2.maxProgramSize 5/);
    expect(re2Problem('/[a-z]+/[0-9]+', { maxProgramSize: 100 })).toBeUndefined();
  });

  test('without googleRe2 the process limit applies: 100 by default, as Envoy (issue 24 finding 12)', () => {
    expect(re2Problem('/[a-z]{97}')).toBeUndefined();
    expect(re2Problem('/[a-z]{98}')).toBe("the regex's RE2 program size is 101, over the limit of 100 (GATEHOUSE_REGEX_MAX_PROGRAM_SIZE; Envoy's re2.max_program_size.error_level, Gloo's regexMaxProgramSize)");
    // A field's own googleRe2.maxProgramSize wins, larger or smaller.
    expect(re2Problem('/[a-z]{98}', { maxProgramSize: 1_000 })).toBeUndefined();
  });

  test('a pattern far over the limit is refused before it is compiled (compiling it took 0.8 s)', () => {
    const started = performance.now();
    expect(re2Problem('a{1000}'.repeat(2_000))).toMatch(/RE2 program is far larger than the limit of 100 .*not compiled/);
    expect(re2Problem('x'.repeat(100_000))).toMatch(/far larger/);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  test('the size bound read from the text is never below re2js\'s program size (seeded random patterns)', () => {
    const parts = ['a', 'b', '.', '\\d', '[a-z]', '[^/]', '\\pL', '(', '(?:', '(?P<n>', '(?i)', ')', '|', '*', '+', '?', '{2}', '{1,3}', '{2,}', '^', '$', '\\Qa.\\E', '[[:alpha:]]'];
    let seed = 24;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    let compiled = 0;
    for (let n = 0; n < 20_000; n++) {
      const source = Array.from({ length: 1 + Math.floor(random() * 12) }, () => parts[Math.floor(random() * parts.length)]).join('');
      let actual: number;
      try {
        actual = RE2JS.compile(source).programSize();
      } catch {
        continue;
      }
      compiled++;
      expect(programSizeBound(source), source).toBeGreaterThanOrEqual(actual);
    }
    expect(compiled).toBeGreaterThan(500);
  });

  test('matching is linear: a pattern that backtracks exponentially in JavaScript runs at once', () => {
    const full = fullMatcher('/(a+)+$');
    const started = performance.now();
    expect(full(`/${'a'.repeat(100_000)}!`)).toBe(false);
    expect(full(`/${'a'.repeat(100_000)}`)).toBe(true);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  test('substitution: every match replaced, \\N groups inserted, \\\\ a backslash, $ literal', () => {
    expect('/v1/a/v22/b'.replace(regexSubstitution('/v([0-9]+)/([a-z])', '/\\2-\\1'), '')).toBe('/a-1/b-22');
    expect('/x'.replace(regexSubstitution('x', '$1\\\\\\0'), '')).toBe('/$1\\x');
    expect(substitutionProblem('/(a)', '\\2')).toBe('the substitution uses \\2 but the pattern has 1 capture group');
    expect(substitutionProblem('/(a)', '\\\\2 \\1')).toBeUndefined();
  });
});
