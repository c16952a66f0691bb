/**
 * `oauth2.accessTokenValidation` through a real `gatehouse run`: RFC 7662 introspection against
 * oidc-provider's introspection endpoint (with client credentials, as Gloo's Hydra guide), JWT
 * access tokens against a remote JWKS (cached, a rotated key picked up) and an inline JWKS,
 * requiredScopes, claimsToHeaders and the result cache.
 */
import { createPublicKey } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_AUDIENCE, signingKey, startOidcProvider, type OidcIssuer } from '../plugin-kit/oidc-provider.ts';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { CLIENT, startProvider, type TestProvider } from './provider.ts';

function files(echoPort: number, oauth2: object): Record<string, object | object[]> {
  return {
    'secret.yaml': { apiVersion: 'v1', kind: 'Secret', type: 'extauth.solo.io/oauth', metadata: { name: 'client-secret', namespace: 'default' }, data: { 'client-secret': Buffer.from(CLIENT.secret).toString('base64') } },
    'app.yaml': [
      manifests.upstream('echo', [{ addr: '127.0.0.1', port: echoPort }]),
      manifests.virtualService('app', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }], options: { extauth: { configRef: { name: 'atv', namespace: 'default' } } } }),
    ],
    'auth.yaml': { ...manifests.authConfig('atv', [{ oauth2 }]), metadata: { name: 'atv', namespace: 'default' } },
  };
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('access-token validation through gatehouse run', () => {
  let echo: TestServer;
  const cleanup: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    echo = await startEcho('api');
  });
  afterAll(async () => {
    for (const c of cleanup.reverse()) await c();
    await echo?.close();
  });

  async function gateway(oauth2: object): Promise<GatehouseProcess> {
    const dir: ConfigDir = await makeConfigDir(files(echo.port, oauth2));
    cleanup.push(() => dir.cleanup());
    const gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false', '--extauth-timeout', '5s']);
    cleanup.push(() => gw.stop());
    return gw;
  }

  it('introspection (RFC 7662) with client credentials: active tokens pass, unknown and missing ones get 403; results are cached', { timeout: 60_000 }, async () => {
    const provider: TestProvider = await startProvider({ redirectUris: ['http://app.test/callback'], postLogoutUris: [] });
    cleanup.push(() => provider.close());
    const gw = await gateway({
      accessTokenValidation: {
        introspection: { introspectionUrl: `${provider.issuer}/token/introspection`, clientId: CLIENT.id, clientSecretRef: { name: 'client-secret', namespace: 'default' } },
        claimsToHeaders: [{ claim: 'client_id', header: 'x-client' }],
      },
    });
    const token = await provider.clientCredentialsToken();
    const ok = await send(gw.url, { path: '/headers', headers: bearer(token) });
    expect(ok.status).toBe(200);
    expect((JSON.parse(ok.body) as Echo).headers['x-client']).toBe(CLIENT.id);
    expect((JSON.parse(ok.body) as Echo).headers.authorization).toBe(`Bearer ${token}`);
    expect((await send(gw.url, { path: '/headers' })).status).toBe(403);
    expect((await send(gw.url, { path: '/headers', headers: bearer('qwertyuio23456789') })).status).toBe(403);
    expect((await send(gw.url, { path: '/headers', headers: { authorization: `Bearer ${'x'.repeat(9000)}` } })).status).toBe(403);
    // Cached: more requests with the same token do not ask the provider again.
    const asked = provider.hits.get('/token/introspection')!;
    for (let i = 0; i < 5; i++) expect((await send(gw.url, { path: '/headers', headers: bearer(token) })).status).toBe(200);
    expect(provider.hits.get('/token/introspection')).toBe(asked);
  });

  it('JWT access tokens with a remote JWKS (issuer, audiences, requiredScopes, claimsToHeaders), a rotated key picked up, and an inline JWKS', { timeout: 60_000 }, async () => {
    const first = signingKey('k1');
    const issuer: OidcIssuer = await startOidcProvider([first], { tenant: 'acme' });
    cleanup.push(() => issuer.close());
    const gw = await gateway({
      accessTokenValidation: {
        jwt: { remoteJwks: { url: issuer.jwksUrl, refreshInterval: '1s' }, issuer: issuer.issuer, audiences: [API_AUDIENCE] },
        requiredScopes: { scope: ['orders:read'] },
        claimsToHeaders: [{ claim: 'tenant', header: 'x-tenant' }, { claim: 'client_id', header: 'x-client' }],
        cacheTimeout: '0s',
      },
    });
    const token = await issuer.token();
    const ok = await send(gw.url, { path: '/orders', headers: bearer(token) });
    expect(ok.status).toBe(200);
    expect((JSON.parse(ok.body) as Echo).headers['x-tenant']).toBe('acme');
    // Tampered payload, a token of another issuer's key, garbage: 403.
    const [h, p, s] = token.split('.');
    const tampered = `${h}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p!, 'base64url').toString()), tenant: 'evil' })).toString('base64url')}.${s}`;
    expect((await send(gw.url, { path: '/orders', headers: bearer(tampered) })).status).toBe(403);
    expect((await send(gw.url, { path: '/orders', headers: bearer('a.b.c') })).status).toBe(403);
    // Rotation: the issuer now signs with k2 (k1 still published); the JWKS refreshes and k2 tokens pass.
    const second = signingKey('k2');
    issuer.useKeys([second, first]);
    const rotated = await issuer.token();
    const deadline = Date.now() + 15_000;
    let status = (await send(gw.url, { path: '/orders', headers: bearer(rotated) })).status;
    while (status !== 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      status = (await send(gw.url, { path: '/orders', headers: bearer(rotated) })).status;
    }
    expect(status).toBe(200);
    expect((await send(gw.url, { path: '/orders', headers: bearer(token) })).status).toBe(200);

    // Inline JWKS: the public half of k2 only.
    const publicJwk = { ...createPublicKey({ key: second as never, format: 'jwk' }).export({ format: 'jwk' }), kid: 'k2', use: 'sig', alg: 'RS256' };
    const local = await gateway({ accessTokenValidation: { jwt: { localJwks: { inlineString: JSON.stringify({ keys: [publicJwk] }) }, issuer: issuer.issuer } } });
    expect((await send(local.url, { path: '/orders', headers: bearer(rotated) })).status).toBe(200);
    expect((await send(local.url, { path: '/orders', headers: bearer(token) })).status).toBe(403);
    // requiredScopes the token lacks: 403.
    const strict = await gateway({ accessTokenValidation: { jwt: { localJwks: { inlineString: JSON.stringify({ keys: [publicJwk] }) } }, requiredScopes: { scope: ['orders:write'] } } });
    expect((await send(strict.url, { path: '/orders', headers: bearer(rotated) })).status).toBe(403);
  });
});
