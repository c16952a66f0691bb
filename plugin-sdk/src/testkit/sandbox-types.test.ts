import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import vm from 'node:vm';
import type { PluginHarness } from './harness.ts';
import { startPlugin } from './start-plugin.ts';

// plugin-sdk/types/sandbox.d.ts declares exactly the globals the sandbox adds to the language's own.
let plugin: PluginHarness;
beforeAll(async () => {
  plugin = await startPlugin('sandbox', { entry: new URL('./fixtures/probe-plugin.ts', import.meta.url), name: 'Probe' });
});
afterAll(() => plugin?.close());

it('sandbox.d.ts declares every global the sandbox adds, and nothing else', async () => {
  const decision = (await plugin.authorize({ headers: { 'x-probe': 'globals' } })) as { headersToSet: { key: string; value: string }[] };
  const inSandbox = JSON.parse(decision.headersToSet[0]!.value) as string[];
  const language = new Set(vm.runInContext('Object.getOwnPropertyNames(globalThis)', vm.createContext({})) as string[]);
  // console is V8's own global, replaced by the sandbox's; __gatehousePlugin is the plugin script's exports.
  const added = inSandbox.filter((name) => (!language.has(name) || name === 'console') && name !== '__gatehousePlugin').sort();
  const text = await readFile(new URL('../../types/sandbox.d.ts', import.meta.url), 'utf8');
  const declared = [...text.matchAll(/^declare (?:class|function|const) ([A-Za-z_$][\w$]*)/gm)].map((m) => m[1]!);
  expect([...new Set(declared)].sort()).toEqual(added);
});
