/**
 * The OIDC authorization code flow through a real `gatehouse run` against a real OpenID provider
 * (oidc-provider): 302 to the login, the provider's login and consent forms filled in by the
 * test's HTTP client, the callback, the session cookie, 200 from a real upstream with the ID and
 * access token headers and claims, a refresh after the tokens expire, and logout through the
 * provider's end_session_endpoint. Then what an attacker tries: forged and replayed states, cookies
 * sealed with another key or altered, oversized cookies, open redirects through the original URL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { appFiles, login, oidcAuthConfig } from './app.ts';
import { Browser, type Step } from './browser.ts';
import { signingKey } from '../plugin-kit/oidc-provider.ts';
import { CLIENT, startProvider, USER, type TestProvider } from './provider.ts';

const APP = 'http://app.test';

const echoOf = (step: Step) => JSON.parse(step.reply.body) as Echo;

describe('OIDC authorization code flow through gatehouse run', () => {
  let provider: TestProvider;
  let echo: TestServer;
  let dir: ConfigDir;
  let gw: GatehouseProcess;
  beforeAll(async () => {
    // ID and access tokens live 3 s (at least two whole seconds: iat is rounded down), so a refresh is seen soon.
    provider = await startProvider({ redirectUris: [`${APP}/callback`], postLogoutUris: [`${APP}/`], ttl: 3 });
    echo = await startEcho('app');
    dir = await makeConfigDir(appFiles(echo.port, oidcAuthConfig(provider.issuer)));
    gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false', '--extauth-timeout', '5s']);
  });
  afterAll(async () => {
    await gw?.stop();
    await dir?.cleanup();
    await echo?.close();
    await provider?.close();
  });

  it('redirects to the login, logs in with PKCE, state and nonce, reaches the upstream with the tokens, refreshes, and logs out', { timeout: 60_000 }, async () => {
    const browser = new Browser({ 'app.test': gw.url });
    const { first, steps } = await login(browser, `${APP}/private/page?x=1`);
    // 1. The unauthenticated request: 302 to the provider's authorization endpoint.
    expect(first.reply.status).toBe(302);
    const auth = new URL(first.reply.headers.location!);
    expect(auth.origin + auth.pathname).toBe(`${provider.issuer}/auth`);
    expect(Object.fromEntries(auth.searchParams)).toMatchObject({ response_type: 'code', client_id: CLIENT.id, redirect_uri: `${APP}/callback`, code_challenge_method: 'S256', prompt: 'consent' });
    expect(auth.searchParams.get('scope')!.split(' ')).toEqual(['openid', 'email', 'profile', 'offline_access']);
    expect(auth.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(auth.searchParams.get('nonce')).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(auth.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // The login state cookie is sealed: no verifier, nonce or URL readable in it.
    const stateCookie = first.reply.headers['set-cookie']!.find((c) => c.startsWith('__oidc_state_'))!;
    expect(stateCookie).toMatch(/Path=\/callback/);
    expect(stateCookie).toMatch(/HttpOnly/);
    expect(stateCookie).not.toContain('private');
    // 2. The callback: 302 back to the original URL with the session cookie.
    const callback = steps.find((s) => s.url.startsWith(`${APP}/callback`))!;
    expect(callback.reply.status).toBe(302);
    expect(callback.reply.headers.location).toBe(`${APP}/private/page?x=1`);
    const sessionCookie = callback.reply.headers['set-cookie']!.find((c) => c.startsWith('__session='))!;
    expect(sessionCookie).toMatch(/HttpOnly/);
    expect(sessionCookie).toMatch(/Max-Age=2592000/);
    expect(sessionCookie).not.toMatch(/Secure/);
    const sealed = browser.cookies('app.test').get('__session')!;
    expect(sealed).toMatch(/^[A-Za-z0-9_-]+$/);
    // Tokens are JWTs starting "eyJ": nothing of them is readable in the cookie.
    expect(Buffer.from(sealed, 'base64url').toString('latin1')).not.toMatch(/eyJ|admin|example\.com/);
    // 3. The upstream sees the tokens and claims.
    const page = steps[steps.length - 1]!;
    expect(page.reply.status).toBe(200);
    const seen = echoOf(page);
    expect(seen.url).toBe('/private/page?x=1');
    const idToken = seen.headers['x-id-token'] as string;
    expect(idToken.split('.')).toHaveLength(3);
    expect(JSON.parse(Buffer.from(idToken.split('.')[1]!, 'base64url').toString())).toMatchObject({ iss: provider.issuer, aud: CLIENT.id, sub: USER.name });
    expect(seen.headers.authorization).toMatch(/^Bearer \S+$/);
    expect(seen.headers['x-email']).toBe(`${USER.name}@example.com`);
    expect(seen.headers['x-sub']).toBe(USER.name);
    // A client-sent x-id-token never reaches the upstream in place of the real one.
    const spoofed = await browser.request(`${APP}/again`, { headers: { 'x-id-token': 'forged' } });
    expect((JSON.parse(spoofed.body) as Echo).headers['x-id-token']).toBe(idToken);

    // 4. After the tokens expire, the next request refreshes them (refresh_token grant) and sets the new cookie.
    const tokenCalls = provider.hits.get('/token') ?? 0;
    const refreshed = await eventually(async () => {
      const r = await browser.request(`${APP}/after-expiry`);
      const e = JSON.parse(r.body) as Echo;
      return r.status === 200 && e.headers['x-id-token'] !== idToken ? r : undefined;
    }, 20_000, 250);
    expect(provider.hits.get('/token')! - tokenCalls).toBe(1);
    expect(refreshed.headers['set-cookie']?.some((c) => c.startsWith('__session='))).toBe(true);
    expect(browser.cookies('app.test').get('__session')).not.toBe(sealed);
    // A request still carrying the old cookie (sent before the new one arrived) gets the refreshed session, without spending the rotated refresh token again.
    const tokensAfter = provider.hits.get('/token');
    const stale = await send(gw.url, { path: '/late', headers: { host: 'app.test', cookie: `__session=${sealed}` } });
    expect(stale.status).toBe(200);
    expect((JSON.parse(stale.body) as Echo).headers['x-id-token']).not.toBe(idToken);
    expect(provider.hits.get('/token')).toBe(tokensAfter);
    // The refreshed cookie carries the rotated refresh token: it keeps working, still without a login.
    const loginsBefore = provider.logins;
    expect((await browser.request(`${APP}/still`)).status).toBe(200);
    expect(provider.logins).toBe(loginsBefore);

    // 5. Logout: the session cookie is cleared and the browser goes to the provider's end_session_endpoint.
    const out = await browser.request(`${APP}/logout`);
    expect(out.status).toBe(302);
    const end = new URL(out.headers.location!);
    expect(end.origin + end.pathname).toBe(`${provider.issuer}/session/end`);
    expect(end.searchParams.get('post_logout_redirect_uri')).toBe(`${APP}/`);
    expect(end.searchParams.get('client_id')).toBe(CLIENT.id);
    expect(end.searchParams.get('id_token_hint')?.split('.')).toHaveLength(3);
    expect(out.headers['set-cookie']!.some((c) => c.startsWith('__session=;') && /Max-Age=0/.test(c))).toBe(true);
    expect(browser.cookies('app.test').has('__session')).toBe(false);
    // The provider's logout confirmation, submitted, lands on afterLogoutUrl (the app, which asks for a login again).
    const confirm = await browser.follow(end.href);
    const landed = await browser.submit(confirm[confirm.length - 1]!, { logout: 'yes' });
    expect(landed.some((s) => s.url === `${APP}/`)).toBe(true);
    expect(landed.find((s) => s.url === `${APP}/`)!.reply.status).toBe(302);
    // The old sealed cookie, replayed, is what a stolen cookie is: valid until it expires (cookie sessions are stateless).
  });

  it('refuses forged, replayed and foreign states and cookies, oversized cookies and open redirects (fail closed, never a crash)', { timeout: 60_000 }, async () => {
    const browser = new Browser({ 'app.test': gw.url });
    // Open redirect attempts through the original URL: the callback only ever returns to the app's origin.
    for (const target of ['//evil.test/x', '/\\evil.test/x']) {
      const b = new Browser({ 'app.test': gw.url });
      const r = await send(gw.url, { path: target, headers: { host: 'app.test' } });
      // The gateway refuses a backslash in the path itself (400) before auth; otherwise the login starts.
      if (target.includes('\\')) {
        expect(r.status).toBe(400);
        continue;
      }
      expect(r.status).toBe(302);
      for (const [k, v] of (r.headers['set-cookie'] ?? []).map((c) => c.split(';')[0]!.split('='))) b.cookies('app.test').set(k!, v!);
      const { steps } = await login(b, r.headers.location!);
      const back = steps.find((s) => s.url.startsWith(`${APP}/callback`))!;
      // The gateway normalises the path; whatever is left, the way back stays on the app's origin.
      expect(new URL(back.reply.headers.location!).origin).toBe(APP);
      expect(back.reply.headers.location).not.toMatch(/^https?:\/\/evil|^\/\//);
    }

    // A full login, then its callback URL replayed with the same state cookie: refused.
    const start = await browser.request(`${APP}/a`);
    const stateCookie = start.headers['set-cookie']!.find((c) => c.startsWith('__oidc_state_'))!.split(';')[0]!;
    const rest = await browser.follow(start.headers.location!);
    const afterLogin = await browser.submit(rest[rest.length - 1]!, { username: USER.name, password: USER.password });
    const consent = afterLogin[afterLogin.length - 1]!;
    const toCallback = await browser.request(new URL(/<form[^>]*action="([^"]*)"/.exec(consent.reply.body)![1]!, consent.url).href, { form: {} });
    let location = toCallback.headers.location!;
    while (!location.startsWith(`${APP}/callback`)) location = (await browser.request(new URL(location, provider.issuer).href)).headers.location!;
    const callbackUrl = new URL(location);
    const good = await send(gw.url, { path: callbackUrl.pathname + callbackUrl.search, headers: { host: 'app.test', cookie: stateCookie } });
    expect(good.status).toBe(302);
    const replay = await send(gw.url, { path: callbackUrl.pathname + callbackUrl.search, headers: { host: 'app.test', cookie: stateCookie } });
    expect(replay.status).toBe(403);
    // A forged state (no cookie for it), a state whose cookie belongs to another login, a garbage cookie.
    const forged = `${callbackUrl.pathname}?code=abc&state=${'A'.repeat(32)}`;
    expect((await send(gw.url, { path: forged, headers: { host: 'app.test' } })).status).toBe(403);
    expect((await send(gw.url, { path: forged, headers: { host: 'app.test', cookie: `__oidc_state_AAAAAAAA=${stateCookie.split('=')[1]}` } })).status).toBe(403);
    expect((await send(gw.url, { path: '/callback?code=x&state=<script>', headers: { host: 'app.test' } })).status).toBe(403);
    expect((await send(gw.url, { path: '/callback?error=access_denied&state=x', headers: { host: 'app.test' } })).status).toBe(403);
    await gw.waitForLog((l) => l.code === 'GH_OAUTH2_STATE' && String(l.msg).includes('replayed'));

    // The session cookie of the good login works; altered, or sealed with another key, it is no session (302 to login).
    const sessionCookie = good.headers['set-cookie']!.find((c) => c.startsWith('__session='))!.split(';')[0]!;
    expect((await send(gw.url, { path: '/x', headers: { host: 'app.test', cookie: sessionCookie } })).status).toBe(200);
    const value = sessionCookie.slice('__session='.length);
    const flipped = value.slice(0, 20) + (value[20] === 'A' ? 'B' : 'A') + value.slice(21);
    expect((await send(gw.url, { path: '/x', headers: { host: 'app.test', cookie: `__session=${flipped}` } })).status).toBe(302);
    const { Sealer } = await import('../../core/src/extauth/oauth2/cookies.ts');
    const foreign = new Sealer(Buffer.alloc(32, 7)).seal({ id: 'a.b.c', at: 'x', exp: Date.now() + 3_600_000, iat: Date.now() }, '__session');
    expect((await send(gw.url, { path: '/x', headers: { host: 'app.test', cookie: `__session=${foreign}` } })).status).toBe(302);
    // Oversized cookies and a flood of state cookies: answered, not crashed.
    expect((await send(gw.url, { path: '/x', headers: { host: 'app.test', cookie: `__session=${'A'.repeat(12_000)}` } })).status).toBe(302);
    const big = await send(gw.url, { path: `/callback?code=x&state=${'B'.repeat(32)}`, headers: { host: 'app.test', cookie: Array.from({ length: 100 }, (_, i) => `__oidc_state_${i}=${'C'.repeat(100)}`).join('; ') } });
    expect(big.status).toBe(403);
    // The gateway still serves.
    expect((await send(gw.url, { path: '/x', headers: { host: 'app.test', cookie: sessionCookie } })).status).toBe(200);
  });
  it('verifies ID tokens signed with a rotated key: the JWKS is fetched again for an unknown kid (jwksCacheRefreshPolicy always)', { timeout: 60_000 }, async () => {
    const rotating = await startProvider({ redirectUris: [`${APP}/callback`], postLogoutUris: [`${APP}/`] });
    const rdir = await makeConfigDir(appFiles(echo.port, oidcAuthConfig(rotating.issuer, { jwksCacheRefreshPolicy: { always: {} } })));
    const rgw = await startGatehouse('run', ['--config-dir', rdir.path, '--access-log', 'false', '--extauth-timeout', '5s']);
    try {
      const first = await login(new Browser({ 'app.test': rgw.url }), `${APP}/one`);
      expect(first.steps[first.steps.length - 1]!.reply.status).toBe(200);
      const fetched = rotating.hits.get('/jwks') ?? 0;
      expect(fetched).toBeGreaterThan(0);
      rotating.rotate([signingKey('provider-key-2'), signingKey('provider-key-1')]);
      const second = await login(new Browser({ 'app.test': rgw.url }), `${APP}/two`);
      const page = second.steps[second.steps.length - 1]!;
      expect(page.reply.status, JSON.stringify(rgw.logs.filter((l) => String(l.code ?? '').startsWith('GH_')))).toBe(200);
      const header = JSON.parse(Buffer.from((echoOf(page).headers['x-id-token'] as string).split('.')[0]!, 'base64url').toString());
      expect(header.kid).toBe('provider-key-2');
      expect(rotating.hits.get('/jwks')!).toBeGreaterThan(fetched);
    } finally {
      await rgw.stop();
      await rdir.cleanup();
      await rotating.close();
    }
  });
});
