import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, test } from 'vitest';
import type { MatcherSpec } from '../../config/schema/virtual-service.ts';
import { compileMatchers, literalPrefix, type RequestLine } from './route-matcher.ts';

function line(path: string, options: { method?: string; query?: string; headers?: IncomingHttpHeaders } = {}): RequestLine {
  return { method: options.method ?? 'GET', path, query: options.query ?? '', headers: options.headers ?? {} };
}

/** True when any compiled entry of `specs` matches (a route's semantics). */
function matches(specs: MatcherSpec[] | undefined, req: RequestLine): boolean {
  return compileMatchers(specs).some((m) => m.matches(req));
}

describe('path matchers', () => {
  test('no matchers, or an empty list, means prefix "/"', () => {
    expect(matches(undefined, line('/anything'))).toBe(true);
    expect(matches([], line('/'))).toBe(true);
  });

  test('prefix is a plain string prefix', () => {
    expect(matches([{ prefix: '/api' }], line('/api'))).toBe(true);
    expect(matches([{ prefix: '/api' }], line('/apiary'))).toBe(true);
    expect(matches([{ prefix: '/api/' }], line('/api'))).toBe(false);
  });

  test('exact matches the whole path', () => {
    expect(matches([{ exact: '/a' }], line('/a'))).toBe(true);
    expect(matches([{ exact: '/a' }], line('/a/'))).toBe(false);
  });

  test('regex must match the full path', () => {
    expect(matches([{ regex: '/u/[0-9]+' }], line('/u/12'))).toBe(true);
    expect(matches([{ regex: '/u/[0-9]+' }], line('/u/12/x'))).toBe(false);
    expect(matches([{ regex: '[0-9]+' }], line('/u/12'))).toBe(false);
    // An alternation is anchored as a whole.
    expect(matches([{ regex: '/a|/b' }], line('/a/x'))).toBe(false);
  });

  test('a regex is tried only when its literal start matches, with the same outcome', () => {
    expect(literalPrefix('/tenant-[0-9]+/x')).toBe('/tenant-');
    expect(literalPrefix('/users?/x')).toBe('/user');
    expect(literalPrefix('/ab*c')).toBe('/a');
    expect(literalPrefix('/ab{0,2}')).toBe('/a');
    expect(literalPrefix('/ab+')).toBe('/ab');
    expect(literalPrefix('/a|/b')).toBe('');
    expect(literalPrefix('\\/x')).toBe('');
    expect(literalPrefix('(/a)')).toBe('');
    for (const [regex, path, expected] of [
      ['/users?/[0-9]+', '/use/1', false],
      ['/users?/[0-9]+', '/users/1', true],
      ['/users?/[0-9]+', '/user/1', true],
      ['/ab*c', '/ac', true],
      ['/ab{0,2}', '/a', true],
      ['/a|/b', '/b', true],
      ['/tenant-[0-9]+', '/tenant-x', false],
    ] as const) {
      expect(matches([{ regex }], line(path)), `${regex} vs ${path}`).toBe(expected);
    }
  });

  test('regexes are RE2: (?i) inline, and header/query regexes too', () => {
    expect(matches([{ regex: '(?i)/Items/[0-9]+' }], line('/ITEMS/7'))).toBe(true);
    expect(matches([{ regex: '/items/(?i)abc' }], line('/items/ABC'))).toBe(true);
    expect(matches([{ regex: '/items/(?i)abc' }], line('/ITEMS/abc'))).toBe(false);
    expect(matches([{ prefix: '/', headers: [{ name: 'authorization', value: '(?i)bearer .+', regex: true }] }], line('/', { headers: { authorization: 'BEARER x' } }))).toBe(true);
    expect(matches([{ prefix: '/', queryParameters: [{ name: 'n', value: '\\pL+', regex: true }] }], line('/', { query: 'n=%C3%A9t%C3%A9' }))).toBe(true);
  });

  test('caseSensitive: false applies to prefix, exact and regex', () => {
    expect(matches([{ prefix: '/API', caseSensitive: false }], line('/api/x'))).toBe(true);
    expect(matches([{ exact: '/Login', caseSensitive: false }], line('/LOGIN'))).toBe(true);
    expect(matches([{ regex: '/item/[a-z]+', caseSensitive: false }], line('/ITEM/ABC'))).toBe(true);
    expect(matches([{ prefix: '/API' }], line('/api/x'))).toBe(false);
    // Even prefix "/" is compared without case; it matches everything either way.
    expect(matches([{ prefix: '/', caseSensitive: false }], line('/X'))).toBe(true);
  });
});

