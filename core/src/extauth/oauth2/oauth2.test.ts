import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { compileAccessTokenValidation, compileOidc } from './compile.ts';
import { readCookie, Sealer, setCookie } from './cookies.ts';
import { CookieSessionStore } from './sessions.ts';
import { domainMatches } from './oidc-step.ts';

const secrets = (data: Record<string, Record<string, string>>) => (ref: { name: string; namespace: string }) => data[`${ref.namespace}/${ref.name}`];
const base = { appUrl: 'https://app.test/', callbackPath: '/callback', clientId: 'gloo', issuerUrl: 'https://idp.test/', clientSecretRef: { name: 'oauth' } };
const withSecret = secrets({ 'ns/oauth': { 'client-secret': 'shh' } });

describe('compileOidc', () => {
  it("applies Gloo's defaults: 30-day secure HttpOnly cookie on /, no refresh for cookie sessions, a key derived from the client secret", () => {
    const { compiled, problems } = compileOidc({ oidcAuthorizationCode: base }, 'ns', withSecret);
    expect(problems).toEqual([]);
    expect(compiled).toMatchObject({ redirectUri: 'https://app.test/callback', callbackPath: '/callback', clientSecret: 'shh', scopes: ['openid'], allowRefreshing: false, keySource: 'derived', sessionCookie: '__session' });
    expect(compiled!.cookie).toEqual({ maxAge: 2_592_000, secure: true, httpOnly: true, path: '/', domain: undefined, sameSite: undefined });
    // Same inputs, same key: replicas share sessions.
    expect(compileOidc({ oidcAuthorizationCode: base }, 'ns', withSecret).compiled!.key.equals(compiled!.key)).toBe(true);
  });

  it('reads proto (snake_case) names and the legacy "clientSecret: <value>" Secret form', () => {
    const { compiled, problems } = compileOidc({ oidc_authorization_code: { app_url: 'https://app.test', callback_path: '/cb', client_id: 'gloo', issuer_url: 'https://idp.test', client_secret_ref: { name: 'oauth' }, session: { cookie_options: { not_secure: true, max_age: 0, path: '' } } } }, 'ns', secrets({ 'ns/oauth': { 'client-secret': 'clientSecret: secretvalue\n' } }));
    expect(problems).toEqual([]);
    expect(compiled).toMatchObject({ clientSecret: 'secretvalue', redirectUri: 'https://app.test/cb' });
    expect(compiled!.cookie).toMatchObject({ secure: false, maxAge: 0, path: undefined });
  });

  it('rejects what cannot work, naming the field; warns about what is accepted but not honoured', () => {
    const bad = compileOidc({ oidcAuthorizationCode: { ...base, appUrl: 'app', callbackPath: undefined, clientSecretRef: undefined } }, 'ns', withSecret).problems;
    expect(bad.filter((p) => p.severity === 'error').map((p) => p.path.join('.'))).toEqual(['oidcAuthorizationCode.appUrl', 'oidcAuthorizationCode.callbackPath', 'oidcAuthorizationCode.clientSecretRef']);
    const key = compileOidc({ oidcAuthorizationCode: { ...base, session: { cipherConfig: { keyRef: { name: 'key' } } } } }, 'ns', secrets({ 'ns/oauth': { 'client-secret': 'x' }, 'ns/key': { key: 'short' } })).problems;
    expect(key[0]).toMatchObject({ severity: 'error', path: ['oidcAuthorizationCode', 'session', 'cipherConfig', 'keyRef'] });
    const warned = compileOidc({ oidcAuthorizationCode: { ...base, frontChannelLogout: { path: '/fcl' }, dynamicMetadataFromClaims: { a: 'b' }, parseCallbackPathAsRegex: true, endSessionProperties: { methodType: 'PostMethod' } } }, 'ns', withSecret).problems;
    // The fields not honoured at all are the schema's Ignored ones (warned by the store; config/honoured-fields.test.ts); only a value not honoured is warned here.
    expect(warned.every((p) => p.severity === 'warning' && p.message.startsWith('accepted but not honoured'))).toBe(true);
    expect(warned.map((p) => p.path.at(-1))).toEqual(['methodType']);
    const missingKey = compileOidc({ oidcAuthorizationCode: base }, 'ns', secrets({ 'ns/oauth': { password: 'x' } })).problems;
    expect(missingKey[0]!.message).toContain('has no key "client-secret"');
  });
});

