import { generateKeyPairSync } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { SignJWT } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../log/logger.ts';
import type { FilterBuildContext, FilterRequest, HttpFilter, LocalReply } from '../proxy/filters/http-filter.ts';
import { FilterStage } from '../proxy/filters/http-filter.ts';
import type { RequestContext } from '../proxy/context.ts';
import { jwtFilterFactory, JWT_METADATA } from './jwt-filter.ts';
import { RemoteJwks } from './remote-jwks.ts';
import { MAX_TOKEN_LENGTH } from './verify.ts';
import { b64, ecKey, edKey, JwksServer, nowS as now, rsaKey, token, type Key } from '../../../test/jwt/support.ts';

const logger = createLogger('jwt-test', { level: 'silent' });

function build(routeOptions: Record<string, unknown> | undefined, virtualHostOptions: Record<string, unknown> | undefined): HttpFilter[] {
  const context = { routeOptions, virtualHostOptions, namespace: 'default', virtualHost: 'default/vs', route: 'r', snapshot: { generation: 1, resources: new Map(), statuses: [], diagnostics: [] }, logger } as unknown as FilterBuildContext;
  const made = jwtFilterFactory.create(context);
  return made === undefined ? [] : Array.isArray(made) ? [...made] : [made as HttpFilter];
}

/** The request as a filter sees it (no socket: the filter reads headers, URL and metadata only). */
function request(headers: Record<string, string>, url = '/get', method = 'GET'): FilterRequest {
  const h: Record<string, string> = { host: 'www.example.com', ...headers };
  return {
    req: { url, method, headers: { ...h }, socket: {} } as unknown as IncomingMessage,
    ctx: { headers: h } as unknown as RequestContext,
    method,
    path: url,
    remoteAddress: '127.0.0.1',
    metadata: new Map(),
    body: undefined,
    readBody: async () => Buffer.alloc(0),
    bodyPartial: false,
    signal: new AbortController().signal,
    clearRouteCache() {
      this.ctx.headers['x-test-route-cleared'] = 'yes';
    },
    responseHeaders: [],
  };
}

async function run(filter: HttpFilter, r: FilterRequest): Promise<LocalReply | undefined> {
  return (await filter.onRequest!(r)) ?? undefined;
}

const provider = (key: Key | Key[], extra: Record<string, unknown> = {}) => ({ issuer: 'solo.io', jwks: { local: { key: JSON.stringify({ keys: (Array.isArray(key) ? key : [key]).map((k) => k.jwk) }) } }, ...extra });
const vhost = (providers: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ jwt: { providers, ...extra } });

const rs = rsaKey('rs');
const es = ecKey('es');
const ed = edKey('ed');
const hs: Key = { kid: 'hs', alg: 'HS256', privateKey: new Uint8Array(Buffer.from('0123456789abcdef0123456789abcdef')), jwk: { kty: 'oct', kid: 'hs', k: Buffer.from('0123456789abcdef0123456789abcdef').toString('base64url') } };