describe('methods, headers and query parameters', () => {
  test('methods are compared upper-case', () => {
    expect(matches([{ methods: ['get', 'Post'] }], line('/', { method: 'POST' }))).toBe(true);
    expect(matches([{ methods: ['GET'] }], line('/', { method: 'DELETE' }))).toBe(false);
  });

  test('headers: exact value, full-match regex, presence, invertMatch', () => {
    const h = (headers: IncomingHttpHeaders) => line('/', { headers });
    expect(matches([{ headers: [{ name: 'X-Env', value: 'prod' }] }], h({ 'x-env': 'prod' }))).toBe(true);
    expect(matches([{ headers: [{ name: 'x-env', value: 'prod' }] }], h({ 'x-env': 'production' }))).toBe(false);
    expect(matches([{ headers: [{ name: 'x-v', value: 'v[0-9]', regex: true }] }], h({ 'x-v': 'v1' }))).toBe(true);
    expect(matches([{ headers: [{ name: 'x-v', value: 'v[0-9]', regex: true }] }], h({ 'x-v': 'v12' }))).toBe(false);
    expect(matches([{ headers: [{ name: 'x-v' }] }], h({ 'x-v': '' }))).toBe(true);
    expect(matches([{ headers: [{ name: 'x-v' }] }], h({}))).toBe(false);
    expect(matches([{ headers: [{ name: 'x-v', value: '' }] }], h({ 'x-v': 'anything' }))).toBe(true);
    expect(matches([{ headers: [{ name: 'x-v', value: 'a', invertMatch: true }] }], h({ 'x-v': 'b' }))).toBe(true);
    expect(matches([{ headers: [{ name: 'x-v', value: 'a', invertMatch: true }] }], h({ 'x-v': 'a' }))).toBe(false);
    // Gloo: "invert_match: true, name: foo" matches when foo is absent.
    expect(matches([{ headers: [{ name: 'x-v', invertMatch: true }] }], h({}))).toBe(true);
    expect(matches([{ headers: [{ name: 'x-v', invertMatch: true }] }], h({ 'x-v': '1' }))).toBe(false);
    // Envoy: invertMatch with a value (or a regex) does not match a request without the header.
    expect(matches([{ headers: [{ name: 'x-v', value: 'a', invertMatch: true }] }], h({}))).toBe(false);
    expect(matches([{ headers: [{ name: 'x-v', value: 'v[0-9]', regex: true, invertMatch: true }] }], h({}))).toBe(false);
  });

  test('a repeated header is matched as its comma-joined value', () => {
    expect(matches([{ headers: [{ name: 'x-v', value: 'a,b' }] }], line('/', { headers: { 'x-v': ['a', 'b'] } as IncomingHttpHeaders }))).toBe(true);
  });

  test('query parameters: value (decoded), regex, presence; all must hold', () => {
    const q = (query: string) => line('/', { query });
    expect(matches([{ queryParameters: [{ name: 'q', value: 'a b' }] }], q('q=a%20b'))).toBe(true);
    expect(matches([{ queryParameters: [{ name: 'q', value: 'a b' }] }], q('q=a+b'))).toBe(true);
    expect(matches([{ queryParameters: [{ name: 'id', value: '[0-9]+', regex: true }] }], q('id=42'))).toBe(true);
    expect(matches([{ queryParameters: [{ name: 'id', value: '[0-9]+', regex: true }] }], q('id=42x'))).toBe(false);
    expect(matches([{ queryParameters: [{ name: 'flag' }] }], q('flag'))).toBe(true);
    expect(matches([{ queryParameters: [{ name: 'flag' }] }], q('other=1'))).toBe(false);
    expect(matches([{ queryParameters: [{ name: 'a', value: '1' }, { name: 'b' }] }], q('a=1'))).toBe(false);
    expect(matches([{ queryParameters: [{ name: 'a', value: '1' }, { name: 'b' }] }], q('b&a=1'))).toBe(true);
    // The first value of a repeated parameter is the one compared.
    expect(matches([{ queryParameters: [{ name: 'a', value: '1' }] }], q('a=1&a=2'))).toBe(true);
  });

  test('pseudo-headers match what Envoy sees: :authority the Host, :method, :path with its query, :scheme the connection', () => {
    const h = (name: string, value: string, regex = false) => [{ headers: [{ name, value, ...(regex ? { regex } : {}) }] }];
    // The Gloo workshop's first lab: Host echo.solo.io → echo.
    expect(matches(h(':authority', 'echo.solo.io'), line('/', { headers: { host: 'echo.solo.io' } }))).toBe(true);
    expect(matches(h(':authority', 'echo.solo.io'), line('/', { headers: { host: 'other.io' } }))).toBe(false);
    // As sent: a port is part of the authority (Envoy matches the header, not the routed host name).
    expect(matches(h(':authority', 'echo.solo.io'), line('/', { headers: { host: 'echo.solo.io:8080' } }))).toBe(false);
    expect(matches(h(':authority', 'echo\\.solo\\.io(:[0-9]+)?', true), line('/', { headers: { host: 'echo.solo.io:8080' } }))).toBe(true);
    // :method + :path as one matcher: both must hold (issue 31: GET / and POST /p fell through).
    const both = [{ headers: [{ name: ':method', value: 'GET' }, { name: ':path', value: '/p' }] }];
    expect(matches(both, line('/p'))).toBe(true);
    expect(matches(both, line('/'))).toBe(false);
    expect(matches(both, line('/p', { method: 'POST' }))).toBe(false);
    // :path holds the query: an exact /p does not match /p?x=1, a regex can.
    expect(matches(h(':path', '/p'), line('/p', { query: 'x=1' }))).toBe(false);
    expect(matches(h(':path', '/p\\?x=[0-9]+', true), line('/p', { query: 'x=1' }))).toBe(true);
    expect(matches(h(':scheme', 'https'), line('/'))).toBe(false);
    expect(matches(h(':scheme', 'https'), { ...line('/'), scheme: 'https' })).toBe(true);
    expect(matches(h(':scheme', 'http'), line('/'))).toBe(true);
    // Presence and inversion: pseudo-headers are always present.
    expect(matches([{ headers: [{ name: ':authority' }] }], line('/', { headers: { host: 'a' } }))).toBe(true);
    expect(matches([{ headers: [{ name: ':method', value: 'GET', invertMatch: true }] }], line('/', { method: 'POST' }))).toBe(true);
    // A client header spelled like a pseudo-header is never what is matched (HTTP/2 cannot send one; HTTP/1.1 names cannot start with ":").
    expect(matches(h(':method', 'DELETE'), line('/', { headers: { ':method': 'DELETE' } }))).toBe(false);
    // Names from Object.prototype are ordinary headers.
    expect(matches(h('constructor', 'x'), line('/', { headers: { constructor: 'x' } as IncomingHttpHeaders }))).toBe(true);
  });

  test('within one entry every condition must hold; any entry of a route may match', () => {
    const specs: MatcherSpec[] = [{ prefix: '/a', methods: ['GET'] }, { exact: '/b' }];
    expect(matches(specs, line('/a/x'))).toBe(true);
    expect(matches(specs, line('/a/x', { method: 'POST' }))).toBe(false);
    expect(matches(specs, line('/b', { method: 'POST' }))).toBe(true);
  });
});

