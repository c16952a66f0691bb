import { describe, expect, it } from 'vitest';

type ResponseRedirectStatus = Parameters<typeof Response.redirect>[1];
import { Request as SandboxRequest, Response as SandboxResponse } from './fetch-types.ts';

// Differential tests: the sandbox's Request and Response against Node's (undici's), the Fetch standard's reference here.

function outcome(run: () => unknown): { value?: unknown; error?: string } {
  try {
    return { value: run() };
  } catch (error) {
    return { error: `${(error as Error).name}: ${(error as Error).message}` };
  }
}

describe('Request', () => {
  // Issue 26 item 7: the URL is parsed (WHATWG), not only checked for a scheme.
  const urls = ['http://Example.COM', 'HTTP://a.test:80/x/../y?q#f', 'https://a.test/%7e', 'http://a.test/ space', '/relative', 'relative', 'http://', 'http://u:p@a.test/', 'http://u@a.test/', 'data:,x', 'http://[::1]:8080/', 'http://a.test:99999/'];
  it.each(urls)('parses %j as Node does', (url) => {
    const ours = outcome(() => new SandboxRequest(url).url);
    const theirs = outcome(() => new Request(url).url);
    expect(ours).toEqual(theirs);
  });

  const methods = ['get', 'GET', 'post', 'Post', 'put', 'delete', 'options', 'head', 'patch', 'PATCH', 'Patch', 'PROPFIND', 'custom', 'connect', 'TRACE', 'track', 'bad method', ''];
  it.each(methods)('normalises the method %j as Node does', (method) => {
    const ours = outcome(() => new SandboxRequest('http://a.test/', { method }).method);
    const theirs = outcome(() => new Request('http://a.test/', { method }).method);
    expect(ours.value ?? 'threw').toEqual(theirs.value ?? 'threw');
  });
});

describe('Response.redirect', () => {
  const cases: [string, number | undefined][] = [['http://a.test/x', undefined], ['HTTP://A.test', 301], ['http://a.test/ x', 307], ['/relative', 302], ['nope', 302], ['http://a.test/', 200], ['/relative', 200]];
  it.each(cases)('redirect(%j, %j) answers as Node does', (url, status) => {
    const answer = (r: Response | SandboxResponse) => [r.status, r.headers.get('location')];
    const ours = outcome(() => answer(SandboxResponse.redirect(url, status)));
    const theirs = outcome(() => answer(Response.redirect(url, status as ResponseRedirectStatus | undefined)));
    expect(ours.value ?? ours.error?.split(':')[0]).toEqual(theirs.value ?? theirs.error?.split(':')[0]);
  });
});
