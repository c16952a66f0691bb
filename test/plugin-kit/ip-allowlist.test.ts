import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startServer, type TestServer } from '../support/upstream.ts';
import { authRoute, buildReferencePlugin, deploy, SHAPES, type Deployment } from './support.ts';

// The IpAllowlist reference plugin through `gatehouse run` and through `gatehouse gateway` +
// `gatehouse extauth`: the gateway's own CheckRequest carries the peer address (127.0.0.1
// here), the bucket lives in the step's ctx.store (in the process running the auth steps).

let plugin: Awaited<ReturnType<typeof buildReferencePlugin>>;
let upstream: TestServer;
let config: ConfigDir;

const step = (config: object) => [{ pluginAuth: { name: 'IpAllowlist', config } }];

beforeAll(async () => {
  plugin = await buildReferencePlugin('ip-allowlist', 'IpAllowlist');
  upstream = await startServer((req, res) => res.end(`client ${req.headers['x-client-ip']}`));
  config = await makeConfigDir({
    'ip.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.authConfig('loopback', step({ AllowedCidrs: ['127.0.0.0/8', '::1'], RateLimit: { RequestsPerSecond: 0.2, Burst: 2 } })),
      manifests.authConfig('private', step({ AllowedCidrs: ['10.0.0.0/8'] })),
      manifests.authConfig('proxied', step({ AllowedCidrs: ['10.0.0.0/8'], TrustedProxyHops: 1 })),
      manifests.virtualService('app', { domains: ['*'], routes: [authRoute('/limited/', 'loopback'), authRoute('/private/', 'private'), authRoute('/proxied/', 'proxied')] }),
    ],
  });
});

afterAll(async () => {
  await config?.cleanup();
  await upstream?.close();
  await plugin?.cleanup();
});

describe.each(SHAPES)('IpAllowlist through gatehouse %s', (shape) => {
  let gatehouse: Deployment;
  beforeAll(async () => {
    gatehouse = await deploy(shape, config.path, plugin.dir);
  }, 60_000);
  afterAll(async () => {
    await gatehouse?.stop();
  });

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
