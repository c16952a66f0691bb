import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { SourceMap } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startPlugin, TEST_MODES } from '../testkit/start-plugin.ts';
import { expectFailure } from '../testkit/expect.ts';
import { buildPlugin } from './build-plugin.ts';
import { BuildCodes } from './errors.ts';
import { parsePluginFile } from './metadata.ts';
import { originalPosition } from './source-map.ts';

// Diagnostics (issue 11 item 3): source maps from the build (minified too), plugin stacks in the
// plugin's own file:line in both test modes and in the host's logs, the build refusing Node.js
// globals with file:line, and the hint for a Go port's `{}` config.

const REQUIRED_HEADER = fileURLToPath(new URL('../../../plugins/required-header/src/index.ts', import.meta.url));
const GO_PORT = new URL('../testkit/fixtures/go-port-plugin.ts', import.meta.url);
const FIXTURE = 'src/testkit/fixtures/go-port-plugin.ts';
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-diag-'));
  await writeFile(join(dir, 'package.json'), '{"name":"diag","type":"module"}');
});
afterEach(() => rm(dir, { recursive: true, force: true }));

async function source(name: string, text: string): Promise<string> {
  const file = join(dir, name);
  await mkdir(join(file, '..'), { recursive: true });
  await writeFile(file, text);
  return file;
}

describe('source maps', () => {
  for (const minify of [false, true]) {
    it(`build${minify ? ' --minify' : ''} writes NAME.js.map beside NAME.js, mapping back to the plugin's sources`, async () => {
      const result = await buildPlugin({ entry: REQUIRED_HEADER, name: 'RequiredHeader', outDir: join(dir, 'out'), minify });
      expect(result.sourceMap).toBe(join(dir, 'out', 'RequiredHeader.js.map'));
      const { body } = parsePluginFile(await readFile(result.file, 'utf8'));
      expect(body.trimEnd().endsWith('//# sourceMappingURL=RequiredHeader.js.map')).toBe(true);
      const map = JSON.parse(await readFile(result.sourceMap, 'utf8')) as { sources: string[]; sourcesContent: string[] };
      // Relative to the plugin's package, whatever the working directory.
      expect(map.sources).toContain('src/index.ts');
      // A string literal of line 40 of the source is found at its place through the map.
      const lines = body.split('\n');
      const line = lines.findIndex((l) => l.includes('RequiredHeader configured'));
      const at = originalPosition(new SourceMap(map as never), line + 1, lines[line]!.indexOf('RequiredHeader configured') + 1);
      expect(at).toMatchObject({ source: 'src/index.ts', line: 40 });
      if (minify) expect(lines.length).toBeLessThan(5);
    });
  }
});

describe('stacks name the plugin\'s own file:line', () => {
  it.each(TEST_MODES)('%s: a throw in Authorize is recorded with its source-mapped stack', async (mode) => {
    const plugin = await startPlugin(mode, { entry: GO_PORT, name: 'Thrower' });
    try {
      expectFailure(await plugin.authorize(), 'GH_PLUGIN_THREW');
      const [failure] = plugin.failures;
      expect(failure!.message).toBe('Authorize threw: RangeError: deliberate failure');
      expect(failure!.stack).toMatch(new RegExp(`^    at check \\(${FIXTURE}:52:9\\)\\n    at Object\\.Authorize \\(${FIXTURE}:45:16\\)`));
    } finally {
      await plugin.close();
    }
  });

  it('sandbox, built with --minify: the same stack', async () => {
    const plugin = await startPlugin('sandbox', { entry: GO_PORT, name: 'Thrower', minify: true });
    try {
      await plugin.authorize();
      expect(plugin.failures[0]!.stack).toContain(`${FIXTURE}:52:9`);
      expect(plugin.failures[0]!.stack).toContain(`${FIXTURE}:45:16`);
    } finally {
      await plugin.close();
    }
  });

  it.each(TEST_MODES)('%s: a Start failure names where it threw', async (mode) => {
    await expect(startPlugin(mode, { entry: GO_PORT, name: 'Thrower', config: { FailStart: true } })).rejects.toMatchObject({
      code: 'GH_PLUGIN_START_FAILED',
      message: expect.stringContaining(`Start failed: Error: cannot start (at ${FIXTURE}:42:30)\n    at Object.Start (${FIXTURE}:42:30)`),
    });
  });
});

