/**
 * Issue 17's request-path findings, against a real `gatehouse run`: a client-triggerable crash
 * through an auth decision (1, 23), path-normalisation bypasses (19), hop-by-hop and identity
 * header tricks (20, 22), and Host headers that fell through to the catch-all (21). Each case
 * failed before its fix: the process died, or protected content came back without credentials.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { basic, htpasswdApr1, startEnvoyAuthServer } from '../extauth/support.ts';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { rawRequest, send, type Reply } from '../support/http.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

const alice = htpasswdApr1('alice', 'wonderland');

/**
 * Echoes a decoded client value into a denial header, as an ordinary "redirect to x-next"
 * plugin would: `x-next: /%E2%82%AC` becomes `location: /€`, which `writeHead` cannot send.
 */
const ECHO_PLUGIN = `export const EchoNext = {
  NewConfigInstance: () => ({}),
  GetAuthService: () => ({
    Start() {},
    Authorize(_ctx, request) {
      const h = request.CheckRequest.attributes.request.http.headers;
      const next = decodeURIComponent(h['x-next'] || '/');
      const mode = h['x-mode'] || 'deny';
      if (mode === 'gc') return { CheckResponse: { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-gc', value: typeof globalThis.gc } }] } } };
      if (mode === 'allow') return { CheckResponse: { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-next', value: next } }] } } };
      if (mode === 'te') return { CheckResponse: { status: { code: 7 }, denied_response: { status: { code: 403 }, headers: [{ header: { key: 'transfer-encoding', value: 'chunked' } }, { header: { key: 'connection', value: 'upgrade' } }, { header: { key: 'upgrade', value: 'h2c' } }], body: 'no' } } };
      if (mode === 'nocontent') return { CheckResponse: { status: { code: 7 }, denied_response: { status: { code: 204 }, body: 'a body a 204 cannot have' } } };
      if (mode === 'badstatus') return { CheckResponse: { status: { code: 7 }, denied_response: { status: { code: 99 } } } };
      return { CheckResponse: { status: { code: 7 }, denied_response: { status: { code: 302 }, headers: [{ header: { key: 'location', value: next } }, { header: { key: 'x-ok', value: 'kept' } }] } } };
    },
  }),
};
`;

/**
 * An upstream that normalises paths as nginx does (percent-decoding, merged slashes, dot
 * segments) and serves its secrets at /admin and /private; it also echoes what it received.
 */
function normalisingUpstream(): Promise<TestServer> {
  return startServer((req, res) => {
    let path = (req.url ?? '/').split('?')[0]!;
    try {
      path = decodeURIComponent(path);
    } catch {
      // keep it raw
    }
    path = path.replace(/\/{2,}/g, '/');
    const out: string[] = [];
    for (const segment of path.split('/').slice(1)) {
      if (segment === '..') out.pop();
      else if (segment !== '.') out.push(segment);
    }
    path = `/${out.join('/')}`;
    const secret = /^\/(admin|private)(\/|$)/.test(path);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ secret, raw: req.url, headers: req.headers }));
  });
}

let upstream: TestServer;
let userServer: Awaited<ReturnType<typeof startEnvoyAuthServer>>;
let config: ConfigDir;
let pluginDir: string;
let sources: string;
let gatehouse: GatehouseProcess;

const up = { routeAction: { single: { upstream: { name: 'up' } } } };
const guarded = (prefix: string) => ({ matchers: [{ prefix }], options: { extauth: { configRef: { name: 'basic' } } }, ...up });