describe('prefixRewrite', () => {
  test('a prefix matcher swaps only the matched prefix', () => {
    const [m] = compileMatchers([{ prefix: '/api/v1/' }]);
    expect(m!.rewrite('/api/v1/users/7', '/v1/')).toBe('/v1/users/7');
    expect(m!.rewrite('/api/v1/', '/')).toBe('/');
  });

  test('exact and regex matchers replace the whole path', () => {
    expect(compileMatchers([{ exact: '/old' }])[0]!.rewrite('/old', '/new')).toBe('/new');
    expect(compileMatchers([{ regex: '/r/.*' }])[0]!.rewrite('/r/x/y', '/fixed')).toBe('/fixed');
  });

  test('the default matcher (prefix "/") prepends', () => {
    expect(compileMatchers(undefined)[0]!.rewrite('/x', '/base/')).toBe('/base/x');
  });
});

describe('the route index by first path segment', () => {
  test('finds the same first match as scanning every route, for every kind of matcher', async () => {
    const { indexRoutes, matchRoute } = await import('./route-table.ts');
    const specs: MatcherSpec[][] = [
      [{ prefix: '/a/' }], [{ prefix: '/a' }], [{ exact: '/a' }], [{ exact: '/' }], [{ regex: '/b/[0-9]+' }], [{ regex: '/b[0-9]/x' }], [{ regex: '(?i)/C/.*' }],
      [{ prefix: '/C/', caseSensitive: false }], [{ exact: '/d/e' }, { prefix: '/f/' }], [{ prefix: '/g/', headers: [{ name: 'x', value: '1' }] }], [{ regex: '/h/a|/i/b' }], [{ prefix: '/' , methods: ['POST'] }],
    ];
    const routes = Array.from({ length: 40 }, (_, i) => ({ name: `r${i}`, matchers: compileMatchers(specs[i % specs.length]!) })) as never[];
    const index = indexRoutes(routes)!;
    expect(index).toBeDefined();
    const paths = ['/', '/a', '/a/', '/a/x', '/ab', '/b/12', '/b1/x', '/c/x', '/C/x', '/d/e', '/d', '/f/1', '/g/1', '/h/a', '/i/b', '/zz', ''];
    for (const path of paths) {
      for (const method of ['GET', 'POST']) {
        for (const headers of [{}, { x: '1' }]) {
          const req = { method, path, query: '', headers };
          const scanned = matchRoute({ name: 'v', routes }, req);
          const indexed = matchRoute({ name: 'v', routes, index }, req);
          expect((indexed?.route as { name?: string } | undefined)?.name, `${method} ${path}`).toBe((scanned?.route as { name?: string } | undefined)?.name);
        }
      }
    }
  });
});

