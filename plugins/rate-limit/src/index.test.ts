import { afterEach, describe, expect, it } from 'vitest';
import { createFakeClock, expectAllowed, expectDenied, startPlugin, TEST_MODES, type PluginHarness } from '@gatehouse/plugin-sdk/testkit';

// The reference rate limit in both test-kit modes: fixed windows per header, client address or
// JWT claim, counted with ctx.store.increment; a fake clock moves the window (and the store's
// TTLs) in both modes.

const entry = new URL('./index.ts', import.meta.url);
const name = 'RateLimit';
const responseHeaders = (decision: unknown) => Object.fromEntries(((decision as { responseHeaders?: { key: string; value: string }[] }).responseHeaders ?? []).map((h) => [h.key, h.value]));
const deniedHeaders = (decision: unknown) => Object.fromEntries(((decision as { headers?: { key: string; value: string }[] }).headers ?? []).map((h) => [h.key, h.value]));
// A token whose payload is {"sub":"alice"} (the plugin does not verify: a step before it does).
const token = (sub: string) => `Bearer e30.${Buffer.from(JSON.stringify({ sub })).toString('base64url')}.sig`;

describe.each(TEST_MODES)('RateLimit (%s)', (mode) => {
  let plugin: PluginHarness | undefined;
  afterEach(async () => {
    await plugin?.close();
    plugin = undefined;
  });

  it('allows exactly RequestsPerUnit per window and key, with X-RateLimit-* on the client response, then 429 with Retry-After', async () => {
    const clock = createFakeClock(Date.UTC(2030, 0, 1, 0, 0, 0));
    plugin = await startPlugin(mode, { entry, name, clock, config: { RequestsPerUnit: 3, Unit: 'minute', Key: { Header: 'x-api-key' } } });
    for (let i = 1; i <= 3; i++) {
      const decision = await plugin.authorize({ headers: { 'x-api-key': 'k1' } });
      expectAllowed(decision);
      expect(responseHeaders(decision)).toEqual({ 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': String(3 - i), 'x-ratelimit-reset': '60' });
    }
    await clock.advance(20_000);
    const denied = await plugin.authorize({ headers: { 'x-api-key': 'k1' } });
    expectDenied(denied, 429);
    expect(deniedHeaders(denied)).toEqual({ 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '40', 'retry-after': '40' });
    // Another key has its own count.
    expectAllowed(await plugin.authorize({ headers: { 'x-api-key': 'k2' } }));
    // The next window starts from zero.
    await clock.advance(40_000);
    expect(responseHeaders(await plugin.authorize({ headers: { 'x-api-key': 'k1' } }))['x-ratelimit-remaining']).toBe('2');
  });

  it('counts by client address from the CheckRequest, never from x-forwarded-for unless hops are trusted', async () => {
    plugin = await startPlugin(mode, { entry, name, config: { RequestsPerUnit: 1, Unit: 'hour', Key: { ClientIp: {} } } });
    expectAllowed(await plugin.authorize({ clientAddress: '10.0.0.1', headers: { 'x-forwarded-for': '1.1.1.1' } }));
    expectDenied(await plugin.authorize({ clientAddress: '10.0.0.1', headers: { 'x-forwarded-for': '2.2.2.2' } }), 429);
    expectAllowed(await plugin.authorize({ clientAddress: '10.0.0.2' }));
    expectDenied(await plugin.authorize({}), 403);
    await plugin.close();
    plugin = await startPlugin(mode, { entry, name, config: { RequestsPerUnit: 1, Unit: 'hour', Key: { ClientIp: { TrustedProxyHops: 1 } } } });
    expectAllowed(await plugin.authorize({ clientAddress: '10.0.0.9', headers: { 'x-forwarded-for': '6.6.6.6, 1.1.1.1' } }));
    expectDenied(await plugin.authorize({ clientAddress: '10.0.0.9', headers: { 'x-forwarded-for': '7.7.7.7, 1.1.1.1' } }), 429);
    expectAllowed(await plugin.authorize({ clientAddress: '10.0.0.9', headers: { 'x-forwarded-for': '1.1.1.1, 2.2.2.2' } }));
  });

  it('counts by a JWT claim; MissingKey allow skips requests without one; long keys are hashed', async () => {
    plugin = await startPlugin(mode, { entry, name, config: { RequestsPerUnit: 1, Unit: 'day', Key: { JwtClaim: 'sub' }, MissingKey: 'allow', HeadersOnAllowed: false } });
    const first = await plugin.authorize({ headers: { authorization: token('alice') } });
    expectAllowed(first);
    expect(responseHeaders(first)).toEqual({});
    expectDenied(await plugin.authorize({ headers: { authorization: token('alice') } }), 429);
    expectAllowed(await plugin.authorize({ headers: { authorization: token('bob') } }));
    expectAllowed(await plugin.authorize({ headers: { authorization: 'Bearer garbage' } }));
    expectAllowed(await plugin.authorize({ headers: { authorization: token('x'.repeat(600)) } }));
    expectDenied(await plugin.authorize({ headers: { authorization: token('x'.repeat(600)) } }), 429);
  });

  it('refuses a config it cannot honour at start', async () => {
    await expect(startPlugin(mode, { entry, name, config: { RequestsPerUnit: 0, Key: { Header: 'x' } } })).rejects.toThrow(/RequestsPerUnit/);
    await expect(startPlugin(mode, { entry, name, config: { RequestsPerUnit: 5, Unit: 'week', Key: { Header: 'x' } } })).rejects.toThrow(/Unit/);
    await expect(startPlugin(mode, { entry, name, config: { RequestsPerUnit: 5, Key: { Header: 'x', JwtClaim: 'sub' } } })).rejects.toThrow(/exactly one/);
  });
});
