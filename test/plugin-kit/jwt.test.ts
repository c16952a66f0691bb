/**
 * The Jwt reference plugin end to end, through `gatehouse run` and through `gatehouse gateway`
 * + `gatehouse extauth`, with access tokens from a real OpenID provider (oidc-provider,
 * client_credentials + resource indicators, RS256 JWTs) whose JWKS the plugin fetches through
 * the step's egress. The provider rotates its keys while the gateway runs: a token signed by
 * the new key is accepted once the plugin refetches the JWKS on the unknown kid.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { API_AUDIENCE, CLIENT, decodeJwt, SHORT_LIVED_RESOURCE, signingKey, startOidcProvider, type OidcIssuer } from './oidc-provider.ts';
import { authRoute, buildReferencePlugin, deploy, get, SHAPES, type Deployment } from './support.ts';

let idp: OidcIssuer;
let echo: TestServer;
let config: ConfigDir;
let plugin: Awaited<ReturnType<typeof buildReferencePlugin>>;
const first = signingKey('idp-key-1');

beforeAll(async () => {
  idp = await startOidcProvider([first], { tenant: { id: 'acme', plan: 'gold' }, roles: ['orders:reader', 'orders:auditor'] });
  echo = await startEcho('orders');
  plugin = await buildReferencePlugin('jwt', 'Jwt');
  config = await makeConfigDir({
    'jwt.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: echo.port }]),
      manifests.authConfig('oidc', [
        {
          pluginAuth: {
            name: 'Jwt',
            egress: [{ url: idp.issuer }],
            config: {
              Issuer: idp.issuer,
              Audience: API_AUDIENCE,
              JwksUrl: idp.jwksUrl,
              Algorithms: ['RS256'],
              ClockSkewSeconds: 0,
              JwksMinRefreshSeconds: 1,
              ClaimsToHeaders: { client_id: 'x-client-id', scope: 'x-scope', 'tenant.id': 'x-tenant', roles: 'x-roles', email: 'x-user-email' },
            },
          },
        },
      ]),
      manifests.virtualService('orders', { domains: ['*'], routes: [authRoute('/orders', 'oidc')] }),
    ],
  });
});

afterAll(async () => {
  await config?.cleanup();
  await plugin?.cleanup();
  await echo?.close();
  await idp?.close();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(SHAPES)('Jwt with tokens from oidc-provider through gatehouse %s', (shape) => {
  let gatehouse: Deployment;
  let startedAt: number;

  beforeAll(async () => {
    // Each shape starts against an issuer publishing only the first key.
    idp.useKeys([first]);
    gatehouse = await deploy(shape, config.path, plugin.dir);
    // deploy() returns once Start (and its JWKS fetch) is done.
    startedAt = Date.now();
  }, 60_000);
  afterAll(async () => {
    await gatehouse?.stop();
  });

  it('accepts the provider’s token; its claims reach the upstream as headers, a client-sent claim header is removed', async () => {
    const token = await idp.token();
    expect(decodeJwt(token).header).toMatchObject({ alg: 'RS256', kid: 'idp-key-1' });
    const reply = await get(`${gatehouse.url}/orders/42`, { ...bearer(token), 'x-user-email': 'spoofed@evil.test', 'x-tenant': 'other' });
    expect(reply.status).toBe(200);
    const seen = JSON.parse(reply.body) as Echo;
    expect(seen.url).toBe('/orders/42');
    expect(seen.headers).toMatchObject({ 'x-user-id': CLIENT.id, 'x-client-id': CLIENT.id, 'x-scope': 'orders:read', 'x-tenant': 'acme', 'x-roles': 'orders:reader,orders:auditor' });
    expect(seen.headers['x-user-email']).toBeUndefined();
  });

  it('answers 401 with WWW-Authenticate: Bearer error="invalid_token" for expired, garbage, forged and wrong-audience tokens', async () => {
    const shortLived = await idp.token(SHORT_LIVED_RESOURCE);
    // The short-lived token is accepted while it lives (ClockSkewSeconds: 0)…
    expect((await get(`${gatehouse.url}/orders`, bearer(shortLived))).status).toBe(200);
    const { payload } = decodeJwt(shortLived);
    expect(payload).toMatchObject({ aud: API_AUDIENCE, iss: idp.issuer });
    expect(Number(payload.exp) - Number(payload.iat)).toBe(3);
    const otherAudience = await idp.token('https://billing.test');
    const good = await idp.token();
    const [head, , signature] = good.split('.');
    const forged = `${head}.${Buffer.from(JSON.stringify({ ...decodeJwt(good).payload, client_id: 'admin' })).toString('base64url')}.${signature}`;
    await sleep(Math.max(0, Number(payload.exp) * 1000 + 1100 - Date.now()));
    const cases: [string, string, Record<string, string>][] = [
      ['expired', 'token expired', bearer(shortLived)],
      ['wrong audience', 'wrong audience', bearer(otherAudience)],
      ['forged claims', 'bad signature', bearer(forged)],
      ['garbage', 'malformed token', bearer('not-a-jwt')],
      ['garbage segments', 'malformed token', bearer('e30.e30e30.sig')],
    ];
    for (const [what, description, headers] of cases) {
      const reply = await get(`${gatehouse.url}/orders`, headers);
      expect(reply.status, what).toBe(401);
      expect(reply.headers.get('www-authenticate'), what).toBe(`Bearer error="invalid_token", error_description="${description}"`);
      expect(reply.body, what).toBe('');
    }
    // No credentials at all: the plain challenge.
    const none = await get(`${gatehouse.url}/orders`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
  });

  it('rotation: a token signed by the provider’s new key is accepted after one JWKS refetch on the unknown kid', async () => {
    const oldToken = await idp.token();
    // The min refresh interval (1 s) counts from the Start fetch.
    await sleep(Math.max(0, startedAt + 1100 - Date.now()));
    const kid = `idp-key-2-${shape.replace(/\W+/g, '-')}`;
    // The issuer rotates: a new provider instance signing with the new key, the old one still published.
    idp.useKeys([signingKey(kid), first]);
    const newToken = await idp.token();
    expect(decodeJwt(newToken).header.kid).toBe(kid);
    const before = idp.jwksFetches;
    const reply = await get(`${gatehouse.url}/orders/rotated`, bearer(newToken));
    expect(reply.status).toBe(200);
    expect((JSON.parse(reply.body) as Echo).headers['x-user-id']).toBe(CLIENT.id);
    expect(idp.jwksFetches).toBe(before + 1);
    await gatehouse.auth.waitForLog((line) => line.msg === 'JWKS fetched' && JSON.stringify(line).includes(kid));
    // Both keys are held now: old and new tokens pass with no further fetch.
    for (const token of [oldToken, newToken, await idp.token()]) expect((await get(`${gatehouse.url}/orders`, bearer(token))).status).toBe(200);
    expect(idp.jwksFetches).toBe(before + 1);
  });
});
