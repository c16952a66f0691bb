import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parsePluginFile } from '../build/metadata.ts';
import { GATEWAY_VERSION } from '../version.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = join(ROOT, 'node_modules/.bin/gatehouse-plugin');
const ENTRY = join(ROOT, 'plugins/required-header/src/index.ts');
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-cli-'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

/** Runs the real bin (as `npx gatehouse-plugin` would) with Node 24 first on PATH. */
async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}` };
  try {
    const { stdout, stderr } = await run(BIN, args, { cwd: dir, env });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('gatehouse-plugin', () => {
  it('build ENTRY --name NAME writes compiled-auth-plugins/NAME.js by default', async () => {
    const { code, stdout } = await cli(['build', ENTRY, '--name', 'RequiredHeader']);
    expect(code).toBe(0);
    expect(stdout).toContain(`built ${join(dir, 'compiled-auth-plugins', 'RequiredHeader.js')} (plugin RequiredHeader, exports RequiredHeader, gateway ${GATEWAY_VERSION}, sha256:`);
    const { metadata } = parsePluginFile(await readFile(join(dir, 'compiled-auth-plugins', 'RequiredHeader.js'), 'utf8'));
    expect(metadata.name).toBe('RequiredHeader');
  });

  it('--out DIR chooses the directory', async () => {
    const { code } = await cli(['build', ENTRY, '--name', 'RH', '--out', 'dist']);
    expect(code).toBe(0);
    expect(parsePluginFile(await readFile(join(dir, 'dist', 'RH.js'), 'utf8')).metadata.exports).toEqual(['RequiredHeader']);
  });

  it('--minify writes a minified script and its source map beside it', async () => {
    const { code } = await cli(['build', ENTRY, '--name', 'RH', '--minify']);
    expect(code).toBe(0);
    const { body } = parsePluginFile(await readFile(join(dir, 'compiled-auth-plugins', 'RH.js'), 'utf8'));
    expect(body.split('\n').length).toBeLessThan(5);
    expect(JSON.parse(await readFile(join(dir, 'compiled-auth-plugins', 'RH.js.map'), 'utf8')).sources).toContain('src/index.ts');
  });

  it('a plugin using a Node.js global fails to build, naming the global and file:line', async () => {
    await writeFile(join(dir, 'package.json'), '{}');
    await writeFile(join(dir, 'bad.ts'), "export const P = { go: () => Buffer.from('x') };\n");
    const { code, stderr } = await cli(['build', 'bad.ts', '--name', 'P']);
    expect(code).toBe(1);
    expect(stderr).toContain('bad.ts:1:30: Buffer is a Node.js global');
    expect(stderr).toContain('[GH_PLUGIN_NODE_GLOBAL]');
  });

  it('usage errors exit 2, build failures exit 1 with the code', async () => {
    expect(await cli(['build', ENTRY])).toMatchObject({ code: 2, stderr: expect.stringContaining('expected one ENTRY file and --name NAME') });
    expect(await cli(['build', ENTRY, '--name', 'X', '--bogus'])).toMatchObject({ code: 2, stderr: expect.stringContaining("Unknown option '--bogus'") });
    expect(await cli(['frobnicate'])).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown command "frobnicate"') });
    expect(await cli(['build', join(dir, 'missing.ts'), '--name', 'X'])).toMatchObject({ code: 1, stderr: expect.stringContaining('[GH_PLUGIN_ENTRY_NOT_FOUND]') });
  });

  it('version prints the gateway version plugins are built for', async () => {
    expect(await cli(['version'])).toMatchObject({ code: 0, stdout: `${GATEWAY_VERSION}\n` });
  });

  it('image is dispatched to the OCI tooling (./image.ts)', async () => {
    const { code, stdout } = await cli(['image', '--help']);
    expect(code).toBe(0);
    expect(stdout).toContain('gatehouse-plugin image build');
  });
});