describe('JWT filter: verification (local JWKS)', () => {
  const [filter] = build(undefined, vhost({ p: provider([rs, es, ed, hs], { claimsToHeaders: [{ claim: 'sub', header: 'x-sub' }, { claim: 'llms.openai', header: 'x-models' }] }) }));

  it('runs after ext auth (jwt / jwtStaged.afterExtAuth), verifies RS256, ES256, EdDSA and HS256, and leaves the claims in metadata under the provider', async () => {
    expect(filter!.stage).toBe(FilterStage.jwtAfterExtAuth);
    for (const key of [rs, es, ed, hs]) {
      const r = request({ authorization: `Bearer ${await token(key, { llms: { openai: ['gpt-4o', 'o1'] } })}` });
      expect(await run(filter!, r)).toBeUndefined();
      expect((r.metadata.get(JWT_METADATA) as Record<string, { sub: string }>).p!.sub).toBe('alice');
      // claimsToHeaders, nested by `.`; the token header is removed (keepToken false).
      expect(r.ctx.headers['x-sub']).toBe('alice');
      expect(r.ctx.headers['x-models']).toBe('gpt-4o,o1');
      // Routes may match on the claim headers: the chain is asked to match the route again.
      expect(r.ctx.headers['x-test-route-cleared']).toBe('yes');
      expect(r.ctx.headers.authorization).toBeUndefined();
    }
  });

  it('a token verified before is accepted synchronously, with the same effects', async () => {
    const t = await token(rs, { team: 'x' });
    expect(await run(filter!, request({ authorization: `Bearer ${t}` }))).toBeUndefined();
    const again = request({ authorization: `Bearer ${t}`, 'x-sub': 'forged' });
    const verdict = filter!.onRequest!(again);
    expect(verdict).toBeUndefined();
    expect(again.ctx.headers['x-sub']).toBe('alice');
    expect(again.ctx.headers.authorization).toBeUndefined();
    expect((again.metadata.get(JWT_METADATA) as Record<string, { team: string }>).p!.team).toBe('x');
  });

  it('answers 401 with Envoy\'s body and www-authenticate on a missing token (no error=) and a bad one (error="invalid_token")', async () => {
    const missing = await run(filter!, request({}, '/get?x=1'));
    expect(missing).toMatchObject({ status: 401, code: 'GH_JWT_MISSING', body: 'Jwt is missing', headers: ['www-authenticate', 'Bearer realm="http://www.example.com/get?x=1"'] });
    const other = rsaKey('rs');
    const bad = await run(filter!, request({ authorization: `Bearer ${await token(other)}` }));
    expect(bad).toMatchObject({ status: 401, code: 'GH_JWT_INVALID', body: 'Jwt verification fails', headers: ['www-authenticate', 'Bearer realm="http://www.example.com/get", error="invalid_token"'] });
  });

  it('refuses expired, not-yet-valid and foreign-issuer tokens, honouring the clock skew (default 60 s)', async () => {
    expect(await run(filter!, request({ authorization: `Bearer ${await token(rs, { exp: now() - 120 })}` }))).toMatchObject({ status: 401, body: 'Jwt is expired' });
    expect(await run(filter!, request({ authorization: `Bearer ${await token(rs, { exp: now() - 30 })}` }))).toBeUndefined();
    expect(await run(filter!, request({ authorization: `Bearer ${await token(rs, { nbf: now() + 600 })}` }))).toMatchObject({ status: 401, body: 'Jwt not yet valid' });
    expect(await run(filter!, request({ authorization: `Bearer ${await token(rs, { iss: 'evil.io' })}` }))).toMatchObject({ status: 401, body: 'Jwt issuer is not configured' });
  });

  it('answers 403 "Audiences in Jwt are not allowed" for a token outside the audiences (Envoy), and compares audiences without scheme and trailing slash', async () => {
    const [aud] = build(undefined, vhost({ p: provider(rs, { audiences: ['https://api.example.com/'] }) }));
    expect(await run(aud!, request({ authorization: `Bearer ${await token(rs, { aud: 'other' })}` }))).toMatchObject({ status: 403, code: 'GH_JWT_AUDIENCE', body: 'Audiences in Jwt are not allowed' });
    expect(await run(aud!, request({ authorization: `Bearer ${await token(rs, { aud: ['x', 'api.example.com'] })}` }))).toBeUndefined();
  });

  it('refuses hostile tokens without throwing: alg none, garbage base64, 1000 segments, oversized, alg/key mismatch', async () => {
    const payload = b64({ iss: 'solo.io', exp: now() + 60 });
    const cases: [string, string][] = [
      [`${b64({ alg: 'none' })}.${payload}.`, 'Jwt header [alg] is not supported'],
      [`${b64({ alg: 'none' })}.${payload}.c2ln`, 'Jwt header [alg] is not supported'],
      ['%%%.@@@.!!!', 'Jwt header is an invalid Base64url encoded'],
      [`${b64('not json')}.${payload}.c2ln`, 'Jwt header is an invalid JSON'],
      [Array.from({ length: 1000 }, () => 'eyJ9').join('.'), 'Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections'],
      [`${b64({ alg: 'RS256' })}.${'A'.repeat(MAX_TOKEN_LENGTH)}.c2ln`, 'Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections'],
      [`${b64({ alg: 'RS256', kid: 'rs' })}.${b64([1, 2])}.c2ln`, 'Jwt payload is an invalid JSON'],
      [`${b64({ alg: 'RS256', kid: 'rs' })}.${payload}.c2ln`, 'Jwt verification fails'],
      // An HS256 token signed with the RSA public key as the secret (the classic confusion): no oct key fits.
      [`${b64({ alg: 'HS256', kid: 'rs' })}.${payload}.c2ln`, "Jwks doesn't have key to match kid or alg from Jwt"],
      [`${b64({ alg: 'RS256' })}.${b64({ iss: 'solo.io', exp: 'soon' })}.c2ln`, 'Jwt payload [exp] or [nbf] field is not an integer'],
    ];
    for (const [bad, body] of cases) {
      expect(await run(filter!, request({ authorization: `Bearer ${bad}` }))).toMatchObject({ status: 401, body });
    }
  });

  it('strips claim headers a client sends itself, even when no token verifies (allowMissingOrFailedJwt)', async () => {
    const [open] = build(undefined, vhost({ p: provider(rs, { claimsToHeaders: [{ claim: 'sub', header: 'x-sub' }, { claim: 'team', header: 'x-team', append: true }] }) }, { allowMissingOrFailedJwt: true }));
    const r = request({ 'x-sub': 'admin', 'x-team': 'a', authorization: 'Bearer junk' });
    expect(await run(open!, r)).toBeUndefined();
    expect(r.ctx.headers['x-sub']).toBeUndefined();
    expect(r.ctx.headers['x-team']).toBe('a');
    expect(r.metadata.get(JWT_METADATA)).toBeUndefined();
    const ok = request({ 'x-team': 'a', authorization: `Bearer ${await token(rs, { team: 'ops' })}` });
    expect(await run(open!, ok)).toBeUndefined();
    expect(ok.ctx.headers['x-team']).toBe('a,ops');
  });

  it('leaves out claim values that cannot be headers', async () => {
    const [f] = build(undefined, vhost({ p: provider(rs, { claimsToHeaders: [{ claim: 'evil', header: 'x-evil' }, { claim: 'obj', header: 'x-obj' }] }) }));
    const r = request({ authorization: `Bearer ${await token(rs, { evil: 'a\r\nx-admin: 1', obj: { a: 1 } })}` });
    expect(await run(f!, r)).toBeUndefined();
    expect(r.ctx.headers['x-evil']).toBeUndefined();
    expect(r.ctx.headers['x-obj']).toBeUndefined();
  });
});

