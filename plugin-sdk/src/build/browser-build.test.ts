import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { JSONPath } from 'jsonpath-plus';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlugin, TEST_MODES } from '../testkit/start-plugin.ts';
import { buildPlugin } from './build-plugin.ts';
import { BuildCodes } from './errors.ts';

// Issue 30 item 6: `--browser` builds a plugin from an npm package's browser build (jsonpath-plus,
// whose main needs "vm"), and CommonJS that esbuild bundles does not warn about `require`.

const JSONPATH_PLUGIN = fileURLToPath(new URL('./fixtures/jsonpath-plugin.ts', import.meta.url));
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-browser-build-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('--browser: npm packages\' browser builds', () => {
  it('jsonpath-plus: the default build fails naming "vm"; --browser builds it without warnings', async () => {
    await expect(buildPlugin({ entry: JSONPATH_PLUGIN, name: 'JsonPathPlugin', outDir: join(dir, 'node') })).rejects.toMatchObject({
      code: BuildCodes.BUILD_FAILED,
      message: expect.stringContaining('"node:vm" is a Node.js module; auth plugins run in a sandbox without Node.js APIs (no fs, network or process) (a dependency imports it: if the package has a browser build, build with --browser)'),
    });
    const built = await buildPlugin({ entry: JSONPATH_PLUGIN, name: 'JsonPathPlugin', outDir: join(dir, 'browser'), browser: true });
    expect(built.warnings).toEqual([]);
  });

  it.each(TEST_MODES)('%s: the browser build runs in the sandbox and finds what jsonpath-plus finds in Node', async (mode) => {
    const plugin = await startPlugin(mode, { entry: JSONPATH_PLUGIN, name: 'JsonPathPlugin', browser: true });
    try {
      const doc = { store: { book: [{ author: 'Nigel Rees', price: 8.95 }, { author: 'Evelyn Waugh', price: 12.99 }], bicycle: { color: 'red' } } };
      for (const path of ['$.store.book[*].author', '$..price', '$.store.bicycle.color', '$.store.book[?(@.price < 10)].author', '$..missing']) {
        const decision = await plugin.authorize({ headers: { 'x-path': path, 'x-doc': JSON.stringify(doc) } });
        const expected = JSONPath({ path, json: doc, wrap: true, eval: 'safe' }) as unknown[];
        if (expected.length === 0) expect(decision.allowed).toBe(false);
        else expect(decision).toMatchObject({ allowed: true, headersToSet: [{ key: 'x-found', value: JSON.stringify(expected) }] });
      }
      expect(plugin.failures).toEqual([]);
    } finally {
      await plugin.close();
    }
  });
});

describe('require in bundled CommonJS', () => {
  it('a dependency\'s require("./x") that esbuild bundles is no warning; a require left to run time still is', async () => {
    const project = join(dir, 'cjs');
    await mkdir(join(project, 'node_modules', 'cjs-dep'), { recursive: true });
    await writeFile(join(project, 'package.json'), '{"name":"cjs-project","type":"module"}');
    await writeFile(join(project, 'node_modules', 'cjs-dep', 'package.json'), '{"name":"cjs-dep","main":"index.js"}');
    await writeFile(join(project, 'node_modules', 'cjs-dep', 'helper.js'), 'module.exports = (x) => x * 2;\n');
    await writeFile(join(project, 'node_modules', 'cjs-dep', 'index.js'), "const twice = require('./helper');\nexports.twice = twice;\nexports.load = (name) => require(name);\n");
    await writeFile(join(project, 'static.ts'), "import { twice } from 'cjs-dep';\nexport const Static = { NewConfigInstance: () => ({}), GetAuthService: () => ({ Start() {}, Authorize: () => ({ CheckResponse: { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-twice', value: String(twice(21)) } }] } } }) }) };\n");
    await writeFile(join(project, 'node_modules', 'cjs-dep', 'static-only.js'), "const twice = require('./helper');\nexports.twice = twice;\n");
    await writeFile(join(project, 'static-only.ts'), "import { twice } from 'cjs-dep/static-only.js';\nexport const StaticOnly = { NewConfigInstance: () => ({}), GetAuthService: () => ({ Start() {}, Authorize: () => ({ CheckResponse: { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-twice', value: String(twice(21)) } }] } } }) }) };\n");
    const clean = await buildPlugin({ entry: join(project, 'static-only.ts'), name: 'StaticOnly', outDir: join(project, 'out') });
    expect(clean.warnings).toEqual([]);
    const plugin = await startPlugin('sandbox', { entry: join(project, 'static-only.ts'), name: 'StaticOnly' });
    try {
      expect(await plugin.authorize({})).toMatchObject({ allowed: true, headersToSet: [{ key: 'x-twice', value: '42' }] });
    } finally {
      await plugin.close();
    }
    // `require(name)` cannot be bundled: a bundle that keeps one warns (naming it).
    const dynamic = await buildPlugin({ entry: join(project, 'static.ts'), name: 'Static', outDir: join(project, 'out') });
    expect(dynamic.warnings).toContainEqual(expect.stringMatching(/^node_modules\/cjs-dep\/index\.js:3:26: require is a Node\.js global.*in a dependency/));
  });
});
