/**
 * Gloo's Host rewrites through a real `gatehouse run` (issue 31 item 4): `hostRewriteHeader`,
 * `hostRewritePathRegex` and `appendXForwardedHost` as Envoy applies them; a header value or
 * substitution that is no host keeps the original Host and is counted; bad configs are rejected
 * naming the field (Gloo's oneof, RE2, a bounded program size).
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));

let echo: TestServer;
let config: ConfigDir;
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  echo = await startEcho('backend');
  const to = { single: { upstream: { name: 'backend' } } };
  config = await makeConfigDir({
    'rewrites.yaml': [
      manifests.upstream('backend', [{ addr: '127.0.0.1', port: echo.port }]),
      manifests.virtualService('rewrites', {
        domains: ['*'],
        routes: [
          { name: 'by-header', matchers: [{ prefix: '/by-header' }], routeAction: to, options: { hostRewriteHeader: 'X-Target-Host', appendXForwardedHost: true } },
          // Envoy applies it to the request's own path (before prefixRewrite), without the query.
          { name: 'by-path', matchers: [{ prefix: '/tenants/' }], routeAction: to, options: { prefixRewrite: '/t/', hostRewritePathRegex: { pattern: { regex: '^/tenants/([a-z0-9]+)/.*$' }, substitution: '\\1.tenants.internal' } } },
          { name: 'literal', matchers: [{ prefix: '/literal' }], routeAction: to, options: { hostRewrite: 'fixed.internal', appendXForwardedHost: true } },
          { name: 'plain', matchers: [{ prefix: '/' }], routeAction: to },
        ],
      }),
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', config.path], { timeoutMs: 60_000 });
}, 90_000);

afterAll(async () => {
  await gatehouse?.stop();
  await echo?.close();
  await config?.cleanup();
});

const seen = async (path: string, headers: Record<string, string | string[]>) => {
  const reply = await send(gatehouse.url, { path, headers });
  expect(reply.status).toBe(200);
  return JSON.parse(reply.body) as Echo;
};

async function invalidCount(route: string): Promise<number> {
  const text = await (await fetch(`${gatehouse.adminUrl}/metrics`)).text();
  return Number(new RegExp(`gatehouse_host_rewrite_invalid_total\\{route="${route}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
}

function validate(dir: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', dir], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 30_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

describe('Host rewrites through gatehouse run', () => {
  it('hostRewriteHeader: the header\'s value is the Host; appendXForwardedHost appends the original', async () => {
    const r = await seen('/by-header/a', { host: 'gw.example', 'x-target-host': 'orders.internal:8443' });
    expect(r.headers.host).toBe('orders.internal:8443');
    expect(r.headers['x-forwarded-host']).toBe('gw.example');
    // An x-forwarded-host from an earlier proxy keeps its values, the original Host appended last.
    const chained = await seen('/by-header/b', { host: 'gw.example', 'x-target-host': 'orders.internal', 'x-forwarded-host': 'edge.example' });
    expect(chained.headers['x-forwarded-host']).toBe('edge.example,gw.example');
  });

  it('hostRewriteHeader absent or empty: the Host is passed on and nothing is appended', async () => {
    const absent = await seen('/by-header/c', { host: 'gw.example' });
    expect(absent.headers.host).toBe('gw.example');
    expect(absent.headers['x-forwarded-host']).toBeUndefined();
    const empty = await seen('/by-header/d', { host: 'gw.example', 'x-target-host': '' });
    expect(empty.headers.host).toBe('gw.example');
  });

  it('hostile: a header value that is no host keeps the original Host, and is counted', async () => {
    const before = await invalidCount('by-header');
    const values = ['evil.example/admin', 'a b.example', 'x.example?q=1', 'x.example#f', '"quoted"', 'a\\b'];
    for (const value of values) {
      const r = await seen('/by-header/e', { host: 'gw.example', 'x-target-host': value });
      expect(r.headers.host).toBe('gw.example');
      expect(r.headers['x-forwarded-host']).toBeUndefined();
    }
    await eventually(async () => (await invalidCount('by-header')) === before + values.length);
    // The gateway serves on.
    expect((await send(gatehouse.url, { path: '/x', headers: { host: 'gw.example' } })).status).toBe(200);
  });

  it('hostRewritePathRegex: the substitution on the request path (without query) is the Host; the path is rewritten as usual', async () => {
    const r = await seen('/tenants/acme42/orders?since=1', { host: 'gw.example' });
    expect(r.headers.host).toBe('acme42.tenants.internal');
    expect(r.url).toBe('/t/acme42/orders?since=1');
    // No match: the substitution leaves the path, which is no host: the original is kept (counted).
    const before = await invalidCount('by-path');
    const miss = await seen('/tenants/ACME', { host: 'gw.example' });
    expect(miss.headers.host).toBe('gw.example');
    await eventually(async () => (await invalidCount('by-path')) === before + 1);
  });

  it('hostRewrite with appendXForwardedHost: the literal Host, the original in x-forwarded-host', async () => {
    const r = await seen('/literal', { host: 'gw.example:8080' });
    expect(r.headers.host).toBe('fixed.internal');
    expect(r.headers['x-forwarded-host']).toBe('gw.example:8080');
  });
});

describe('Host rewrite config', () => {
  const route = (options: object) => [
    manifests.upstream('backend', [{ addr: '127.0.0.1', port: 1 }]),
    manifests.virtualService('vs', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'backend' } } }, options }] }),
  ];

  it.each([
    ['two rewrites at once (Gloo\'s host_rewrite_type oneof)', { hostRewrite: 'a.example', hostRewriteHeader: 'x-h' }, 'options.hostRewriteHeader', 'set one of'],
    ['a regex RE2 refuses (lookahead)', { hostRewritePathRegex: { pattern: { regex: '^/(?=a)(.*)$' }, substitution: '\\1' } }, 'options.hostRewritePathRegex.pattern.regex', 'GH_CONFIG_BAD_REGEX'],
    ['a regex over its program size', { hostRewritePathRegex: { pattern: { regex: '^/(a|b|c|d|e|f|g|h)+/(.*)$', googleRe2: { maxProgramSize: 5 } }, substitution: '\\2' } }, 'options.hostRewritePathRegex.pattern.regex', 'maxProgramSize'],
    ['a substitution naming a missing group', { hostRewritePathRegex: { pattern: { regex: '^/(a)$' }, substitution: '\\3' } }, 'options.hostRewritePathRegex.substitution', 'GH_CONFIG_BAD_REGEX'],
    ['a pseudo-header as hostRewriteHeader', { hostRewriteHeader: ':authority' }, 'options.hostRewriteHeader', ''],
  ])('%s is rejected naming the field', async (_what, options, field, text) => {
    const dir = await makeConfigDir({ 'vs.yaml': route(options) });
    try {
      const { code, out } = await validate(dir.path);
      expect(code).not.toBe(0);
      expect(out).toContain(field);
      expect(out).toContain(text);
    } finally {
      await dir.cleanup();
    }
  });
});
