import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createFakeClock, expectAllowed, expectDenied, startPlugin, TEST_MODES, type FakeClock, type PluginHarness } from '@gatehouse/plugin-sdk/testkit';

// The Jwt plugin's JWKS life cycle and claim handling, in both test modes, against a real JWKS
// server on 127.0.0.1 (fetched through the step's egress) with the test kit's fake clock:
// rotation by kid, cache expiry, the minimum refresh interval under a flood of unknown kids,
// ClaimsToHeaders, and exp/nbf/iss/aud with clock skew.

const entry = new URL('./index.ts', import.meta.url);
const b64url = (data: string) => Buffer.from(data).toString('base64url');
const rsaKey = () => generateKeyPairSync('rsa', { modulusLength: 2048 });
const publicJwk = (key: KeyObject, kid: string) => ({ ...key.export({ format: 'jwk' }), kid, use: 'sig' });
const k1 = rsaKey();
const k2 = rsaKey();

/** An RS256 token signed with `key`, its header naming `kid`. */
function rs256(kid: string, claims: object, key: KeyObject): string {
  const input = `${b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid }))}.${b64url(JSON.stringify(claims))}`;
  return `${input}.${sign('sha256', Buffer.from(input), key).toString('base64url')}`;
}
const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
const reason = (decision: unknown) => /error_description=\\?"([^"\\]*)/.exec(JSON.stringify(decision))?.[1];

