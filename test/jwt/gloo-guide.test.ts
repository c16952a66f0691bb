/**
 * The JWT and RBAC manifests of the Gloo corpus (test/proxy/fixtures/gloo-guides/security/jwt-*.yaml,
 * in the shapes of Gloo's JWT guides) load unchanged through `gatehouse validate` beside the
 * Upstreams the guides assume, and behave as their guides say through a real `gatehouse run`,
 * with tokens signed by the test keys whose public halves the manifests carry.
 */
import { execFile } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../proxy/fixtures/gloo-guides/security/', import.meta.url));
const KEYS = fileURLToPath(new URL('./keys/', import.meta.url));
/** The guides' kube service (petstore.default:8080), on its own loopback address. */
const PETSTORE = { host: 'petstore.default.svc.cluster.local', addr: '127.77.2.8', port: 8080 };

let work: string;
let petstore: Server;
const echoes = new Map<string, TestServer>();

/** The Upstreams the guides route to without defining them. */
const ASSUMED: Record<string, [string, string][]> = {
  'jwt-claims-to-headers.yaml': [
    ['gloo-system', 'echoapp-canary'],
    ['gloo-system', 'echoapp-primary'],
  ],
  'jwt-route-policy.yaml': [['default', 'httpbin']],
};

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'jwt-guides-'));
  for (const name of ['echoapp-canary', 'echoapp-primary', 'httpbin']) echoes.set(name, await startEcho(name));
  petstore = createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ upstream: 'petstore', url: req.url, method: req.method, headers: req.headers })));
  await new Promise<void>((resolve, reject) => petstore.once('error', reject).listen(PETSTORE.port, PETSTORE.addr, resolve));
});

afterAll(async () => {
  await Promise.all([...echoes.values()].map((e) => e.close()));
  await new Promise((r) => (petstore ? (petstore.closeAllConnections(), petstore.close(r)) : r(undefined)));
  if (work) await rm(work, { recursive: true, force: true });
});

async function guideDir(file: string): Promise<string> {
  const dir = await mkdtemp(join(work, file.replace(/\.yaml$/, '-')));
  await copyFile(join(FIXTURES, file), join(dir, file));
  const assumed = (ASSUMED[file] ?? []).map(([namespace, name]) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name, namespace }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: echoes.get(name)!.port }] } } }));
  if (assumed.length > 0) await writeFile(join(dir, 'assumed.yaml'), assumed.map((d) => JSON.stringify(d)).join('\n---\n'));
  return dir;
}