beforeAll(async () => {
  upstream = await normalisingUpstream();
  // A user's pass-through server answering with what a buggy or hostile one might.
  userServer = await startEnvoyAuthServer((req) => {
    const mode = req.attributes.request.http.headers['x-mode'];
    if (mode === 'crlf') return { status: { code: 7 }, denied_response: { status: { code: 403 }, headers: [{ header: { key: 'x-a', value: 'x\r\nset-cookie: pwned=1' } }], body: 'no' } };
    if (mode === 'badname') return { status: { code: 7 }, denied_response: { status: { code: 403 }, headers: [{ header: { key: 'bad name:', value: 'v' } }], body: 'no' } };
    if (mode === 'allow-ctl') return { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-user-id', value: 'admin\u0000' } }] } };
    return { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-user-id', value: 'team;carol' } }] } };
  });
  pluginDir = await mkdtemp(join(tmpdir(), 'gatehouse-hostile-plugins-'));
  sources = await mkdtemp(join(tmpdir(), 'gatehouse-hostile-src-'));
  await writeFile(join(sources, 'echo-next.ts'), ECHO_PLUGIN);
  await buildPlugin({ entry: join(sources, 'echo-next.ts'), name: 'EchoNext', outDir: pluginDir });
  config = await makeConfigDir({
    'config.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.authConfig('basic', [{ basicAuth: { realm: 'shop', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } } }]),
      manifests.authConfig('echo', [{ pluginAuth: { name: 'EchoNext' } }]),
      manifests.authConfig('user', [{ passThroughAuth: { grpc: { address: userServer.address } } }]),
      manifests.virtualService('shop', {
        domains: ['shop.test'],
        routes: [
          guarded('/admin'),
          guarded('/private'),
          { matchers: [{ prefix: '/login' }], options: { extauth: { configRef: { name: 'echo' } } }, ...up },
          { matchers: [{ prefix: '/team' }], options: { extauth: { configRef: { name: 'user' } } }, ...up },
          { matchers: [{ prefix: '/basic' }], options: { extauth: { configRef: { name: 'basic' } } }, ...up },
          { matchers: [{ prefix: '/' }], ...up },
        ],
      }),
      // The catch-all has no auth: a Host that falls through to it reaches the upstream unguarded.
      manifests.virtualService('catch-all', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], ...up }] }),
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', config.path, '--plugin-dir', pluginDir]);
});

afterAll(async () => {
  await gatehouse?.stop();
  await upstream?.close();
  await userServer?.close();
  await config?.cleanup();
  await rm(pluginDir, { recursive: true, force: true });
  await rm(sources, { recursive: true, force: true });
});

const shop = (path: string, headers: Record<string, string | string[]> = {}): Promise<Reply> => send(gatehouse.url, { path, headers: { host: 'shop.test', ...headers } });
const seen = (r: Reply) => JSON.parse(r.body) as { secret: boolean; raw: string; headers: Record<string, string> };

/** The gateway still answers: a crash would refuse this. */
async function expectAlive(): Promise<void> {
  const r = await shop('/public');
  expect(r.status).toBe(200);
}

describe('auth decisions that cannot be sent (findings 1, 23)', () => {
  it('a plugin denial header with a character above U+00FF is dropped, the denial still answered, the gateway alive', async () => {
    const r = await shop('/login', { 'x-next': '/%E2%82%AC' });
    expect(r.status).toBe(302);
    expect(r.headers.location).toBeUndefined();
    expect(r.headers['x-ok']).toBe('kept');
    for (const value of ['/%7F', '/%01', '/%C3%BF%E2%80%A8']) {
      const other = await shop('/login', { 'x-next': value });
      expect(other.status).toBe(302);
      expect(other.headers.location).toBeUndefined();
    }
    // CR, LF and NUL make the SDK refuse the whole plugin answer: fail closed.
    for (const value of ['/%00', '/%0D%0Aset-cookie:%20x=1']) {
      const refused = await shop('/login', { 'x-next': value });
      expect(refused.status).toBe(403);
      expect(refused.headers['set-cookie']).toBeUndefined();
    }
    await expectAlive();
  });

  it('an allowing plugin that sets an unsendable header is denied (fail closed), not forwarded without it', async () => {
    const r = await shop('/login', { 'x-mode': 'allow', 'x-next': '/%E2%82%AC' });
    expect(r.status).toBe(403);
    const fine = await shop('/login', { 'x-mode': 'allow', 'x-next': '/home' });
    expect(fine.status).toBe(200);
    expect(seen(fine).headers['x-next']).toBe('/home');
  });

  it('a denial cannot set framing or connection headers, give a 204 a body, or use a status outside 200-599', async () => {
    const te = await shop('/login', { 'x-mode': 'te' });
    expect(te.status).toBe(403);
    expect(te.headers['transfer-encoding']).toBeUndefined();
    expect(te.headers.upgrade).toBeUndefined();
    expect(te.headers['content-length']).toBe('2');
    expect(te.body).toBe('no');
    const noContent = await shop('/login', { 'x-mode': 'nocontent' });
    expect(noContent.status).toBe(204);
    expect(noContent.body).toBe('');
    expect((await shop('/login', { 'x-mode': 'badstatus' })).status).toBe(403);
    await expectAlive();
  });

  it("a pass-through server's CR/LF values and non-token names never reach the client; a control character in an allow header denies", async () => {
    const crlf = await shop('/team', { 'x-mode': 'crlf' });
    expect(crlf.status).toBe(403);
    expect(crlf.headers['set-cookie']).toBeUndefined();
    expect(crlf.headers['x-a']).toBeUndefined();
    expect((await shop('/team', { 'x-mode': 'badname' })).status).toBe(403);
    expect((await shop('/team', { 'x-mode': 'allow-ctl' })).status).toBe(403);
    const allowed = await shop('/team');
    expect(allowed.status).toBe(200);
    expect(seen(allowed).headers['x-user-id']).toBe('team;carol');
    await expectAlive();
  });
});

