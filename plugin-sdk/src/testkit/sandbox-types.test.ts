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

it('sandbox.d.ts types the new platform APIs as plugins use them (issue 30): timers as promises, AbortSignal, Web Crypto, WebAssembly', async () => {
  const { execFile } = await import('node:child_process');
  const { mkdtemp, rm, writeFile } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { fileURLToPath } = await import('node:url');
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-sandbox-types-'));
  try {
    await writeFile(
      join(dir, 'plugin.ts'),
      `export async function uses(): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 5));
  await new Promise<void>((resolve) => setTimeout(resolve, 5));
  setTimeout((a: string, b: number) => void [a, b], 1, 'x', 2);
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 10);
  await fetch('https://keys.example/jwks', { signal: AbortSignal.any([controller.signal, AbortSignal.timeout(100)]) });
  const key = await crypto.subtle.generateKey({ name: 'AES-GCM', length: 256 }, false, ['encrypt', 'decrypt']);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = await crypto.subtle.encrypt({ name: 'AES-GCM', iv }, key, new TextEncoder().encode('x'));
  await crypto.subtle.decrypt({ name: 'AES-GCM', iv }, key, sealed);
  const base = await crypto.subtle.importKey('raw', new Uint8Array(32), 'HKDF', false, ['deriveKey']);
  await crypto.subtle.deriveKey({ name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(0), info: new Uint8Array(0) }, base, { name: 'AES-GCM', length: 256 }, false, ['encrypt']);
  const pair = await crypto.subtle.generateKey({ name: 'ECDH', namedCurve: 'P-256' }, false, ['deriveBits']);
  await crypto.subtle.deriveBits({ name: 'ECDH', public: pair.publicKey }, pair.privateKey, 256);
  const kw = await crypto.subtle.generateKey({ name: 'AES-KW', length: 128 }, false, ['wrapKey', 'unwrapKey']);
  const wrapped = await crypto.subtle.wrapKey('raw', key, kw, 'AES-KW');
  await crypto.subtle.unwrapKey('raw', wrapped, kw, 'AES-KW', 'AES-GCM', false, ['decrypt']);
  const { instance } = await WebAssembly.instantiate(new Uint8Array(8), { env: { memory: new WebAssembly.Memory({ initial: 1, maximum: 16 }) } });
  try {
    controller.signal.throwIfAborted();
  } catch (error) {
    if (error instanceof DOMException) return error.code;
  }
  return (instance.exports.add as (a: number, b: number) => number)(1, 2);
}
`,
    );
    const types = fileURLToPath(new URL('../../types/sandbox.d.ts', import.meta.url));
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { target: 'es2023', lib: ['es2023'], types: [], strict: true, noEmit: true, module: 'esnext', moduleResolution: 'bundler' }, files: ['plugin.ts', types] }));
    const tsc = fileURLToPath(new URL('../../../node_modules/.bin/tsc', import.meta.url));
    const result = await new Promise<{ code: number; output: string }>((resolve) => {
      execFile(tsc, ['-p', join(dir, 'tsconfig.json')], (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, output: stdout + stderr }));
    });
    expect(result.output).toBe('');
    expect(result.code).toBe(0);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
