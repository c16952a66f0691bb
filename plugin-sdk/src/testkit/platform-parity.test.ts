import { randomBytes, webcrypto } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PluginHarness } from './harness.ts';
import { startPlugin, TEST_MODES } from './start-plugin.ts';
import { cryptoWorkflow } from './fixtures/platform-probe-plugin.ts';

// Issue 30 items 4–6 in both test-kit modes: Web Crypto equal to Node's own crypto.subtle,
// WebAssembly with its memory budget, AbortSignal cancelling a slow fetch, and Error objects
// logged with their message and stack. Both modes run the sandbox's own runtime over the host's.

const entry = new URL('./fixtures/platform-probe-plugin.ts', import.meta.url);
const seen = (decision: unknown): unknown => JSON.parse((decision as { headersToSet: { key: string; value: string }[] }).headersToSet.find((h) => h.key === 'x-seen')!.value);
let server: Server;
let base: string;
/** Requests to /slow, and whether the client went away before an answer. */
const slow: { closed: boolean }[] = [];

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    if (req.url === '/slow') {
      const entry = { closed: false };
      slow.push(entry);
      // Never answers: only the plugin's signal ends the request.
      res.on('close', () => (entry.closed = true));
      return;
    }
    res.end('hello');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

const started: PluginHarness[] = [];
const start = async (mode: (typeof TEST_MODES)[number], options: Partial<Parameters<typeof startPlugin>[1]> = {}) => {
  const plugin = await startPlugin(mode, { entry, name: 'PlatformProbe', ...options });
  started.push(plugin);
  return plugin;
};
afterEach(async () => {
  await Promise.all(started.splice(0).map((plugin) => plugin.close()));
});

describe('Web Crypto: the sandbox equals Node\'s crypto.subtle', () => {
  it.each(TEST_MODES)('%s: an OIDC session cookie\'s workflow gives the bytes and errors Node gives on the same inputs', async (mode) => {
    const plugin = await start(mode);
    for (let i = 0; i < 3; i++) {
      const input = { key: randomBytes(32).toString('hex'), iv: randomBytes(16).toString('hex'), data: randomBytes(1 + i * 40).toString('hex') };
      const ours = seen(await plugin.authorize({ headers: { 'x-probe': 'crypto', 'x-key': input.key, 'x-iv': input.iv, 'x-data': input.data } }));
      const theirs = JSON.parse(JSON.stringify(await cryptoWorkflow(webcrypto.subtle as never, input))) as Record<string, unknown>;
      expect(ours).toEqual(theirs);
      // And what Node says is what a standard implementation says.
      expect(theirs).toMatchObject({ tampered: 'OperationError (DOMException)', wrongUsage: 'InvalidAccessError (DOMException)', notExtractable: 'InvalidAccessError (DOMException)', agreed: true });
    }
  });
});

describe('WebAssembly', () => {
  it.each(TEST_MODES)('%s: a module compiles and runs, its memory is an import of the budget, growth past memoryLimitMb throws', async (mode) => {
    const plugin = await start(mode, { memoryLimitMb: 16 });
    expect(seen(await plugin.authorize({ headers: { 'x-probe': 'wasm' } }))).toEqual({ add: 42, pages: 1, imports: 1, valid: true, grown: 'RangeError' });
  });
});

describe('AbortController and AbortSignal', () => {
  it.each(TEST_MODES)('%s: AbortSignal.timeout and abort() cancel a slow fetch (the server sees the request closed); events, any() and a live signal work', async (mode) => {
    const plugin = await start(mode, { config: { Url: base }, egress: [base] });
    const before = slow.length;
    expect(seen(await plugin.authorize({ headers: { 'x-probe': 'abort' } }))).toEqual({
      timedOut: 'TimeoutError (DOMException)',
      aborted: 'AbortError (DOMException)',
      already: 'AbortError (DOMException)',
      events: 2,
      any: [true, 'stop'],
      fine: 'hello',
    });
    // The host cancelled the requests: the server sees its clients go away (a request aborted before
    // it connected never reaches it; on this machine both do).
    expect(slow.length).toBeGreaterThan(before);
    await expect.poll(() => slow.slice(before).every((request) => request.closed), { timeout: 5000 }).toBe(true);
  });
});

describe('Error objects in logs', () => {
  it.each(TEST_MODES)('%s: message, stack (the plugin\'s own source lines), cause and own fields, not {}', async (mode) => {
    const plugin = await start(mode);
    await plugin.authorize({ headers: { 'x-probe': 'error-log' } });
    const [fields, line] = plugin.logs;
    expect(fields).toMatchObject({ level: 'error', message: 'refresh failed', fields: { error: { name: 'TypeError', message: 'token endpoint failed', code: 'E_TOKEN', cause: { name: 'Error', message: 'connection refused' } } } });
    const error = (fields!.fields as { error: { stack: string } }).error;
    expect(error.stack).toMatch(/^ {4}at .*platform-probe-plugin\.ts:\d+:\d+/);
    expect(line!.level).toBe('info');
    expect(line!.message).toMatch(/^caught TypeError: token endpoint failed\n {4}at .*platform-probe-plugin\.ts:\d+:\d+/);
  });
});