describe('JWT filter: Gloo semantics of sources, policies and stages', () => {
  it('reads tokenSource headers (with prefix) and queryParams, keeps the token with keepToken', async () => {
    const [f] = build(undefined, vhost({ p: provider(rs, { keepToken: true, tokenSource: { headers: [{ header: 'x-token' }, { header: 'x-auth', prefix: 'JWT ' }], queryParams: ['token'] } }) }));
    const t = await token(rs);
    const byHeader = request({ 'x-token': t });
    expect(await run(f!, byHeader)).toBeUndefined();
    expect(byHeader.ctx.headers['x-token']).toBe(t);
    expect(await run(f!, request({ 'x-auth': `jwt ${t}` }))).toBeUndefined();
    expect(await run(f!, request({}, `/get?token=${t}`))).toBeUndefined();
    // The default Authorization: Bearer source is not used once a tokenSource is given.
    expect(await run(f!, request({ authorization: `Bearer ${t}` }))).toMatchObject({ status: 401, body: 'Jwt is missing' });
  });

  it('takes the token from ?access_token= by default (Envoy), and accepts proto (snake_case) names', async () => {
    const [f] = build(undefined, { jwt_staged: { after_ext_auth: { providers: { p: { ...provider(rs), keep_token: true, claims_to_headers: [{ claim: 'sub', header: 'x-sub' }] } } } } });
    const r = request({}, `/get?access_token=${await token(rs)}`);
    expect(await run(f!, r)).toBeUndefined();
    expect(r.ctx.headers['x-sub']).toBe('alice');
  });

  it('validationPolicy ALLOW_MISSING lets requests without a token through but not bad tokens', async () => {
    const [f] = build(undefined, vhost({ p: provider(rs) }, { validationPolicy: 'ALLOW_MISSING' }));
    expect(await run(f!, request({}))).toBeUndefined();
    expect(await run(f!, request({ authorization: 'Bearer a.b.c' }))).toMatchObject({ status: 401 });
  });

  it('any of several providers may verify; a token for neither is reported as the failure that is not "missing"', async () => {
    const [f] = build(undefined, vhost({ a: provider(rs), b: { ...provider(es), issuer: 'other.io' } }));
    const r = request({ authorization: `Bearer ${await token(es, { iss: 'other.io' })}` });
    expect(await run(f!, r)).toBeUndefined();
    expect(Object.keys(r.metadata.get(JWT_METADATA) as object)).toEqual(['b']);
    expect(await run(f!, request({ authorization: `Bearer ${await token(rsaKey('rs'))}` }))).toMatchObject({ body: 'Jwt verification fails' });
  });

  it('jwtStaged.beforeExtAuth runs at its own stage; a route disables a stage or replaces its providers (jwtProvidersStaged)', async () => {
    const host = { jwtStaged: { beforeExtAuth: { providers: { v: provider(rs) } }, afterExtAuth: { providers: { w: provider(es) } } } };
    expect(build(undefined, host).map((f) => [f.name, f.stage])).toEqual([
      ['jwt-before-ext-auth', FilterStage.jwtBeforeExtAuth],
      ['jwt', FilterStage.jwtAfterExtAuth],
    ]);
    expect(build({ jwtStaged: { beforeExtAuth: { disable: true } } }, host).map((f) => f.stage)).toEqual([FilterStage.jwtAfterExtAuth]);
    expect(build({ jwt: { disable: true } }, vhost({ v: provider(rs) }))).toEqual([]);
    const [routeOnly] = build({ jwtProvidersStaged: { afterExtAuth: { providers: { route: provider(es) } } } }, vhost({ v: provider(rs) }));
    expect(await run(routeOnly!, request({ authorization: `Bearer ${await token(rs)}` }))).toMatchObject({ status: 401 });
    expect(await run(routeOnly!, request({ authorization: `Bearer ${await token(es)}` }))).toBeUndefined();
  });

  it('accepts a PEM public key as the local key (the guides\' form)', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const [f] = build(undefined, vhost({ p: { issuer: 'solo.io', jwks: { local: { key: publicKey.export({ format: 'pem', type: 'spki' }).toString() } } } }));
    const t = await new SignJWT({ iss: 'solo.io' }).setProtectedHeader({ alg: 'RS256' }).sign(privateKey);
    expect(await run(f!, request({ authorization: `Bearer ${t}` }))).toBeUndefined();
  });
});