/** The JWKS server: serves `keys` (changed by the tests), counts fetches, can be made to fail. */
let server: Server;
let base: string;
let keys: object[] = [];
let fetches = 0;
let failing = false;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url !== '/jwks') return res.writeHead(404).end();
    fetches++;
    if (failing) return res.writeHead(503).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe.each(TEST_MODES)('Jwt JWKS refresh and claims (%s)', (mode) => {
  let plugin: PluginHarness | undefined;
  let clock: FakeClock;
  /** Claims valid at the fake clock's time. */
  const claims = (extra: object = {}) => {
    const now = Math.floor(clock.now() / 1000);
    return { sub: 'svc-1', iss: 'https://idp.test', aud: 'api', iat: now, exp: now + 300, ...extra };
  };
  const start = async (config: object = {}) => {
    plugin = await startPlugin(mode, {
      entry,
      name: 'Jwt',
      clock,
      egress: [base],
      config: { Issuer: 'https://idp.test', Audience: 'api', JwksUrl: `${base}/jwks`, Algorithms: ['RS256'], ClockSkewSeconds: 0, ...config },
    });
    return plugin;
  };

  beforeEach(() => {
    clock = createFakeClock();
    keys = [publicJwk(k1.publicKey, 'k1')];
    fetches = 0;
    failing = false;
  });
  afterEach(async () => {
    await plugin?.close();
    plugin = undefined;
  });

  it('rotation: a token naming a new kid makes the plugin fetch the JWKS again, once the minimum interval has passed', async () => {
    const p = await start({ JwksMinRefreshSeconds: 30 });
    expect(fetches).toBe(1);
    expectAllowed(await p.authorize(bearer(rs256('k1', claims(), k1.privateKey))));
    // The issuer rotates: k2 first, k1 still published for tokens already issued.
    keys = [publicJwk(k2.publicKey, 'k2'), publicJwk(k1.publicKey, 'k1')];
    const fresh = () => bearer(rs256('k2', claims(), k2.privateKey));
    // Within 30 s of the Start fetch: no fetch, the kid stays unknown.
    await clock.advance(10_000);
    const early = await p.authorize(fresh());
    expectDenied(early, 401);
    expect(reason(early)).toBe('unknown key');
    expect(fetches).toBe(1);
    await clock.advance(21_000);
    expectAllowed(await p.authorize(fresh()), { 'x-user-id': 'svc-1' });
    expect(fetches).toBe(2);
    // Both keys now held: no further fetch for either kid.
    expectAllowed(await p.authorize(bearer(rs256('k1', claims(), k1.privateKey))));
    expectAllowed(await p.authorize(fresh()));
    expect(fetches).toBe(2);
    expect(p.logs.some((l) => l.message === 'JWKS fetched' && JSON.stringify(l.fields).includes('"k2"'))).toBe(true);
  });

  it('a kid the issuer never published is denied after one fetch, and a key signed with the wrong private key is not accepted under a known kid', async () => {
    const p = await start({ JwksMinRefreshSeconds: 0 });
    const unknown = await p.authorize(bearer(rs256('nope', claims(), k1.privateKey)));
    expectDenied(unknown, 401);
    expect(reason(unknown)).toBe('unknown key');
    expect(fetches).toBe(2);
    const forged = await p.authorize(bearer(rs256('k1', claims(), k2.privateKey)));
    expectDenied(forged, 401);
    expect(reason(forged)).toBe('bad signature');
  });

  it('cache expiry: the JWKS is fetched again once older than JwksCacheSeconds, retired keys go, a failed fetch keeps the keys held', async () => {
    const p = await start({ JwksCacheSeconds: 60, JwksMinRefreshSeconds: 5 });
    expect(fetches).toBe(1);
    await clock.advance(59_000);
    expectAllowed(await p.authorize(bearer(rs256('k1', claims(), k1.privateKey))));
    expect(fetches).toBe(1);
    // Expired, and the issuer is down: one try, the held keys still verify.
    failing = true;
    await clock.advance(2_000);
    expectAllowed(await p.authorize(bearer(rs256('k1', claims(), k1.privateKey))));
    expect(fetches).toBe(2);
    expect(p.logs.some((l) => l.level === 'warn' && l.message.startsWith('JWKS fetch failed'))).toBe(true);
    // Still expired but within the minimum interval of that try: no new fetch per request.
    expectAllowed(await p.authorize(bearer(rs256('k1', claims(), k1.privateKey))));
    expect(fetches).toBe(2);
    // The issuer is back and has retired k1: the next fetch drops it.
    failing = false;
    keys = [publicJwk(k2.publicKey, 'k2')];
    await clock.advance(5_000);
    const retired = await p.authorize(bearer(rs256('k1', claims(), k1.privateKey)));
    expectDenied(retired, 401);
    expect(reason(retired)).toBe('unknown key');
    expect(fetches).toBe(3);
    expectAllowed(await p.authorize(bearer(rs256('k2', claims(), k2.privateKey))));
    expect(fetches).toBe(3);
  });

  it('a flood of tokens with made-up kids costs at most one JWKS fetch per JwksMinRefreshSeconds', async () => {
    const p = await start({ JwksMinRefreshSeconds: 30 });
    await clock.advance(31_000);
    const flood = Array.from({ length: 60 }, (_, i) => p.authorize(bearer(rs256(`made-up-${i}`, claims(), k1.privateKey))));
    for (const decision of await Promise.all(flood)) expectDenied(decision, 401);
    expect(fetches).toBe(2);
    for (let i = 0; i < 40; i++) expectDenied(await p.authorize(bearer(rs256(`again-${i}`, claims(), k1.privateKey))), 401);
    expect(fetches).toBe(2);
    // Valid tokens keep working throughout.
    expectAllowed(await p.authorize(bearer(rs256('k1', claims(), k1.privateKey))));
    await clock.advance(30_000);
    for (let i = 0; i < 40; i++) expectDenied(await p.authorize(bearer(rs256(`later-${i}`, claims(), k1.privateKey))), 401);
    expect(fetches).toBe(3);
  });

  it('ClaimsToHeaders: plain, nested (dotted), array, object, number and non-ASCII claims; an absent claim removes the header', async () => {
    const p = await start({
      ClaimsToHeaders: {
        email: 'x-user-email',
        'realm_access.roles': 'x-roles',
        'tenant.id': 'x-tenant',
        tenant: 'x-tenant-json',
        scope: 'x-scope',
        level: 'x-level',
        name: 'x-name',
        'dotted.name': 'x-dotted',
        missing: 'x-missing',
        'tenant.missing': 'x-missing-nested',
      },
    });
    const decision = await p.authorize({
      headers: {
        authorization: `Bearer ${rs256(
          'k1',
          claims({ email: 'a@b.test', realm_access: { roles: ['admin', 'ops'] }, tenant: { id: 't-7', plan: 'gold' }, scope: 'read write', level: 3, name: 'Zoë', 'dotted.name': 'literal' }),
          k1.privateKey,
        )}`,
        'x-missing': 'client-sent',
        'x-missing-nested': 'client-sent',
      },
    });
    expectAllowed(decision, {
      'x-user-email': 'a@b.test',
      'x-roles': 'admin,ops',
      'x-tenant': 't-7',
      'x-tenant-json': '{"id":"t-7","plan":"gold"}',
      'x-scope': 'read write',
      'x-level': '3',
      'x-name': 'Zo%C3%AB',
      'x-dotted': 'literal',
      'x-user-id': 'svc-1',
    });
    expect(decision.headersToRemove.sort()).toEqual(['x-missing', 'x-missing-nested']);
    // A token without any of the claims: every configured header is removed, none set.
    const bare = await p.authorize(bearer(rs256('k1', claims(), k1.privateKey)));
    expectAllowed(bare);
    expect(bare.headersToSet.map((h) => h.key)).toEqual(['x-user-id']);
    expect(bare.headersToRemove).toHaveLength(10);
  });

  it('ClaimsToHeaders must name headers: a bad header name fails the step at start', async () => {
    await expect(start({ ClaimsToHeaders: { email: 'bad header' } })).rejects.toThrow(/ClaimsToHeaders\.email: expected a header name/);
  });

  it('credentials that are not a JWS are an invalid_token; no Bearer credentials get the plain challenge', async () => {
    const p = await start();
    for (const garbage of ['not-a-jwt', 'a.b', 'e30.e30.sig.extra', 'e30.e30e30.sig']) {
      const decision = await p.authorize(bearer(garbage));
      expectDenied(decision, 401);
      expect(reason(decision), garbage).toBe('malformed token');
    }
    for (const headers of [{} as Record<string, string>, { authorization: 'Basic YTpi' }, { authorization: 'Bearer ' }]) {
      const decision = await p.authorize({ headers });
      expectDenied(decision, 401);
      expect(decision.headers).toEqual([{ key: 'www-authenticate', value: 'Bearer' }]);
    }
  });

  it('exp, nbf, iss and aud with ClockSkewSeconds', async () => {
    const p = await start({ ClockSkewSeconds: 30 });
    const now = Math.floor(clock.now() / 1000);
    const check = async (extra: object) => p.authorize(bearer(rs256('k1', claims(extra), k1.privateKey)));
    expectAllowed(await check({ exp: now - 20 }));
    expect(reason(await check({ exp: now - 40 }))).toBe('token expired');
    expectAllowed(await check({ nbf: now + 20 }));
    expect(reason(await check({ nbf: now + 40 }))).toBe('token not yet valid');
    expect(reason(await check({ exp: String(now + 300) }))).toBe('token expired');
    expect(reason(await check({ iss: 'https://idp.test/' }))).toBe('wrong issuer');
    expect(reason(await check({ iss: undefined }))).toBe('wrong issuer');
    expectAllowed(await check({ aud: ['other', 'api'] }));
    expect(reason(await check({ aud: ['other'] }))).toBe('wrong audience');
    expect(reason(await check({ aud: 'apis' }))).toBe('wrong audience');
    // The fake clock moves: a token valid now expires 30 s (the skew) after its exp.
    const token = rs256('k1', claims({ exp: now + 10 }), k1.privateKey);
    await clock.advance(39_000);
    expectAllowed(await p.authorize(bearer(token)));
    await clock.advance(2_000);
    const expired = await p.authorize(bearer(token));
    expectDenied(expired, 401);
    expect(JSON.stringify(expired.headers)).toContain('Bearer error=\\"invalid_token\\", error_description=\\"token expired\\"');
  });
});
