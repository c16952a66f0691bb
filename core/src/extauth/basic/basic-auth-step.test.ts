import { describe, expect, it, test } from 'vitest';
import type { BasicAuthSpec } from '../../config/schema/auth-config.ts';
import { basic, checkRequest, htpasswdApr1, opensslSha1 } from '../../../../test/extauth/support.ts';
import { applyAllowed } from '../decision.ts';
import type { AuthDecision, CheckRequest } from '../step.ts';
import { BasicAuthStep, FailureLimiter, MAX_CREDENTIALS_HEADER, compileBasicAuth } from './basic-auth-step.ts';

function step(spec: BasicAuthSpec): BasicAuthStep {
  const { compiled, problems } = compileBasicAuth(spec);
  if (!compiled) throw new Error(JSON.stringify(problems));
  return new BasicAuthStep(compiled, { name: 'basic' });
}

const check = (s: BasicAuthStep, headers: Record<string, string>) => s.authorize(checkRequest('default.basic', headers));

/** Every detail of SPEC 5.1's 401. */
function expectUnauthorized(decision: AuthDecision, realm: string): void {
  expect(decision).toEqual({
    allowed: false,
    status: 401,
    headers: [
      { key: 'www-authenticate', value: `Basic realm="${realm}"` },
      { key: 'content-length', value: '0' },
    ],
    body: '',
  });
}

const alice = htpasswdApr1('alice', 'wonderland');
const colon = htpasswdApr1('carol', 'pa:ss:word');
const legacy = step({ realm: 'gatehouse', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword }, carol: { salt: colon.salt, hashedPassword: colon.hashedPassword } } } });

describe('basicAuth, legacy form (apr.users)', () => {
  it('allows the right password and sets x-user-id to <realm>;<username>', async () => {
    expect(await check(legacy, { authorization: basic('alice', 'wonderland') })).toEqual({
      allowed: true,
      headersToSet: [{ key: 'x-user-id', value: 'gatehouse;alice', append: false }],
      headersToRemove: [],
    });
  });

  it('accepts the scheme in any case and passwords containing ":"', async () => {
    expect((await check(legacy, { authorization: basic('alice', 'wonderland', 'bAsIc') })).allowed).toBe(true);
    expect((await check(legacy, { authorization: basic('alice', 'wonderland', 'BASIC') })).allowed).toBe(true);
    expect(await check(legacy, { authorization: basic('carol', 'pa:ss:word') })).toMatchObject({ allowed: true, headersToSet: [{ value: 'gatehouse;carol' }] });
    expectUnauthorized(await check(legacy, { authorization: basic('carol', 'pa') }), 'gatehouse');
  });

  it('answers 401 with the realm, content-length 0 and an empty body for every kind of failure', async () => {
    expectUnauthorized(await check(legacy, {}), 'gatehouse');
    expectUnauthorized(await check(legacy, { authorization: basic('alice', 'wrong') }), 'gatehouse');
    expectUnauthorized(await check(legacy, { authorization: basic('mallory', 'wonderland') }), 'gatehouse');
    expectUnauthorized(await check(legacy, { authorization: 'Bearer abc.def' }), 'gatehouse');
    expectUnauthorized(await check(legacy, { authorization: 'Basic not*base64' }), 'gatehouse');
    expectUnauthorized(await check(legacy, { authorization: `Basic ${Buffer.from('alice').toString('base64')}` }), 'gatehouse');
  });

  it('ignores Proxy-Authorization (extended form only)', async () => {
    expectUnauthorized(await check(legacy, { 'proxy-authorization': basic('alice', 'wonderland') }), 'gatehouse');
  });

  it('uses an empty realm when none is set', async () => {
    const s = step({ apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } });
    expectUnauthorized(await check(s, { authorization: basic('alice', 'nope') }), '');
    expect(await check(s, { authorization: basic('alice', 'wonderland') })).toMatchObject({ headersToSet: [{ key: 'x-user-id', value: ';alice' }] });
  });

  it('replaces a client-sent x-user-id on the upstream request', async () => {
    const decision = await check(legacy, { authorization: basic('alice', 'wonderland'), 'x-user-id': 'gatehouse;admin' });
    if (!decision.allowed) throw new Error('expected allow');
    expect(applyAllowed({ 'x-user-id': 'gatehouse;admin' }, decision)['x-user-id']).toBe('gatehouse;alice');
  });

  it('caches verified credentials only', async () => {
    const s = step({ apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } });
    await check(s, { authorization: basic('alice', 'wrong') });
    expect(s.cachedCredentials).toBe(0);
    await check(s, { authorization: basic('alice', 'wonderland') });
    await check(s, { authorization: basic('alice', 'wonderland') });
    expect(s.cachedCredentials).toBe(1);
    // Same credentials, different header text: its own entry, still verified.
    expect((await check(s, { authorization: basic('alice', 'wonderland', 'basic') })).allowed).toBe(true);
    expect(s.cachedCredentials).toBe(2);
    await s.close();
    expect(s.cachedCredentials).toBe(0);
  });

  it('keeps the cache bounded', async () => {
    const { compiled } = compileBasicAuth({ apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } });
    const s = new BasicAuthStep(compiled!, { name: 'basic', cacheSize: 2 });
    for (const scheme of ['Basic', 'basic', 'BASIC', 'BaSiC']) await check(s, { authorization: basic('alice', 'wonderland', scheme) });
    expect(s.cachedCredentials).toBe(2);
  });
});

