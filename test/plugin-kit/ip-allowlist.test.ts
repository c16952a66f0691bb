import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

// The IpAllowlist reference plugin through `gatehouse run`: the gateway's own CheckRequest
// carries the peer address (127.0.0.1 here), the bucket lives in the step's ctx.store.

const ENTRY = fileURLToPath(new URL('../../plugins/ip-allowlist/src/index.ts', import.meta.url));
let pluginDir: string;
let upstream: TestServer;
let config: ConfigDir;
let gatehouse: GatehouseProcess;

const route = (prefix: string, authConfig: string) => ({ matchers: [{ prefix }], options: { extauth: { configRef: { name: authConfig } } }, routeAction: { single: { upstream: { name: 'up' } } } });
const step = (config: object) => [{ pluginAuth: { name: 'IpAllowlist', config } }];

beforeAll(async () => {
  pluginDir = await mkdtemp(join(tmpdir(), 'gatehouse-ip-allowlist-'));
  await buildPlugin({ entry: ENTRY, name: 'IpAllowlist', outDir: pluginDir });
  upstream = await startServer((req, res) => res.end(`client ${req.headers['x-client-ip']}`));
  config = await makeConfigDir({
    'ip.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.authConfig('loopback', step({ AllowedCidrs: ['127.0.0.0/8', '::1'], RateLimit: { RequestsPerSecond: 0.2, Burst: 2 } })),
      manifests.authConfig('private', step({ AllowedCidrs: ['10.0.0.0/8'] })),
      manifests.authConfig('proxied', step({ AllowedCidrs: ['10.0.0.0/8'], TrustedProxyHops: 1 })),
      manifests.virtualService('app', { domains: ['*'], routes: [route('/limited/', 'loopback'), route('/private/', 'private'), route('/proxied/', 'proxied')] }),
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', config.path, '--plugin-dir', pluginDir]);
  await gatehouse.waitForLog((line) => line.msg === 'received new auth configuration');
});

afterAll(async () => {
  await gatehouse?.stop();
  await config?.cleanup();
  await upstream?.close();
  await rm(pluginDir, { recursive: true, force: true });
});

describe('IpAllowlist through gatehouse run', () => {
  it('allows the loopback client (x-client-ip upstream) until its bucket is empty, then 429 with retry-after', async () => {
    for (let i = 0; i < 2; i++) {
      const allowed = await fetch(`${gatehouse.url}/limited/x`);
      expect(allowed.status).toBe(200);
      expect(await allowed.text()).toBe('client 127.0.0.1');
    }
    const limited = await fetch(`${gatehouse.url}/limited/x`);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(4);
    expect(Number(limited.headers.get('retry-after'))).toBeLessThanOrEqual(5);
  });

  it('denies a client outside the ranges with 403; a spoofed x-forwarded-for changes nothing unless hops are trusted', async () => {
    const denied = await fetch(`${gatehouse.url}/private/x`, { headers: { 'x-forwarded-for': '10.1.2.3' } });
    expect(denied.status).toBe(403);
    expect(denied.headers.get('content-length')).toBe('0');
    const proxied = await fetch(`${gatehouse.url}/proxied/x`, { headers: { 'x-forwarded-for': '192.168.0.9, 10.1.2.3' } });
    expect(proxied.status).toBe(200);
    expect(await proxied.text()).toBe('client 10.1.2.3');
  });
});
