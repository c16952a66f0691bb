import { createHmac } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { checkRequest, expectAllowed, expectDenied, startPlugin, TEST_MODES, type PluginHarness } from '@gatehouse/plugin-sdk/testkit';

// The reference webhook plugin in both test modes with GitHub's published X-Hub-Signature-256
// test vector, the body as text (`body`) and as bytes (`raw_body`, packAsBytes).

const entry = new URL('./index.ts', import.meta.url);
const SECRET = "It's a Secret to Everybody";
const PAYLOAD = 'Hello, World!';
const SIGNATURE = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';

/** A POST carrying `body` as text (`body`), or as bytes (`raw_body`: base64, as proto3 JSON carries bytes; the plugin sees a Uint8Array). */
function delivery(body: string | Uint8Array, headers: Record<string, string> = {}) {
  const request = checkRequest({ method: 'POST', path: '/hooks', headers, ...(typeof body === 'string' ? { body } : {}) });
  if (typeof body !== 'string') request.attributes.request.http.raw_body = Buffer.from(body).toString('base64');
  return request;
}

describe.each(TEST_MODES)('WebhookSignature (%s)', (mode) => {
  let plugin: PluginHarness | undefined;
  afterEach(async () => {
    await plugin?.close();
    plugin = undefined;
  });

  it('accepts GitHub’s test vector as text and as bytes; denies a tampered body, another secret and a malformed header', async () => {
    expect(`sha256=${createHmac('sha256', SECRET).update(PAYLOAD).digest('hex')}`).toBe(SIGNATURE);
    plugin = await startPlugin(mode, { entry, name: 'WebhookSignature', secrets: { WebhookSecret: SECRET } });
    const signed = { 'x-hub-signature-256': SIGNATURE };
    expectAllowed(await plugin.authorize(delivery(PAYLOAD, signed)));
    expectAllowed(await plugin.authorize(delivery(new TextEncoder().encode(PAYLOAD), signed)));
    expectAllowed(await plugin.authorize(delivery(PAYLOAD, { 'x-hub-signature-256': SIGNATURE.toUpperCase().replace('SHA256=', 'sha256=') })));
    const bad = async (request: ReturnType<typeof delivery>, body: string) => {
      const decision = await plugin!.authorize(request);
      expectDenied(decision, 401);
      expect(decision.body).toBe(body);
    };
    await bad(delivery('Hello, World?', signed), 'bad signature');
    await bad(delivery(new TextEncoder().encode('Hello, World! '), signed), 'bad signature');
    await bad(delivery(PAYLOAD, { 'x-hub-signature-256': `sha256=${createHmac('sha256', 'other').update(PAYLOAD).digest('hex')}` }), 'bad signature');
    await bad(delivery(PAYLOAD, { 'x-hub-signature-256': SIGNATURE.slice(7) }), 'missing or malformed signature');
    await bad(delivery(PAYLOAD, { 'x-hub-signature-256': `${SIGNATURE}0` }), 'missing or malformed signature');
    await bad(delivery(PAYLOAD), 'missing or malformed signature');
    const partial = await plugin.authorize(delivery(PAYLOAD, { ...signed, 'x-envoy-auth-partial-body': 'true' }));
    expectDenied(partial, 413);
  });

  it('fails to start without the secret named by config.Secret', async () => {
    await expect(startPlugin(mode, { entry, name: 'WebhookSignature', config: { Secret: 'Missing' }, secrets: { WebhookSecret: SECRET } })).rejects.toThrow(/secretRefs has no Missing/);
  });
});
