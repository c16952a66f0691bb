import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createFakeClock, expectAllowed, expectDenied, startPlugin, TEST_MODES, type PluginHarness } from '@gatehouse/plugin-sdk/testkit';
import { localPath } from './index.ts';

// OidcLogin in both test-kit modes against a small OpenID provider of the test's own (a real HTTP
// server signing real RS256 ID tokens and checking PKCE S256), which can also misbehave (a wrong
// nonce, another issuer): what a provider or an attacker can send. The full flow against the real
// `oidc-provider` through `gatehouse run` is test/plugin-kit/oidc-login.test.ts.

const entry = new URL('./index.ts', import.meta.url);
const name = 'OidcLogin';
const APP = 'https://app.test';
const CLIENT = { id: 'app', secret: 'client-secret' };
const b64url = (data: Buffer | string) => Buffer.from(data).toString('base64url');
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });

/** What the next ID token gets besides the right claims (a hostile provider's overrides). */
let idTokenOverrides: Record<string, unknown> = {};
const codes = new Map<string, { nonce: string; challenge: string; redirectUri: string }>();
const grants: string[] = [];
let issuer = '';
let server: Server;
/** Discovery requests still to leave unanswered (a provider that hangs), and the ones held. */
let hangDiscovery = 0;
const held: { destroy(): void }[] = [];

