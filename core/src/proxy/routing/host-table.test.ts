import { describe, expect, test } from 'vitest';
import { HostTable, parseHostHeader } from './host-table.ts';

function table(...domains: string[]): HostTable<string> {
  const t = new HostTable<string>();
  for (const d of domains) t.add(d, d);
  return t;
}

describe('parseHostHeader (RFC 9110 7.2; issue 17 finding 21)', () => {
  test.each([
    ['shop.test', 'shop.test'],
    ['Shop.Test.:80', 'shop.test'],
    ['shop.test.', 'shop.test'],
    ['shop.test:', 'shop.test'],
    ['[::1]:8080', '[::1]'],
    ['[::1]', '[::1]'],
    ['Example.COM:8080', 'example.com'],
    ['10.0.0.1:443', '10.0.0.1'],
    ['127.0.0.1', '127.0.0.1'],
  ])('%s → %s', (input, expected) => {
    expect(parseHostHeader(input)).toBe(expected);
  });

  test.each(['', 'host:notaport', 'a@shop.test', 'shop.test:abc', 'shop.test:1:2', 'shop.test:99999', 'shop test', 'shop.test/x', '%73hop.test', '[::1', '[::1]x'])(
    'malformed %j is refused, not routed to the catch-all',
    (input) => {
      expect(parseHostHeader(input)).toBeUndefined();
      expect(table('*').match(input)).toBeUndefined();
    },
  );

  test('no Host at all (HTTP/1.0) is the empty host, which only "*" matches', () => {
    expect(parseHostHeader(undefined)).toBe('');
  });

  test('a Host seen before gets the same answer (valid or not), past the bounded memory of them too', () => {
    const inputs = ['Shop.Test.:80', 'shop.test:abc', '[::1]:8080', 'a@shop.test', `${'x'.repeat(300)}.test`];
    const first = inputs.map((h) => parseHostHeader(h));
    expect(first).toEqual(['shop.test', undefined, '[::1]', undefined, undefined]);
    // More distinct hosts than are kept: the memory starts over, answers stay the same.
    for (let i = 0; i < 3_000; i++) expect(parseHostHeader(`h${i}.test:${i % 65_536}`)).toBe(`h${i}.test`);
    for (let round = 0; round < 2; round++) expect(inputs.map((h) => parseHostHeader(h))).toEqual(first);
  });
});

describe('HostTable (SPEC 3.2)', () => {
  test('exact names match case-insensitively, ignoring the port on either side', () => {
    const t = table('API.example.com', 'other.test:8080');
    expect(t.match('api.example.com')).toBe('API.example.com');
    expect(t.match('Api.Example.Com:443')).toBe('API.example.com');
    expect(t.match('other.test')).toBe('other.test:8080');
    expect(t.match('example.com')).toBeUndefined();
  });

  test('"*.suffix" matches subdomains only, the longest suffix first', () => {
    const t = table('*.example.com', '*.deep.example.com');
    expect(t.match('a.example.com')).toBe('*.example.com');
    expect(t.match('a.b.example.com')).toBe('*.example.com');
    expect(t.match('x.deep.example.com')).toBe('*.deep.example.com');
    expect(t.match('deep.example.com')).toBe('*.example.com');
    expect(t.match('example.com')).toBeUndefined();
    expect(t.match('badexample.com')).toBeUndefined();
  });

  test('the order domains are added in does not change which suffix wins', () => {
    const t = table('*.deep.example.com', '*.example.com');
    expect(t.match('x.deep.example.com')).toBe('*.deep.example.com');
  });

  test('exact beats suffix beats "*"', () => {
    const t = table('*', '*.example.com', 'www.example.com');
    expect(t.match('www.example.com')).toBe('www.example.com');
    expect(t.match('api.example.com')).toBe('*.example.com');
    expect(t.match('elsewhere.org')).toBe('*');
    expect(t.match(undefined)).toBe('*');
  });

  test('no "*": unknown and missing hosts match nothing', () => {
    const t = table('a.test');
    expect(t.match('b.test')).toBeUndefined();
    expect(t.match('')).toBeUndefined();
    expect(t.match(undefined)).toBeUndefined();
  });

  test("Envoy's wildcard forms: suffix wildcards other than '*.', prefix wildcards, in Envoy's order", () => {
    const table = new HostTable<string>();
    table.add('*-bar.foo.com', 'dash-suffix');
    table.add('*.foo.com', 'dot-suffix');
    table.add('api.*', 'prefix');
    table.add('api.v2.*', 'longer-prefix');
    table.add('*', 'any');
    expect(table.match('baz-bar.foo.com')).toBe('dash-suffix');
    expect(table.match('x.foo.com')).toBe('dot-suffix');
    expect(table.match('api.example.org')).toBe('prefix');
    expect(table.match('api.v2.example.org')).toBe('longer-prefix');
    // Suffix wildcards before prefix wildcards (Envoy's order), the wildcard matching at least one character.
    expect(table.match('api.foo.com')).toBe('dot-suffix');
    expect(table.match('-bar.foo.com')).toBe('dot-suffix');
    expect(table.match('api.')).toBe('any');
  });
});
