import { describe, expect, it } from 'vitest';
import { hostUrl } from '../host/url.ts';
import { createUrlClasses } from './url.ts';

// Differential tests (issue 10 acceptance): the sandbox's URL / URLSearchParams against Node's.

const { URL: SandboxURL, URLSearchParams: SandboxParams } = createUrlClasses(hostUrl) as { URL: typeof URL; URLSearchParams: typeof URLSearchParams };
const FIELDS = ['href', 'origin', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash'] as const;

/** A seeded PRNG, so failures reproduce. */
function random(seed: number): () => number {
  return () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
}
const pick = <T>(r: () => number, list: readonly T[]): T => list[Math.floor(r() * list.length)]!;

function describeUrl(make: () => URL): string {
  try {
    const url = make();
    return JSON.stringify(FIELDS.map((f) => url[f]));
  } catch (error) {
    return `${(error as Error).name}: ${(error as Error).message}`;
  }
}

describe('URL', () => {
  it('5,000 random URLs parse (or fail) exactly as Node parses them, with and without a base', () => {
    const r = random(42);
    const schemes = ['http://', 'https://', 'HTTP://', 'ftp://', 'file:///', 'mailto:', 'ws://', 'x:', '', '//', 'http:', 'https:\\\\'];
    const hosts = ['example.com', 'EXAMPLE.com.', '127.0.0.1', '0x7f.1', '[::1]', '[2001:db8::1]', 'xn--nxasmq6b.com', 'ünicode.test', 'user:pa ss@host', 'a b', '%41.com', 'host:0', 'host:65535', 'host:65536', ''];
    const paths = ['', '/', '/a/../b', '/./c', '/%2e%2E/d', '/é', '/a b', '\\\\back', '/x?y=1&z=%20', '?q=ü#frag', '#h', '/p;x', '/%zz'];
    const bases = [undefined, 'http://base.test/dir/file', 'https://u:p@b.test:8443/a/?q#f', 'file:///etc/', 'not a base'];
    for (let i = 0; i < 5000; i++) {
      const input = pick(r, schemes) + pick(r, hosts) + pick(r, paths) + (r() < 0.2 ? pick(r, paths) : '');
      const base = pick(r, bases);
      expect(describeUrl(() => new SandboxURL(input, base)), `${input} @ ${base}`).toBe(describeUrl(() => new URL(input, base)));
      expect(SandboxURL.canParse(input, base)).toBe(URL.canParse(input, base));
    }
  });

  it('setters behave as Node’s, and searchParams stays linked both ways', () => {
    const setters: [(typeof FIELDS)[number], string][] = [
      ['protocol', 'https'], ['protocol', 'foo'], ['username', 'ü s'], ['password', 'p@ss'], ['host', 'other.test:81'], ['hostname', 'x.test'],
      ['port', '8080'], ['port', 'abc'], ['port', '99999'], ['pathname', '/new path'], ['search', '?a=1&b=ü'], ['search', ''], ['hash', 'top'], ['href', 'http://z.test/'],
    ];
    for (const [field, value] of setters) {
      const ours = new SandboxURL('http://user@example.com:8000/path?x=1#h');
      const theirs = new URL('http://user@example.com:8000/path?x=1#h');
      (ours as unknown as Record<string, string>)[field] = value;
      (theirs as unknown as Record<string, string>)[field] = value;
      expect(ours.href, `${field}=${value}`).toBe(theirs.href);
    }
    expect(() => ((new SandboxURL('http://a.test/') as { href: string }).href = 'nope')).toThrow(TypeError);
    const ours = new SandboxURL('http://a.test/?b=2&a=1');
    const theirs = new URL('http://a.test/?b=2&a=1');
    for (const url of [ours, theirs]) {
      url.searchParams.append('c', 'x y');
      url.searchParams.sort();
    }
    expect(ours.href).toBe(theirs.href);
    for (const url of [ours, theirs]) url.search = '?z=9';
    expect([...ours.searchParams]).toEqual([...theirs.searchParams]);
    for (const url of [ours, theirs]) url.searchParams.delete('z');
    expect(ours.href).toBe(theirs.href);
    expect(JSON.stringify({ u: ours })).toBe(JSON.stringify({ u: theirs }));
  });

  // Issue 26 item 7: deleting the last search param drops the query's `?`, never one inside the fragment.
  it('emptying searchParams removes only the query, as Node does', () => {
    for (const href of ['http://a.test/?x=1#frag?', 'http://a.test/?x=1#?', 'http://a.test/p?x=1#a?b?', 'http://a.test/?x=1', 'http://a.test/#only?', 'http://a.test/?x=1#']) {
      const ours = new SandboxURL(href);
      const theirs = new URL(href);
      for (const url of [ours, theirs]) for (const name of [...url.searchParams.keys()]) url.searchParams.delete(name);
      for (const url of [ours, theirs]) url.searchParams.delete('absent');
      expect([href, ours.href, ours.search, ours.hash]).toEqual([href, theirs.href, theirs.search, theirs.hash]);
    }
  });

  it('plugin code cannot reach the host through URL objects', () => {
    const url = new SandboxURL('http://a.test/');
    expect(Object.getOwnPropertyNames(url)).toEqual([]);
    expect(Object.getOwnPropertyNames(SandboxParams)).not.toContain('fromQuery');
    expect(Object.getOwnPropertyNames(SandboxParams)).not.toContain('reset');
  });
});

describe('URLSearchParams', () => {
  it('random queries parse and serialize as Node’s (unicode, lone surrogates, escapes, +)', () => {
    const r = random(7);
    // Raw non-ASCII characters are left out here (Node garbles them next to a bad escape): see the next test.
    const parts = ['a', 'b=', '=c', 'u=%C3%A9', '%41%zz', '+', '%2B', 'x=1=2', '', '&&', 'k=\ud800', '\udc00=v', 'e=%F0%9F%98%80', '%E2%82', 'sp ace', '*-._~!'];
    for (let i = 0; i < 2000; i++) {
      const query = Array.from({ length: 1 + Math.floor(r() * 5) }, () => pick(r, parts)).join(pick(r, ['&', '&', ';']));
      const ours = new SandboxParams(r() < 0.5 ? `?${query}` : query);
      const theirs = new URLSearchParams(query);
      expect([...ours], query).toEqual([...new URLSearchParams(query)]);
      expect(ours.toString(), query).toBe(theirs.toString());
    }
  });

  it('raw non-ASCII next to a bad escape decodes as WHATWG says (Node 24 garbles it: a known divergence)', () => {
    expect([...new SandboxParams('%41%zz;😀=1')]).toEqual([['A%zz;😀', '1']]);
    expect([...new SandboxParams('x=é%41%zz')]).toEqual([['x', 'éA%zz']]);
    expect([...new SandboxParams('ü=é')]).toEqual([...new URLSearchParams('ü=é')]);
    expect([...new SandboxParams('😀=%F0%9F%98%80')]).toEqual([['😀', '😀']]);
  });

  it('constructors, mutators and iteration match Node', () => {
    const inits: unknown[] = [{ a: '1', b: 'ü' }, [['x', '1'], ['x', '2'], ['y', '3']], new Map([['m', 'n']]), 'q=1&q=2&r'];
    for (const init of inits) {
      const ours = new SandboxParams(init as never);
      const theirs = new URLSearchParams(init as never);
      for (const p of [ours, theirs]) {
        p.append('x', 'new');
        p.set('q', 'only');
        p.delete('y');
        p.sort();
      }
      expect(ours.toString()).toBe(theirs.toString());
      expect([ours.get('x'), ours.getAll('x'), ours.has('q', 'only'), ours.size]).toEqual([theirs.get('x'), theirs.getAll('x'), theirs.has('q', 'only'), theirs.size]);
    }
    expect(() => new SandboxParams([['a']] as never)).toThrow(TypeError);
    expect(() => new URLSearchParams([['a']] as never)).toThrow(TypeError);
  });
});
