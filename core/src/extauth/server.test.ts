import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { authConfig, basic, captureLogger, envoyAuthClient, eventually, healthStatus, htpasswdApr1, startEnvoyAuthServer } from '../../../test/extauth/support.ts';
import { startExtAuthServer, type ExtAuthServer } from './server.ts';

const alice = htpasswdApr1('alice', 'wonderland');
const basicStep = { basicAuth: { realm: 'demo', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } } };

/** A CheckRequest message as Envoy sends it. */
function envoyRequest(configId: string, headers: Record<string, string>) {
  return {
    attributes: {
      request: { http: { id: '1', method: 'GET', path: '/things?x=1', host: 'api.example.com', scheme: 'http', protocol: 'HTTP/1.1', headers: { ':authority': 'api.example.com', ...headers } } },
      context_extensions: { config_id: configId, source_type: 'route', source_name: 'default/api/0' },
    },
  };
}

describe('startExtAuthServer', () => {
  let dir: string;
  let server: ExtAuthServer;
  let client: ReturnType<typeof envoyAuthClient>;
  let userServer: Awaited<ReturnType<typeof startEnvoyAuthServer>>;
  const { logger, lines } = captureLogger();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'extauth-'));
    // The user's own ext_authz server behind passThroughAuth: denies unless x-user-id came through.
    userServer = await startEnvoyAuthServer((req) => {
      const headers = req.attributes.request.http.headers;
      if (headers['x-user-id'] !== 'demo;alice' || headers['x-deny']) return { status: { code: 7 }, denied_response: { status: { code: 418 }, headers: [{ header: { key: 'x-why', value: 'teapot' } }], body: 'no tea' } };
      return { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-team', value: 'blue' }, append: { value: false } }], headers_to_remove: ['x-internal'] } };
    });
    await writeFile(
      join(dir, 'auth.yaml'),
      [authConfig('basic', [basicStep], 'demo'), authConfig('chain', [basicStep, { passThroughAuth: { grpc: { address: userServer.address } } }], 'demo')].map((d) => stringify(d)).join('---\n'),
    );
    server = await startExtAuthServer({ configDir: dir, port: 0, host: '127.0.0.1', logger });
    client = envoyAuthClient(`127.0.0.1:${server.port}`);
  });

  afterAll(async () => {
    client?.close();
    await server?.close();
    await userServer?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('logs listening with the port and the loaded configuration, and reports SERVING', async () => {
    expect(lines.find((l) => l.msg === 'listening')).toMatchObject({ port: server.port });
    expect(lines.find((l) => l.msg === 'received new auth configuration')).toMatchObject({ count: 2, ids: ['demo.basic', 'demo.chain'] });
    expect(await healthStatus(`127.0.0.1:${server.port}`)).toBe('SERVING');
    expect(await healthStatus(`127.0.0.1:${server.port}`, 'envoy.service.auth.v3.Authorization')).toBe('SERVING');
  });

  it('answers OK with the headers to set', async () => {
    const response = await client.check(envoyRequest('demo.basic', { authorization: basic('alice', 'wonderland'), 'x-user-id': 'forged' }));
    expect(response.status.code).toBe(0);
    expect(response.http_response).toBe('ok_response');
    expect(response.ok_response!.headers).toEqual([{ header: { key: 'x-user-id', value: 'demo;alice', raw_value: Buffer.alloc(0) }, append: { value: false }, append_action: 'APPEND_IF_EXISTS_OR_ADD', keep_empty_value: false }]);
  });

  it('answers a Basic Auth denial with UNAUTHENTICATED and the exact 401', async () => {
    const response = await client.check(envoyRequest('demo.basic', { authorization: basic('alice', 'nope') }));
    expect(response.status.code).toBe(16);
    expect(response.http_response).toBe('denied_response');
    expect(response.denied_response!.status.code).toBe('Unauthorized');
    expect(response.denied_response!.headers.map((h) => h.header)).toEqual([
      { key: 'www-authenticate', value: 'Basic realm="demo"', raw_value: Buffer.alloc(0) },
      { key: 'content-length', value: '0', raw_value: Buffer.alloc(0) },
    ]);
    expect(response.denied_response!.body).toBe('');
  });

  it('denies an unknown config_id with 403', async () => {
    const response = await client.check(envoyRequest('demo.missing', {}));
    expect(response.status.code).toBe(7);
    expect(response.denied_response!.status.code).toBe('Forbidden');
  });

  it('passThroughAuth forwards the request as shaped by earlier steps and merges its OK headers', async () => {
    const response = await client.check(envoyRequest('demo.chain', { authorization: basic('alice', 'wonderland'), 'x-internal': 'yes' }));
    expect(response.status.code).toBe(0);
    const seen = userServer.requests.at(-1) as { attributes: { request: { http: { headers: Record<string, string>; path: string } }; context_extensions: Record<string, string> } };
    expect(seen.attributes.request.http.headers['x-user-id']).toBe('demo;alice');
    expect(seen.attributes.request.http.path).toBe('/things?x=1');
    expect(seen.attributes.context_extensions.config_id).toBe('demo.chain');
    expect(response.ok_response!.headers.map((h) => [h.header.key, h.header.value, h.append?.value])).toEqual([
      ['x-user-id', 'demo;alice', false],
      ['x-team', 'blue', false],
    ]);
    expect(response.ok_response!.headers_to_remove).toEqual(['x-internal']);
  });

  it('passThroughAuth returns the user server’s denial as is', async () => {
    const response = await client.check(envoyRequest('demo.chain', { authorization: basic('alice', 'wonderland'), 'x-deny': '1' }));
    expect(response.status.code).toBe(7);
    // 418 is not in Envoy's StatusCode enum: it travels as a plain number (proto3 open enum).
    expect(String(response.denied_response!.status.code)).toBe('418');
    expect(response.denied_response!.headers.map((h) => [h.header.key, h.header.value])).toEqual([['x-why', 'teapot']]);
    expect(response.denied_response!.body).toBe('no tea');
  });

  it('a Basic Auth denial stops the chain before passThroughAuth', async () => {
    const before = userServer.requests.length;
    const response = await client.check(envoyRequest('demo.chain', { authorization: basic('alice', 'nope') }));
    expect(response.denied_response!.status.code).toBe('Unauthorized');
    expect(userServer.requests.length).toBe(before);
  });

  it('picks up a changed config directory and logs the new ids', async () => {
    await writeFile(join(dir, 'more.yaml'), stringify(authConfig('extra', [basicStep])));
    await eventually(() => lines.find((l) => l.msg === 'received new auth configuration' && (l.ids as string[]).includes('default.extra')), 5_000, 'reload');
    const response = await client.check(envoyRequest('default.extra', { authorization: basic('alice', 'wonderland') }));
    expect(response.status.code).toBe(0);
  });
});

describe('startExtAuthServer arguments', () => {
  it('rejects a missing config directory and a bad port with GH_BAD_ARGUMENT', async () => {
    await expect(startExtAuthServer({ configDir: '/does/not/exist', port: 0 })).rejects.toMatchObject({ code: 'GH_BAD_ARGUMENT', message: 'config directory /does/not/exist does not exist or is not a directory' });
    await expect(startExtAuthServer({ configDir: tmpdir(), port: 70000 })).rejects.toMatchObject({ code: 'GH_BAD_ARGUMENT' });
  });
});
