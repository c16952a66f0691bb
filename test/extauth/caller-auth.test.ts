/**
 * Issue 24, finding 9: the ext_authz port answers "is this password right?", so only the
 * gateway or Envoy may ask. Real processes: `gatehouse extauth` with a caller token, a
 * `gatehouse gateway` that sends it, `gatehouse run` whose embedded port binds loopback; the
 * failed-login lockout keyed on username and source.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';
import { authConfig, basic, envoyAuthClient, htpasswdApr1 } from './support.ts';

const TOKEN = 'caller-token-7f3a9c1e5b2d4f60a8e1';
const alice = htpasswdApr1('alice', 'wonderland');
const bob = htpasswdApr1('bob', 'builder');

/** A CheckRequest as a caller writes it: the source address included (forgeable by whoever may call). */
const checkFrom = (source: string, authorization: string) => ({
  attributes: {
    source: { address: { socket_address: { address: source, port_value: 40000 } } },
    request: { http: { method: 'GET', path: '/', host: 'shop.test', headers: { ':path': '/', authorization } } },
    context_extensions: { config_id: 'default.basic' },
  },
});

let dir: ConfigDir;
let tokenDir: string;
let echo: TestServer;
let extauth: GatehouseProcess;

beforeAll(async () => {
  echo = await startEcho('echo');
  tokenDir = await mkdtemp(join(tmpdir(), 'gatehouse-token-'));
  await writeFile(join(tokenDir, 'token'), `${TOKEN}\n`, { mode: 0o600 });
  dir = await makeConfigDir({
    'auth.yaml': [
      authConfig('basic', [{ basicAuth: { realm: 'shop', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword }, bob: { salt: bob.salt, hashedPassword: bob.hashedPassword } } } } }]),
      manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
      manifests.virtualService('shop', { domains: ['*'], options: { extauth: { configRef: { name: 'basic' } } }, routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] }),
    ],
  });
  extauth = await startGatehouse('extauth', ['--config-dir', dir.path, '--host', '127.0.0.1', '--extauth-token-file', join(tokenDir, 'token')]);
}, 60_000);

afterAll(async () => {
  await extauth?.stop();
  await echo?.close();
  await dir?.cleanup();
  if (tokenDir) await rm(tokenDir, { recursive: true, force: true });
});

describe('callers of the ext_authz port (gatehouse extauth)', () => {
  it('refuses Check calls without the token or with a wrong one (UNAUTHENTICATED), whatever they guess', async () => {
    for (const token of [undefined, 'caller-token-7f3a9c1e5b2d4f60a8e2', `${TOKEN}x`, '']) {
      const client = envoyAuthClient(`127.0.0.1:${extauth.port}`, token === undefined ? {} : { token });
      try {
        // The right password among forged sources: never an answer either way.
        for (const [i, password] of ['guess', 'wonderland'].entries()) {
          await expect(client.check(checkFrom(`203.0.113.${i}`, basic('alice', password)))).rejects.toMatchObject({ code: 16 });
        }
      } finally {
        client.close();
      }
    }
    await extauth.waitForLog((l) => l.code === 'GH_EXTAUTH_UNAUTHENTICATED' && l.msg === 'ext_authz call refused: no valid caller token');
  });

  it('answers callers with the token', async () => {
    const client = envoyAuthClient(`127.0.0.1:${extauth.port}`, { token: TOKEN });
    try {
      expect((await client.check(checkFrom('198.51.100.1', basic('alice', 'wonderland')))).http_response).toBe('ok_response');
      expect((await client.check(checkFrom('198.51.100.1', basic('alice', 'nope')))).denied_response?.status.code).toBe('Unauthorized');
    } finally {
      client.close();
    }
  });

  it("a gateway with the token checks through it; one without is denied (fail closed)", async () => {
    const withToken = await startGatehouse('gateway', ['--config-dir', dir.path, '--extauth-address', `127.0.0.1:${extauth.port}`, '--extauth-timeout', '5s'], { env: { GATEHOUSE_EXTAUTH_TOKEN_FILE: join(tokenDir, 'token') } });
    const without = await startGatehouse('gateway', ['--config-dir', dir.path, '--extauth-address', `127.0.0.1:${extauth.port}`, '--extauth-timeout', '5s']);
    try {
      expect((await send(withToken.url, { path: '/x', headers: { authorization: basic('bob', 'builder') } })).status).toBe(200);
      expect((await send(withToken.url, { path: '/x', headers: { authorization: basic('bob', 'wrong') } })).status).toBe(401);
      expect((await send(without.url, { path: '/x', headers: { authorization: basic('bob', 'builder') } })).status).toBe(403);
    } finally {
      await withToken.stop();
      await without.stop();
    }
  }, 60_000);

  it('a lockout from guessing at a user does not lock out that user elsewhere, other users, or credentials verified before', async () => {
    const client = envoyAuthClient(`127.0.0.1:${extauth.port}`, { token: TOKEN });
    try {
      // Bob logs in from the office NAT; then someone there guesses at his password 25 times.
      expect((await client.check(checkFrom('192.0.2.50', basic('bob', 'builder')))).http_response).toBe('ok_response');
      for (let i = 0; i < 25; i++) expect((await client.check(checkFrom('192.0.2.50', basic('bob', `guess-${i}`)))).denied_response?.status.code).toBe('Unauthorized');
      expect((await client.check(checkFrom('192.0.2.50', basic('bob', 'builder')))).http_response).toBe('ok_response');
      expect((await client.check(checkFrom('192.0.2.99', `${basic('bob', 'builder')} `))).http_response).toBe('ok_response');
      expect((await client.check(checkFrom('192.0.2.50', `${basic('alice', 'wonderland')} `))).http_response).toBe('ok_response');
      // The guessing pair itself gets no answer for a fresh credential, right or wrong.
      expect((await client.check(checkFrom('192.0.2.50', `${basic('bob', 'builder')}  `))).denied_response?.status.code).toBe('Unauthorized');
    } finally {
      client.close();
    }
  });
});

describe('caller-chosen config_ids (issue 24 finding 10)', () => {
  it('2,000 unknown 1 KB config_ids write a few bounded lines, not 2 MB of log', async () => {
    const client = envoyAuthClient(`127.0.0.1:${extauth.port}`, { token: TOKEN });
    const before = extauth.logs.length;
    try {
      for (let batch = 0; batch < 20; batch++) {
        await Promise.all(
          Array.from({ length: 100 }, (_, i) =>
            client.check({ attributes: { request: { http: { method: 'GET', path: '/', headers: {} } }, context_extensions: { config_id: `ns.${String(batch * 100 + i).padStart(4, '0')}${'x'.repeat(1024)}` } } }),
          ),
        );
      }
    } finally {
      client.close();
    }
    const lines = extauth.logs.slice(before).filter((l) => l.code === 'GH_EXTAUTH_UNKNOWN_CONFIG');
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines.length).toBeLessThanOrEqual(5);
    const bytes = lines.reduce((sum, l) => sum + JSON.stringify(l).length, 0);
    expect(bytes).toBeLessThan(5 * 2048);
  }, 60_000);
});

describe('gatehouse run: the embedded ext_authz port', () => {
  it('binds loopback even when the gateway listens on every interface', async () => {
    const run = await startGatehouse('run', ['--config-dir', dir.path, '--host', '0.0.0.0']);
    try {
      const started = await run.waitForLog((l) => l.msg === 'extauth server started');
      expect(started.host).toBe('127.0.0.1');
    } finally {
      await run.stop();
    }
  }, 60_000);
});
