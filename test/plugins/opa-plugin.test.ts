/**
 * The OPA reference plugin (plugins/opa) end to end (issue 30 item 4): a Rego policy compiled
 * to WebAssembly by the real `opa` binary, OPA's Wasm SDK bundled into the plugin by the real
 * compiler, evaluated in the sandbox of a real `gatehouse run` (its default plugin process).
 * Every decision the client sees equals `opa eval` of the same policy and data on the exact
 * input the plugin evaluated (the plugin logs it: `LogDecisions`).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { compilePolicy, DATA, describeWithOpa, opaEval, POLICY } from '../../plugins/opa/src/test-support.ts';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

const OPA_PLUGIN = fileURLToPath(new URL('../../plugins/opa/src/index.ts', import.meta.url));
const claims = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

describeWithOpa('the OPA plugin through gatehouse run', 'test/plugins/opa-plugin.test.ts', () => {
  let upstream: TestServer & { paths: string[] };
  let config: ConfigDir;
  let pluginDir: string;
  let gatehouse: GatehouseProcess;

  beforeAll(async () => {
    const paths: string[] = [];
    upstream = Object.assign(await startServer((req, res) => (paths.push(req.url!), req.resume().on('end', () => res.end('upstream ok')))), { paths });
    pluginDir = await mkdtemp(join(tmpdir(), 'gatehouse-opa-plugin-'));
    const [built, policyWasm] = await Promise.all([buildPlugin({ entry: OPA_PLUGIN, name: 'Opa', outDir: pluginDir }), compilePolicy(POLICY, 'authz/allow')]);
    expect(built.metadata.exports).toContain('Opa');
    config = await makeConfigDir({
      'opa.yaml': [
        manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
        manifests.authConfig('opa', [{ pluginAuth: { name: 'Opa', config: { PolicyWasm: policyWasm, Entrypoint: 'authz/allow', Data: DATA, LogDecisions: true } } }]),
        manifests.virtualService('opa', {
          domains: ['*'],
          options: { extauth: { configRef: { name: 'opa' } } },
          routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'up' } } } }],
        }),
      ],
    });
    gatehouse = await startGatehouse('run', ['--config-dir', config.path, '--plugin-dir', pluginDir, '--extauth-timeout', '3s']);
    await gatehouse.waitForLog((l) => l.msg === 'OPA policy loaded', 30_000);
  }, 240_000);

  afterAll(async () => {
    await gatehouse?.stop();
    await upstream?.close();
    await config?.cleanup();
    if (pluginDir) await rm(pluginDir, { recursive: true, force: true });
  });

  it('each decision the client sees equals opa eval on the input the plugin evaluated; allowed requests reach the upstream', async () => {
    const requests: { method: string; path: string; headers?: Record<string, string> }[] = [
      { method: 'GET', path: '/public/a' },
      { method: 'GET', path: '/publicity' },
      { method: 'DELETE', path: '/admin/1', headers: { authorization: 'Bearer abc' } },
      { method: 'DELETE', path: '/admin/2', headers: { authorization: 'Bearer def' } },
      { method: 'GET', path: '/x', headers: { authorization: 'Bearer nope' } },
      { method: 'POST', path: '/api/v2/items', headers: { 'x-claims': claims({ team: 'core', scopes: ['read'] }) } },
      { method: 'POST', path: '/api/v2/items', headers: { 'x-claims': 'garbage' } },
    ];
    const outcomes: boolean[] = [];
    for (const [i, request] of requests.entries()) {
      const marker = `req-${i}`;
      const before = upstream.paths.length;
      const response = await fetch(`${gatehouse.url}${request.path}`, { method: request.method, headers: { ...request.headers, 'x-marker': marker } });
      await response.arrayBuffer();
      const line = await gatehouse.waitForLog((l) => l.msg === 'OPA decision' && (l.fields as { input?: { http_request?: { headers?: Record<string, string> } } })?.input?.http_request?.headers?.['x-marker'] === marker);
      const { input, allowed } = line.fields as { input: unknown; allowed: boolean };
      const expected = await opaEval(POLICY, DATA, input, 'data.authz.allow');
      expect({ request, allowed }).toEqual({ request, allowed: expected === true });
      expect({ request, status: response.status }).toEqual({ request, status: expected === true ? 200 : 403 });
      expect(upstream.paths.length).toBe(before + (allowed ? 1 : 0));
      outcomes.push(allowed);
    }
    expect(outcomes).toContain(true);
    expect(outcomes).toContain(false);
    // The plugin process ran it: the gateway never loaded the policy itself.
    expect(gatehouse.logs.some((l) => l.code === 'GH_PLUGIN_THREW' || l.code === 'GH_PLUGIN_OUT_OF_MEMORY')).toBe(false);
  });
});