describe('requiredLiteral (the substring search before an RE2 match)', () => {
  test('finds the longest literal every match contains, and gives up where unsure', async () => {
    const { requiredLiteral } = await import('./route-matcher.ts');
    expect(requiredLiteral('/[a-z]+-7/[0-9]+')).toBe('-7/');
    expect(requiredLiteral('/api/v[0-9]+/users')).toBe('/api/v');
    expect(requiredLiteral('/ab?cd')).toBe('/a');
    expect(requiredLiteral('/x\\.json')).toBe('/x.json');
    expect(requiredLiteral('/a\\d+bc')).toBe('/a');
    expect(requiredLiteral('/abc{2}')).toBe('/ab');
    expect(requiredLiteral('/(foo|bar)/baz')).toBe('');
    expect(requiredLiteral('(?i)/abc')).toBe('');
    expect(requiredLiteral('/[xy]z*')).toBe('/');
    expect(requiredLiteral('/(abc)?def')).toBe('def');
  });

  test('never changes what a regex matcher matches (differential against the plain RE2 match)', () => {
    const regexes = ['/[a-z]+-7/[0-9]+', '/api/v[0-9]+/users', '/ab?cd', '/x\\.json', '/a\\d+bc', '/abc{2}', '/[xy]z*', '/(abc)?def', '/a+b*c?/d', '/q[\\]]r/s', '/\\/\\/x'];
    const alphabet = ['/', 'a', 'b', 'c', 'd', 'x', 'y', 'z', '-', '7', '1', '.', 'j', 's', 'o', 'n', 'api', 'v2', 'users', 'def', 'q]r', '\\'];
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (const regex of regexes) {
      const [matcher] = compileMatchers([{ regex }]);
      const plain = new RegExp(`^(?:${regex})$`);
      for (let n = 0; n < 3000; n++) {
        let path = '/';
        const parts = 1 + Math.floor(random() * 6);
        for (let k = 0; k < parts; k++) path += alphabet[Math.floor(random() * alphabet.length)];
        expect(matcher!.matches({ method: 'GET', path, query: '', headers: {} }), `${regex} on ${path}`).toBe(plain.test(path));
      }
    }
  });
});
