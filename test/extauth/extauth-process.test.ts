/**
 * `gatehouse extauth` as users run it (a real process), called through a gRPC client built
 * from Envoy's .proto files in the test, as an Envoy ext_authz filter would call it.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { authConfig, basic, envoyAuthClient, healthStatus, htpasswdApr1, opensslSha1 } from './support.ts';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const alice = htpasswdApr1('alice', 'wonderland');

/** The CheckRequest an Envoy ext_authz filter sends, with a per-route config_id. */
function envoyCheck(configId: string, headers: Record<string, string>) {
  return {
    attributes: {
      source: { address: { socket_address: { address: '10.0.0.7', port_value: 51234 } } },
      request: {
        time: { seconds: '1700000000' },
        http: { id: '42', method: 'POST', path: '/orders?limit=5', host: 'shop.example.com', scheme: 'https', protocol: 'HTTP/2', headers: { ':method': 'POST', ':path': '/orders?limit=5', ':authority': 'shop.example.com', ...headers } },
      },
      context_extensions: { config_id: configId, source_type: 'route', source_name: 'shop/orders' },
    },
  };
}

describe('gatehouse extauth (process)', () => {
  let dir: ConfigDir;
  let extauth: GatehouseProcess;
  let client: ReturnType<typeof envoyAuthClient>;

  beforeAll(async () => {
    dir = await makeConfigDir({
      'auth.yaml': [
        { ...authConfig('basic', [{ basicAuth: { realm: 'shop', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } } }], 'shop') },
        authConfig('broken', [{ basicAuth: { encryption: { sha1: {} }, userList: { users: { bob: { salt: 's', hashedPassword: 'not-hex' } } } } }], 'shop'),
      ],
    });
    // The config dir from the environment, as in the extauth Deployment.
    extauth = await startGatehouse('extauth', ['--host', '127.0.0.1'], { env: { GATEHOUSE_CONFIG_DIR: dir.path } });
    client = envoyAuthClient(`127.0.0.1:${extauth.port}`);
  });

  afterAll(async () => {
    client?.close();
    await extauth?.stop();
    await dir?.cleanup();
  });

  it('logs listening, the configuration it received and each load failure with its cause', async () => {
    expect(extauth.listening).toMatchObject({ msg: 'listening', port: extauth.port });
    expect(extauth.logs.find((l) => l.msg === 'received new auth configuration')).toMatchObject({ count: 1, ids: ['shop.basic'] });
    expect(extauth.logs.find((l) => l.resource === 'AuthConfig shop/broken')).toMatchObject({
      level: 'error',
      code: 'GH_EXTAUTH_STEP_BUILD',
      path: 'spec.configs[0].basicAuth.userList.users.bob.hashedPassword',
    });
    expect(await healthStatus(`127.0.0.1:${extauth.port}`)).toBe('SERVING');
  });

  it('answers an Envoy CheckRequest with OK and the headers to set', async () => {
    const response = await client.check(envoyCheck('shop.basic', { authorization: basic('alice', 'wonderland') }));
    expect(response.status.code).toBe(0);
    expect(response.http_response).toBe('ok_response');
    expect(response.ok_response!.headers.map((h) => ({ key: h.header.key, value: h.header.value, append: h.append?.value }))).toEqual([{ key: 'x-user-id', value: 'shop;alice', append: false }]);
    expect(response.ok_response!.headers_to_remove).toEqual([]);
  });

  it('answers wrong credentials with a denied 401 (exact header, content-length 0, empty body)', async () => {
    const response = await client.check(envoyCheck('shop.basic', { authorization: basic('alice', 'nope') }));
    expect(response.status.code).toBe(16);
    expect(response.http_response).toBe('denied_response');
    expect(response.denied_response).toMatchObject({ status: { code: 'Unauthorized' }, body: '' });
    expect(response.denied_response!.headers.map((h) => [h.header.key, h.header.value])).toEqual([
      ['www-authenticate', 'Basic realm="shop"'],
      ['content-length', '0'],
    ]);
  });

  it('denies (403) a config_id that is rejected or unknown, logging why', async () => {
    for (const id of ['shop.broken', 'shop.nothing']) {
      const response = await client.check(envoyCheck(id, { authorization: basic('alice', 'wonderland') }));
      expect(response.status.code).toBe(7);
      expect(response.denied_response!.status.code).toBe('Forbidden');
    }
    await extauth.waitForLog((l) => l.code === 'GH_EXTAUTH_UNKNOWN_CONFIG' && String(l.msg).startsWith('request denied: auth config shop.broken is rejected: ') && String(l.msg).includes('must be 40 hex digits'));
    await extauth.waitForLog((l) => l.msg === 'request denied: no AuthConfig shop.nothing is served (config_id is <namespace>.<name>)');
  });

  it('reloads when the directory changes, without restarting', async () => {
    const hex = opensslSha1('builder', 'pepper');
    await dir.write('more.yaml', [authConfig('sha', [{ basicAuth: { realm: 'r', encryption: { sha1: {} }, userList: { users: { bob: { salt: 'pepper', hashedPassword: hex } } } } }], 'shop')]);
    await extauth.waitForLog((l) => l.msg === 'received new auth configuration' && JSON.stringify(l.ids) === JSON.stringify(['shop.basic', 'shop.sha']));
    const response = await client.check(envoyCheck('shop.sha', { 'proxy-authorization': basic('bob', 'builder') }));
    expect(response.ok_response!.headers[0]!.header).toMatchObject({ key: 'x-user-id', value: 'r;bob' });
  });

  it('exits 0 on SIGTERM', async () => {
    const other = await startGatehouse('extauth', ['--config-dir', dir.path, '--host', '127.0.0.1']);
    expect(await other.stop('SIGTERM')).toBe(0);
  });
});

describe('gatehouse extauth arguments', () => {
  it.each([
    [['--port', '0'], '--config-dir is required (or set GATEHOUSE_CONFIG_DIR)'],
    [['--config-dir', '/nonexistent', '--port', '0'], 'config directory /nonexistent does not exist or is not a directory'],
    [['--config-dir', '/tmp', '--port', 'x'], '--port must be a port number from 0 to 65535, got "x"'],
  ])('%j fails with a clear message and exit code 2', (args, message) => {
    const result = spawnSync(process.execPath, [...NODE_FLAGS, CLI, 'extauth', ...args], { encoding: 'utf8', env: { ...process.env, GATEHOUSE_CONFIG_DIR: '' } });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(message);
  });
});