describe('compileAccessTokenValidation', () => {
  it('needs exactly one validation and a usable inline JWKS', () => {
    expect(compileAccessTokenValidation({ accessTokenValidation: {} }, 'ns', withSecret).problems[0]!.message).toContain('exactly one');
    expect(compileAccessTokenValidation({ accessTokenValidation: { jwt: { localJwks: { inlineString: '{"nope":1}' } } } }, 'ns', withSecret).problems[0]!.path).toEqual(['accessTokenValidation', 'jwt', 'localJwks', 'inlineString']);
    const { compiled } = compileAccessTokenValidation({ accessTokenValidation: { introspectionUrl: 'https://idp.test/introspect', cacheTimeout: '0s' } }, 'ns', withSecret);
    expect(compiled).toMatchObject({ mode: 'introspection', cacheMs: 0 });
  });
});

describe('sealed cookies', () => {
  const sealer = new Sealer(Buffer.alloc(32, 1));
  it('opens only what it sealed, for the same purpose, unaltered', () => {
    const sealed = sealer.seal({ a: 'token' }, '__session');
    expect(sealer.open(sealed, '__session')).toEqual({ a: 'token' });
    expect(sealer.open(sealed, '__other')).toBeUndefined();
    expect(new Sealer(Buffer.alloc(32, 2)).open(sealed, '__session')).toBeUndefined();
    const flipped = sealed.slice(0, 30) + (sealed[30] === 'A' ? 'B' : 'A') + sealed.slice(31);
    expect(sealer.open(flipped, '__session')).toBeUndefined();
    expect(sealer.open(sealed.slice(0, -4), '__session')).toBeUndefined();
    expect(sealer.open('A'.repeat(20_000), '__session')).toBeUndefined();
    expect(sealer.open('not base64!', '__session')).toBeUndefined();
  });

  it('reads one cookie among many and writes the attributes asked for', () => {
    expect(readCookie('a=1; __session=xyz; b="q"', '__session')).toBe('xyz');
    expect(readCookie('a=1; b="q"', 'b')).toBe('q');
    expect(readCookie('x__session=1', '__session')).toBeUndefined();
    expect(setCookie('s', 'v', { maxAge: 60, secure: true, httpOnly: true, path: '/', domain: 'example.com', sameSite: 'Lax' })).toBe('s=v; Max-Age=60; Path=/; Domain=example.com; Secure; HttpOnly; SameSite=Lax');
  });

  it('splits a large session over chunk cookies and reads it back; a missing chunk is no session', async () => {
    const attrs = { maxAge: 0, secure: true, httpOnly: true, path: '/', domain: undefined, sameSite: undefined } as const;
    const store = new CookieSessionStore('__session', sealer, attrs);
    const random = randomBytes(6000).toString('base64');
    const session = { id: random, at: 'at', exp: Date.now() + 60_000, iat: Date.now() };
    const cookies = await store.save(session, undefined, undefined);
    expect(cookies.length).toBeGreaterThan(1);
    const header = cookies.map((c) => c.split(';')[0]).join('; ');
    expect((await store.load(header))!.session).toEqual(session);
    expect(await store.load(header.split('; ').slice(0, -1).join('; '))).toBeUndefined();
  });
});

it('domain-matches hosts as RFC 6265 does', () => {
  expect(domainMatches('app.example.com:8080', 'example.com')).toBe(true);
  expect(domainMatches('example.com', '.example.com')).toBe(true);
  expect(domainMatches('badexample.com', 'example.com')).toBe(false);
});
