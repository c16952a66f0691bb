import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GATEWAY_VERSION } from '../version.ts';
import { buildPlugin } from './build-plugin.ts';
import { BuildCodes } from './errors.ts';
import { contentHash, parsePluginFile, PLUGIN_GLOBAL } from './metadata.ts';
import { SDK_VERSION } from './sdk-version.ts';

const REQUIRED_HEADER = fileURLToPath(new URL('../../../plugins/required-header/src/index.ts', import.meta.url));
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-build-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

async function source(name: string, text: string): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, text);
  return file;
}

describe('buildPlugin', () => {
  it('writes <out>/<name>.js: a metadata line, then one self-contained script', async () => {
    const result = await buildPlugin({ entry: REQUIRED_HEADER, name: 'RequiredHeader', outDir: join(dir, 'out') });
    expect(result.file).toBe(join(dir, 'out', 'RequiredHeader.js'));
    expect(result.warnings).toEqual([]);
    const text = await readFile(result.file, 'utf8');
    const { metadata, body } = parsePluginFile(text);
    expect(metadata).toEqual({ format: 1, name: 'RequiredHeader', exports: ['RequiredHeader'], gatewayVersion: GATEWAY_VERSION, sdkVersion: SDK_VERSION, contentHash: contentHash(body) });
    expect(result.metadata).toEqual(metadata);
    // Self-contained: no module syntax, no require, the SDK helpers inlined.
    expect(body).not.toMatch(/^\s*(import|export)\s/m);
    expect(body).not.toContain('require(');
    expect(body).toContain('function AuthorizedResponse');
    // A classic script that leaves the exports on the global the host reads.
    const sandbox: Record<string, unknown> = {};
    new Function('globalThis', `${body.replace(`var ${PLUGIN_GLOBAL} =`, `globalThis.${PLUGIN_GLOBAL} =`)}`)(sandbox);
    expect(Object.keys(sandbox[PLUGIN_GLOBAL] as object)).toEqual(['RequiredHeader']);
  });

  it('is reproducible: the same source gives the same hash', async () => {
    const a = await buildPlugin({ entry: REQUIRED_HEADER, name: 'RequiredHeader', outDir: join(dir, 'a') });
    const b = await buildPlugin({ entry: REQUIRED_HEADER, name: 'RequiredHeader', outDir: join(dir, 'b') });
    expect(a.metadata.contentHash).toBe(b.metadata.contentHash);
  });

  it('records every export and the gateway version asked for', async () => {
    const entry = await source('multi.ts', 'export const A = { NewConfigInstance() { return {}; }, GetAuthService() { return null as never; } };\nexport const B = A;\nexport default A;\n');
    const { metadata, warnings } = await buildPlugin({ entry, name: 'A', outDir: dir, gatewayVersion: '9.9.9' });
    expect(metadata.exports).toEqual(['A', 'B', 'default']);
    expect(metadata.gatewayVersion).toBe('9.9.9');
    expect(warnings).toEqual([]);
  });

  it('warns when the plugin name is not exported (exportedSymbolName will be needed)', async () => {
    const entry = await source('other.ts', 'export const Other = {};\n');
    const { warnings } = await buildPlugin({ entry, name: 'Mine', outDir: dir });
    expect(warnings).toEqual([expect.stringContaining('does not export "Mine" (it exports Other); AuthConfigs must set exportedSymbolName')]);
  });

  it('rejects Node.js imports at build time, naming the import', async () => {
    const entry = await source('fs.ts', "import { readFileSync } from 'node:fs';\nexport const P = { read: () => readFileSync('/etc/passwd') };\n");
    await expect(buildPlugin({ entry, name: 'P', outDir: dir })).rejects.toMatchObject({
      code: BuildCodes.BUILD_FAILED,
      message: expect.stringContaining('"node:fs" is a Node.js module; auth plugins run in a sandbox without Node.js APIs'),
    });
    const bare = await source('http.ts', "import http from 'http';\nexport const P = http;\n");
    await expect(buildPlugin({ entry: bare, name: 'P', outDir: dir })).rejects.toMatchObject({ message: expect.stringContaining('"http" is a Node.js module') });
  });

  it('reports syntax errors with file and line', async () => {
    const entry = await source('broken.ts', 'export const P = {\n');
    await expect(buildPlugin({ entry, name: 'P', outDir: dir })).rejects.toMatchObject({ code: BuildCodes.BUILD_FAILED, message: expect.stringMatching(/broken\.ts:2:\d+: /) });
  });

  it('rejects a module without exports, a missing entry and an unusable name', async () => {
    const entry = await source('empty.ts', 'const x = 1;\n');
    await expect(buildPlugin({ entry, name: 'P', outDir: dir })).rejects.toMatchObject({ code: BuildCodes.NO_EXPORTS });
    await expect(buildPlugin({ entry: join(dir, 'nope.ts'), name: 'P', outDir: dir })).rejects.toMatchObject({ code: BuildCodes.ENTRY_NOT_FOUND });
    await expect(buildPlugin({ entry, name: '../evil', outDir: dir })).rejects.toMatchObject({ code: BuildCodes.BAD_NAME });
  });
});

describe('the contract', () => {
  it('has no runtime dependencies: the SDK entry bundles to its own contract files only', async () => {
    const result = await esbuild.build({
      entryPoints: [fileURLToPath(new URL('../index.ts', import.meta.url))],
      bundle: true,
      write: false,
      metafile: true,
      format: 'esm',
      platform: 'neutral',
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs).map((path) => path.replace(/^.*plugin-sdk\/src\//, ''));
    // Type-only modules (contract/types.ts) vanish from a bundle; what is left is the helpers.
    expect(inputs.sort()).toEqual(['contract/index.ts', 'contract/responses.ts', 'index.ts']);
  });
});