describe('a Go port\'s {} config gets a hint naming the fix', () => {
  it.each(TEST_MODES)('%s: NewConfigInstance returning {} and a list left out of the config', async (mode) => {
    await expect(startPlugin(mode, { entry: GO_PORT, name: 'WholeConfigEmpty', config: { RequiredHeader: 'x-a' } })).rejects.toMatchObject({
      code: 'GH_PLUGIN_INIT_FAILED',
      message: expect.stringMatching(/GetAuthService failed: TypeError: c\.AllowedValues is not iterable \(hint: NewConfigInstance returned \{\}, and an empty object decodes as a map: .*lists as arrays.*\) \(at src\/testkit\/fixtures\/go-port-plugin\.ts:16:/),
    });
  });

  it.each(TEST_MODES)('%s: a list field initialised as {}', async (mode) => {
    const plugin = await startPlugin(mode, { entry: GO_PORT, name: 'ListAsMap', config: { RequiredHeader: 'x-a' } });
    try {
      expectFailure(await plugin.authorize({ headers: { 'x-a': '1' } }), 'GH_PLUGIN_THREW');
      expect(plugin.failures[0]!.message).toBe(
        'Authorize threw: TypeError: c.AllowedValues is not iterable (hint: NewConfigInstance returned {} for config.AllowedValues, and an empty object decodes as a map, not a list: initialise list fields as arrays, e.g. AllowedValues: [])',
      );
      expect(plugin.failures[0]!.stack).toContain(`${FIXTURE}:29:`);
    } finally {
      await plugin.close();
    }
    // Given a list, the same mistake fails at load, saying the same.
    await expect(startPlugin(mode, { entry: GO_PORT, name: 'ListAsMap', config: { RequiredHeader: 'x-a', AllowedValues: ['1'] } })).rejects.toMatchObject({
      code: 'GH_PLUGIN_BAD_CONFIG',
      message: expect.stringContaining('config.AllowedValues: expected an object, got an array (NewConfigInstance returned {} for AllowedValues, and an empty object decodes as a map; if AllowedValues is a list, initialise it as AllowedValues: [])'),
    });
  });
});

describe('the build refuses what the sandbox does not have', () => {
  const globals = [
    ['process', 'const level = process.env.LEVEL;'],
    ['Buffer', "const level = Buffer.from('x').toString('base64');"],
    ['require', "const level = require('./x.js');"],
    ['__dirname', 'const level = __dirname;'],
    ['global', 'const level = global.level;'],
    ['setImmediate', 'const level = setImmediate(() => {});'],
  ] as const;
  it.each(globals)('%s in the plugin\'s own code fails the build, naming file:line and the global', async (name, line) => {
    const entry = await source('src/plugin.ts', `export const P = {\n  NewConfigInstance: () => ({}),\n  GetAuthService() {\n    ${line}\n    return level as never;\n  },\n};\n`);
    const error = await buildPlugin({ entry, name: 'P', outDir: dir }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: BuildCodes.NODE_GLOBAL });
    expect((error as Error).message).toContain(`src/plugin.ts:4:${line.indexOf(name) + 5}: ${name} is a Node.js global, and auth plugins run in a sandbox without Node.js`);
  });

  it('a typeof probe, a local of the same name and a dependency\'s use are not the plugin\'s: a dependency gets a warning', async () => {
    await source('node_modules/probe-lib/package.json', '{"name":"probe-lib","main":"index.js"}');
    await source('node_modules/probe-lib/index.js', "exports.root = typeof globalThis !== 'undefined' ? globalThis : global;\n");
    const entry = await source(
      'src/ok.ts',
      "import { root } from 'probe-lib';\nconst hasProcess = typeof process !== 'undefined';\nexport const P = { go(process: { env: object }) { return [hasProcess, process.env, root]; } };\n",
    );
    const result = await buildPlugin({ entry, name: 'P', outDir: dir });
    expect(result.warnings).toEqual([expect.stringMatching(/^node_modules\/probe-lib\/index\.js:1:\d+: global is a Node\.js global.*\(in a dependency: it fails if that code runs\)$/)]);
  });

  it('an import of a Node.js module fails naming file:line', async () => {
    const entry = await source('src/fs.ts', "export const x = 1;\nimport { readFileSync } from 'node:fs';\nexport const P = { read: () => readFileSync('/etc/passwd') };\n");
    await expect(buildPlugin({ entry, name: 'P', outDir: dir })).rejects.toMatchObject({
      code: BuildCodes.BUILD_FAILED,
      message: expect.stringMatching(/src\/fs\.ts:2:\d+: "node:fs" is a Node\.js module/),
    });
  });
});
