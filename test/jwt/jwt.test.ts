/**
 * The JWT filter and RBAC through a real `gatehouse run`: RS256 and ES256 tokens from a real
 * JWKS server that rotates its key, Envoy's 401/403 answers, claims reaching a real upstream,
 * RBAC by claim, path and method, `jwtStaged.beforeExtAuth` with the AuthConfig `jwt` step
 * beside Basic Auth, and hostile tokens and JWKS servers that must neither crash nor stall it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { htpasswdApr1 } from '../extauth/support.ts';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { b64, ecKey, JwksServer, nowS, rsaKey, token, type Key } from './support.ts';

let echo: TestServer;
let jwks: JwksServer;
let hanging: JwksServer;
let huge: JwksServer;
let dir: ConfigDir;
let gw: GatehouseProcess;
const rs = rsaKey('rs-1');
const es = ecKey('es-1');
const alice = htpasswdApr1('alice', 'wonderland');

const provider = (url: string, extra: object = {}) => ({ issuer: 'solo.io', audiences: ['api.test'], jwks: { remote: { url } }, ...extra });
const route = (prefix: string, options?: object) => ({ matchers: [{ prefix }], routeAction: { single: { upstream: { name: 'echo' } } }, ...(options ? { options } : {}) });

beforeAll(async () => {
  echo = await startEcho('echo');
  jwks = new JwksServer();
  hanging = new JwksServer();
  huge = new JwksServer();
  const url = await jwks.start();
  const hangUrl = await hanging.start();
  const hugeUrl = await huge.start();
  jwks.keys = [rs, es];
  hanging.mode = 'hang';
  huge.mode = 'huge';
  dir = await makeConfigDir({
    'echo.yaml': manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
    'api.yaml': manifests.virtualService('api', {
      domains: ['api.test'],
      options: {
        jwt: { providers: { corp: provider(url, { claimsToHeaders: [{ claim: 'sub', header: 'x-user' }, { claim: 'org.team', header: 'x-team' }] }) } },
        rbac: {
          policies: {
            readers: { nestedClaimDelimiter: '.', principals: [{ jwtPrincipal: { claims: { 'org.team': 'ops' } } }], permissions: { pathPrefix: '/read', methods: ['GET'] } },
            admins: { principals: [{ jwtPrincipal: { claims: { roles: 'admin' }, matcher: 'LIST_CONTAINS' } }] },
          },
        },
      },
      routes: [route('/public', { jwt: { disable: true }, rbac: { disable: true } }), route('/')],
    }),
    // jwks.remote.upstreamRef: the URL names a host nobody resolves; the fetch goes to the Upstream.
    'idp.yaml': [
      manifests.upstream('idp', [{ addr: '127.0.0.1', port: Number(new URL(url).port) }]),
      manifests.virtualService('via-upstream', { domains: ['upstream.test'], options: { jwt: { providers: { p: { ...provider('http://idp.invalid/jwks.json'), jwks: { remote: { url: 'http://idp.invalid/jwks.json', upstreamRef: { name: 'idp' }, asyncFetch: {} } } } } } }, routes: [route('/')] }),
    ],
    'hostile.yaml': [
      manifests.virtualService('hang', { domains: ['hang.test'], options: { jwt: { providers: { p: provider(hangUrl) } } }, routes: [route('/')] }),
      manifests.virtualService('huge', { domains: ['huge.test'], options: { jwt: { providers: { p: provider(hugeUrl) } } }, routes: [route('/')] }),
    ],
    'mixed.yaml': [
      // Gloo's JWT-or-other-auth shape: the jwt step and Basic Auth under a booleanExpr.
      { ...manifests.authConfig('jwt-or-basic', []), spec: { configs: [{ name: 'jwt', jwt: {} }, { name: 'basic', basicAuth: { realm: 'mixed', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } } }], booleanExpr: 'jwt || basic' } },
      manifests.virtualService('mixed', {
        domains: ['mixed.test'],
        options: {
          jwtStaged: { beforeExtAuth: { providers: { corp: provider(url, { claimsToHeaders: [{ claim: 'sub', header: 'x-user' }] }) }, allowMissingOrFailedJwt: true } },
          extauth: { configRef: { name: 'jwt-or-basic' } },
        },
        routes: [route('/')],
      }),
    ],
  });
  gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false'], { timeoutMs: 45_000 });
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  await dir?.cleanup();
  await Promise.all([echo?.close(), jwks?.close(), hanging?.close(), huge?.close()]);
});

const get = (host: string, path: string, headers: Record<string, string> = {}, method = 'GET') => send(gw.url, { path, method, headers: { host, ...headers } });
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const seen = (body: string) => JSON.parse(body) as Echo;
// Local replies end with a newline (the gateway's convention for its own answers).
const text = (reason: string) => `${reason}\n`;
const claims = { aud: 'api.test', org: { team: 'ops' } };

describe('JWT filter through gatehouse run', () => {
  it('verifies RS256 and ES256 tokens from the remote JWKS; the claims reach the upstream as headers and the token does not', async () => {
    for (const key of [rs, es]) {
      const r = await get('api.test', '/read/1', bearer(await token(key, claims)));
      expect(r.status).toBe(200);
      const headers = seen(r.body).headers;
      expect(headers['x-user']).toBe('alice');
      expect(headers['x-team']).toBe('ops');
      expect(headers.authorization).toBeUndefined();
    }
  });

  it('answers Envoy\'s 401s: missing (no error=), expired, foreign issuer, bad signature; 403 for a foreign audience', async () => {
    const missing = await get('api.test', '/read/1?q=1');
    expect(missing.status).toBe(401);
    expect(missing.headers['www-authenticate']).toBe('Bearer realm="http://api.test/read/1?q=1"');
    expect(missing.body).toBe(text('Jwt is missing'));
    expect(missing.headers['x-gatehouse-error']).toBe('GH_JWT_MISSING');
    const expired = await get('api.test', '/read/1', bearer(await token(rs, { ...claims, exp: nowS() - 3600 })));
    expect([expired.status, expired.body, expired.headers['www-authenticate']]).toEqual([401, text('Jwt is expired'), 'Bearer realm="http://api.test/read/1", error="invalid_token"']);
    expect((await get('api.test', '/read/1', bearer(await token(rs, { ...claims, iss: 'evil.io' })))).body).toBe(text('Jwt issuer is not configured'));
    expect((await get('api.test', '/read/1', bearer(await token({ ...rsaKey('x'), kid: 'rs-1' }, claims)))).body).toBe(text('Jwt verification fails'));
    const audience = await get('api.test', '/read/1', bearer(await token(rs, { ...claims, aud: 'other.test' })));
    expect([audience.status, audience.body]).toEqual([403, text('Audiences in Jwt are not allowed')]);
  });

  it('RBAC: allows by nested claim within path and method, by a list claim anywhere; 403 otherwise; a route can turn both off', async () => {
    const ops = bearer(await token(rs, claims));
    expect((await get('api.test', '/read/x', ops)).status).toBe(200);
    const post = await get('api.test', '/read/x', ops, 'POST');
    expect([post.status, post.body, post.headers['x-gatehouse-error']]).toEqual([403, text('RBAC: access denied'), 'GH_RBAC_DENIED']);
    expect((await get('api.test', '/write', ops)).status).toBe(403);
    expect((await get('api.test', '/read/x', bearer(await token(rs, { ...claims, org: { team: 'dev' } })))).status).toBe(403);
    expect((await get('api.test', '/write', bearer(await token(rs, { aud: 'api.test', roles: ['user', 'admin'] })), 'DELETE')).status).toBe(200);
    expect((await get('api.test', '/public/x')).status).toBe(200);
  });

  it('follows a key rotation at once (unknown kid → refetch) and stops accepting tokens of the removed key', async () => {
    const old = bearer(await token(rs, claims));
    const next: Key = rsaKey('rs-2');
    jwks.keys = [next, es];
    expect((await get('api.test', '/read/1', bearer(await token(next, claims)))).status).toBe(200);
    const stale = await get('api.test', '/read/1', old);
    expect([stale.status, stale.body]).toEqual([401, text("Jwks doesn't have key to match kid or alg from Jwt")]);
  });

  it('jwks.remote.upstreamRef fetches through the Upstream (the URL gives path and Host)', async () => {
    const r = await get('upstream.test', '/', bearer(await token(es, claims)));
    expect(r.status).toBe(200);
  });

  it('jwtStaged.beforeExtAuth feeds the AuthConfig jwt step: a token or Basic credentials get through, neither does not', async () => {
    const withToken = await get('mixed.test', '/', bearer(await token(es, claims)));
    expect(withToken.status).toBe(200);
    expect(seen(withToken.body).headers['x-user']).toBe('alice');
    const withBasic = await get('mixed.test', '/', { authorization: `Basic ${Buffer.from('alice:wonderland').toString('base64')}` });
    expect(withBasic.status).toBe(200);
    expect((await get('mixed.test', '/')).status).toBe(401);
    expect((await get('mixed.test', '/', bearer(await token(rsaKey('rs-1'), claims)))).status).toBe(401);
  });

  it('hostile tokens are refused without harm: oversized, alg none, garbage, 1000 segments', async () => {
    const payload = b64({ iss: 'solo.io', aud: 'api.test', exp: nowS() + 60, org: { team: 'ops' } });
    const hostile = [`${b64({ alg: 'RS256' })}.${'A'.repeat(12_000)}.c2ln`, `${b64({ alg: 'none' })}.${payload}.`, '%%%.@@@.!!!', Array.from({ length: 1000 }, () => 'e30').join('.'), `${b64({ alg: 'HS256', kid: 'rs-2' })}.${payload}.c2ln`];
    const replies = await Promise.all(hostile.map((t) => get('api.test', '/read/1', bearer(t))));
    expect(replies.map((r) => r.status)).toEqual([401, 401, 401, 401, 401]);
    expect((await get('api.test', '/read/1', bearer(await token(es, claims)))).status).toBe(200);
  });

  it('a JWKS server that hangs or answers 100 MB: 401 "Jwks remote fetch is failed", and other hosts keep being served meanwhile', async () => {
    const t = await token(rs, claims);
    const pending = [get('hang.test', '/', bearer(t), 'GET'), get('huge.test', '/', bearer(t))];
    // While those fetches run, the gateway answers others.
    expect((await get('api.test', '/public/x')).status).toBe(200);
    const [hang, big] = await Promise.all(pending);
    expect([hang!.status, hang!.body]).toEqual([401, text('Jwks remote fetch is failed')]);
    expect([big!.status, big!.body]).toEqual([401, text('Jwks remote fetch is failed')]);
    expect(gw.child.exitCode).toBeNull();
  });

  it('a bad local key or JWKS URL is rejected with the field path and the last good config keeps serving', async () => {
    await dir.write('bad.yaml', manifests.virtualService('bad', { domains: ['bad.test'], options: { jwt: { providers: { p: { jwks: { local: { key: '{"keys": [' } } } } } }, routes: [route('/')] }));
    const line = await gw.waitForLog((l) => typeof l.msg === 'string' && JSON.stringify(l).includes('jwks.local.key'));
    expect(JSON.stringify(line)).toContain('spec.virtualHost.options.jwt.providers.p.jwks.local.key');
    await eventually(async () => (await get('bad.test', '/')).status === 404);
    expect((await get('api.test', '/public/x')).status).toBe(200);
  });
});
