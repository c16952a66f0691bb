/**
 * Gloo routing compatibility (issue 15) through a real `gatehouse run` with real upstreams:
 * regexes on RE2 (`(?i)`, RE2-only syntax, lookaround and backreferences refused at load).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));

function validate(...paths: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', ...paths], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 20_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr });
    });
  });
}

const upstream = (name: string, port: number) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } } });
const virtualService = (name: string, domains: string[], routes: object[]) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name }, spec: { virtualHost: { domains, routes } } });
const to = (name: string) => ({ single: { upstream: { name } } });
const tagged = (tag: string) => ({ headerManipulation: { responseHeadersToAdd: [{ header: { key: 'x-route', value: tag } }] } });

let echo: TestServer;
let dir: ConfigDir;
let gw: GatehouseProcess;

beforeAll(async () => {
  echo = await startEcho('echo');
  dir = await makeConfigDir({
    'upstreams.yaml': [upstream('echo', echo.port)],
    're2.yaml': [
      virtualService('re2', ['re2.test'], [
        { matchers: [{ regex: '(?i)/Tenant-[0-9]+/.*' }], routeAction: to('echo'), options: tagged('tenant') },
        { matchers: [{ prefix: '/auth', headers: [{ name: 'authorization', value: '(?i)bearer [a-z0-9.]+', regex: true }] }], routeAction: to('echo'), options: tagged('bearer') },
        { matchers: [{ prefix: '/q', queryParameters: [{ name: 'word', value: '[[:alpha:]]+', regex: true }] }], routeAction: to('echo'), options: tagged('posix') },
        {
          matchers: [{ prefix: '/rx/' }],
          routeAction: to('echo'),
          options: { ...tagged('rewrite'), regexRewrite: { pattern: { regex: '^/rx/(?P<kind>[a-z]+)/([0-9]+)$', googleRe2: { maxProgramSize: 1000 } }, substitution: '/items/\\2/\\1' } },
        },
      ]),
    ],
    'lookahead.yaml': [virtualService('lookahead', ['ahead.test'], [{ matchers: [{ regex: '/a(?=b).*' }], routeAction: to('echo') }])],
    'backref.yaml': [virtualService('backref', ['back.test'], [{ matchers: [{ prefix: '/', headers: [{ name: 'x-pair', value: '(a)\\1', regex: true }] }], routeAction: to('echo') }])],
  });
  gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
});

afterAll(async () => {
  await gw?.stop();
  await echo?.close();
  await dir?.cleanup();
});

async function statusOf(name: string): Promise<{ state: string; reasons: { code: string; path: string; message: string }[] }> {
  const resources = (JSON.parse((await send(gw.adminUrl, { path: '/config' })).body) as { resources: { name: string; state: string; reasons: never[] }[] }).resources;
  return resources.find((r) => r.name === name)!;
}

describe('regexes follow RE2 (Envoy safe_regex)', () => {
  it('(?i) path and header regexes, POSIX classes in query regexes', async () => {
    const route = async (path: string, headers: Record<string, string> = {}) => (await send(gw.url, { path, headers: { host: 're2.test', ...headers } })).headers['x-route'];
    expect(await route('/TENANT-42/orders')).toBe('tenant');
    expect(await route('/tenant-x/orders')).toBeUndefined();
    expect(await route('/auth', { authorization: 'BEARER abc.def' })).toBe('bearer');
    expect(await route('/auth', { authorization: 'Basic abc' })).toBeUndefined();
    expect(await route('/q?word=hello')).toBe('posix');
    expect(await route('/q?word=hello1')).toBeUndefined();
  });

  it('regexRewrite with RE2 named groups and Envoy\'s \\N substitution; the query is kept', async () => {
    const r = await send(gw.url, { path: '/rx/books/42?x=1', headers: { host: 're2.test' } });
    expect((JSON.parse(r.body) as Echo).url).toBe('/items/42/books?x=1');
  });

  it('lookahead and backreferences are refused at load with the field path; gatehouse validate says so', async () => {
    const ahead = await statusOf('lookahead');
    expect(ahead.state).toBe('Rejected');
    expect(ahead.reasons[0]).toMatchObject({ code: 'GH_CONFIG_BAD_REGEX', path: 'spec.virtualHost.routes[0].matchers[0].regex' });
    expect(ahead.reasons[0]!.message).toContain('lookahead');
    expect((await send(gw.url, { path: '/abc', headers: { host: 'ahead.test' } })).status).toBe(404);
    const { code, out } = await validate(join(dir.path, 'upstreams.yaml'), join(dir.path, 'backref.yaml'));
    expect(code).toBe(1);
    expect(out).toContain('spec.virtualHost.routes[0].matchers[0].headers[0].value: the backreference "\\1" is not supported: regexes use RE2 syntax');
    expect(out).toContain('[GH_CONFIG_BAD_REGEX]');
  });
});
