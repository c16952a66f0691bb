/**
 * Issue 24, "Plugins": the attacks on the plugin host, against a real `gatehouse run` with
 * plugins compiled by the real compiler. The hostile code goes through the `Evaluate` fixture
 * (the JavaScript in a request header, run in the sandbox), so one process takes many attacks;
 * after each one the process must still be the same process and other routes must answer.
 */
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
const HOST_API = fileURLToPath(new URL('../../core/src/extauth/plugins/fixtures/host-api.ts', import.meta.url));

/** The base64 the Evaluate fixture reads from `x-code`. */
const encodeCode = (code: string): string => Buffer.from(code, 'utf8').toString('base64');

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: string; ms: number }> {
  const started = performance.now();
  const response = await fetch(url, { headers });
  const body = await response.text();
  return { status: response.status, headers: response.headers, body, ms: performance.now() - started };
}

let config: ConfigDir;
let pluginDir: string;
let upstream: TestServer;
/** The declared egress (`upstreamRef: keys`): echoes what it got; `/redirect?to=URL` answers 302 to URL. */
let keys: TestServer & { paths: string[] };
/** A server no plugin declared: any request reaching it is an escape. */
let forbidden: TestServer & { hits: string[] };
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  // The headers an allowing plugin set reach the upstream, which hands them back to the test.
  upstream = await startServer((req, res) => {
    for (const name of ['x-result', 'x-error', 'x-body', 'x-status']) if (req.headers[name] !== undefined) res.setHeader(name, req.headers[name]!);
    req.resume().on('end', () => res.end('upstream ok'));
  });
  const paths: string[] = [];
  keys = Object.assign(
    await startServer((req, res) => {
      paths.push(req.url!);
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk)).on('end', () => {
        const to = new URL(req.url!, 'http://x').searchParams.get('to');
        if (req.url!.startsWith('/redirect') && to) {
          res.writeHead(302, { location: to }).end();
          return;
        }
        // /big: a response body of exactly 1 MiB (the default fetch response limit), JSON.
        if (req.url === '/big') {
          res.end(JSON.stringify('x'.repeat(1024 * 1024 - 2)));
          return;
        }
        res.end(`keys saw ${req.url} with ${Buffer.concat(chunks).byteLength} bytes`);
      });
    }),
    { paths },
  );
  const hits: string[] = [];
  forbidden = Object.assign(
    await startServer((req, res) => {
      hits.push(req.url!);
      req.resume().on('end', () => res.end('FORBIDDEN SERVER REACHED'));
    }),
    { hits },
  );
  pluginDir = await mkdtemp(join(tmpdir(), 'gatehouse-attack-plugins-'));
  await buildPlugin({ entry: HOSTILE, name: 'Hostile', outDir: pluginDir });
  await buildPlugin({ entry: HOST_API, name: 'HostApi', outDir: pluginDir });
  const egress = [{ upstreamRef: { name: 'keys' } }];
  const route = (prefix: string, auth: string) => ({ matchers: [{ prefix }], options: { extauth: { configRef: { name: auth } } }, routeAction: { single: { upstream: { name: 'up' } } } });
  config = await makeConfigDir({
    'attacks.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.upstream('keys', [{ addr: '127.0.0.1', port: keys.port }]),
      manifests.authConfig('eval', [{ pluginAuth: { name: 'Hostile', exportedSymbolName: 'Evaluate', egress } }]),
      manifests.authConfig('fetcher', [{ pluginAuth: { name: 'HostApi', exportedSymbolName: 'Fetcher', config: { Url: 'http://keys.default.upstream' }, egress } }]),
      manifests.virtualService('attacks', {
        domains: ['*'],
        routes: [route('/eval/', 'eval'), route('/fetch/', 'fetcher'), { matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'up' } } } }],
      }),
    ],
  });
  // A 500 ms CPU limit: the legitimate programs here (encoding 3 M characters, sorting 12,000
  // elements in JavaScript) must not lose to a loaded machine; every attack is refused before
  // its builtin starts, whatever the limit. The default 50 ms is the fuzz test's.
  gatehouse = await startGatehouse('run', ['--config-dir', config.path, '--plugin-dir', pluginDir, '--extauth-timeout', '5s', '--plugin-cpu-timeout', '500ms']);
  await gatehouse.waitForLog((l) => l.msg === 'received new auth configuration');
}, 120_000);

afterAll(async () => {
  await gatehouse?.stop();
  await Promise.all([upstream?.close(), keys?.close(), forbidden?.close()]);
  await config?.cleanup();
  if (pluginDir) await rm(pluginDir, { recursive: true, force: true });
});

/** Runs `code` in the sandbox through the real gateway. */
function evaluate(code: string) {
  return get(`${gatehouse.url}/eval/x`, { 'x-code': encodeCode(code) });
}

