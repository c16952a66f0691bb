import { describe, expect, test } from 'vitest';
import { fullMatcher, re2Problem, regexSubstitution, substitutionProblem } from './re2.ts';

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
