import { describe, expect, test } from 'vitest';
import { normalizePath, removeDotSegments, targetError } from './normalize-path.ts';

const ok = (path: string, options?: Parameters<typeof normalizePath>[1]): string => {
  const result = normalizePath(path, options);
  if ('error' in result) throw new Error(`refused ${path}: ${result.error}`);
  return result.path;
};

describe('normalizePath (issue 17 finding 19)', () => {
  // Every variant that reached /admin or /private past a protected route before.
  test.each([
    ['/%61dmin', '/admin'],
    ['//admin', '/admin'],
    ['/./admin', '/admin'],
    ['/x/../admin', '/admin'],
    ['/%2e/admin', '/admin'],
    ['/%2E%2E/admin', '/admin'],
    ['/public/../private', '/private'],
    ['/public/%2e%2e/private', '/private'],
    ['/public/%2E./private', '/private'],
    ['/public/.%2e/private', '/private'],
    ['/x//../admin', '/admin'],
    ['///admin//', '/admin/'],
    ['/../../admin', '/admin'],
    ['/%41%44%4D%49%4E', '/ADMIN'],
    ['/adm%69n/', '/admin/'],
    ['/a/b/..', '/a/'],
    ['/a/.', '/a/'],
  ])('%s → %s', (raw, expected) => {
    expect(ok(raw)).toBe(expected);
  });

  test('reserved and non-ASCII escapes stay encoded, upper-cased', () => {
    expect(ok('/a%3fb/%e2%82%ac')).toBe('/a%3Fb/%E2%82%AC');
    expect(ok('/100%25')).toBe('/100%25');
  });

  test('plain paths come back unchanged (the same string)', () => {
    const path = '/api/v1/users';
    expect(ok(path)).toBe(path);
    expect(ok('/file.txt')).toBe('/file.txt');
    expect(ok('/a..b/.well-known')).toBe('/a..b/.well-known');
  });

  test('encoded slashes and backslashes are refused by default, unescaped or kept when configured', () => {
    for (const raw of ['/%2fadmin', '/%2Fadmin', '/public%2f..%2fprivate', '/%5cadmin', '/\\admin']) {
      expect(normalizePath(raw)).toHaveProperty('error');
    }
    const unescape = { normalize: true, mergeSlashes: true, escapedSlashes: 'unescape' as const };
    expect(ok('/%2fadmin', unescape)).toBe('/admin');
    expect(ok('/public%2f..%2fprivate', unescape)).toBe('/private');
    expect(ok('/\\admin', unescape)).toBe('/admin');
    const keep = { normalize: true, mergeSlashes: true, escapedSlashes: 'keep' as const };
    expect(ok('/a%2fb', keep)).toBe('/a%2Fb');
  });

  test('an invalid percent-encoding is refused', () => {
    expect(normalizePath('/a%zz')).toHaveProperty('error');
    expect(normalizePath('/a%2')).toHaveProperty('error');
  });

  test('normalisation off: only slashes merge', () => {
    expect(ok('/x/../%61', { normalize: false, mergeSlashes: true, escapedSlashes: 'keep' })).toBe('/x/../%61');
    expect(ok('//a', { normalize: false, mergeSlashes: true, escapedSlashes: 'keep' })).toBe('/a');
  });

  test('removeDotSegments never climbs above the root', () => {
    expect(removeDotSegments('/..')).toBe('/');
    expect(removeDotSegments('/a/../../b')).toBe('/b');
  });
});

describe('fragments (issue 29 finding 9)', () => {
  test('a # anywhere in the target is refused, whatever the normalisation options; an encoded %23 is a path character', () => {
    expect(targetError('/admin#x')).toMatch(/fragment/);
    expect(targetError('/x?q=1#/admin')).toMatch(/fragment/);
    expect(targetError('/admin%23x')).toBeUndefined();
    expect(normalizePath('/admin#')).toEqual({ error: 'a fragment (#) in the request target' });
    expect(normalizePath('/admin#x', { normalize: false, mergeSlashes: false, escapedSlashes: 'keep' })).toHaveProperty('error');
    expect(normalizePath('/admin%23x')).toEqual({ path: '/admin%23x' });
  });
});
