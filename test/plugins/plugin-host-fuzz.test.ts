/**
 * The plugin-host fuzz test (issue 24 acceptance): a bounded, seeded generator of hostile plugin
 * code, run through a real `gatehouse run` with its default plugin process. Each program is
 * composed of fragments (builtins with lying getters and proxies, huge strings and arrays, deep
 * recursion, timers, fetch to odd URLs, prototype tampering first) and runs in the sandbox through
 * the `Evaluate` fixture. After every program:
 * - the gateway is the same process and a route without plugins answers 200;
 * - the program's check was answered within its limit times the documented factor
 *   (docs/plugins.md "Limits": wall deadline + the plugin process's stall bound);
 * - nothing reached a server no plugin declared;
 * and at the end the plugin steps answer again (the plugin process recovered by itself) and the
 * gateway's own memory never held a plugin's (its peak RSS stays under a bound).
 *
 * `GATEHOUSE_FUZZ_SEED=<n>` replays a run; `GATEHOUSE_FUZZ_PROGRAMS=<n>` changes how many
 * programs run (default 150: 35 s on the 2-core dev machine, under 2 minutes loaded). The seed is printed
 * at the start and in every failure message.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

const HOSTILE = fileURLToPath(new URL('../../core/src/extauth/plugins/fixtures/hostile.ts', import.meta.url));
const SEED = Number(process.env.GATEHOUSE_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const PROGRAMS = Number(process.env.GATEHOUSE_FUZZ_PROGRAMS ?? 150);
/** The documented bound on one check (docs/plugins.md): wall deadline (1 s) + plugin process stall bound (5 s). */
const WALL_MS = 1_000;
const STALL_MS = 5_000;
/** Slack for a loaded machine on top of the documented bound: scheduling, restarts, rebuilds. */
const SLACK_MS = 4_000;
/**
 * CPU the plugin process may spend on one program (docs/plugins.md "Limits"): 40× the 50 ms CPU
 * limit, for the call, the rebuild of an isolate it broke and the collection of its heap
 * (worst measured over 450 programs: 0.7 s). A builtin V8 cannot interrupt ran 0.6–5 s.
 */
const PROGRAM_CPU_MS = 2_000;
/** The gateway process never holds plugin memory: its peak RSS stays under this. */
const GATEWAY_PEAK_RSS_MB = 600;

