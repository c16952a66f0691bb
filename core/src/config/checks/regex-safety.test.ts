import { describe, expect, test } from 'vitest';
import { regexHazard } from './regex-safety.ts';

describe('regexHazard (issue 17 finding 13)', () => {
  test.each(['/(a+)+$', '(a*)*', '^(\\w+\\s?)*$', '(x+x+)+y', '/(a|aa)+$', '(a|a)*', '(.|x)+', '(\\d|1)*', '^(a)\\1$', '(?<n>a)\\k<n>', '(?:ab|ac){2,}'])('refuses %s', (source) => {
    expect(regexHazard(source)).toBeDefined();
  });

  test.each(['^/api/v[0-9]+/.*$', '/users/[^/]+/posts', '^/(users|groups)/[0-9]+$', '(foo|bar)+', '^/static/.*\\.(css|js)$', '[(|]+', '^/a(b|c)?d$'])('accepts %s', (source) => {
    expect(regexHazard(source)).toBeUndefined();
  });

  test('the refused pattern really is slow in this engine, and an accepted one is not (bounded input)', () => {
    // 22 characters keep the slow case to a fraction of a second; 33 took 10 s.
    const input = `/${'a'.repeat(22)}!`;
    let started = performance.now();
    new RegExp('/(a+)+$').test(input);
    const slow = performance.now() - started;
    started = performance.now();
    new RegExp('/a+$').test(input);
    const fast = performance.now() - started;
    expect(slow).toBeGreaterThan(fast * 10);
  });
});
