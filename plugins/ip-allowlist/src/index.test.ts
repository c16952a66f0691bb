import { afterEach, describe, expect, it } from 'vitest';
import { createFakeClock, expectAllowed, expectDenied, startPlugin, TEST_MODES, type PluginHarness } from '@gatehouse/plugin-sdk/testkit';

// The reference IP allow-list in both test-kit modes: CIDR v4/v6, the peer address by default,
// x-forwarded-for only through trusted hops, and a token bucket per client in ctx.store
// (a fake clock moves time; Date.now follows it in both modes).

const entry = new URL('./index.ts', import.meta.url);
const name = 'IpAllowlist';
const AllowedCidrs = ['10.0.0.0/8', '2001:db8::/32'];

describe.each(TEST_MODES)('IpAllowlist (%s)', (mode) => {
  let plugin: PluginHarness | undefined;
  afterEach(async () => {
    await plugin?.close();
    plugin = undefined;
  });

  it('allows addresses in the ranges (IPv4, IPv6, IPv4-mapped) and tells the upstream which', async () => {
    plugin = await startPlugin(mode, { entry, name, config: { AllowedCidrs } });
    expectAllowed(await plugin.authorize({ clientAddress: '10.1.2.3' }), { 'x-client-ip': '10.1.2.3' });
    expectAllowed(await plugin.authorize({ clientAddress: '2001:db8:0:0::7' }), { 'x-client-ip': '2001:db8::7' });
    expectAllowed(await plugin.authorize({ clientAddress: '::ffff:10.9.8.7' }), { 'x-client-ip': '10.9.8.7' });
  });

  it('denies other addresses and requests without one with 403; x-forwarded-for is not trusted by default', async () => {
    plugin = await startPlugin(mode, { entry, name, config: { AllowedCidrs } });
    expectDenied(await plugin.authorize({ clientAddress: '192.168.1.1' }), 403);
    expectDenied(await plugin.authorize({ clientAddress: '2001:db9::1' }), 403);
    expectDenied(await plugin.authorize({}), 403);
    expectDenied(await plugin.authorize({ clientAddress: '192.168.1.1', headers: { 'x-forwarded-for': '10.1.2.3' } }), 403);
    expect(await plugin.authorize({ clientAddress: '192.168.1.1' })).toEqual({ allowed: false, status: 403, headers: [], body: '' });
  });

  it('with trusted proxy hops, takes the client from x-forwarded-for, counting from the right', async () => {
    plugin = await startPlugin(mode, { entry, name, config: { AllowedCidrs, TrustedProxyHops: 2 } });
    // spoofed, client as the first trusted proxy saw it, the second proxy's own record.
    const headers = { 'x-forwarded-for': '10.6.6.6, 192.168.7.7, 172.16.0.1' };
    expectDenied(await plugin.authorize({ clientAddress: '172.16.0.2', headers }), 403);
    expectAllowed(await plugin.authorize({ clientAddress: '172.16.0.2', headers: { 'x-forwarded-for': '192.168.7.7,10.1.1.1, 172.16.0.1' } }), { 'x-client-ip': '10.1.1.1' });
    // Shorter than the hops: the client cannot be known.
    expectDenied(await plugin.authorize({ clientAddress: '10.1.1.1', headers: { 'x-forwarded-for': '10.1.1.1' } }), 403);
    expect(plugin.logs).toContainEqual({ level: 'warn', message: 'client address unknown: denied', fields: { trustedProxyHops: 2 } });
  });

  it('rate-limits each client with a token bucket: 429 with retry-after, refilled as time passes', async () => {
    const clock = createFakeClock();
    plugin = await startPlugin(mode, { entry, name, clock, config: { AllowedCidrs, RateLimit: { RequestsPerSecond: 0.5, Burst: 3 } } });
    for (let i = 0; i < 3; i++) expectAllowed(await plugin.authorize({ clientAddress: '10.0.0.1' }));
    const limited = await plugin.authorize({ clientAddress: '10.0.0.1' });
    expectDenied(limited, 429);
    expect(limited).toEqual({ allowed: false, status: 429, headers: [{ key: 'retry-after', value: '2' }], body: '' });
    // Another client has its own bucket.
    expectAllowed(await plugin.authorize({ clientAddress: '10.0.0.2' }));
    await clock.advance(1000);
    expect(await plugin.authorize({ clientAddress: '10.0.0.1' })).toMatchObject({ status: 429, headers: [{ key: 'retry-after', value: '1' }] });
    await clock.advance(1000);
    expectAllowed(await plugin.authorize({ clientAddress: '10.0.0.1' }));
    expectDenied(await plugin.authorize({ clientAddress: '10.0.0.1' }), 429);
    // A long pause refills the bucket to its burst, not beyond.
    await clock.advance(60_000);
    for (let i = 0; i < 3; i++) expectAllowed(await plugin.authorize({ clientAddress: '10.0.0.1' }));
    expectDenied(await plugin.authorize({ clientAddress: '10.0.0.1' }), 429);
  });

  it('refuses config it cannot honour, naming the field', async () => {
    await expect(startPlugin(mode, { entry, name, config: {} })).rejects.toMatchObject({ code: 'GH_PLUGIN_INIT_FAILED', message: expect.stringContaining('config.AllowedCidrs is required') });
    await expect(startPlugin(mode, { entry, name, config: { AllowedCidrs: ['10.0.0.0/8', '10.0.0.0/40'] } })).rejects.toMatchObject({
      message: expect.stringContaining('config.AllowedCidrs[1]: "10.0.0.0/40": the prefix length must be 0 to 32 for IPv4'),
    });
    await expect(startPlugin(mode, { entry, name, config: { AllowedCidrs, RateLimit: { RequestsPerSecond: 5 } } })).rejects.toMatchObject({ message: expect.stringContaining('config.RateLimit.Burst must be at least 1') });
    await expect(startPlugin(mode, { entry, name, config: { AllowedCidrs, TrustedProxyHops: -1 } })).rejects.toMatchObject({ message: expect.stringContaining('config.TrustedProxyHops must be a whole number') });
  });
});