function idToken(claims: Record<string, unknown>): string {
  const input = `${b64url(JSON.stringify({ alg: 'RS256', kid: 'k1', typ: 'JWT' }))}.${b64url(JSON.stringify(claims))}`;
  return `${input}.${b64url(sign('sha256', Buffer.from(input), rsa.privateKey))}`;
}

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c)).on('end', () => {
      const json = (status: number, value: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      if (req.url === '/.well-known/openid-configuration' && hangDiscovery > 0) {
        hangDiscovery--;
        held.push(res);
        return;
      }
      if (req.url === '/.well-known/openid-configuration') return json(200, { issuer, authorization_endpoint: `${issuer}/auth`, token_endpoint: `${issuer}/token`, jwks_uri: `${issuer}/jwks` });
      if (req.url === '/jwks') return json(200, { keys: [{ ...rsa.publicKey.export({ format: 'jwk' }), kid: 'k1', alg: 'RS256', use: 'sig' }] });
      if (req.url !== '/token' || req.method !== 'POST') return json(404, {});
      if (req.headers.authorization !== `Basic ${Buffer.from(`${CLIENT.id}:${CLIENT.secret}`).toString('base64')}`) return json(401, { error: 'invalid_client' });
      const form = new URLSearchParams(body);
      grants.push(form.get('grant_type')!);
      const now = Math.floor(Date.now() / 1000);
      const base = { iss: issuer, aud: CLIENT.id, sub: 'alice', iat: now, exp: now + 300 };
      if (form.get('grant_type') === 'refresh_token') {
        if (!form.get('refresh_token')?.startsWith('rt-')) return json(400, { error: 'invalid_grant' });
        return json(200, { access_token: `at-${randomBytes(6).toString('hex')}`, refresh_token: `rt-${randomBytes(6).toString('hex')}`, expires_in: 60, id_token: idToken(base) });
      }
      const code = codes.get(form.get('code') ?? '');
      codes.delete(form.get('code') ?? '');
      // PKCE S256 (RFC 7636 4.6): the verifier must hash to the challenge of the authorization request.
      if (!code || code.redirectUri !== form.get('redirect_uri') || b64url(createHash('sha256').update(form.get('code_verifier') ?? '').digest()) !== code.challenge) return json(400, { error: 'invalid_grant' });
      json(200, { access_token: `at-${randomBytes(6).toString('hex')}`, refresh_token: `rt-${randomBytes(6).toString('hex')}`, expires_in: 60, id_token: idToken({ ...base, nonce: code.nonce, ...idTokenOverrides }) });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  for (const res of held) res.destroy();
  return new Promise<void>((resolve) => server.close(() => resolve()));
});

type Decision = { allowed: boolean; status?: number; headers?: { key: string; value: string }[]; headersToSet?: { key: string; value: string }[]; headersToRemove?: string[]; responseHeaders?: { key: string; value: string }[] };
const headerOf = (d: unknown, key: string) => (d as Decision).headers?.find((h) => h.key === key)?.value;
const setCookies = (list: { key: string; value: string }[] | undefined) => (list ?? []).filter((h) => h.key === 'set-cookie').map((h) => h.value);
const cookieValue = (line: string) => line.slice(line.indexOf('=') + 1, line.indexOf(';'));

/** The provider's side of the authorization request: checks it and answers the callback URL's query with a fresh code. */
function authorizeAt(location: string): { state: string; code: string; nonce: string } {
  const url = new URL(location);
  expect(url.origin + url.pathname).toBe(`${issuer}/auth`);
  const p = Object.fromEntries(url.searchParams);
  expect(p).toMatchObject({ response_type: 'code', client_id: CLIENT.id, redirect_uri: `${APP}/oidc/callback`, code_challenge_method: 'S256', scope: 'openid email' });
  const code = b64url(randomBytes(16));
  codes.set(code, { nonce: p.nonce!, challenge: p.code_challenge!, redirectUri: p.redirect_uri! });
  return { state: p.state!, code, nonce: p.nonce! };
}

describe.each(TEST_MODES)('OidcLogin (%s)', (mode) => {
  let plugin: PluginHarness | undefined;
  afterEach(async () => {
    await plugin?.close();
    plugin = undefined;
    idTokenOverrides = {};
  });
  const start = (clock?: ReturnType<typeof createFakeClock>) =>
    startPlugin(mode, {
      entry,
      name,
      ...(clock ? { clock } : {}),
      config: { Issuer: issuer, ClientId: CLIENT.id, AppUrl: APP, Scopes: ['openid', 'email'] },
      secrets: { ClientSecret: CLIENT.secret, CookieSecret: 'a cookie secret of at least 32 characters' },
      egress: [issuer],
    });

  /** From a navigation to `path` without a session to the callback's answer. */
  async function login(p: PluginHarness, path = '/orders?page=2') {
    const first = await p.authorize({ path, headers: { accept: 'text/html' } });
    expectDenied(first, 302);
    const loginCookie = setCookies((first as Decision).headers)[0]!;
    const { state, code } = authorizeAt(headerOf(first, 'location')!);
    const cookie = `__gh_session_login=${cookieValue(loginCookie)}`;
    const callbackPath = `/oidc/callback?code=${code}&state=${state}`;
    const callback = await p.authorize({ path: callbackPath, headers: { cookie } });
    return { first, loginCookie, state, code, cookie, callbackPath, callback };
  }

  it('a call that timed out waiting for discovery leaves nothing that hangs the next one (a host fetch whose call ended never settles)', async () => {
    hangDiscovery = 1;
    plugin = await startPlugin(mode, {
      entry,
      name,
      wallTimeoutMs: 300,
      config: { Issuer: issuer, ClientId: CLIENT.id, AppUrl: APP, Scopes: ['openid', 'email'] },
      secrets: { ClientSecret: CLIENT.secret, CookieSecret: 'a cookie secret of at least 32 characters' },
      egress: [issuer],
    });
    // The provider does not answer the first discovery request: that call ends at its wall deadline.
    expect((await plugin.authorize({ path: '/orders', headers: { accept: 'text/html' } })).allowed).toBe(false);
    expect(hangDiscovery).toBe(0);
    // The next call fetches discovery again instead of awaiting the first call's dead fetch.
    const next = await plugin.authorize({ path: '/orders', headers: { accept: 'text/html' } });
    expectDenied(next, 302);
    expect(headerOf(next, 'location')).toMatch(new RegExp(`^${issuer}/auth\\?`));
  });

  it('logs in: 302 with state, nonce and a PKCE S256 challenge; the callback exchanges the code and sets a sealed session cookie; the session reaches the upstream', async () => {
    plugin = await start();
    const { first, loginCookie, callback } = await login(plugin);
    expect(headerOf(first, 'cache-control')).toBe('no-store');
    expect(loginCookie).toMatch(/^__gh_session_login=[A-Za-z0-9_-]+; Path=\/oidc\/callback; Max-Age=600; HttpOnly; SameSite=Lax; Secure$/);
    expectDenied(callback, 302);
    expect(headerOf(callback, 'location')).toBe(`${APP}/orders?page=2`);
    const [session, cleared] = setCookies((callback as Decision).headers);
    expect(session).toMatch(/^__gh_session=[A-Za-z0-9_-]+; Path=\/; Max-Age=28800; HttpOnly; SameSite=Lax; Secure$/);
    expect(cleared).toMatch(/^__gh_session_login=; Path=\/oidc\/callback; Max-Age=0/);
    // Nothing of the tokens or the user in the cookie: it is a sealed random session id.
    expect(Buffer.from(cookieValue(session!), 'base64url').toString('latin1')).not.toMatch(/alice|at-|rt-|eyJ/);
    const allowed = await plugin.authorize({ path: '/orders', headers: { cookie: `theme=dark; __gh_session=${cookieValue(session!)}` } });
    expectAllowed(allowed, { 'x-user-sub': 'alice' });
    const set = Object.fromEntries((allowed as Decision).headersToSet!.map((h) => [h.key, h.value]));
    expect(set.authorization).toMatch(/^Bearer at-/);
    // The upstream gets the client's other cookies, not the session.
    expect(set.cookie).toBe('theme=dark');
    expect(plugin.failures).toEqual([]);
  });

  it('refuses a replayed state, a callback without this browser\'s login cookie, and a code the provider refuses', async () => {
    plugin = await start();
    const { cookie, callbackPath, state } = await login(plugin);
    expectDenied(await plugin.authorize({ path: callbackPath, headers: { cookie } }), 403);
    // Another browser (no login cookie, or another login's) cannot use a callback URL it saw.
    const other = await login(plugin);
    expectDenied(await plugin.authorize({ path: other.callbackPath }), 403);
    expectDenied(await plugin.authorize({ path: other.callbackPath, headers: { cookie } }), 403);
    expect(state).not.toBe(other.state);
    // A forged code: the provider refuses it.
    const third = await plugin.authorize({ path: '/' });
    const { state: s3 } = authorizeAt(headerOf(third, 'location')!);
    expectDenied(await plugin.authorize({ path: `/oidc/callback?code=forged&state=${s3}`, headers: { cookie: `__gh_session_login=${cookieValue(setCookies((third as Decision).headers)[0]!)}` } }), 403);
    expect(plugin.logs.map((l) => l.message)).toEqual(expect.arrayContaining(["login callback refused: the state is not this browser's", 'login callback refused: the state was used or has expired', 'the token endpoint refused']));
  });

  it('refuses an ID token with a wrong nonce or from another issuer', async () => {
    plugin = await start();
    idTokenOverrides = { nonce: 'not-the-one-sent' };
    expectDenied((await login(plugin)).callback, 403);
    idTokenOverrides = { iss: 'https://evil.test' };
    expectDenied((await login(plugin)).callback, 403);
    expect(plugin.logs.map((l) => l.message)).toEqual(expect.arrayContaining(['ID token refused: wrong nonce', 'ID token refused: wrong issuer']));
  });

  it('treats a tampered, swapped, oversized or foreign cookie as no session (a new login), never an error', async () => {
    plugin = await start();
    const { callback, loginCookie } = await login(plugin);
    const sealed = cookieValue(setCookies((callback as Decision).headers)[0]!);
    const flipped = sealed.slice(0, 20) + (sealed[20] === 'A' ? 'B' : 'A') + sealed.slice(21);
    for (const cookie of [
      `__gh_session=${flipped}`,
      // The login cookie's sealed state is not a session id (the cookie name is bound in as AAD).
      `__gh_session=${cookieValue(loginCookie)}`,
      `__gh_session=${'A'.repeat(600)}`,
      `__gh_session=${sealed.slice(0, -4)}`,
      `__gh_session=%%%not-base64%%%`,
      `pad=${'x'.repeat(20_000)}; __gh_session=${sealed}`,
    ]) {
      const decision = await plugin.authorize({ path: '/x', headers: { cookie } });
      expectDenied(decision, 302);
      expect(headerOf(decision, 'location')).toMatch(new RegExp(`^${issuer}/auth\\?`));
    }
    // Not a navigation: 401, no redirect.
    expectDenied(await plugin.authorize({ method: 'POST', path: '/x', headers: { cookie: `__gh_session=${flipped}` } }), 401);
    expect(plugin.failures).toEqual([]);
  });

  it('returns only to local paths: open-redirect attempts through return_to or the original URL come back to /', async () => {
    plugin = await start();
    for (const attempt of ['https://evil.test/', '//evil.test/', '/\\evil.test', '/%09/evil.test', '/\t/evil.test', 'javascript:alert(1)', '/ok/../..//evil']) {
      const first = await plugin.authorize({ path: `/oidc/login?return_to=${encodeURIComponent(attempt)}` });
      const { state, code } = authorizeAt(headerOf(first, 'location')!);
      const callback = await plugin.authorize({ path: `/oidc/callback?code=${code}&state=${state}`, headers: { cookie: `__gh_session_login=${cookieValue(setCookies((first as Decision).headers)[0]!)}` } });
      const location = headerOf(callback, 'location')!;
      expect(new URL(location).origin, attempt).toBe(APP);
      expect(location, attempt).toBe(attempt === '/%09/evil.test' || attempt === '/ok/../..//evil' ? `${APP}${attempt}` : `${APP}/`);
    }
    expect(headerOf((await login(plugin, '//evil.test/x')).callback, 'location')).toBe(`${APP}/`);
  });

  it('refreshes an expired access token once (fake clock), sets a fresh session cookie on the client response, and logs out for good', async () => {
    const clock = createFakeClock(Date.now());
    plugin = await start(clock);
    const { callback } = await login(plugin);
    const cookie = `__gh_session=${cookieValue(setCookies((callback as Decision).headers)[0]!)}`;
    const before = (await plugin.authorize({ path: '/a', headers: { cookie } })) as Decision;
    const token = before.headersToSet!.find((h) => h.key === 'authorization')!.value;
    expect(before.responseHeaders ?? []).toEqual([]);
    const refreshes = grants.filter((g) => g === 'refresh_token').length;
    await clock.advance(61_000);
    const decided = await plugin.authorize({ path: '/a', headers: { cookie } });
    expectAllowed(decided, { 'x-user-sub': 'alice' });
    const after = decided as Decision;
    expect(after.headersToSet!.find((h) => h.key === 'authorization')!.value).not.toBe(token);
    expect(setCookies(after.responseHeaders)[0]).toMatch(/^__gh_session=[A-Za-z0-9_-]+; Path=\/; Max-Age=28800/);
    expect(grants.filter((g) => g === 'refresh_token').length).toBe(refreshes + 1);
    // Fresh again: no second refresh.
    expect(((await plugin.authorize({ path: '/a', headers: { cookie } })) as Decision).responseHeaders ?? []).toEqual([]);
    const out = await plugin.authorize({ path: '/oidc/logout', headers: { cookie } });
    expectDenied(out, 302);
    expect(headerOf(out, 'location')).toBe(`${APP}/`);
    expect(setCookies((out as Decision).headers)).toEqual(['__gh_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax; Secure']);
    // The cookie replayed after logout finds no session.
    expectDenied(await plugin.authorize({ path: '/a', headers: { cookie } }), 302);
  });

  it('refuses a config it cannot honour', async () => {
    const base = { Issuer: issuer, ClientId: CLIENT.id, AppUrl: APP };
    const secrets = { ClientSecret: 'x', CookieSecret: 'a cookie secret of at least 32 characters' };
    await expect(startPlugin(mode, { entry, name, config: { ...base, AppUrl: 'app.test' }, secrets })).rejects.toThrow(/AppUrl/);
    await expect(startPlugin(mode, { entry, name, config: { ...base, CallbackPath: '//evil' }, secrets })).rejects.toThrow(/CallbackPath/);
    await expect(startPlugin(mode, { entry, name, config: { ...base, Scopes: ['email'] }, secrets })).rejects.toThrow(/openid/);
    await expect(startPlugin(mode, { entry, name, config: base, secrets: { ...secrets, CookieSecret: 'short' } })).rejects.toThrow(/32 characters/);
  });
});

describe('localPath', () => {
  it('keeps local paths and turns everything a browser could read as another origin into /', () => {
    expect(localPath('/a/b?c=d#e')).toBe('/a/b?c=d#e');
    for (const value of [null, '', 'a', 'https://x', '//x', '/\\x', '/\tx', '/a\nb', '/a\\b', `/${'a'.repeat(3000)}`]) expect(localPath(value), String(value)).toBe('/');
  });
});