/** mulberry32: a small seeded PRNG, so that a seed replays the same programs. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Random = { pick<T>(items: readonly T[]): T; int(max: number): number };

const HUGE = ['1.2e8', '2 ** 32 - 1', '2 ** 53 - 1', '1e9', '6e7', 'Infinity'];
const ARRAY_METHODS = ['fill', 'join', 'copyWithin', 'reverse', 'sort', 'indexOf', 'includes', 'lastIndexOf', 'slice', 'splice', 'map', 'filter', 'reduce', 'concat', 'flat', 'shift', 'unshift', 'toSorted', 'toReversed', 'with', 'every', 'toString'];
const ARGS: Record<string, string> = { fill: '1', join: "'x'", copyWithin: '1, 0', indexOf: '1', includes: '1', lastIndexOf: '1', slice: '0', splice: '0, 0, 1', map: 'x => x', filter: 'x => x', reduce: '(a, b) => a, 0', every: 'x => true', with: '0, 1', flat: 'Infinity' };
const TYPED = ['Uint8Array', 'Float64Array', 'Int32Array', 'BigInt64Array', 'Uint8ClampedArray', 'Float32Array'];

/** Fragments of hostile code; each returns a value or throws, and may use `target` (a port no plugin declared). */
const FRAGMENTS: ((r: Random, target: string) => string)[] = [
  // A length getter answering small, then huge.
  (r) => {
    const method = r.pick(ARRAY_METHODS);
    return `{ let reads = 0; const o = { get length() { return reads++ < ${r.int(3)} ? ${r.int(4)} : ${r.pick(HUGE)}; } }; Array.prototype.${method}.call(o, ${ARGS[method] ?? ''}); }`;
  },
  // A proxy answering every read differently.
  (r) => {
    const method = r.pick(ARRAY_METHODS);
    const target = r.pick(['[]', '{}', 'new Uint8Array(4)', '[1, 2, 3]']);
    return `{ let n = 0; const p = new Proxy(${target}, { get: (t, k) => (k === 'length' ? (n++ % 2 ? ${r.pick(HUGE)} : 0) : Reflect.get(t, k)), has: () => true, ownKeys: () => [] }); [].${method}.call(p, ${ARGS[method] ?? ''}); }`;
  },
  // Array.from / TypedArray constructors and from with lying sources.
  (r) => {
    const Typed = r.pick(TYPED);
    const source = r.pick([
      `{ get length() { return reads++ ? ${r.pick(HUGE)} : 1; } }`,
      `{ length: ${r.pick(HUGE)} }`,
      `'${r.int(9)}e9'`,
      `{ valueOf() { return reads++ ? ${r.pick(HUGE)} : 1; } }`,
      `new Proxy({ length: 1 }, { get: (t, k) => (k === 'length' ? (reads++ ? ${r.pick(HUGE)} : 1) : undefined) })`,
    ]);
    const call = r.pick([`new ${Typed}(src)`, `${Typed}.from(src)`, `Array.from(src)`, `new ArrayBuffer(src)`, `new ArrayBuffer(8).transfer(src)`, `new ArrayBuffer(8, { get maxByteLength() { return reads++ ? ${r.pick(HUGE)} : 16; } })`]);
    return `{ let reads = 0; const src = ${source}; ${call}; }`;
  },
  // Concat and flat that build huge arrays from small parts.
  (r) =>
    r.pick([
      `{ const a = new Array(1e6).fill(0); new Array(${r.int(2000) + 2}).fill(a).flat(); }`,
      `{ const a = new Array(1e6).fill(0); [].concat(a, a, a); }`,
      `{ let reads = 0; const o = { get length() { return reads++ ? ${r.pick(HUGE)} : 0; }, [Symbol.isConcatSpreadable]: true }; [].concat(o); }`,
      `{ const a = [1]; a.push(a); a.flat(Infinity); }`,
      `{ [1, 2, 3].flatMap(() => new Array(1e6).fill(0)); }`,
    ]),
  // Huge strings.
  (r) =>
    r.pick([
      `'a'.repeat(1 << ${16 + r.int(6)}).replace(/a/g, 'x'.repeat(${1 << r.int(10)}))`,
      `'a'.repeat(1 << ${16 + r.int(6)}).replaceAll('a', '$&$&$&$\`')`,
      `{ let s = 'x'.repeat(1 << 20); for (let i = 0; i < ${4 + r.int(6)}; i++) s += s; s.indexOf('y'); }`,
      `new Array(${2 + r.int(64)}).fill('x'.repeat(1 << 24)).join('')`,
      `'x'.repeat(1 << 24).split('')`,
      `'x'.padStart({ valueOf: () => ${r.pick(HUGE)} })`,
      `JSON.stringify(new Array(1e6).fill('x'.repeat(64)))`,
      `encodeURIComponent('\\u{1F600}'.repeat(1 << ${18 + r.int(4)}))`,
      `'ß'.repeat(1 << 23).toUpperCase()`,
    ]),
  // Deep recursion and deep data.
  (r) =>
    r.pick([
      `{ const f = (n) => f(n + 1) + 1; f(0); }`,
      `JSON.parse('['.repeat(${1e4 * (1 + r.int(50))}) + ']'.repeat(${1e4 * (1 + r.int(50))}))`,
      `{ let o = {}; for (let i = 0; i < 1e5; i++) o = { o }; structuredClone(o); }`,
      `{ let o = {}; for (let i = 0; i < 1e5; i++) o = [o]; JSON.stringify(o); }`,
      `{ const f = () => { try { f(); } catch { f(); } }; f(); }`,
    ]),
  // Timers and promises.
  (r) =>
    r.pick([
      `await new Promise(() => {})`,
      `{ for (let i = 0; i < 5000; i++) setInterval(() => { for (let j = 0; j < 1e5; j++); }, 0); await new Promise((resolve) => setTimeout(resolve, 50)); }`,
      `{ const loop = () => Promise.resolve().then(loop); loop(); await new Promise((resolve) => setTimeout(resolve, 20)); }`,
      `await new Promise((resolve) => setTimeout(resolve, ${r.int(3000)}))`,
      `{ setTimeout(() => { for (;;); }, 0); await new Promise((resolve) => setTimeout(resolve, 10)); }`,
    ]),
  // fetch to odd URLs: only the declared Upstream may be reached, at any spelling.
  (r, target) =>
    `await fetch(${JSON.stringify(
      r.pick([
        `http://keys.default.upstream//${target}/x`,
        `http://keys.default.upstream/.//${target}/x`,
        `http://keys.default.upstream/\\${target}/x`,
        `http://keys.default.upstream/..//${target}/x`,
        `http://keys.default.upstream@${target}/x`,
        `http://${target}/x`,
        `http://${target.replace('127.0.0.1', '2130706433')}/x`,
        `http://${target.replace('127.0.0.1', '0x7f.1')}/x`,
        `http://${target.replace('127.0.0.1', 'localhost')}/x`,
        `http://${target.replace('127.0.0.1', '[::ffff:127.0.0.1]')}/x`,
        `http://keys.default.upstream/redirect?to=${encodeURIComponent(`http://keys.default.upstream//${target}/x`)}`,
        `http://keys.default.upstream/redirect?to=${encodeURIComponent(`//${target}/x`)}`,
        `http://keys.default.upstream/redirect?to=${encodeURIComponent(`http://${target}/x`)}`,
        `file:///etc/passwd`,
        `http://KEYS.DEFAULT.UPSTREAM:80//${target}/x`,
      ]),
    )}, { method: ${JSON.stringify(r.pick(['GET', 'POST', 'PUT']))}, body: ${r.pick(['undefined', 'new Uint8Array(1040000)', "'x'"])} }).then((res) => res.text())`,
];

/**
 * WebAssembly (issue 30 item 4): hand-assembled modules that grow memory until it fails and
 * trap, loop forever, recurse without end, ask for shared, 64-bit, huge or several memories,
 * or lie about their section sizes; Memory and Table growth from JavaScript; many instances.
 * The Wasm budget (memoryLimitMb) and the CPU limit must stop each, and nothing may crash.
 */
const WASM_MODULES: Record<string, string> = {
  // memory 1 page; hog (grow 1 MB until -1, then unreachable), spin (loop), add, pages, mem
  main: 'AGFzbQEAAAABDgNgAABgAn9/AX9gAAF/AwUEAAABAgUDAQABByIFA2hvZwAABHNwaW4AAQNhZGQAAgVwYWdlcwADA21lbQIACiYEDwADQEEQQABBf0cNAAsACwcAA0AMAAsLBwAgACABagsEAD8ACw==',
  recursion: 'AGFzbQEAAAABBAFgAAADAgEABwUBAXIAAAoGAQQAEAAL',
  shared: 'AGFzbQEAAAAFBAEDAQI=',
  memory64: 'AGFzbQEAAAAFAwEEAQ==',
  huge: 'AGFzbQEAAAAFBQEAgIAE',
  multi: 'AGFzbQEAAAAFBQIAAQABBwkCAWECAAFiAgE=',
  lying: 'AGFzbQEAAAAF/////w8BAAE=',
};
const wasmFragment = (r: Random): string => {
  const bytes = (name: string) => `Uint8Array.from(atob('${WASM_MODULES[name]}'), (c) => c.charCodeAt(0))`;
  const instance = (name: string) => `new WebAssembly.Instance(new WebAssembly.Module(${bytes(name)}), {})`;
  return r.pick([
    `${instance('main')}.exports.hog()`,
    `${instance('main')}.exports.spin()`,
    `${instance('recursion')}.exports.r()`,
    `${instance(r.pick(['shared', 'memory64', 'huge', 'multi', 'lying']))}`,
    `(await WebAssembly.instantiate(${bytes(r.pick(Object.keys(WASM_MODULES)))}, {})).instance.exports`,
    `WebAssembly.validate(${bytes(r.pick(Object.keys(WASM_MODULES)))})`,
    `{ const m = new WebAssembly.Memory({ initial: ${r.int(4)}${r.int(2) ? `, maximum: ${r.pick(HUGE)}` : ''} }); for (;;) m.grow(${1 + r.int(4096)}); }`,
    `{ const t = new WebAssembly.Table({ element: 'anyfunc', initial: 1 }); for (;;) t.grow(${r.pick(['1e6', '1 << 20', '65536'])}); }`,
    `{ for (let i = 0; i < ${1 + r.int(5000)}; i++) ${instance('main')}; }`,
    `new WebAssembly.Module(new Uint8Array(${r.pick(['8 * 1024 * 1024 + 1', '64', '8'])}))`,
    `{ const m = new WebAssembly.Module(${bytes('main')}); Object.getPrototypeOf(m).constructor.call(null, ${bytes('main')}); }`,
    `{ const i = ${instance('main')}; i.exports.mem.grow(${r.pick(HUGE)}); }`,
  ]);
};
FRAGMENTS.push(wasmFragment);

/**
 * Tampering done first, to see whether it unlocks a later fragment: [save, tamper, restore]. The
 * program restores what it replaced when it ends (the isolate is shared by the programs; the
 * fixture itself must keep working for the next one).
 */
const TAMPERING: [string, string, string][] = [
  ['Object.getOwnPropertyDescriptor', 'Object.getOwnPropertyDescriptor = () => ({ value: 0 });', 'Object.getOwnPropertyDescriptor = saved;'],
  ['Reflect.apply', 'Reflect.apply = () => 0;', 'Reflect.apply = saved;'],
  ['WeakSet.prototype.has', 'WeakSet.prototype.has = () => false;', 'WeakSet.prototype.has = saved;'],
  ['Array.isArray', 'Array.isArray = () => true;', 'Array.isArray = saved;'],
  ['Array.prototype[Symbol.iterator]', 'Array.prototype[Symbol.iterator] = function* () {};', 'Array.prototype[Symbol.iterator] = saved;'],
  ['RegExp.prototype.exec', 'RegExp.prototype.exec = () => null;', 'RegExp.prototype.exec = saved;'],
  ['undefined', "Object.defineProperty(Object.prototype, 'value', { get() { return 0; }, configurable: true });", 'delete Object.prototype.value;'],
  ['undefined', "Object.defineProperty(Array.prototype, '0', { set() {}, get() { return 0; }, configurable: true });", "delete Array.prototype['0'];"],
  ['Function.prototype.call', 'Function.prototype.call = function () { return 0; };', 'Function.prototype.call = saved;'],
  ['Object.getPrototypeOf', 'Object.getPrototypeOf = () => null;', 'Object.getPrototypeOf = saved;'],
  ['Number', 'Number = () => 0;', 'Number = saved;'],
  ['Math.trunc', 'Math.trunc = () => 0;', 'Math.trunc = saved;'],
];

/** The `count` programs of `seed`. */
function programs(seed: number, count: number, target: string): string[] {
  const next = prng(seed);
  const r: Random = { pick: (items) => items[Math.floor(next() * items.length)]!, int: (max) => Math.floor(next() * max) };
  return Array.from({ length: count }, () => {
    const parts: string[] = [];
    const n = 1 + r.int(2);
    // Each fragment's failure is caught so that the next one runs too.
    for (let i = 0; i < n; i++) parts.push(`try { ${r.pick(FRAGMENTS)(r, target)}; } catch (error) { void error; }`);
    if (r.int(3) !== 0) return parts.join('\n');
    const [save, tamper, restore] = r.pick(TAMPERING);
    return `const saved = ${save};\n${tamper}\ntry {\n${parts.join('\n')}\n} finally {\n${restore}\n}`;
  });
}

const encodeCode = (code: string): string => Buffer.from(code, 'utf8').toString('base64');

let config: ConfigDir;
let pluginDir: string;
let upstream: TestServer;
let keys: TestServer;
let forbidden: TestServer & { hits: string[] };
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  console.log(`plugin-host fuzz: seed ${SEED}, ${PROGRAMS} programs (GATEHOUSE_FUZZ_SEED=${SEED} replays them)`);
  upstream = await startServer((req, res) => void req.resume().on('end', () => res.end('upstream ok')));
  keys = await startServer((req, res) => {
    req.resume().on('end', () => {
      const to = new URL(req.url!, 'http://x').searchParams.get('to');
      if (req.url!.startsWith('/redirect') && to) res.writeHead(302, { location: to }).end();
      else res.end('keys');
    });
  });
  const hits: string[] = [];
  forbidden = Object.assign(
    await startServer((req, res) => {
      hits.push(req.url!);
      req.resume().on('end', () => res.end('escaped'));
    }),
    { hits },
  );
  pluginDir = await mkdtemp(join(tmpdir(), 'gatehouse-fuzz-plugins-'));
  await buildPlugin({ entry: HOSTILE, name: 'Hostile', outDir: pluginDir });
  const route = (prefix: string, auth: string) => ({ matchers: [{ prefix }], options: { extauth: { configRef: { name: auth } } }, routeAction: { single: { upstream: { name: 'up' } } } });
  config = await makeConfigDir({
    'fuzz.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.upstream('keys', [{ addr: '127.0.0.1', port: keys.port }]),
      manifests.authConfig('eval', [{ pluginAuth: { name: 'Hostile', exportedSymbolName: 'Evaluate', egress: [{ upstreamRef: { name: 'keys' } }] } }]),
      manifests.authConfig('good', [{ pluginAuth: { name: 'Hostile', exportedSymbolName: 'Probe' } }]),
      manifests.virtualService('fuzz', {
        domains: ['*'],
        routes: [route('/eval/', 'eval'), route('/good/', 'good'), { matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'up' } } } }],
      }),
    ],
  });
  // The defaults: 50 ms CPU, 1 s wall, 64 MB per isolate, plugin process bound 512 MB / 5 s.
  gatehouse = await startGatehouse('run', ['--config-dir', config.path, '--plugin-dir', pluginDir, '--extauth-timeout', '30s']);
  await gatehouse.waitForLog((l) => l.msg === 'received new auth configuration');
}, 120_000);

afterAll(async () => {
  await gatehouse?.stop();
  await Promise.all([upstream?.close(), keys?.close(), forbidden?.close()]);
  await config?.cleanup();
  if (pluginDir) await rm(pluginDir, { recursive: true, force: true });
});

async function timed(url: string, headers: Record<string, string> = {}): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(60_000) });
  await response.arrayBuffer();
  return { status: response.status, ms: performance.now() - started };
}

/** CPU time (user + system) a process has used so far (Linux), in ms; undefined elsewhere. */
function cpuMs(pid: number): number | undefined {
  try {
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return undefined;
  }
}

/** Peak resident memory of a process (Linux), in MB; undefined elsewhere. */
function peakRssMb(pid: number): number | undefined {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

describe(`plugin-host fuzz (seed ${SEED})`, () => {
  it('hostile programs never take the gateway down, never escape the egress, and every check is answered within its bound', async () => {
    const list = programs(SEED, PROGRAMS, `127.0.0.1:${forbidden.port}`);
    const outcomes: Record<number, number> = {};
    const pluginPid = () => gatehouse.logs.filter((l) => l.msg === 'plugin process started').at(-1)?.pid as number;
    let worstCpu = { ms: 0, index: -1 };
    for (const [index, program] of list.entries()) {
      const where = `seed ${SEED}, program ${index}:\n${program}`;
      const pid = pluginPid();
      const cpuBefore = cpuMs(pid);
      const check = await timed(`${gatehouse.url}/eval/x`, { 'x-code': encodeCode(program) }).catch((error: unknown) => {
        // No answer at all: the gateway died or hung up (what the findings did).
        throw new Error(`${where}\nno answer: ${String(error)} (gateway exit ${gatehouse.child.exitCode}, signal ${gatehouse.child.signalCode})`, { cause: error });
      });
      const cpuAfter = pid === pluginPid() ? cpuMs(pid) : undefined;
      if (cpuBefore !== undefined && cpuAfter !== undefined) {
        expect(cpuAfter - cpuBefore, `${where}\nplugin process CPU (ms)`).toBeLessThan(PROGRAM_CPU_MS);
        if (cpuAfter - cpuBefore > worstCpu.ms) worstCpu = { ms: cpuAfter - cpuBefore, index };
      }
      outcomes[check.status] = (outcomes[check.status] ?? 0) + 1;
      expect([200, 403], where).toContain(check.status);
      expect(check.ms, where).toBeLessThan(WALL_MS + STALL_MS + SLACK_MS);
      expect(gatehouse.child.exitCode, where).toBeNull();
      expect(gatehouse.child.signalCode, where).toBeNull();
      expect((await timed(`${gatehouse.url}/open`)).status, where).toBe(200);
      expect(forbidden.hits, where).toEqual([]);
      // Every program runs on a sound step: after a failure, wait for the isolate to be rebuilt
      // (or the plugin process restarted), which is also the recovery every failure must allow.
      if (check.status !== 200) await expect.poll(async () => (await timed(`${gatehouse.url}/eval/x`, { 'x-code': encodeCode('return 1') })).status, { timeout: 30_000, interval: 100, message: where }).toBe(200);
    }
    console.log(`plugin-host fuzz: seed ${SEED}: worst plugin process CPU for one program ${worstCpu.ms} ms (program ${worstCpu.index})`);
    // The plugin steps answer again by themselves (a plugin process that died was restarted).
    await expect.poll(async () => (await timed(`${gatehouse.url}/good/x`)).status, { timeout: 30_000, interval: 250, message: `seed ${SEED}` }).toBe(200);
    const peak = peakRssMb(gatehouse.child.pid!);
    if (peak !== undefined) expect(peak, `seed ${SEED}: gateway peak RSS`).toBeLessThan(GATEWAY_PEAK_RSS_MB);
    const restarts = gatehouse.logs.filter((l) => l.code === 'GH_PLUGIN_PROCESS_EXITED').length;
    const codes: Record<string, number> = {};
    for (const l of gatehouse.logs) if (typeof l.code === 'string') codes[l.code] = (codes[l.code] ?? 0) + 1;
    console.log(`plugin-host fuzz: seed ${SEED}: statuses ${JSON.stringify(outcomes)}, codes ${JSON.stringify(codes)}, plugin process restarts ${restarts}, gateway peak RSS ${peak?.toFixed(0) ?? '?'} MB`);
  }, 240_000);
});

describe('a builtin V8 sorts without interruption (findings 1 and 2, with the default 50 ms limit)', () => {
  it('a default sort of a million numbers is interruptible: the CPU limit stops it, the plugin process survives', async () => {
    // Inside V8 this compares numbers by their strings (two conversions a comparison): 1.1 s of CPU
    // that termination could not reach. Past 10,000 elements the sandbox sorts with a JavaScript
    // comparator of the same order, which the CPU limit interrupts.
    const pid = gatehouse.logs.filter((l) => l.msg === 'plugin process started').at(-1)!.pid as number;
    const restarts = gatehouse.logs.filter((l) => l.code === 'GH_PLUGIN_PROCESS_EXITED').length;
    const before = cpuMs(pid);
    // A million distinct numbers (V8 caches the strings of repeated ones) from the cheapest loop.
    const r = await timed(`${gatehouse.url}/eval/x`, { 'x-code': encodeCode('const a = new Array(1e6); for (let i = 0; i < 1e6; i++) a[i] = (i * 7919) % 1e6; a.sort(); return a[0];') });
    const after = cpuMs(pid);
    expect(r.status).toBe(403);
    await expect.poll(() => gatehouse.logs.some((l) => l.code === 'GH_PLUGIN_TIMEOUT' && String(l.cause).includes('CPU limit')), { timeout: 5_000 }).toBe(true);
    // The call's 50 ms, the loop before the sort and the isolate's rebuild. Measured: 0–80 ms
    // now, 1.1 s before (the native sort ran to its end).
    if (before !== undefined && after !== undefined) expect(after - before).toBeLessThan(400);
    expect(gatehouse.logs.filter((l) => l.code === 'GH_PLUGIN_PROCESS_EXITED').length).toBe(restarts);
    expect((await timed(`${gatehouse.url}/open`)).status).toBe(200);
  });
});