describe('JWT filter: load-time checks', () => {
  const at = (path: (string | number)[], code: string, message: string, severity: 'error' | 'warning' = 'error') => ({ path: path.join('.'), code, message, severity });
  const check = (options: Record<string, unknown>) => jwtFilterFactory.check!(options, at as never, ['spec', 'virtualHost', 'options']);
  it('rejects bad JWKS JSON, a bad PEM, a bad URL, and jwt with jwtStaged, naming the field', () => {
    const out = check({ jwt: { providers: { a: { jwks: { local: { key: '{"keys": [' } } }, b: { jwks: { local: { key: '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----' } } }, c: { jwks: { remote: { url: 'ftp://x' } } } } }, jwtStaged: {} });
    expect(out.map((d) => [d.path, d.severity])).toEqual([
      ['spec.virtualHost.options.jwtStaged', 'error'],
      ['spec.virtualHost.options.jwt.providers.a.jwks.local.key', 'error'],
      ['spec.virtualHost.options.jwt.providers.b.jwks.local.key', 'error'],
      ['spec.virtualHost.options.jwt.providers.c.jwks.remote.url', 'error'],
    ]);
    expect(check({ jwt: { providers: { a: provider(rs) } } })).toEqual([]);
  });
});

describe('remote JWKS', () => {
  const server = new JwksServer();
  let url: string;
  beforeAll(async () => {
    url = await server.start();
  });
  afterAll(() => server.close());
  afterEach(() => {
    server.mode = 'ok';
  });

  it('fetches once, serves from cache, and refetches when a token names a new kid (rotation), at most once per interval', async () => {
    const first = rsaKey('k1');
    server.keys = [first];
    const [f] = build(undefined, vhost({ p: { issuer: 'solo.io', jwks: { remote: { url: `${url}?rotation`, cacheDuration: '300s' } } } }));
    const hitsBefore = server.hits;
    expect(await run(f!, request({ authorization: `Bearer ${await token(first)}` }))).toBeUndefined();
    expect(await run(f!, request({ authorization: `Bearer ${await token(first)}` }))).toBeUndefined();
    expect(server.hits - hitsBefore).toBe(1);
    const second = ecKey('k2');
    server.keys = [second];
    expect(await run(f!, request({ authorization: `Bearer ${await token(second)}` }))).toBeUndefined();
    expect(server.hits - hitsBefore).toBe(2);
  });

  it('tokens with made-up kids cannot drive fetches: one unknown-kid refetch per interval', async () => {
    server.keys = [rsaKey('only')];
    const remote = new RemoteJwks({ url: `${url}?storm`, unknownKidIntervalMs: 600_000 });
    await remote.get();
    const before = server.hits;
    const refetches = await Promise.all(Array.from({ length: 20 }, () => remote.refreshForUnknownKid()));
    expect(refetches.filter((r) => r !== undefined).length).toBeGreaterThanOrEqual(1);
    await Promise.all(refetches);
    expect(remote.refreshForUnknownKid()).toBeUndefined();
    expect(server.hits - before).toBe(1);
  });

  it('a hanging JWKS server, one answering 100 MB, garbage or 500: bounded, 401 "Jwks remote fetch is failed", never a throw', async () => {
    const key = rsaKey('k');
    for (const mode of ['hang', 'huge', 'garbage', 'error'] as const) {
      server.mode = mode;
      const remote = new RemoteJwks({ url: `${url}?${mode}`, timeoutMs: 500, maxBytes: 1 << 20 });
      const keys = await remote.get();
      expect(keys).toBeUndefined();
    }
    server.mode = 'hang';
    const [f] = build(undefined, vhost({ p: { issuer: 'solo.io', jwks: { remote: { url: `${url}?hang-filter` } } } }));
    expect(await run(f!, request({ authorization: `Bearer ${await token(key)}` }))).toMatchObject({ status: 401, code: 'GH_JWT_JWKS_UNAVAILABLE', body: 'Jwks remote fetch is failed' });
    // Within the failure backoff, requests do not wait on another fetch.
    expect(await run(f!, request({ authorization: `Bearer ${await token(key)}` }))).toMatchObject({ status: 401 });
  });

  it('keeps serving the last good keys when a refresh fails', async () => {
    const key = rsaKey('stale');
    server.keys = [key];
    const remote = new RemoteJwks({ url: `${url}?stale`, cacheMs: 1, timeoutMs: 500, failureBackoffMs: 0 });
    expect(await remote.get()).toBeDefined();
    server.mode = 'error';
    await expect.poll(() => remote.fetches).toBeGreaterThanOrEqual(1);
    const again = await remote.get();
    expect(again?.hasKid('stale')).toBe(true);
  });

  it('asyncFetch fetches at load, before any request', async () => {
    server.keys = [rsaKey('async')];
    const before = server.hits;
    build(undefined, vhost({ p: { issuer: 'solo.io', jwks: { remote: { url: `${url}?async`, asyncFetch: { fastListener: true } } } } }));
    await expect.poll(() => server.hits - before).toBe(1);
  });

  it('concurrent requests on a cold cache share one fetch', async () => {
    const key = rsaKey('cold');
    server.keys = [key];
    const [f] = build(undefined, vhost({ p: { issuer: 'solo.io', jwks: { remote: { url: `${url}?cold` } } } }));
    const before = server.hits;
    const t = await token(key);
    const results = await Promise.all(Array.from({ length: 50 }, () => run(f!, request({ authorization: `Bearer ${t}` }))));
    expect(results.every((r) => r === undefined)).toBe(true);
    expect(server.hits - before).toBe(1);
  });
});
