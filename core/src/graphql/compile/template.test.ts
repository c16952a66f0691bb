import { describe, expect, it } from 'vitest';
import { getPath, parsePath } from './path.ts';
import { DotPathSegmentError, EmptyPathSegmentError, JsonTemplate, Template } from './template.ts';

const ALL = ['parent', 'args', 'headers', 'body'] as const;

describe('paths', () => {
  it('parses a.b, a[0] and a[*].b', () => {
    expect(parsePath('a.b[0][*].c')).toEqual([{ key: 'a' }, { key: 'b' }, { index: 0 }, { all: true }, { key: 'c' }]);
    expect(parsePath('x-user-id')).toEqual([{ key: 'x-user-id' }]);
  });

  it('rejects malformed paths with the position', () => {
    expect(() => parsePath('a..b')).toThrow('empty segment at position 2 in path "a..b"');
    expect(() => parsePath('a[x]')).toThrow('"[x]" in path "a[x]": an index must be a number or *');
    expect(() => parsePath('a[0')).toThrow('unclosed "["');
    expect(() => parsePath('a.')).toThrow('ends with "."');
  });

  it('walks values; [*] maps over arrays; missing is undefined', () => {
    const value = { a: { items: [{ id: 1 }, { id: 2, tags: ['x'] }, {}] } };
    expect(getPath(value, parsePath('a.items[1].tags[0]'))).toBe('x');
    expect(getPath(value, parsePath('a.items[*].id'))).toEqual([1, 2, null]);
    expect(getPath(value, parsePath('a.nope.deeper'))).toBeUndefined();
    expect(getPath(value, parsePath('a.items[9]'))).toBeUndefined();
  });
});

describe('templates', () => {
  const scope = { parent: { id: 7, name: 'Ada', tags: ['a', 'b'] }, args: { q: 'a b/c', n: 3, flag: false }, headers: { authorization: 'Bearer t', 'x-multi': ['1', '2'] } };

  it('keeps the JSON type of a string that is exactly one template', () => {
    expect(Template.parse('{$args.n}', ALL).value(scope)).toBe(3);
    expect(Template.parse('{$args.flag}', ALL).value(scope)).toBe(false);
    expect(Template.parse('{$parent.tags}', ALL).value(scope)).toEqual(['a', 'b']);
    expect(Template.parse('{$args.missing}', ALL).value(scope)).toBeNull();
  });

  it('interpolates embedded templates as strings (objects as JSON, missing as empty)', () => {
    expect(Template.parse('id={$parent.id};n={$args.n};t={$parent.tags};m={$args.missing}', ALL).value(scope)).toBe('id=7;n=3;t=["a","b"];m=');
    expect(Template.parse('{$headers.Authorization}', ALL).value(scope)).toBe('Bearer t');
    expect(Template.parse('{$headers.x-multi}', ALL).value(scope)).toBe('1, 2');
    expect(Template.parse('no templates {here}', ALL).constant).toBe(true);
  });

  it('URL-encodes substituted values in paths, and refuses an empty path segment', () => {
    expect(Template.parse('/search/{$args.q}?page={$args.n}', ALL).urlPath(scope)).toBe('/search/a%20b%2Fc?page=3');
    expect(() => Template.parse('/users/{$args.missing}/posts', ALL).urlPath(scope)).toThrow(EmptyPathSegmentError);
    expect(() => Template.parse('/users/{$args.missing}', ALL).urlPath(scope)).toThrow('{$args.missing} is empty or missing');
    expect(Template.parse('/users?filter={$args.missing}', ALL).urlPath(scope)).toBe('/users?filter=');
    expect(Template.parse('/users/x{$args.missing}', ALL).urlPath(scope)).toBe('/users/x');
  });

  it('rejects unknown sources, sources not available here, and unclosed templates', () => {
    expect(() => Template.parse('{$context.x}', ALL)).toThrow('unknown template source "{$context.x}"');
    expect(() => Template.parse('{$body.x}', ['parent', 'args', 'headers'])).toThrow('$body is not available here; use one of $parent, $args, $headers');
    expect(() => Template.parse('/users/{$args.id', ALL)).toThrow('unclosed template at position 7');
    expect(() => Template.parse('{$args..id}', ALL)).toThrow('empty segment');
    expect(() => Template.parse('{$headers.a.b}', ALL)).toThrow('write a header as {$headers.<name>}');
  });

  it('evaluates templates inside JSON values and keeps constant parts as they are', () => {
    const t = JsonTemplate.parse({ id: '{$parent.id}', label: 'user {$parent.name}', fixed: { n: 1, list: ['x'] }, list: ['{$args.n}', 'lit'] }, ALL);
    expect(t.constant).toBe(false);
    expect(t.value(scope)).toEqual({ id: 7, label: 'user Ada', fixed: { n: 1, list: ['x'] }, list: [3, 'lit'] });
    expect(JsonTemplate.parse({ a: [1, 'b'] }, ALL).constant).toBe(true);
    expect(() => JsonTemplate.parse({ a: { b: ['{$nope}'] } }, ALL)).toThrow('at a.b[0]: unknown template source');
  });
});

describe('urlPath: a value cannot change the path structure (issue 25 finding 4)', () => {
  const path = Template.parse('/users/{$args.id}/posts', ALL);
  const at = (id: unknown) => path.urlPath({ args: { id } });
  it('refuses values that would make a . or .. segment, also next to literal dots', () => {
    expect(() => at('..')).toThrow(DotPathSegmentError);
    expect(() => at('.')).toThrow(DotPathSegmentError);
    expect(() => Template.parse('/a/.{$args.id}/b', ALL).urlPath({ args: { id: '.' } })).toThrow(DotPathSegmentError);
    expect(() => Template.parse('/a/{$args.x}{$args.y}', ALL).urlPath({ args: { x: '.', y: '.' } })).toThrow(DotPathSegmentError);
  });
  it('encodes what could otherwise split or end the path; other dots are data', () => {
    expect(at('../../admin?x=1#y')).toBe('/users/..%2F..%2Fadmin%3Fx%3D1%23y/posts');
    expect(at('%2e%2e')).toBe('/users/%252e%252e/posts');
    expect(at('a.b')).toBe('/users/a.b/posts');
    expect(at('...')).toBe('/users/.../posts');
    // In the query string a dot is only data.
    expect(Template.parse('/s?q={$args.id}', ALL).urlPath({ args: { id: '..' } })).toBe('/s?q=..');
  });
});
