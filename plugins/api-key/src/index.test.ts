import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { expectAllowed, startPlugin, type PluginHarness } from '@gatehouse/plugin-sdk/testkit';

// The reference API-key plugin in the real sandbox against a real key service on 127.0.0.1:
// fetch through egress, answers cached in ctx.store, fail closed when the service fails.

const entry = new URL('./index.ts', import.meta.url);
let server: Server;
let base: string;
const lookups: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const key = decodeURIComponent((req.url ?? '').replace(/^\/keys\//, ''));
    lookups.push(key);
    if (key === 'good-key') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"user":"alice","customer":"acme-7","tier":3,"meta":{"x":1}}');
    if (key === 'no-customer') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"user":"bob"}');
    if (key === 'broken') return res.writeHead(500).end();
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server.close());

describe('ApiKey (sandbox)', () => {
  let plugin: PluginHarness | undefined;
  afterEach(async () => {
    await plugin?.close();
    plugin = undefined;
  });

  it('allows a known key (x-user-id from the service) and asks the service once per key while cached', async () => {
    plugin = await startPlugin('sandbox', { entry, name: 'ApiKey', config: { KeyServiceUrl: `${base}/keys/` }, egress: [base] });
    lookups.length = 0;
    for (let i = 0; i < 5; i++) {
      const decision = await plugin.authorize({ headers: { 'x-api-key': 'good-key' } });
      expect(decision).toMatchObject({ allowed: true });
      expect((decision as { headersToSet: unknown[] }).headersToSet).toContainEqual({ key: 'x-user-id', value: 'alice' });
    }
    expect(lookups).toEqual(['good-key']);
  });

  it('FieldsToHeaders: the service’s fields go upstream as headers, cached with the answer; a missing field removes its header', async () => {
    const config = { KeyServiceUrl: `${base}/keys/`, FieldsToHeaders: { customer: 'x-customer-id', tier: 'x-tier', meta: 'x-meta' } };
    plugin = await startPlugin('sandbox', { entry, name: 'ApiKey', config, egress: [base] });
    lookups.length = 0;
    for (let i = 0; i < 3; i++) {
      const decision = await plugin.authorize({ headers: { 'x-api-key': 'good-key', 'x-customer-id': 'spoofed' } });
      expectAllowed(decision, { 'x-customer-id': 'acme-7', 'x-tier': '3', 'x-user-id': 'alice' });
      expect(decision.headersToRemove).toEqual(['x-meta']);
    }
    expect(lookups).toEqual(['good-key']);
    const bob = await plugin.authorize({ headers: { 'x-api-key': 'no-customer', 'x-customer-id': 'spoofed' } });
    expectAllowed(bob, { 'x-user-id': 'bob' });
    expect(bob.headersToRemove.sort()).toEqual(['x-customer-id', 'x-meta', 'x-tier']);
    await expect(startPlugin('sandbox', { entry, name: 'ApiKey', config: { ...config, FieldsToHeaders: { customer: 'x customer' } }, egress: [base] })).rejects.toThrow(/FieldsToHeaders\.customer: expected a header name/);
  });

  it('denies an unknown or missing key with 401; the service failing denies with 503 and is not cached', async () => {
    plugin = await startPlugin('sandbox', { entry, name: 'ApiKey', config: { KeyServiceUrl: `${base}/keys/` }, egress: [base] });
    expect(await plugin.authorize({ headers: { 'x-api-key': 'nope' } })).toMatchObject({ allowed: false, status: 401 });
    expect(await plugin.authorize({ headers: {} })).toMatchObject({ allowed: false, status: 401 });
    lookups.length = 0;
    expect(await plugin.authorize({ headers: { 'x-api-key': 'broken' } })).toMatchObject({ allowed: false, status: 503 });
    expect(await plugin.authorize({ headers: { 'x-api-key': 'broken' } })).toMatchObject({ allowed: false, status: 503 });
    expect(lookups).toEqual(['broken', 'broken']);
  });
});