/** The process that took the attack is alive and serves an unrelated route. */
async function stillServing(): Promise<void> {
  expect(gatehouse.child.exitCode).toBeNull();
  expect(gatehouse.child.signalCode).toBeNull();
  expect((await get(`${gatehouse.url}/open`)).status).toBe(200);
  expect((await get(`${gatehouse.adminUrl}/healthz`)).status).toBe(200);
}

describe('finding 4: the path of an upstream URL never changes its authority', () => {
  it.each([
    ['//HOST/config'],
    ['/.//HOST/config'],
    ['/\\HOST/config'],
    ['/\\\\HOST/config'],
    ['/..//HOST/config'],
    ['/%2e//HOST/config'],
    ['//user@HOST/config'],
  ])('fetch("http://keys.default.upstream%s") stays on the declared Upstream', async (form) => {
    const path = form.replace('HOST', `127.0.0.1:${forbidden.port}`);
    const before = keys.paths.length;
    const r = await get(`${gatehouse.url}/fetch/x`, { 'x-base': 'http://keys.default.upstream', 'x-path': path });
    expect(forbidden.hits).toEqual([]);
    // It went to the Upstream (with the path as a path), or was refused; never anywhere else.
    if (r.status === 200) {
      expect(r.headers.get('x-body')).toMatch(/^keys saw /);
      expect(keys.paths.length).toBe(before + 1);
    } else {
      expect(r.headers.get('x-error') ?? '').not.toContain('FORBIDDEN');
    }
  });

  it('the gateway admin port is not reachable through an upstream URL either', async () => {
    const r = await get(`${gatehouse.url}/fetch/x`, { 'x-base': 'http://keys.default.upstream', 'x-path': `//127.0.0.1:${gatehouse.adminPort}/config` });
    expect(r.headers.get('x-body') ?? '').toMatch(/^keys saw \/\/127\.0\.0\.1/);
  });

  it.each([['http://keys.default.upstream//HOST/x'], ['http://keys.default.upstream/.//HOST/x'], ['http://keys.default.upstream/\\HOST/x'], ['//HOST/x'], ['http://HOST/x']])(
    'a 302 from the declared Upstream to %s is re-checked and never leaves it',
    async (location) => {
      const to = location.replace('HOST', `127.0.0.1:${forbidden.port}`);
      const r = await get(`${gatehouse.url}/fetch/x`, { 'x-base': 'http://keys.default.upstream', 'x-path': `/redirect?to=${encodeURIComponent(to)}` });
      expect(forbidden.hits).toEqual([]);
      if (r.status === 200) expect(r.headers.get('x-body')).toMatch(/^keys saw /);
      else expect(r.headers.get('x-error')).toMatch(/TypeError: fetch: redirected to .* not allowed/);
    },
  );
});

describe('finding 5: fetch bodies up to the documented 1 MiB', () => {
  it.each([1_040_000, 1024 * 1024])('a request body of %i bytes is sent whole', async (size) => {
    const r = await evaluate(`
      const response = await fetch('http://keys.default.upstream/body', { method: 'POST', body: new Uint8Array(${size}) });
      return await response.text();
    `);
    expect(r.headers.get('x-error')).toBeNull();
    expect(r.headers.get('x-result')).toBe(`keys saw /body with ${size} bytes`);
  });

  it('a response body of 1 MiB reads whole as text, bytes and JSON', async () => {
    const r = await evaluate(`
      const text = await (await fetch('http://keys.default.upstream/big')).text();
      const bytes = await (await fetch('http://keys.default.upstream/big')).arrayBuffer();
      const json = await (await fetch('http://keys.default.upstream/big')).json();
      return [text.length, bytes.byteLength, json.length].join(',');
    `);
    expect(r.headers.get('x-error')).toBeNull();
    expect(r.headers.get('x-result')).toBe(`${1024 * 1024},${1024 * 1024},${1024 * 1024 - 2}`);
  });

  it('the runtime\'s own encoder sizes its buffer by the real output: 3 M characters with one non-ASCII encode', async () => {
    const r = await evaluate(`return new TextEncoder().encode('é' + 'x'.repeat(3_000_000)).byteLength;`);
    expect(r.headers.get('x-error')).toBeNull();
    expect(r.headers.get('x-result')).toBe('3000002');
  });

  it('atob of 1.4 MB of base64 decodes (the runtime chunks its own arrays under the sandbox bound)', async () => {
    // 'YWL/' is base64 of 'ab\xff': 1.05 M characters out, more than one array of the sandbox may hold.
    const r = await evaluate(`const text = atob('YWL/'.repeat(350_000)); return [text.length, text.slice(0, 3) === 'ab\\xff', text.endsWith('ab\\xff')].join(',');`);
    expect(r.headers.get('x-error')).toBeNull();
    expect(r.headers.get('x-result')).toBe('1050000,true,true');
  });

  it('one byte over the limit is a TypeError from the host, not a RangeError from the runtime', async () => {
    const r = await evaluate(`await fetch('http://keys.default.upstream/body', { method: 'POST', body: new Uint8Array(${1024 * 1024 + 1}) });`);
    expect(r.headers.get('x-error')).toMatch(/^TypeError: fetch: request body larger than 1048576 bytes/);
  });
});