describe('basicAuth, extended form (encryption + userList)', () => {
  const sha1Hex = opensslSha1('s3cret', 'pepper');
  const sha1 = step({ realm: 'r', encryption: { sha1: {} }, userList: { users: { bob: { salt: 'pepper', hashedPassword: sha1Hex } } } });

  it('verifies SHA1 = hex(sha1(password + salt)), the hex in any case', async () => {
    expect(await check(sha1, { authorization: basic('bob', 's3cret') })).toMatchObject({ allowed: true, headersToSet: [{ key: 'x-user-id', value: 'r;bob' }] });
    expectUnauthorized(await check(sha1, { authorization: basic('bob', 'S3cret') }), 'r');
    const upper = step({ encryption: { sha1: {} }, userList: { users: { bob: { salt: 'pepper', hashedPassword: sha1Hex.toUpperCase() } } } });
    expect((await check(upper, { authorization: basic('bob', 's3cret') })).allowed).toBe(true);
  });

  it('verifies APR1 from htpasswd', async () => {
    const apr = step({ encryption: { apr: {} }, userList: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } });
    expect((await check(apr, { authorization: basic('alice', 'wonderland') })).allowed).toBe(true);
    expectUnauthorized(await check(apr, { authorization: basic('alice', 'Wonderland') }), '');
  });

  it('also reads Proxy-Authorization', async () => {
    expect((await check(sha1, { 'proxy-authorization': basic('bob', 's3cret') })).allowed).toBe(true);
    expect((await check(sha1, { authorization: 'Bearer xyz', 'proxy-authorization': basic('bob', 's3cret') })).allowed).toBe(true);
    expectUnauthorized(await check(sha1, { 'proxy-authorization': basic('bob', 'nope') }), 'r');
  });
});

describe('compileBasicAuth', () => {
  it('names the field of a malformed hash', () => {
    expect(compileBasicAuth({ apr: { users: { alice: { salt: 'abc', hashedPassword: '$apr1$abc$BfqKdn9xFDWJPa3kcp/PH0' } } } }).problems).toEqual([
      { path: ['apr', 'users', 'alice', 'hashedPassword'], message: expect.stringContaining('22-character hash part') },
    ]);
    expect(compileBasicAuth({ encryption: { sha1: {} }, userList: { users: { bob: { salt: '', hashedPassword: 'xyz' } } } }).problems).toEqual([
      { path: ['userList', 'users', 'bob', 'hashedPassword'], message: expect.stringContaining('40 hex digits') },
    ]);
  });
});

