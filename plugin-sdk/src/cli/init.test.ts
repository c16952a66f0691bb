import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import rootPackage from '../../../package.json' with { type: 'json' };
import { assertNodeVersion } from '../node-version.ts';
import { initProject, PROJECT_TOOLS } from './init.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-init-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('gatehouse-plugin init', () => {
  it('names the plugin after the directory and depends on the SDK and the host as asked', async () => {
    const result = await initProject({ dir: join(dir, 'rate-limit'), sdk: 'file:/x/sdk.tgz' });
    expect(result.name).toBe('RateLimit');
    const manifest = JSON.parse(await readFile(join(dir, 'rate-limit/package.json'), 'utf8'));
    expect(manifest).toMatchObject({ name: 'rate-limit', type: 'module', engines: { node: '>=24' }, devDependencies: { '@gatehouse/plugin-sdk': 'file:/x/sdk.tgz', '@gatehouse/core': `^${rootPackage.version}` } });
    expect(await readFile(join(dir, 'rate-limit/src/index.ts'), 'utf8')).toContain('export const RateLimit: ExtAuthPlugin');
  });

  it('never overwrites: a non-empty directory is refused, and so is a name that is not an identifier', async () => {
    await mkdir(join(dir, 'taken'));
    await writeFile(join(dir, 'taken/keep.txt'), 'mine');
    await expect(initProject({ dir: join(dir, 'taken') })).rejects.toMatchObject({ code: 'GH_PLUGIN_INIT_NOT_EMPTY' });
    expect(await readFile(join(dir, 'taken/keep.txt'), 'utf8')).toBe('mine');
    await expect(initProject({ dir: join(dir, 'x'), name: 'my-plugin' })).rejects.toMatchObject({ code: 'GH_PLUGIN_BAD_NAME' });
  });

  it('gives new projects the tool versions this repository is tested with', () => {
    expect(PROJECT_TOOLS).toEqual({ vitest: rootPackage.devDependencies.vitest, typescript: rootPackage.devDependencies.typescript, '@types/node': rootPackage.devDependencies['@types/node'] });
  });
});

describe('the Node.js version check', () => {
  it('names the version found and the one needed', () => {
    expect(() => assertNodeVersion('20.20.2')).toThrow(expect.objectContaining({ code: 'GH_PLUGIN_NODE_VERSION', message: expect.stringContaining('Gatehouse plugins need Node.js 24 or newer, but this is Node.js 20.20.2') }));
    expect(() => assertNodeVersion('24.0.0')).not.toThrow();
    expect(() => assertNodeVersion('25.1.0')).not.toThrow();
  });
});
