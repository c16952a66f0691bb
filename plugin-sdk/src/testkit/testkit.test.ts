import { afterEach, describe, expect, it } from 'vitest';
import { checkRequest } from './check-request.ts';
import type { PluginHarness } from './harness.ts';
import { runInProcess } from './in-process.ts';
import { startPlugin, TEST_MODES } from './start-plugin.ts';
import { Echo } from './fixtures/echo-plugin.ts';

const entry = new URL('./fixtures/echo-plugin.ts', import.meta.url);

describe('checkRequest', () => {
  it('builds the CheckRequest the gateway sends: lowercase headers, host header, context extensions', () => {
    expect(checkRequest({ method: 'POST', path: '/a?b=1', headers: { 'X-Key': 'v' } })).toEqual({
      attributes: {
        request: { http: { method: 'POST', path: '/a?b=1', host: 'example.com', scheme: 'http', protocol: 'HTTP/1.1', query: 'b=1', headers: { host: 'example.com', 'x-key': 'v' } } },
        context_extensions: { config_id: 'default.test', source_type: 'route', source_name: 'test' },
      },
    });
  });
});

describe.each(TEST_MODES)('test kit (%s)', (mode) => {
  let plugin: PluginHarness | undefined;
  afterEach(async () => {
    await plugin?.close();
    plugin = undefined;
  });

  it('passes request, config and an empty State to Authorize', async () => {
    plugin = await startPlugin(mode, { entry, name: 'Echo', config: { greeting: 'hi', Labels: { team: 'a' } } });
    expect(plugin.mode).toBe(mode);
    const decision = await plugin.authorize({ method: 'PUT', path: '/x?y=1' });
    expect(decision).toEqual({
      allowed: true,
      headersToRemove: [],
      headersToSet: [
        { key: 'x-greeting', value: 'hi' },
        { key: 'x-method', value: 'PUT' },
        { key: 'x-path', value: '/x?y=1' },
        { key: 'x-config-id', value: 'default.test' },
        { key: 'x-labels', value: '{"team":"a"}' },
        { key: 'x-state', value: '{}' },
      ],
    });
  });

  it('denials keep status, headers and body', async () => {
    plugin = await startPlugin(mode, { entry, name: 'Echo' });
    expect(await plugin.authorize({ headers: { 'x-deny': '1' } })).toEqual({ allowed: false, status: 429, headers: [{ key: 'retry-after', value: '7' }], body: 'slow down' });
  });

  it('a throw and a garbage answer become 403s, recorded with the host codes', async () => {
    plugin = await startPlugin(mode, { entry, name: 'Echo' });
    const forbidden = { allowed: false, status: 403, headers: [], body: '' };
    expect(await plugin.authorize({ headers: { 'x-throw': '1' } })).toEqual(forbidden);
    expect(await plugin.authorize({ headers: { 'x-garbage': '1' } })).toEqual(forbidden);
    expect(plugin.failures.map((f) => f.code)).toEqual(['GH_PLUGIN_THREW', 'GH_PLUGIN_BAD_RESPONSE']);
    expect(plugin.failures[0]!.message).toContain('asked to throw');
  });

  it('records what the plugin logs', async () => {
    plugin = await startPlugin(mode, { entry, name: 'Echo' });
    await expect.poll(() => plugin!.logs).toEqual([{ level: 'debug', message: 'started', fields: { greeting: 'hello' } }]);
  });

  it('an unknown symbol is refused', async () => {
    await expect(startPlugin(mode, { entry, name: 'Echo', exportedSymbolName: 'Nope' })).rejects.toMatchObject({ code: 'GH_PLUGIN_SYMBOL_NOT_EXPORTED' });
  });
});

describe('runInProcess', () => {
  it('takes a plugin object directly', async () => {
    const plugin = await runInProcess(Echo, { Greeting: 'direct' });
    expect(await plugin.authorize()).toMatchObject({ allowed: true, headersToSet: expect.arrayContaining([{ key: 'x-greeting', value: 'direct' }]) });
  });

  it('refuses something that is not an ExtAuthPlugin', async () => {
    await expect(runInProcess({} as never)).rejects.toMatchObject({ code: 'GH_PLUGIN_BAD_EXPORT' });
  });
});