/** A getter that answers `first` to the first read and `then` to every later one. */
const lyingLength = (first: number, then: number) => `let reads = 0; const o = { get length() { return reads++ === 0 ? ${first} : ${then}; } };`;
/** An object whose `valueOf` answers `first`, then `then`. */
const lyingNumber = (first: number, then: number) => `let reads = 0; const n = { valueOf() { return reads++ === 0 ? ${first} : ${then}; } };`;

describe('findings 1 and 2: a check the plugin can answer differently from the operation', () => {
  it.each([
    ['Array.prototype.fill.call with a lying length getter', `${lyingLength(0, 1.2e8)} Array.prototype.fill.call(o, 1); return o.length;`],
    ['Array.prototype.join.call with a lying length getter', `${lyingLength(0, 1.2e8)} return Array.prototype.join.call(o, 'x').length;`],
    ['Array.prototype.copyWithin.call with a lying length getter', `${lyingLength(0, 1.2e8)} Array.prototype.copyWithin.call(o, 1, 0); return 1;`],
    ['Array.from with a lying length getter', `${lyingLength(0, 1.2e8)} return Array.from(o).length;`],
    ['Uint8Array.from with a lying length getter', `${lyingLength(0, 1.2e9)} return Uint8Array.from(o).length;`],
    ['new Float64Array(array-like) with a lying length getter', `${lyingLength(0, 2e8)} return new Float64Array(o).length;`],
    ['new Uint8Array("1e9") (a string size)', `return new Uint8Array('1000000000').length;`],
    ['ArrayBuffer.prototype.transfer(2e9)', `return new ArrayBuffer(8).transfer(2e9).byteLength;`],
    ['a Proxy answering length 0 then 1.2e8', `let reads = 0; const p = new Proxy({}, { get: (t, k) => (k === 'length' ? (reads++ === 0 ? 0 : 1.2e8) : undefined) }); Array.prototype.fill.call(p, 1); return 1;`],
    ['concat of a spreadable object with a lying length', `${lyingLength(0, 1.2e8)} o[Symbol.isConcatSpreadable] = true; return [].concat(o).length;`],
    ['replace building 128 M characters', `return 'a'.repeat(1 << 20).replace(/a/g, 'x'.repeat(128)).length;`],
    ['replaceAll building 128 M characters', `return 'a'.repeat(1 << 20).replaceAll('a', 'x'.repeat(128)).length;`],
    ['join building 128 M characters', `return new Array(8).fill('x'.repeat(16 * 1024 * 1024)).join('').length;`],
    ['split of a 16 M string into characters', `return 'x'.repeat(16 * 1024 * 1024).split('').length;`],
    ['flat of a shared 1 M element array 1,000 times', `const a = new Array(1e6).fill(0); return new Array(1000).fill(a).flat().length;`],
    ['a typed array whose length property says 0 is sorted by its real length', `const u = new Float32Array(2_000_000); Object.defineProperty(u, 'length', { value: 0 }); u.sort(); return 1;`],
    ['a tampered Object.getOwnPropertyDescriptor cannot hide the getter', `Object.getOwnPropertyDescriptor = () => ({ value: 0 }); Reflect.apply = (f, t, a) => 0; ${lyingLength(0, 1.2e8)} Array.prototype.fill.call(o, 1); return 1;`],
  ])('%s: refused before the builtin starts, and the gateway keeps serving', async (_name, code) => {
    const r = await evaluate(code);
    // Refused inside the sandbox (the plugin sees a RangeError or TypeError from the bound), not
    // by termination after the fact and never by the process dying.
    expect(r.status).toBe(200);
    expect(r.headers.get('x-error')).toMatch(/^(RangeError|TypeError): .*(sandbox|Proxy|accessor)/);
    await stillServing();
  });

  it.each([
    ['new ArrayBuffer(n) with a lying valueOf', `${lyingNumber(8, 2e9)} return new ArrayBuffer(n).byteLength;`, '8'],
    ['new ArrayBuffer(n, { maxByteLength }) with a lying getter', `let reads = 0; const options = { get maxByteLength() { return reads++ === 0 ? 16 : 2e9; } }; try { return new ArrayBuffer(8, options).maxByteLength; } catch (e) { return e.name; }`, 'TypeError'],
    ['String.prototype.repeat with a lying count', `${lyingNumber(1, 2 ** 28)} return 'x'.repeat(n).length;`, '1'],
    ['String.prototype.padStart with a lying length', `${lyingNumber(1, 2 ** 28)} return 'x'.padStart(n).length;`, '1'],
    ['new Uint8Array(n) with a lying valueOf', `${lyingNumber(4, 2e9)} return new Uint8Array(n).length;`, '0'],
    ['a typed array whose length property is shadowed', `const u = new Uint8Array(4); Object.defineProperty(u, 'length', { value: 0 }); return u.slice().length;`, '4'],
  ])('%s: the builtin gets the value the check saw (%s)', async (_name, code, expected) => {
    const r = await evaluate(code);
    expect(r.headers.get('x-error')).toBeNull();
    expect(r.headers.get('x-result')).toBe(expected);
    await stillServing();
  });

  it('sorts past the native bound keep the default order exactly (numbers, strings, undefined, holes; typed arrays with NaN and -0)', async () => {
    // 12,000 elements: past the 10,000 that V8 sorts itself, each call well inside the CPU limit.
    const build = `const a = []; for (let i = 0; i < 12000; i++) a.push(i % 7 === 0 ? String(i * 13 % 1000) : i % 11 === 0 ? undefined : (i * 7919) % 12011 - 6000); a.length = 12010;`;
    const print = `let f = 0; for (let i = 0; i < s.length; i++) f = (f * 31 + String(s[i]).length * 17 + (s[i] === undefined ? 7 : 0) + (i in s ? 0 : 3) + (typeof s[i] === 'string' ? 5 : 0)) % 1000000007; return f;`;
    for (const sort of ['const s = a.sort();', 'const s = a.toSorted();']) {
      // The same program with V8's own comparator, here in Node (toSorted fills holes with undefined; sort keeps them).
      const expected = String(new Function(`${build} ${sort} ${print}`)());
      const r = await evaluate(`${build} ${sort} ${print}`);
      expect(r.headers.get('x-error')).toBeNull();
      expect(r.headers.get('x-result'), sort).toBe(expected);
    }
    const typed = `const t = new Float64Array(12000).map((_, i) => (i % 97 === 0 ? NaN : i % 89 === 0 ? -0 : i % 83 === 0 ? 0 : Math.round(Math.cos(i) * 1000))); t.sort(); const s = Array.from(t, (x) => (Object.is(x, -0) ? '-0' : String(x))); return s.join();`;
    const r = await evaluate(typed);
    expect(r.headers.get('x-error')).toBeNull();
    const t = new Float64Array(12000).map((_, i) => (i % 97 === 0 ? NaN : i % 89 === 0 ? -0 : i % 83 === 0 ? 0 : Math.round(Math.cos(i) * 1000)));
    t.sort();
    // The whole order is too long for a header (200 characters come back): its start, and its own check of the end.
    expect(r.headers.get('x-result')).toBe(Array.from(t, (x) => (Object.is(x, -0) ? '-0' : String(x))).join().slice(0, 200));
    const ends = await evaluate(typed.replace('return s.join();', "return [s.at(-1), s.includes('-0') ? s.indexOf('-0') < s.lastIndexOf('0') : 'no -0', s.filter((x) => x === 'NaN').length].join(';');"));
    expect(ends.headers.get('x-result')).toBe(`NaN;true;${t.filter((x) => Number.isNaN(x)).length}`);
  });

  it('well-behaved uses of the same builtins keep working', async () => {
    const r = await evaluate(`
      const a = Array.prototype.map.call('abc', (c) => c.toUpperCase()).join('');
      const b = Array.prototype.slice.call({ length: 2, 0: 'x', 1: 'y' }).join('');
      const c = new Uint8Array([1, 2, 3]).map((x) => x * 2).join(',');
      const d = 'a-b-c'.replace(/-/g, '+') + 'x'.repeat(3) + '7'.padStart(3, '0');
      const e = [[1, [2]], 3].flat(Infinity).concat([4], 5).length;
      const f = Uint8Array.from(new Set([1, 2])).length + new Float32Array({ length: 2 }).length;
      const g = 'a,b'.split(',').length + [1, 2, 3].flatMap((x) => [x, x]).length;
      const h = new ArrayBuffer(8, { maxByteLength: 16 }).maxByteLength;
      return [a, b, c, d, e, f, g, h].join('|');
    `);
    expect(r.headers.get('x-error')).toBeNull();
    expect(r.headers.get('x-result')).toBe('ABC|xy|2,4,6|a+b+cxxx007|5|4|8|16');
  });
});
