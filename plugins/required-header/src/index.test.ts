import { afterEach, describe, expect, it } from 'vitest';
import { startPlugin, TEST_MODES, type PluginHarness } from '@gatehouse/plugin-sdk/testkit';

const entry = new URL('./index.ts', import.meta.url);
const config = { RequiredHeader: 'X-Api-Key', AllowedValues: ['alpha', 'beta'] };
const ALLOWED = { allowed: true, headersToSet: [{ key: 'matched-allowed-headers', value: 'true' }], headersToRemove: [] };
const FORBIDDEN = { allowed: false, status: 403, headers: [], body: '' };

describe.each(TEST_MODES)('RequiredHeader (%s)', (mode) => {
  let plugin: PluginHarness | undefined;
  afterEach(async () => {
    await plugin?.close();
    plugin = undefined;
  });

  it('allows an allowed value and tells the upstream with matched-allowed-headers: true', async () => {
    plugin = await startPlugin(mode, { entry, name: 'RequiredHeader', config });
    expect(await plugin.authorize({ headers: { 'x-api-key': 'alpha' } })).toEqual(ALLOWED);
    expect(await plugin.authorize({ headers: { 'X-API-KEY': 'beta' } })).toEqual(ALLOWED);
    expect(plugin.failures).toEqual([]);
  });

  it('denies with 403 and an empty body when the header is missing', async () => {
    plugin = await startPlugin(mode, { entry, name: 'RequiredHeader', config });
    expect(await plugin.authorize({ headers: { other: 'alpha' } })).toEqual(FORBIDDEN);
  });

  it('denies a value that is not allowed, compared exactly', async () => {
    plugin = await startPlugin(mode, { entry, name: 'RequiredHeader', config });
    expect(await plugin.authorize({ headers: { 'x-api-key': 'gamma' } })).toEqual(FORBIDDEN);
    expect(await plugin.authorize({ headers: { 'x-api-key': 'ALPHA' } })).toEqual(FORBIDDEN);
    expect(await plugin.authorize({ headers: { 'x-api-key': '' } })).toEqual(FORBIDDEN);
  });

  it('decodes config keys case-insensitively, like Go json.Unmarshal', async () => {
    plugin = await startPlugin(mode, { entry, name: 'RequiredHeader', config: { requiredheader: 'x-team', allowedValues: ['core'] } });
    expect(await plugin.authorize({ headers: { 'x-team': 'core' } })).toEqual(ALLOWED);
  });

  it('logs its configuration through the host logger', async () => {
    plugin = await startPlugin(mode, { entry, name: 'RequiredHeader', config });
    expect(plugin.logs).toContainEqual({ level: 'info', message: 'RequiredHeader configured', fields: { header: 'X-Api-Key', allowedValues: 2 } });
  });

  it('refuses to start without RequiredHeader', async () => {
    await expect(startPlugin(mode, { entry, name: 'RequiredHeader', config: { AllowedValues: ['a'] } })).rejects.toMatchObject({
      code: 'GH_PLUGIN_INIT_FAILED',
      message: expect.stringContaining('config.RequiredHeader is required'),
    });
  });

  it('refuses config that does not fit: unknown field and wrong type', async () => {
    await expect(startPlugin(mode, { entry, name: 'RequiredHeader', config: { ...config, AllowedValue: ['a'] } })).rejects.toMatchObject({
      code: 'GH_PLUGIN_BAD_CONFIG',
      message: expect.stringContaining('config.AllowedValue: unknown field'),
    });
    await expect(startPlugin(mode, { entry, name: 'RequiredHeader', config: { ...config, AllowedValues: 'alpha' } })).rejects.toMatchObject({
      code: 'GH_PLUGIN_BAD_CONFIG',
      message: expect.stringContaining('config.AllowedValues: expected an array, got a string'),
    });
  });
});