function validate(dir: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', dir], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 30_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

/** A token signed with a test key (`vhost-provider` or `route-provider`), valid an hour. */
async function sign(keyName: string, claims: Record<string, unknown>): Promise<string> {
  const key = createPrivateKey(await readFile(join(KEYS, `${keyName}.key.pem`), 'utf8'));
  return new SignJWT({ exp: Math.floor(Date.now() / 1000) + 3600, ...claims }).setProtectedHeader({ alg: 'RS256', typ: 'JWT' }).sign(key);
}

async function run(file: string, body: (gw: GatehouseProcess) => Promise<void>): Promise<void> {
  const dir = await guideDir(file);
  const checked = await validate(dir);
  expect(checked.code, checked.out).toBe(0);
  expect(checked.out).toMatch(/Accepted VirtualService/);
  expect(checked.out).toMatch(/0 rejected/);
  // Startup is bounded generously: the shared test machine can take a while to start a process.
  const gw = await startGatehouse('run', ['--config-dir', dir, '--access-log', 'false', '--resolve', `${PETSTORE.host}=${PETSTORE.addr}`], { timeoutMs: 45_000 });
  try {
    await body(gw);
  } finally {
    await gw.stop();
  }
}

const get = (gw: GatehouseProcess, path: string, headers: Record<string, string> = {}, method = 'GET', host = 'foo') => send(gw.url, { path, method, headers: { host, ...headers } });
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const seen = (body: string) => JSON.parse(body) as Echo;
const SA = { iss: 'kubernetes/serviceaccount' };

describe('Gloo JWT guides (corpus manifests) through gatehouse run', () => {
  it('JWT and Access Control: the service account may GET /api/pets, nothing else; no token is 401', async () => {
    await run('jwt-access-control.yaml', async (gw) => {
      const svcA = bearer(await sign('vhost-provider', { ...SA, sub: 'system:serviceaccount:default:svc-a' }));
      const ok = await get(gw, '/api/pets', svcA);
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.body)).toMatchObject({ upstream: 'petstore', url: '/api/pets' });
      expect((await get(gw, '/api/pets', svcA, 'POST')).status).toBe(403);
      expect((await get(gw, '/api/stores', svcA)).status).toBe(403);
      expect((await get(gw, '/api/pets', bearer(await sign('vhost-provider', { ...SA, sub: 'system:serviceaccount:default:svc-b' })))).status).toBe(403);
      expect((await get(gw, '/api/pets')).status).toBe(401);
      // A token from another issuer, and one signed with another key.
      expect((await get(gw, '/api/pets', bearer(await sign('vhost-provider', { iss: 'other', sub: 'system:serviceaccount:default:svc-a' })))).status).toBe(401);
      expect((await get(gw, '/api/pets', bearer(await sign('route-provider', { ...SA, sub: 'system:serviceaccount:default:svc-a' })))).status).toBe(401);
    });
  }, 90_000);

  it('Access control examples: nested claims, REGEX_MATCH, BOOLEAN, LIST_CONTAINS', async () => {
    await run('jwt-rbac-claim-matchers.yaml', async (gw) => {
      const t = async (claims: Record<string, unknown>) => bearer(await sign('vhost-provider', { ...SA, sub: '1234567890', ...claims }));
      expect((await get(gw, '/api/pets', await t({ metadata: { auth: { role: 'user' } } }))).status).toBe(200);
      expect((await get(gw, '/api/pets', await t({ metadata: { auth: { role: 'guest' } } }))).status).toBe(403);
      expect((await get(gw, '/anything', await t({ email: 'dev1@solo.io' }))).status).toBe(200);
      expect((await get(gw, '/anything', await t({ email: 'dev2@solo.io' }))).status).toBe(403);
      expect((await get(gw, '/verified', await t({ email_verified: true }))).status).toBe(200);
      expect((await get(gw, '/verified', await t({ email_verified: 'true' }))).status).toBe(403);
      expect((await get(gw, '/groups', await t({ groups: ['users', 'admins'] }))).status).toBe(200);
      expect((await get(gw, '/groups', await t({ groups: ['users'] }))).status).toBe(403);
    });
  }, 90_000);

  it('JWT claim based routing: the org claim becomes x-company and picks the canary route, from a header or a query parameter', async () => {
    await run('jwt-claims-to-headers.yaml', async (gw) => {
      const solo = await sign('vhost-provider', { iss: 'solo.io', org: 'solo.io' });
      const other = await sign('vhost-provider', { iss: 'solo.io', org: 'othercompany.com' });
      const canary = await get(gw, '/', { 'x-token': solo });
      expect(seen(canary.body)).toMatchObject({ upstream: 'echoapp-canary' });
      expect(seen(canary.body).headers['x-company']).toBe('solo.io');
      expect(seen((await get(gw, `/?token=${solo}`)).body).upstream).toBe('echoapp-canary');
      expect(seen((await get(gw, '/', { 'x-token': other })).body).upstream).toBe('echoapp-primary');
      // A client cannot pick the canary by sending the header itself.
      expect(seen((await get(gw, '/', { 'x-token': other, 'x-company': 'solo.io' })).body).upstream).toBe('echoapp-primary');
      expect((await get(gw, '/')).status).toBe(401);
    });
  }, 90_000);

  it('Route-level JWT policies, separate stages: the host verifies before ext auth (ops), the /get route also after it (finance)', async () => {
    await run('jwt-route-policy.yaml', async (gw) => {
      const bob = await sign('vhost-provider', { iss: 'solo.io', sub: 'bob', team: 'ops' });
      const carol = await sign('route-provider', { iss: 'solo.io', sub: 'carol', team: 'finance', llms: { openai: ['gpt-4o'] } });
      const host = 'www.example.com';
      expect((await get(gw, '/status/200', bearer(bob), 'GET', host)).status).toBe(200);
      expect((await get(gw, '/status/200', bearer(carol), 'GET', host)).status).toBe(401);
      expect((await get(gw, '/get', bearer(bob), 'GET', host)).status).toBe(401);
      expect((await get(gw, '/get', { ...bearer(bob), 'x-after-ext-auth-bearer-token': carol }, 'GET', host)).status).toBe(200);
      expect((await get(gw, '/get', { 'x-after-ext-auth-bearer-token': carol }, 'GET', host)).status).toBe(401);
    });
  }, 90_000);
});
