import { describe, expect, test } from 'vitest';
import { compileHostRewrite, hostRewriteProblems, upstreamAuthority } from './host-rewrite.ts';

describe('Host rewrites (Gloo host_rewrite_type, Envoy host_rewrite_specifier)', () => {
  test('hostRewriteHeader: the header\'s value, the Host unchanged when it is absent or empty', () => {
    const r = compileHostRewrite({ hostRewriteHeader: 'X-Target-Host' });
    expect(upstreamAuthority(r, { host: 'gw.example', 'x-target-host': 'svc.internal' }, '/a', '10.0.0.1')).toEqual({ authority: 'svc.internal' });
    expect(upstreamAuthority(r, { host: 'gw.example' }, '/a', '10.0.0.1')).toEqual({ authority: 'gw.example' });
    expect(upstreamAuthority(r, { host: 'gw.example', 'x-target-host': '' }, '/a', '10.0.0.1')).toEqual({ authority: 'gw.example' });
  });

  test('hostRewritePathRegex: a substitution on the path (Envoy\'s example: /foo/bar → foo)', () => {
    const r = compileHostRewrite({ hostRewritePathRegex: { pattern: { regex: '^/(.+)/.+$' }, substitution: '\\1' } });
    expect(upstreamAuthority(r, { host: 'gw.example' }, '/foo/bar', 'x')).toEqual({ authority: 'foo' });
    // No match: the substitution leaves the path as it is, which is no host: the original is kept, and said so.
    expect(upstreamAuthority(r, { host: 'gw.example' }, '/single', 'x')).toEqual({ authority: 'gw.example', invalid: true });
  });

  test('hostile values: a header value that is not a host keeps the original Host, flagged to be counted', () => {
    const r = compileHostRewrite({ hostRewriteHeader: 'x-target-host', appendXForwardedHost: true });
    for (const bad of ['evil.example/path', 'a b', 'x\ty', 'café.example', 'a"b', 'host?q', 'h#f'])
      expect(upstreamAuthority(r, { host: 'gw.example', 'x-target-host': bad }, '/', 'x')).toEqual({ authority: 'gw.example', invalid: true });
    // The first value of a repeated header is the one used.
    expect(upstreamAuthority(r, { host: 'gw.example', 'x-target-host': ['svc:8080', 'other'] } as never, '/', 'x')).toEqual({ authority: 'svc:8080', forwardedHost: 'gw.example' });
    expect(upstreamAuthority(r, { host: 'gw.example', 'x-target-host': '[::1]:8080' }, '/', 'x').authority).toBe('[::1]:8080');
  });

  test('appendXForwardedHost: a rewrite appends the original Host unless it is already the last value', () => {
    const r = compileHostRewrite({ hostRewrite: 'backend.internal', appendXForwardedHost: true });
    expect(upstreamAuthority(r, { host: 'gw.example' }, '/', 'x')).toEqual({ authority: 'backend.internal', forwardedHost: 'gw.example' });
    expect(upstreamAuthority(r, { host: 'gw.example', 'x-forwarded-host': 'edge.example' }, '/', 'x')).toEqual({ authority: 'backend.internal', forwardedHost: 'edge.example,gw.example' });
    expect(upstreamAuthority(r, { host: 'gw.example', 'x-forwarded-host': 'edge.example, gw.example' }, '/', 'x')).toEqual({ authority: 'backend.internal', forwardedHost: 'edge.example, gw.example' });
    // No rewrite happened (header absent): nothing appended.
    expect(upstreamAuthority(compileHostRewrite({ hostRewriteHeader: 'x-h', appendXForwardedHost: true }), { host: 'gw.example' }, '/', 'x')).toEqual({ authority: 'gw.example' });
    expect(upstreamAuthority(compileHostRewrite({ autoHostRewrite: true, appendXForwardedHost: true }), { host: 'gw.example' }, '/', '10.0.0.7')).toEqual({ authority: '10.0.0.7', forwardedHost: 'gw.example' });
  });

  test('load-time problems: more than one rewrite (Gloo\'s oneof), a non-RE2 regex, a substitution naming a missing group', () => {
    expect(hostRewriteProblems({ hostRewrite: 'a', hostRewriteHeader: 'x' })).toEqual([{ field: ['hostRewriteHeader'], message: expect.stringContaining('set one of') }]);
    expect(hostRewriteProblems({ hostRewritePathRegex: { pattern: { regex: '(?=x)' }, substitution: '' } })[0]!.field).toEqual(['hostRewritePathRegex', 'pattern', 'regex']);
    expect(hostRewriteProblems({ hostRewritePathRegex: { pattern: { regex: '^/(a)$' }, substitution: '\\2' } })[0]!.field).toEqual(['hostRewritePathRegex', 'substitution']);
    expect(hostRewriteProblems({ hostRewriteHeader: 'x', autoHostRewrite: false })).toEqual([]);
    // Accepted before the oneof was checked (hostRewrite wins): a warning, not a rejection.
    expect(hostRewriteProblems({ hostRewrite: 'a', autoHostRewrite: true })).toEqual([{ field: ['autoHostRewrite'], message: expect.stringContaining('is not applied'), warning: true }]);
    expect(hostRewriteProblems({ hostRewrite: 'a', autoHostRewrite: true, hostRewriteHeader: 'x' })[0]!.warning).toBeUndefined();
    expect(compileHostRewrite({ autoHostRewrite: false })).toBeUndefined();
  });
});
