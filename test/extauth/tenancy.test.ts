/**
 * Issue 24, findings 7 and 8, through a real `gatehouse run` (directory source): a resource
 * reads Secrets of its own namespace, another namespace's only when that Secret grants it
 * (docs/tenancy.md); apiKeyAuth never takes a key from a Secret it should not see, and the
 * headers it sets never come from the client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { authConfig } from './support.ts';

const GRANT = 'gatehouse.dev/allow-references-from';
const DB_PASSWORD = 'db-password-Zq81xk02';

const secret = (namespace: string, name: string, stringData: Record<string, string>, extra: { labels?: Record<string, string>; annotations?: Record<string, string>; type?: string } = {}) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  ...(extra.type ? { type: extra.type } : {}),
  metadata: { name, namespace, ...(extra.labels ? { labels: extra.labels } : {}), ...(extra.annotations ? { annotations: extra.annotations } : {}) },
  stringData,
});
const API_KEY = 'extauth.solo.io/apikey';
const upstream = (namespace: string, port: number) => ({ apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo', namespace }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } } });
const vs = (namespace: string, name: string, domain: string, options: object = {}, routeOptions: object = {}) => ({
  apiVersion: 'gateway.gatehouse.dev/v1',
  kind: 'VirtualService',
  metadata: { name, namespace },
  spec: { virtualHost: { domains: [domain], options, routes: [{ matchers: [{ prefix: '/' }], options: routeOptions, routeAction: { single: { upstream: { name: 'echo' } } } }] } },
});
const extauth = (name: string) => ({ extauth: { configRef: { name } } });

type Status = { kind: string; namespace: string; name: string; state: string; reasons: { path?: string; code: string; message: string }[] };

let echo: TestServer;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  echo = await startEcho('echo');
  dir = await makeConfigDir({
    'vault.yaml': [
      // Another team's Secrets: a database password that happens to sit under `api-key`, and one shared on purpose.
      secret('vault', 'db', { 'x-db-password': DB_PASSWORD, 'api-key': DB_PASSWORD }, { labels: { app: 'db' }, type: API_KEY }),
      secret('vault', 'partner-token', { 'x-partner-token': 'shared-token-1' }, { annotations: { [GRANT]: 'tenant, other' } }),
    ],
    'tenant.yaml': [
      upstream('tenant', echo.port),
      secret('tenant', 'key-alice', { 'api-key': 'alice-key-0123456789', 'user-id': 'alice' }, { labels: { app: 'db', team: 'tenant' }, type: API_KEY }),
      secret('tenant', 'key-anon', { 'api-key': 'anon-key-0123456789' }, { labels: { team: 'tenant' }, type: API_KEY }),
      // The tenant's own database password, labelled like the keys but not an API key Secret.
      secret('tenant', 'tenant-db', { 'api-key': 'tenant-db-password-42' }, { labels: { app: 'db' } }),
      vs('tenant', 'steal', 'steal.test', { headerManipulation: { responseHeadersToAdd: [{ headerSecretRef: { name: 'db', namespace: 'vault' } }] } }),
      vs('tenant', 'shared', 'shared.test', { headerManipulation: { responseHeadersToAdd: [{ headerSecretRef: { name: 'partner-token', namespace: 'vault' } }] } }),
      authConfig('steal-key', [{ apiKeyAuth: { apiKeySecretRefs: [{ name: 'db', namespace: 'vault' }] } }], 'tenant'),
      authConfig('by-app-label', [{ apiKeyAuth: { labelSelector: { app: 'db' } } }], 'tenant'),
      authConfig('any-label', [{ apiKeyAuth: { labelSelector: {} } }], 'tenant'),
      authConfig('optional-user', [{ apiKeyAuth: { labelSelector: { team: 'tenant' }, headersFromMetadataEntry: { 'x-api-user': { name: 'user-id' } } } }], 'tenant'),
      vs('tenant', 'steal-key', 'steal-key.test', extauth('steal-key')),
      vs('tenant', 'by-app-label', 'label.test', extauth('by-app-label')),
      vs('tenant', 'any-label', 'any-label.test', extauth('any-label')),
      vs('tenant', 'optional-user', 'optional.test', extauth('optional-user')),
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
}, 60_000);

afterAll(async () => {
  await gatehouse?.stop();
  await echo?.close();
  await dir?.cleanup();
});

async function get(host: string, headers: Record<string, string> = {}) {
  const reply = await send(gatehouse.url, { path: '/x', headers: { host, ...headers } });
  return { ...reply, seen: reply.status === 200 ? (JSON.parse(reply.body) as Echo) : undefined };
}

async function statuses(): Promise<Status[]> {
  return ((await (await fetch(`${gatehouse.adminUrl}/config`)).json()) as { resources: Status[] }).resources;
}
const statusOf = async (kind: string, name: string) => (await statuses()).find((s) => s.kind === kind && s.namespace === 'tenant' && s.name === name);

describe('Secrets across namespaces (gatehouse run)', () => {
  it('a VirtualService reading a Secret of another namespace that does not grant it is Rejected, naming the reference; its host never answers with the value', async () => {
    const response = await get('steal.test');
    expect(response.headers['x-db-password']).toBeUndefined();
    expect(JSON.stringify(response.rawHeaders)).not.toContain(DB_PASSWORD);
    expect(response.body).not.toContain(DB_PASSWORD);
    const status = await statusOf('VirtualService', 'steal');
    expect(status?.state).toBe('Rejected');
    expect(status?.reasons).toContainEqual(
      expect.objectContaining({ code: 'GH_CONFIG_CROSS_NAMESPACE_REF', path: 'spec.virtualHost.options.headerManipulation.responseHeadersToAdd[0].headerSecretRef', message: expect.stringContaining('Secret vault/db') }),
    );
  });

  it('a Secret that grants the namespace by annotation is read', async () => {
    const response = await get('shared.test');
    expect(response.status).toBe(200);
    expect(response.headers['x-partner-token']).toBe('shared-token-1');
    expect((await statusOf('VirtualService', 'shared'))?.state).toBe('Accepted');
  });

  it("an AuthConfig's apiKeySecretRefs into another namespace are Rejected; the password is no API key", async () => {
    expect((await statusOf('AuthConfig', 'steal-key'))?.reasons).toContainEqual(expect.objectContaining({ code: 'GH_CONFIG_CROSS_NAMESPACE_REF', path: 'spec.configs[0].apiKeyAuth.apiKeySecretRefs[0]' }));
    expect((await get('steal-key.test', { 'api-key': DB_PASSWORD })).status).toBe(403);
  });
});

describe('apiKeyAuth selection and owned headers (gatehouse run)', () => {
  it("a label selector takes API key Secrets from the AuthConfig's namespace only", async () => {
    expect((await get('label.test', { 'api-key': 'alice-key-0123456789' })).status).toBe(200);
    expect((await get('label.test', { 'api-key': DB_PASSWORD })).status).toBe(401);
    // Only Secrets of type extauth.solo.io/apikey are keys by label.
    expect((await get('label.test', { 'api-key': 'tenant-db-password-42' })).status).toBe(401);
  });

  it('an empty labelSelector is Rejected (it would make every Secret a key) and its requests are denied', async () => {
    const status = await statusOf('AuthConfig', 'any-label');
    expect(status?.state).toBe('Rejected');
    expect(status?.reasons.map((r) => r.message).join('\n')).toMatch(/empty labelSelector/);
    expect((await get('any-label.test', { 'api-key': DB_PASSWORD })).status).toBe(403);
    expect((await get('any-label.test', { 'api-key': 'alice-key-0123456789' })).status).toBe(403);
  });

  it("the header a step sets from a Secret's metadata never comes from the client", async () => {
    const anon = await get('optional.test', { 'api-key': 'anon-key-0123456789', 'x-api-user': 'admin' });
    expect(anon.status).toBe(200);
    expect(anon.seen!.headers['x-api-user']).toBeUndefined();
    const alice = await get('optional.test', { 'api-key': 'alice-key-0123456789', 'x-api-user': 'admin' });
    expect(alice.seen!.headers['x-api-user']).toBe('alice');
  });
});
