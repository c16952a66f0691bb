import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlugin, TEST_MODES, type PluginHarness } from '@gatehouse/plugin-sdk/testkit';
import { checkRequest, type CheckRequestInit } from '@gatehouse/plugin-sdk/testkit';
import { allowedBy, opaInput } from './index.ts';
import { compilePolicy, DATA, describeWithOpa, opaEval, POLICY } from './test-support.ts';

// Rego compiled to Wasm by the real opa, evaluated in the sandbox by OPA's own SDK: each
// decision equals `opa eval` of the same policy, data and input (Gloo's OPA input of the request).

const entry = new URL('./index.ts', import.meta.url);
const claims = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** Requests that exercise each rule, on both sides of it. */
const REQUESTS: CheckRequestInit[] = [
  { method: 'GET', path: '/public/a' },
  { method: 'GET', path: '/publicity' },
  { method: 'HEAD', path: '/public/a' },
  { method: 'DELETE', path: '/x', headers: { authorization: 'Bearer abc' } },
  { method: 'DELETE', path: '/x', headers: { authorization: 'Bearer def' } },
  { method: 'GET', path: '/x', headers: { authorization: 'Bearer nope' } },
  { method: 'GET', path: '/x', headers: { authorization: 'Basic abc' } },
  { method: 'POST', path: '/api/v2/items', headers: { 'x-claims': claims({ team: 'core', scopes: ['read'] }) } },
  { method: 'POST', path: '/api/v2/items', headers: { 'x-claims': claims({ team: 'core', scopes: [] }) } },
  { method: 'POST', path: '/api/v2/items', headers: { 'x-claims': claims({ team: 'ops', scopes: ['read'] }) } },
  { method: 'POST', path: '/api/vX/items', headers: { 'x-claims': claims({ team: 'edge', scopes: ['w'] }) } },
  { method: 'POST', path: '/api/v10/items', headers: { 'x-claims': 'not base64 json' } },
  { method: 'POST', path: '/api/v1/items', headers: { 'x-claims': claims({ team: 'edge', scopes: ['w'] }) }, contextExtensions: { source_name: 'other' } },
];

describeWithOpa('the OPA plugin (Rego → Wasm in the sandbox)', 'plugins/opa/src/index.test.ts', () => {
  let allowWasm: string;
  let reasonsWasm: string;
  beforeAll(async () => {
    [allowWasm, reasonsWasm] = await Promise.all([compilePolicy(POLICY, 'authz/allow'), compilePolicy(POLICY, 'authz/reasons')]);
  }, 180_000);

  describe.each(TEST_MODES)('%s', (mode) => {
    let plugin: PluginHarness;
    beforeAll(async () => {
      plugin = await startPlugin(mode, { entry, name: 'Opa', config: { PolicyWasm: allowWasm, Entrypoint: 'authz/allow', Data: DATA } });
    });
    afterAll(() => plugin?.close());

    it('every decision equals opa eval on the same policy, data and input', async () => {
      let allowed = 0;
      for (const init of REQUESTS) {
        const expected = await opaEval(POLICY, DATA, opaInput({ CheckRequest: checkRequest(init), State: {} } as never), 'data.authz.allow');
        const decision = await plugin.authorize(init);
        expect({ init, allowed: decision.allowed }).toEqual({ init, allowed: allowedBy(expected) });
        if (decision.allowed) allowed++;
      }
      // Both outcomes were exercised.
      expect(allowed).toBeGreaterThan(2);
      expect(allowed).toBeLessThan(REQUESTS.length - 2);
      expect(plugin.failures).toEqual([]);
    });
  });

  it.each(TEST_MODES)('%s: a set-valued entrypoint is not `true`: denied, as Gloo\'s rule says', async (mode) => {
    const plugin = await startPlugin(mode, { entry, name: 'Opa', config: { PolicyWasm: reasonsWasm, Entrypoint: 'authz/reasons', Data: DATA } });
    try {
      const decision = await plugin.authorize({ method: 'POST', path: '/x' });
      expect(decision.allowed).toBe(false);
      expect(plugin.failures).toEqual([]);
      expect(await opaEval(POLICY, DATA, opaInput({ CheckRequest: checkRequest({ method: 'POST', path: '/x' }), State: {} } as never), 'data.authz.reasons')).toEqual(['no-auth', 'write']);
    } finally {
      await plugin.close();
    }
  });

  it('the policy\'s memory counts against the step\'s memoryLimitMb: a maximum above the budget is cut to it and the policy still runs', async () => {
    const plugin = await startPlugin('sandbox', { entry, name: 'Opa', memoryLimitMb: 16, config: { PolicyWasm: allowWasm, Entrypoint: 'authz/allow', Data: DATA, MaxMemoryPages: 65536 } });
    try {
      expect((await plugin.authorize({ method: 'GET', path: '/public/a' })).allowed).toBe(true);
    } finally {
      await plugin.close();
    }
  });
});
