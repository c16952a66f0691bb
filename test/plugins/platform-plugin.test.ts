/**
 * The platform APIs of issue 30 (items 4–6) through a real `gatehouse run`, where plugin calls
 * run in the plugin process and the asynchronous host calls (Node's crypto.subtle, fetch with an
 * AbortSignal) cross its boundary: the Web Crypto workflow of an OIDC session gives Node's bytes,
 * WebAssembly runs within its budget, a slow fetch is cancelled by its signal (the server sees
 * the request closed), and an Error a plugin logs arrives with its message and stack.
 */
import { randomBytes, webcrypto } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { cryptoWorkflow } from '../../plugin-sdk/src/testkit/fixtures/platform-probe-plugin.ts';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

const PROBE = fileURLToPath(new URL('../../plugin-sdk/src/testkit/fixtures/platform-probe-plugin.ts', import.meta.url));

describe('platform APIs through gatehouse run', () => {
  let upstream: TestServer;
  /** What the plugin put on each allowed request (`x-seen`), as the upstream received it. */
  const seen: unknown[] = [];
  let slowServer: TestServer & { slow: { closed: boolean }[] };
  let config: ConfigDir;
  let pluginDir: string;
  let gatehouse: GatehouseProcess;

  beforeAll(async () => {
    upstream = await startServer((req, res) => {
      seen.push(req.headers['x-seen']);
      req.resume().on('end', () => res.end('upstream ok'));
    });
    const slow: { closed: boolean }[] = [];
    slowServer = Object.assign(
      await startServer((req, res) => {
        if (req.url === '/slow') {
          const entry = { closed: false };
          slow.push(entry);
          res.on('close', () => (entry.closed = true));
          return;
        }
        res.end('hello');
      }),
      { slow },
    );
    pluginDir = await mkdtemp(join(tmpdir(), 'gatehouse-platform-plugin-'));
    await buildPlugin({ entry: PROBE, name: 'PlatformProbe', outDir: pluginDir });
    const base = `http://127.0.0.1:${slowServer.port}`;
    config = await makeConfigDir({
      'platform.yaml': [
        manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
        manifests.authConfig('probe', [{ pluginAuth: { name: 'PlatformProbe', config: { Url: base }, egress: [{ url: base }] } }]),
        manifests.virtualService('platform', {
          domains: ['*'],
          options: { extauth: { configRef: { name: 'probe' } } },
          routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'up' } } } }],
        }),
      ],
    });
    gatehouse = await startGatehouse('run', ['--config-dir', config.path, '--plugin-dir', pluginDir, '--extauth-timeout', '3s']);
    await gatehouse.waitForLog((l) => l.msg === 'received new auth configuration');
  }, 120_000);

  afterAll(async () => {
    await gatehouse?.stop();
    await Promise.all([upstream?.close(), slowServer?.close()]);
    await config?.cleanup();
    if (pluginDir) await rm(pluginDir, { recursive: true, force: true });
  });

  /** Sends a probe request; what the probe saw reaches the upstream in `x-seen`. */
  const probe = async (headers: Record<string, string>): Promise<number> => {
    const response = await fetch(`${gatehouse.url}/x`, { headers });
    await response.arrayBuffer();
    return response.status;
  };

  it('Web Crypto in the plugin process equals Node on the same inputs, and WebAssembly and AbortSignal work there', async () => {
    const input = { key: randomBytes(32).toString('hex'), iv: randomBytes(16).toString('hex'), data: randomBytes(50).toString('hex') };
    const expected = JSON.parse(JSON.stringify(await cryptoWorkflow(webcrypto.subtle as never, input)));
    expect(await probe({ 'x-probe': 'crypto', 'x-key': input.key, 'x-iv': input.iv, 'x-data': input.data })).toBe(200);
    expect(JSON.parse(String(seen.at(-1)))).toEqual(expected);
    expect(await probe({ 'x-probe': 'wasm' })).toBe(200);
    expect(JSON.parse(String(seen.at(-1)))).toEqual({ add: 42, pages: 1, imports: 1, valid: true, grown: 'RangeError' });
    const slowBefore = slowServer.slow.length;
    expect(await probe({ 'x-probe': 'abort' })).toBe(200);
    expect(JSON.parse(String(seen.at(-1)))).toMatchObject({ timedOut: 'TimeoutError (DOMException)', aborted: 'AbortError (DOMException)', fine: 'hello' });
    expect(slowServer.slow.length).toBeGreaterThan(slowBefore);
    await expect.poll(() => slowServer.slow.slice(slowBefore).every((request) => request.closed), { timeout: 5_000 }).toBe(true);
  });

  it('an Error the plugin logs reaches the gateway\'s log with its message, cause and stack in the plugin\'s sources', async () => {
    expect(await probe({ 'x-probe': 'error-log' })).toBe(200);
    const line = await gatehouse.waitForLog((l) => l.msg === 'refresh failed' && l.source === 'plugin');
    const error = (line.fields as { error: { name: string; message: string; stack: string; cause: { message: string }; code: string } }).error;
    expect(error).toMatchObject({ name: 'TypeError', message: 'token endpoint failed', code: 'E_TOKEN', cause: { message: 'connection refused' } });
    expect(error.stack).toMatch(/platform-probe-plugin\.ts:\d+:\d+/);
    const printed = await gatehouse.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('caught TypeError: token endpoint failed') && l.source === 'plugin');
    expect(String(printed.msg)).toMatch(/\n {4}at .*platform-probe-plugin\.ts:\d+:\d+/);
  });
});
