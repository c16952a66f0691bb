import type { IncomingMessage } from 'node:http';
import { describe, expect, test } from 'vitest';
import { compileCors, isPreflight } from './cors-policy.ts';

describe('compileCors', () => {
  test('no policy compiles to undefined', () => {
    expect(compileCors(undefined)).toBeUndefined();
  });

  test('exact origins and full-match regexes are allowed; "*" allows any origin', () => {
    const cors = compileCors({ allowOrigin: ['https://a.example'], allowOriginRegex: ['https://[a-z]+\\.b\\.example'] })!;
    expect(cors.allows('https://a.example')).toBe(true);
    expect(cors.allows('https://x.b.example')).toBe(true);
    expect(cors.allows('https://x.b.example.evil')).toBe(false);
    expect(cors.allows('http://a.example')).toBe(false);
    expect(compileCors({ allowOrigin: ['*'] })!.allows('https://anything')).toBe(true);
  });

  test('preflight headers echo the origin and list methods, headers and max-age in seconds', () => {
    const cors = compileCors({ allowOrigin: ['https://a.example'], allowMethods: ['GET', 'PUT'], allowHeaders: ['x-a', 'x-b'], maxAge: '1.5m', allowCredentials: true })!;
    expect(cors.preflightHeaders('https://a.example')).toEqual({
      'access-control-allow-origin': 'https://a.example',
      vary: 'origin',
      'access-control-allow-credentials': 'true',
      'access-control-allow-methods': 'GET,PUT',
      'access-control-allow-headers': 'x-a,x-b',
      'access-control-max-age': '90',
    });
  });

  test("maxAge as Envoy and Gloo write it (a string of seconds) goes out as is", () => {
    expect(compileCors({ allowOrigin: ['https://a.example'], maxAge: '86400' })!.preflightHeaders('https://a.example')['access-control-max-age']).toBe('86400');
  });

  test('actual-response headers carry expose-headers, and nothing unset', () => {
    const cors = compileCors({ allowOrigin: ['https://a.example'], exposeHeaders: ['x-total'] })!;
    expect(cors.responseHeaders('https://a.example')).toEqual(['access-control-allow-origin', 'https://a.example', 'vary', 'origin', 'access-control-expose-headers', 'x-total']);
    // Appended to a request's list in place, after what is already there.
    const list = ['x-early', '1'];
    expect(cors.responseHeaders('https://a.example', list)).toBe(list);
    expect(list).toEqual(['x-early', '1', 'access-control-allow-origin', 'https://a.example', 'vary', 'origin', 'access-control-expose-headers', 'x-total']);
  });
});

describe('isPreflight', () => {
  const req = (method: string, headers: Record<string, string>) => ({ method, headers }) as unknown as IncomingMessage;
  test('OPTIONS with Origin and Access-Control-Request-Method', () => {
    expect(isPreflight(req('OPTIONS', { origin: 'https://a', 'access-control-request-method': 'GET' }))).toBe(true);
    expect(isPreflight(req('OPTIONS', { origin: 'https://a' }))).toBe(false);
    expect(isPreflight(req('OPTIONS', { 'access-control-request-method': 'GET' }))).toBe(false);
    expect(isPreflight(req('GET', { origin: 'https://a', 'access-control-request-method': 'GET' }))).toBe(false);
  });
});
