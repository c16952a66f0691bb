/**
 * apiKeyAuth (Gloo shape) through a real `gatehouse run`: API keys in Kubernetes Secret
 * manifests selected by label or by reference, a real upstream, keys rotated by writing files.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extAuthChecks } from '../../core/src/extauth/checks.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { authConfig, snapshotter } from './support.ts';

const b64 = (text: string) => Buffer.from(text).toString('base64');
/** A Gloo API key Secret: the key under `api-key`, metadata beside it. */
const apiKeySecret = (name: string, key: string, metadata: Record<string, string>, labels: Record<string, string> = { team: 'infrastructure' }) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  type: 'extauth.solo.io/apikey',
  metadata: { name, namespace: 'default', labels },
  data: { 'api-key': b64(key), ...Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k, b64(v)])) },
});
const gloo = (name: string, configs: object[]) => ({ ...authConfig(name, configs), apiVersion: 'enterprise.gloo.solo.io/v1' });

let echo: TestServer;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  echo = await startEcho('echo');
  const route = (prefix: string, config: string) => ({ matchers: [{ prefix }], options: { extauth: { configRef: { name: config } } }, routeAction: { single: { upstream: { name: 'echo' } } } });
  dir = await makeConfigDir({
    'keys.yaml': [apiKeySecret('infra-alice', 'N2YwMDIxZTEtNGUzNS1jNzgzLTRkYjAtYjE2YzRkZGVmNjcy', { 'user-id': 'alice' }), apiKeySecret('infra-anon', 'anonymous-key-without-user', {}), apiKeySecret('other-team', 'key-of-another-team', { 'user-id': 'mallory' }, { team: 'other' })],
    'auth.yaml': [
      // Gloo's API key guide: select by label, default header `api-key`.
      gloo('by-label', [{ apiKeyAuth: { labelSelector: { team: 'infrastructure' }, headersFromMetadataEntry: { 'x-api-user': { name: 'user-id', required: true } } } }]),
      gloo('by-ref', [{ apiKeyAuth: { headerName: 'x-partner-key', k8sSecretApikeyStorage: { apiKeySecretRefs: [{ name: 'other-team', namespace: 'default' }] }, headersFromMetadata: { 'x-api-user': 'user-id' } } }]),
    ],
    'routes.yaml': [
      { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: echo.port }] } } },
      { apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name: 'api' }, spec: { virtualHost: { domains: ['*'], routes: [route('/label/', 'by-label'), route('/ref/', 'by-ref')] } } },
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
});

afterAll(async () => {
  await gatehouse?.stop();
  await echo?.close();
  await dir?.cleanup();
});

/** Polls `status` of `path` until it is `want` (a reload takes a moment); resolves with the last status seen. */
async function statusBecomes(path: string, headers: Record<string, string>, want: number, timeoutMs = 10_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { status } = await get(path, headers);
    if (status === want || Date.now() > deadline) return status;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function get(path: string, headers: Record<string, string> = {}) {
  const response = await fetch(gatehouse.url + path, { headers });
  return { status: response.status, body: await response.text() };
}

describe('apiKeyAuth through gatehouse run', () => {
  it('a key from a label-selected Secret lets the request through with headers from its metadata; no key or a wrong one is a 401', async () => {
    const ok = await get('/label/x', { 'api-key': 'N2YwMDIxZTEtNGUzNS1jNzgzLTRkYjAtYjE2YzRkZGVmNjcy' });
    expect(ok.status).toBe(200);
    expect((JSON.parse(ok.body) as Echo).headers['x-api-user']).toBe('alice');
    expect((await get('/label/x')).status).toBe(401);
    expect((await get('/label/x', { 'api-key': 'N2YwMDIxZTEtNGUzNS1jNzgzLTRkYjAtYjE2YzRkZGVmNjcz' })).status).toBe(401);
    // Another team's key is not selected by this label.
    expect((await get('/label/x', { 'api-key': 'key-of-another-team' })).status).toBe(401);
  });

  it('a key whose Secret lacks a required metadata entry is refused', async () => {
    expect((await get('/label/x', { 'api-key': 'anonymous-key-without-user' })).status).toBe(401);
  });

  it('apiKeySecretRefs with a custom header and the older headersFromMetadata form', async () => {
    const ok = await get('/ref/x', { 'x-partner-key': 'key-of-another-team' });
    expect(ok.status).toBe(200);
    expect((JSON.parse(ok.body) as Echo).headers['x-api-user']).toBe('mallory');
    // The key goes in x-partner-key, not the default header.
    expect((await get('/ref/x', { 'api-key': 'key-of-another-team' })).status).toBe(401);
  });

  it('keys rotate live: a new labelled Secret works, a removed one stops working', async () => {
    await dir.write('rotated.yaml', [apiKeySecret('infra-bob', 'fresh-key-for-bob', { 'user-id': 'bob' })]);
    expect(await statusBecomes('/label/x', { 'api-key': 'fresh-key-for-bob' }, 200)).toBe(200);
    await dir.remove('rotated.yaml');
    expect(await statusBecomes('/label/x', { 'api-key': 'fresh-key-for-bob' }, 401)).toBe(401);
    // The other keys were served throughout.
    expect((await get('/label/x', { 'api-key': 'N2YwMDIxZTEtNGUzNS1jNzgzLTRkYjAtYjE2YzRkZGVmNjcy' })).status).toBe(200);
  });
});

describe('apiKeyAuth at load time', () => {
  const load = snapshotter(extAuthChecks);
  const diagnostics = (documents: object[]) => load(documents).diagnostics.map((d) => `${d.severity} ${d.path} ${d.message}`);

  it('a referenced Secret without an api-key key, two Secrets with one key, a missing Secret: rejected, naming the field', () => {
    const plain = { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'plain', namespace: 'default' }, stringData: { password: 'x' } };
    expect(diagnostics([plain, gloo('x', [{ apiKeyAuth: { apiKeySecretRefs: [{ name: 'plain' }] } }])])).toEqual([expect.stringMatching(/^error .*apiKeyAuth\.apiKeySecretRefs\[0\].* Secret default\/plain has no "api-key" key/)]);
    expect(diagnostics([apiKeySecret('a', 'same', {}), apiKeySecret('b', 'same', {}), gloo('x', [{ apiKeyAuth: { labelSelector: { team: 'infrastructure' } } }])])).toEqual([expect.stringMatching(/^error .*apiKeyAuth.* Secrets default\/a and default\/b hold the same API key/)]);
    expect(diagnostics([gloo('x', [{ apiKeyAuth: { apiKeySecretRefs: [{ name: 'ghost' }] } }])])).toEqual([expect.stringMatching(/^error .*apiKeyAuth\.apiKeySecretRefs\[0\].* references Secret default\/ghost, which does not exist/)]);
  });

  it('a label selector that selects nothing is a warning (every request denied until a key exists)', () => {
    expect(diagnostics([gloo('x', [{ apiKeyAuth: { labelSelector: { team: 'nobody' } } }])])).toEqual([expect.stringMatching(/^warning .*apiKeyAuth\.labelSelector.* selects no Secret/)]);
  });
});
