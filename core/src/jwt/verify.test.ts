import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JwksServer, nowS, rsaKey, token } from '../../../test/jwt/support.ts';
import { compileProvider } from './provider.ts';
import { JwtStatus, verifyToken } from './verify.ts';

describe('verified-token cache', () => {
  const server = new JwksServer();
  let url: string;
  beforeAll(async () => {
    url = await server.start();
  });
  afterAll(() => server.close());

  it('a cached token is still checked for expiry', async () => {
    const key = rsaKey('k');
    const provider = compileProvider('p', { issuer: 'solo.io', jwks: { local: { key: JSON.stringify({ keys: [key.jwk] }) } } });
    const t = await token(key, { exp: nowS() + 100 });
    expect(await verifyToken(t, provider)).toMatchObject({ ok: true });
    expect(provider.verified.size).toBe(1);
    expect(await verifyToken(t, provider)).toMatchObject({ ok: true, payload: { sub: 'alice' } });
    expect(await verifyToken(t, provider, nowS() + 1000)).toEqual({ ok: false, status: JwtStatus.JwtExpired });
  });

  it('a token cached under a key the issuer has since removed no longer verifies once the JWKS is refetched', async () => {
    const old = rsaKey('old');
    server.keys = [old];
    const provider = compileProvider('p', { issuer: 'solo.io', jwks: { remote: { url: `${url}?revoke`, cacheDuration: '1ms' } } });
    const t = await token(old);
    expect(await verifyToken(t, provider)).toMatchObject({ ok: true });
    server.keys = [rsaKey('new')];
    await expect.poll(async () => (await verifyToken(t, provider)).ok).toBe(false);
    expect(await verifyToken(t, provider)).toEqual({ ok: false, status: JwtStatus.JwksKidAlgMismatch });
  });
});
