/**
 * The WebhookSignature reference plugin end to end, through `gatehouse run` and through
 * `gatehouse gateway` + `gatehouse extauth`: GitHub's published X-Hub-Signature-256 test vector
 * (docs.github.com, "Validating webhook deliveries") passes, a tampered body fails; the secret
 * comes from a Secret through `secretRefs`, the body reaches the plugin through
 * `options.extauth.requestBody` (as text, and as bytes with packAsBytes) and the upstream unchanged.
 */
import { createHash, createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startBodyRecorder } from '../support/upstream.ts';
import { authRoute, buildReferencePlugin, deploy, SHAPES, type Deployment } from './support.ts';

// GitHub's test values, as published.
const GITHUB_SECRET = "It's a Secret to Everybody";
const GITHUB_PAYLOAD = 'Hello, World!';
const GITHUB_SIGNATURE = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';

let upstream: Awaited<ReturnType<typeof startBodyRecorder>>;
let config: ConfigDir;
let plugin: Awaited<ReturnType<typeof buildReferencePlugin>>;

beforeAll(async () => {
  upstream = await startBodyRecorder('delivered');
  plugin = await buildReferencePlugin('webhook-signature', 'WebhookSignature');
  config = await makeConfigDir({
    'webhooks.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'github-webhook' }, data: { secret: Buffer.from(GITHUB_SECRET).toString('base64') } },
      manifests.authConfig('github', [{ pluginAuth: { name: 'WebhookSignature', secretRefs: { WebhookSecret: { name: 'github-webhook', key: 'secret' } } } }]),
      manifests.virtualService('hooks', {
        domains: ['*'],
        routes: [
          authRoute('/text/', 'github', 'up', { requestBody: { maxRequestBytes: 65_536 } }),
          authRoute('/bytes/', 'github', 'up', { requestBody: { maxRequestBytes: 65_536, packAsBytes: true } }),
        ],
      }),
    ],
  });
});

afterAll(async () => {
  await config?.cleanup();
  await plugin?.cleanup();
  await upstream?.close();
});

const post = async (url: string, body: string, headers: Record<string, string> = {}) => {
  const response = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', 'x-github-event': 'ping', ...headers } });
  return { status: response.status, body: await response.text() };
};
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

it('GitHub’s published signature is what HMAC-SHA256 of the payload under the secret gives', () => {
  expect(`sha256=${createHmac('sha256', GITHUB_SECRET).update(GITHUB_PAYLOAD).digest('hex')}`).toBe(GITHUB_SIGNATURE);
});

describe.each(SHAPES)('WebhookSignature with GitHub’s test vector through gatehouse %s', (shape) => {
  let gatehouse: Deployment;

  beforeAll(async () => {
    gatehouse = await deploy(shape, config.path, plugin.dir);
  }, 60_000);
  afterAll(async () => {
    await gatehouse?.stop();
  });

  it.each(['text', 'bytes'])('the signed payload passes and reaches the upstream unchanged (body as %s)', async (as) => {
    const delivered = upstream.seen.length;
    const reply = await post(`${gatehouse.url}/${as}/github`, GITHUB_PAYLOAD, { 'x-hub-signature-256': GITHUB_SIGNATURE });
    expect(reply).toEqual({ status: 200, body: 'delivered' });
    expect(upstream.seen.length).toBe(delivered + 1);
    expect(upstream.seen.at(-1)).toMatchObject({ method: 'POST', path: `/${as}/github`, bytes: GITHUB_PAYLOAD.length, sha256: sha256(GITHUB_PAYLOAD) });
    expect(upstream.seen.at(-1)!.headers['x-hub-signature-256']).toBe(GITHUB_SIGNATURE);
  });

  it.each(['text', 'bytes'])('a tampered body, a wrong or missing signature are denied 401 and never delivered (body as %s)', async (as) => {
    const delivered = upstream.seen.length;
    const url = `${gatehouse.url}/${as}/github`;
    expect(await post(url, 'Hello, World?', { 'x-hub-signature-256': GITHUB_SIGNATURE })).toEqual({ status: 401, body: 'bad signature' });
    expect(await post(url, `${GITHUB_PAYLOAD} `, { 'x-hub-signature-256': GITHUB_SIGNATURE })).toEqual({ status: 401, body: 'bad signature' });
    const otherSecret = `sha256=${createHmac('sha256', "It's a Secret to Nobody").update(GITHUB_PAYLOAD).digest('hex')}`;
    expect(await post(url, GITHUB_PAYLOAD, { 'x-hub-signature-256': otherSecret })).toEqual({ status: 401, body: 'bad signature' });
    expect(await post(url, GITHUB_PAYLOAD, { 'x-hub-signature-256': GITHUB_SIGNATURE.replace('sha256=', 'sha1=') })).toEqual({ status: 401, body: 'missing or malformed signature' });
    expect(await post(url, GITHUB_PAYLOAD)).toEqual({ status: 401, body: 'missing or malformed signature' });
    expect(upstream.seen.length).toBe(delivered);
  });

  it('the secret appears in no log line', () => {
    expect(gatehouse.output()).not.toContain(GITHUB_SECRET);
  });
});