describe('the sandbox of a real gatehouse run (finding 25)', () => {
  it('gc is not visible to plugins although the process runs with --expose-gc', async () => {
    const r = await shop('/login', { 'x-mode': 'gc' });
    expect(r.status).toBe(200);
    expect(seen(r).headers['x-gc']).toBe('undefined');
  });
});

describe('path normalisation (finding 19)', () => {
  const bypasses = [
    '/%61dmin',
    '//admin',
    '/./admin',
    '/x/../admin',
    '/%2e/admin',
    '/%2E%2E/admin',
    '/public/../private',
    '/public/%2e%2e/private',
    '/public/.%2E/private',
    '/public//../private',
    '/%70rivate',
    '/ADMIN/../admin',
    '/./././admin/',
    '/public/%2E%2E/%2E%2E/admin',
  ];

  it.each(bypasses)('%s needs credentials like /admin and /private do', async (path) => {
    const r = await shop(path);
    expect(r.status).toBe(401);
    const authed = await shop(path, { authorization: basic('alice', 'wonderland') });
    expect(authed.status).toBe(200);
    expect(seen(authed).secret).toBe(true);
  });

  it.each(['/%2fadmin', '/%2Fadmin', '/public%2f..%2fprivate', '/%5cadmin', '/a%zz'])('%s is refused with 400 (encoded slashes, bad escapes)', async (path) => {
    const r = await shop(path);
    expect(r.status).toBe(400);
    expect(r.headers['x-gatehouse-error']).toBe('GH_BAD_REQUEST');
  });

  it('the upstream receives the normalised path, with the query untouched', async () => {
    const r = await shop('/public/./a/../%62?q=%2e%2e/x');
    expect(r.status).toBe(200);
    expect(seen(r).raw).toBe('/public/b?q=%2e%2e/x');
  });
});

describe('hop-by-hop and identity headers (findings 20, 22)', () => {
  it('Connection: x-user-id cannot strip the identity Basic Auth sets', async () => {
    const r = await shop('/basic', { authorization: basic('alice', 'wonderland'), connection: 'keep-alive, x-user-id' });
    expect(r.status).toBe(200);
    expect(seen(r).headers['x-user-id']).toBe('shop;alice');
  });

  it('a client-sent x-user-id never reaches the upstream, on routes with or without auth', async () => {
    const open = await shop('/public', { 'x-user-id': 'admin' });
    expect(seen(open).headers['x-user-id']).toBeUndefined();
    const authed = await shop('/basic', { authorization: basic('alice', 'wonderland'), 'x-user-id': 'admin' });
    expect(seen(authed).headers['x-user-id']).toBe('shop;alice');
  });

  it('underscore variants (x_user_id) are dropped, as Envoy does with headers_with_underscores_action DROP_HEADER', async () => {
    const r = await shop('/basic', { authorization: basic('alice', 'wonderland'), x_user_id: 'admin' });
    expect(seen(r).headers['x_user_id']).toBeUndefined();
    expect(seen(r).headers['x-user-id']).toBe('shop;alice');
    expect(seen(await shop('/public', { x_user_id: 'admin' })).headers['x_user_id']).toBeUndefined();
  });

  it('other Connection-listed headers are still hop-by-hop', async () => {
    const r = await shop('/public', { connection: 'x-private', 'x-private': 'secret' });
    expect(seen(r).headers['x-private']).toBeUndefined();
  });
});

describe('Host parsing (finding 21)', () => {
  it('shop.test. (trailing dot) and SHOP.TEST:80 are shop.test, with its auth', async () => {
    for (const host of ['shop.test.', 'SHOP.TEST:80', 'shop.test.:8080']) {
      const r = await send(gatehouse.url, { path: '/admin', headers: { host } });
      expect(r.status).toBe(401);
    }
  });

  it.each(['a@shop.test', 'shop.test:abc', 'shop.test:1:2', 'shop.test:99999'])('Host %s is a 400, not the catch-all', async (host) => {
    const r = await send(gatehouse.url, { path: '/admin', headers: { host } });
    expect(r.status).toBe(400);
  });

  it('an empty Host is a 400', async () => {
    const raw = await rawRequest(gatehouse.port, 'GET /admin HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n');
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    await expectAlive();
  });
});
