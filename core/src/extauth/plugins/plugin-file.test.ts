import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY_VERSION } from '../../version.ts';
import { PluginCodes } from './codes.ts';
import { loadPluginFile, pluginFileName } from './plugin-file.ts';
import { createPluginStep } from './plugin-step.ts';
import { pluginDir, recordingLogger, REQUIRED_HEADER } from './test-support.ts';

let plugins: Awaited<ReturnType<typeof pluginDir>>;

beforeAll(async () => {
  plugins = await pluginDir([
    { entry: REQUIRED_HEADER, name: 'RequiredHeader' },
    { entry: REQUIRED_HEADER, name: 'OldBuild', gatewayVersion: '0.0.9' },
  ]);
});
afterAll(() => plugins?.remove());

describe('loadPluginFile', () => {
  it('reads metadata and body of a compiled plugin', async () => {
    const file = await loadPluginFile({ name: 'RequiredHeader' }, plugins.dir);
    expect(file).toMatchObject({ fileName: 'RequiredHeader.js', symbol: 'RequiredHeader', path: join(plugins.dir, 'RequiredHeader.js') });
    expect(file.metadata).toMatchObject({ format: 1, name: 'RequiredHeader', exports: ['RequiredHeader'], gatewayVersion: GATEWAY_VERSION });
    expect(file.body.startsWith('var __gatehousePlugin')).toBe(true);
  });

  it('defaults pluginFileName to <name>.js and exportedSymbolName to name', () => {
    expect(pluginFileName({ name: 'RequiredHeader' })).toBe('RequiredHeader.js');
    expect(pluginFileName({ name: 'RequiredHeader', pluginFileName: 'rh.js' })).toBe('rh.js');
  });

  it('version mismatch: fails naming both versions', async () => {
    const error = await loadPluginFile({ name: 'Old', pluginFileName: 'OldBuild.js', exportedSymbolName: 'RequiredHeader' }, plugins.dir).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: PluginCodes.VERSION_MISMATCH });
    expect((error as Error).message).toContain('built for gateway version 0.0.9');
    expect((error as Error).message).toContain(`this gateway is version ${GATEWAY_VERSION}`);
  });

  it('version mismatch: createPluginStep fails the same way, before running any plugin code', async () => {
    const logger = recordingLogger();
    await expect(createPluginStep({ name: 'OldBuild', exportedSymbolName: 'RequiredHeader' }, { pluginDir: plugins.dir, logger })).rejects.toMatchObject({
      code: PluginCodes.VERSION_MISMATCH,
      message: expect.stringMatching(/0\.0\.9.*0\.1\.0|0\.1\.0.*0\.0\.9/),
    });
    expect(logger.lines).toEqual([]);
  });

  it('a symbol that is not exported: fails listing the exports', async () => {
    await expect(loadPluginFile({ name: 'RequiredHeader', exportedSymbolName: 'Other' }, plugins.dir)).rejects.toMatchObject({
      code: PluginCodes.SYMBOL_NOT_EXPORTED,
      message: expect.stringContaining('does not export "Other" (it exports RequiredHeader)'),
    });
  });

  it('a missing file: fails naming the path and how to produce it', async () => {
    await expect(loadPluginFile({ name: 'Nope' }, plugins.dir)).rejects.toMatchObject({
      code: PluginCodes.NOT_FOUND,
      message: expect.stringContaining(`${join(plugins.dir, 'Nope.js')} does not exist; build it with "gatehouse-plugin build ENTRY --name Nope"`),
    });
  });

  it('a pluginFileName that leaves the plugin directory is refused', async () => {
    await expect(loadPluginFile({ name: 'x', pluginFileName: '../etc/passwd' }, plugins.dir)).rejects.toMatchObject({ code: PluginCodes.NOT_FOUND });
  });

  it('a changed body: the content hash no longer matches', async () => {
    const text = await readFile(join(plugins.dir, 'RequiredHeader.js'), 'utf8');
    await writeFile(join(plugins.dir, 'Tampered.js'), `${text}\nglobalThis.evil = true;`);
    await expect(loadPluginFile({ name: 'Tampered', exportedSymbolName: 'RequiredHeader' }, plugins.dir)).rejects.toMatchObject({
      code: PluginCodes.BAD_FILE,
      message: expect.stringContaining('the file was changed or truncated after the build'),
    });
  });

  it('a file that is not a compiled plugin', async () => {
    await writeFile(join(plugins.dir, 'Plain.js'), 'module.exports = {};\n');
    await expect(loadPluginFile({ name: 'Plain' }, plugins.dir)).rejects.toMatchObject({
      code: PluginCodes.BAD_FILE,
      message: expect.stringContaining('does not start with a "// @gatehouse-plugin" metadata line'),
    });
  });
});
