import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckRequest } from '../step.ts';
import { compileOidc } from './compile.ts';
import { Sealer } from './cookies.ts';
import { OidcStep } from './oidc-step.ts';
import { ProviderHttp } from './provider-http.ts';
import { CookieSessionStore } from './sessions.ts';

const quiet = { info() {}, warn() {}, error() {}, debug() {} } as never;
const request = (path: string, headers: Record<string, string> = {}): CheckRequest => ({ attributes: { request: { http: { method: 'GET', path, host: 'app.test', scheme: 'https', headers } }, context_extensions: {} } });

describe('OidcStep (in-process discovery server)', () => {
  let server: Server;
  let issuer: string;
  beforeAll(async () => {
    server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer, authorization_endpoint: `${issuer}/auth`, token_endpoint: `${issuer}/token`, jwks_uri: `${issuer}/jwks` })));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  function step(failOnRedirect = false) {
    const { compiled } = compileOidc({ oidcAuthorizationCode: { appUrl: 'https://app.test/', callbackPath: '/callback', logoutPath: '/logout', clientId: 'c', issuerUrl: issuer, clientSecretRef: { name: 's' } } }, 'ns', () => ({ 'client-secret': 'x' }));
    const sealer = new Sealer(compiled!.key);
    return { sealer, compiled: compiled!, step: new OidcStep(compiled!, { name: 'oidc', logger: quiet, http: new ProviderHttp({ timeoutMs: 500 }), store: new CookieSessionStore('__session', sealer, compiled!.cookie), failOnRedirect }) };
  }

  it('returns after login only to plain paths on appUrl: scheme-relative, backslashed, absolute and control-character targets become appUrl', async () => {
    const { step: s, sealer, compiled } = step();
    const returned = async (path: string) => {
      const d = await s.authorize(request(path));
      if (d.allowed) throw new Error('allowed');
      expect(d.status).toBe(302);
      const cookie = d.headers.find((h) => h.key === 'set-cookie')!.value.split(';')[0]!;
      const [name, value] = [cookie.slice(0, cookie.indexOf('=')), cookie.slice(cookie.indexOf('=') + 1)];
      return (sealer.open(value, name) as { u: string }).u;
    };
    expect(await returned('/orders?x=1')).toBe('/orders?x=1');
    for (const hostile of ['//evil.test/x', '/\\evil.test', 'https://evil.test/', '/a\r\nb', `/${'a'.repeat(3000)}`]) expect(await returned(hostile)).toBe('');
    expect(compiled.appUrl).toBe('https://app.test/');
    await s.close();
  });

  it('answers 401 instead of a redirect with the AuthConfig failOnRedirect', async () => {
    const { step: s } = step(true);
    expect(await s.authorize(request('/x'))).toMatchObject({ allowed: false, status: 401 });
    await s.close();
  });

  it('logout without a session still clears the cookie and goes to afterLogoutUrl (no end_session_endpoint)', async () => {
    const { step: s } = step();
    const d = await s.authorize(request('/logout', { cookie: '__session=garbage' }));
    expect(d).toMatchObject({ allowed: false, status: 302 });
    if (d.allowed) return;
    expect(d.headers.find((h) => h.key === 'location')!.value).toBe('https://app.test/');
    expect(d.headers.find((h) => h.key === 'set-cookie')!.value).toMatch(/^__session=; Max-Age=0/);
    await s.close();
  });
});
