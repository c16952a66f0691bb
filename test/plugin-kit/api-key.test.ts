/**
 * The ApiKey reference plugin end to end, through `gatehouse run` and through `gatehouse
 * gateway` + `gatehouse extauth`: a real key service on 127.0.0.1 declared as an Upstream and
 * reached through the step's egress (`http://keys.default.upstream/...`), positive and negative
 * answers cached in ctx.store (counted at the key service), `x-customer-id` from the service's
 * answer on the upstream request, and the key in no log line of any process (debug level).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startEcho, startServer, type Echo, type TestServer } from '../support/upstream.ts';
import { authRoute, buildReferencePlugin, deploy, get, SHAPES, type Deployment } from './support.ts';

/** Keys the service knows, with what it answers; fresh random keys so a leak cannot match by chance. */
const ALICE = `ak_live_${randomBytes(12).toString('hex')}`;
const BOB = `ak_live_${randomBytes(12).toString('hex')}`;
const UNKNOWN = `ak_live_${randomBytes(12).toString('hex')}`;
const KNOWN: Record<string, object> = { [ALICE]: { user: 'alice', customer: 'acme-42' }, [BOB]: { user: 'bob' } };

let keyService: TestServer;
/** Lookups the key service answered, by key. */
const lookups = new Map<string, number>();
let echo: TestServer;
let config: ConfigDir;
let plugin: Awaited<ReturnType<typeof buildReferencePlugin>>;

beforeAll(async () => {
  keyService = await startServer((req, res) => {
    const match = /^\/v1\/keys\/([^/?]+)$/.exec(req.url ?? '');
    if (!match) return res.writeHead(400).end();
    const key = decodeURIComponent(match[1]!);
    lookups.set(key, (lookups.get(key) ?? 0) + 1);
    const found = KNOWN[key];
    if (!found) return res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"no such key"}');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(found));
  });
  echo = await startEcho('orders');
  plugin = await buildReferencePlugin('api-key', 'ApiKey');
  config = await makeConfigDir({
    'api-key.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: echo.port }]),
      manifests.upstream('keys', [{ addr: '127.0.0.1', port: keyService.port }]),
      manifests.authConfig('api-keys', [
        {
          pluginAuth: {
            name: 'ApiKey',
            egress: [{ upstreamRef: { name: 'keys' } }],
            config: { KeyServiceUrl: 'http://keys.default.upstream/v1/keys/', CacheSeconds: 300, NegativeCacheSeconds: 300, FieldsToHeaders: { customer: 'x-customer-id' } },
          },
        },
      ]),
      manifests.virtualService('orders', { domains: ['*'], routes: [authRoute('/orders', 'api-keys')] }),
    ],
  });
});

afterAll(async () => {
  await config?.cleanup();
  await plugin?.cleanup();
  await echo?.close();
  await keyService?.close();
});


describe.each(SHAPES)('ApiKey with a real key service through gatehouse %s', (shape) => {
  let gatehouse: Deployment;

  beforeAll(async () => {
    lookups.clear();
    // Debug level: the key must not appear even there.
    gatehouse = await deploy(shape, config.path, plugin.dir, { env: { GATEHOUSE_LOG_LEVEL: 'debug' } });
  }, 60_000);
  afterAll(async () => {
    await gatehouse?.stop();
  });

  it('allows a known key; x-customer-id and x-user-id reach the upstream; the service is asked once while the answer is cached', async () => {
    for (let i = 0; i < 5; i++) {
      const reply = await get(`${gatehouse.url}/orders/${i}`, { 'x-api-key': ALICE, 'x-customer-id': 'spoofed' });
      expect(reply.status).toBe(200);
      const seen = JSON.parse(reply.body) as Echo;
      expect(seen.url).toBe(`/orders/${i}`);
      expect(seen.headers).toMatchObject({ 'x-customer-id': 'acme-42', 'x-user-id': 'alice' });
    }
    expect(lookups.get(ALICE)).toBe(1);
  });

  it('a key whose answer has no customer: the client’s x-customer-id is removed', async () => {
    const reply = await get(`${gatehouse.url}/orders`, { 'x-api-key': BOB, 'x-customer-id': 'acme-42' });
    expect(reply.status).toBe(200);
    const seen = JSON.parse(reply.body) as Echo;
    expect(seen.headers['x-user-id']).toBe('bob');
    expect(seen.headers['x-customer-id']).toBeUndefined();
  });

  it('an unknown key is denied 401 and the negative answer is cached too; no key is denied without asking', async () => {
    for (let i = 0; i < 5; i++) {
      const reply = await get(`${gatehouse.url}/orders`, { 'x-api-key': UNKNOWN });
      expect(reply.status).toBe(401);
      expect(reply.headers.get('www-authenticate')).toBe('ApiKey');
    }
    expect(lookups.get(UNKNOWN)).toBe(1);
    const before = [...lookups.values()].reduce((a, b) => a + b, 0);
    expect((await get(`${gatehouse.url}/orders`, { 'x-customer-id': 'acme-42' })).status).toBe(401);
    expect([...lookups.values()].reduce((a, b) => a + b, 0)).toBe(before);
  });

  it('no key appears in any log line of the gateway or extauth process', async () => {
    // The processes did log these requests (access log, debug lines): the check is not vacuous.
    await gatehouse.processes.at(-1)!.waitForLog((line) => JSON.stringify(line).includes('/orders/4'));
    const output = gatehouse.output();
    expect(output.length).toBeGreaterThan(1000);
    for (const key of [ALICE, BOB, UNKNOWN]) expect(output).not.toContain(key);
  });
});