describe('hostile Basic Auth input (issue 17 findings 9, 24)', () => {
  const user = htpasswdApr1('alice', 'wonderland');
  const build = (options: { maxFailures?: number; failureWindowMs?: number } = {}) => {
    const compiled = compileBasicAuth({ realm: 'r', apr: { users: { alice: { salt: user.salt, hashedPassword: user.hashedPassword } } } });
    if (!compiled.compiled) throw new Error('bad config');
    return new BasicAuthStep(compiled.compiled, { name: 'basic', ...options });
  };
  const from = (address: string, authorization: string): CheckRequest => ({
    attributes: {
      source: { address: { socket_address: { address, port_value: 1 } } },
      request: { http: { method: 'GET', path: '/', host: 'h', scheme: 'http', headers: { authorization } } },
      context_extensions: {},
    },
  });

  test('an oversized Authorization header is a 401 before any decoding or hashing (11.5 KB password)', async () => {
    const step = build({ maxFailures: 1 });
    const huge = `Basic ${Buffer.from(`alice:${'x'.repeat(11_500)}`).toString('base64')}`;
    expect(huge.length).toBeGreaterThan(MAX_CREDENTIALS_HEADER);
    expect((await step.authorize(from('10.0.0.1', huge))).allowed).toBe(false);
    // Not even parsed: valid credentials padded past the bound (the grammar allows trailing
    // blanks) are refused, and the unhashed attempt did not count as a failure.
    const padded = `${basic('alice', 'wonderland')}${' '.repeat(MAX_CREDENTIALS_HEADER)}`;
    expect((await step.authorize(from('10.0.0.1', padded))).allowed).toBe(false);
    expect((await step.authorize(from('10.0.0.1', basic('alice', 'wonderland')))).allowed).toBe(true);
  });

  test('guesses at one user from one source are answered 401 unchecked, even the right password; other users, sources and verified credentials are not locked out', async () => {
    const step = build({ maxFailures: 3, failureWindowMs: 60_000 });
    // Alice logged in from the attacker's address (NAT) before the attack.
    expect((await step.authorize(from('10.0.0.9', basic('alice', 'wonderland')))).allowed).toBe(true);
    for (let i = 0; i < 3; i++) expect((await step.authorize(from('10.0.0.9', basic('alice', `guess${i}`)))).allowed).toBe(false);
    // A fresh guess, right or wrong, from the locked pair is not checked.
    const fresh = `Basic ${Buffer.from('alice:wonderland').toString('base64')}  `;
    expect((await step.authorize(from('10.0.0.9', fresh))).allowed).toBe(false);
    // Alice's verified credentials still pass; from another address she logs in afresh.
    expect((await step.authorize(from('10.0.0.9', basic('alice', 'wonderland')))).allowed).toBe(true);
    expect((await step.authorize(from('10.0.0.8', `${basic('alice', 'wonderland')} `))).allowed).toBe(true);
  });

  test('one source spraying guesses over many usernames is locked out as a whole', async () => {
    const step = build({ maxFailures: 2, failureWindowMs: 60_000 });
    for (let i = 0; i < 10; i++) expect((await step.authorize(from('10.0.0.7', basic(`user${i}`, 'Summer2026!')))).allowed).toBe(false);
    expect((await step.authorize(from('10.0.0.7', basic('alice', 'wonderland')))).allowed).toBe(false);
    expect((await step.authorize(from('10.0.0.6', basic('alice', 'wonderland')))).allowed).toBe(true);
  });

  test('the lockout ends with its window', () => {
    const limiter = new FailureLimiter(2, 1000);
    limiter.record('a', 0);
    limiter.record('a', 10);
    expect(limiter.lockedOut('a', 20)).toBe(true);
    expect(limiter.lockedOut('a', 1010)).toBe(false);
  });
});
