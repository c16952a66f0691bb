import { afterEach, describe, expect, it } from 'vitest';
import { authConfig, basic, captureLogger, checkRequest, htpasswdApr1, snapshotter, startEnvoyAuthServer } from '../../../test/extauth/support.ts';
import { GrpcAuthorizer, InProcessAuthorizer } from './authorizers.ts';
import { AuthEngine } from './engine.ts';

const FORBIDDEN = { allowed: false, status: 403, headers: [], body: '' };
const ok = { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-user', value: 'u1' } }, { header: { key: 'x-tag', value: 't' }, append: { value: true } }], headers_to_remove: ['X-Drop'] } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('GrpcAuthorizer', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  it('decodes OK and denied CheckResponses like Envoy', async () => {
    const server = await startEnvoyAuthServer((req) =>
      req.attributes.request.http.headers['x-deny']
        ? { status: { code: 16 }, denied_response: { status: { code: 401 }, headers: [{ header: { key: 'WWW-Authenticate', value: 'Basic realm=""' } }], body: 'who?' } }
        : req.attributes.request.http.headers['x-bare']
          ? { status: { code: 7 } }
          : ok,
    );
    cleanups.push(server.close);
    // A generous deadline: this test is about decoding; deadlines have their own tests.
    const authorizer = new GrpcAuthorizer(server.address, { logger: captureLogger().logger, timeoutMs: 3_000 });
    cleanups.push(() => authorizer.close());
    expect(await authorizer.check(checkRequest('default.a'))).toEqual({
      allowed: true,
      headersToSet: [
        { key: 'x-user', value: 'u1', append: false },
        { key: 'x-tag', value: 't', append: true },
      ],
      headersToRemove: ['x-drop'],
    });
    expect(await authorizer.check(checkRequest('default.a', { 'x-deny': '1' }))).toEqual({ allowed: false, status: 401, headers: [{ key: 'www-authenticate', value: 'Basic realm=""', append: false }], body: 'who?' });
    // A denial without an HTTP status is a 403, as in Envoy.
    expect(await authorizer.check(checkRequest('default.a', { 'x-bare': '1' }))).toEqual(FORBIDDEN);
    expect((server.requests[0] as { attributes: { context_extensions: Record<string, string> } }).attributes.context_extensions).toEqual({ config_id: 'default.a', source_type: 'virtual_host', source_name: 'default/test' });
  });

  it('fails closed (403) when the auth server is stopped, and allows with failureModeAllow', async () => {
    const server = await startEnvoyAuthServer(() => ok);
    const address = server.address;
    await server.close();
    const { logger, lines } = captureLogger();
    const closed = new GrpcAuthorizer(address, { logger });
    const open = new GrpcAuthorizer(address, { logger, failureModeAllow: true });
    cleanups.push(() => closed.close(), () => open.close());
    expect(await closed.check(checkRequest('default.a'))).toEqual(FORBIDDEN);
    expect(await open.check(checkRequest('default.a'))).toEqual({ allowed: true, headersToSet: [], headersToRemove: [] });
    expect(lines.filter((l) => l.code === 'GH_EXTAUTH_UNAVAILABLE').map((l) => l.failure_mode_allow)).toEqual([false, true]);
  });

  it('fails closed when the auth server does not answer within the timeout', async () => {
    const server = await startEnvoyAuthServer(async () => (await sleep(1_000), ok));
    cleanups.push(server.close);
    const { logger, lines } = captureLogger();
    const authorizer = new GrpcAuthorizer(server.address, { logger, timeoutMs: 100 });
    cleanups.push(() => authorizer.close());
    const started = performance.now();
    expect(await authorizer.check(checkRequest('default.a'))).toEqual(FORBIDDEN);
    expect(performance.now() - started).toBeLessThan(900);
    expect(lines.find((l) => l.code === 'GH_EXTAUTH_TIMEOUT')?.msg).toContain('did not answer within 100ms');
  });

  it('uses a 200 ms deadline by default', async () => {
    const server = await startEnvoyAuthServer(async () => (await sleep(1_000), ok));
    cleanups.push(server.close);
    const authorizer = new GrpcAuthorizer(server.address, { logger: captureLogger().logger });
    cleanups.push(() => authorizer.close());
    const started = performance.now();
    expect(await authorizer.check(checkRequest('default.a'))).toEqual(FORBIDDEN);
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect(elapsed).toBeLessThan(900);
  });

  it('rejects an address that is not host:port', () => {
    expect(() => new GrpcAuthorizer('localhost', { logger: captureLogger().logger })).toThrow(expect.objectContaining({ code: 'GH_BAD_ARGUMENT' }));
  });
});

describe('InProcessAuthorizer', () => {
  it('decides with the engine, and fails closed when a step outlives the timeout', async () => {
    const slow = await startEnvoyAuthServer(async () => (await sleep(1_000), ok));
    const alice = htpasswdApr1('alice', 'wonderland');
    const { logger, lines } = captureLogger();
    const engine = new AuthEngine({ logger, passThroughTimeoutMs: 5_000 });
    await engine.update(
      snapshotter()([
        authConfig('basic', [{ basicAuth: { apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } } }]),
        authConfig('slow', [{ passThroughAuth: { grpc: { address: slow.address } } }]),
      ]),
    );
    const authorizer = new InProcessAuthorizer(engine, { logger, timeoutMs: 300 });
    try {
      expect(await authorizer.check(checkRequest('default.basic', { authorization: basic('alice', 'wonderland') }))).toMatchObject({ allowed: true, headersToSet: [{ key: 'x-user-id', value: ';alice' }] });
      expect(await authorizer.check(checkRequest('default.slow'))).toEqual(FORBIDDEN);
      expect(lines.find((l) => l.code === 'GH_EXTAUTH_TIMEOUT')).toBeDefined();
      const open = new InProcessAuthorizer(engine, { logger, timeoutMs: 300, failureModeAllow: true });
      expect((await open.check(checkRequest('default.slow'))).allowed).toBe(true);
    } finally {
      await authorizer.close();
      await engine.close();
      await slow.close();
    }
  });
});

describe('GrpcAuthorizer: answers from anyone\'s server are checked (issue 17 finding 1)', () => {
  it('drops unsendable denial headers and fails closed on an unsendable allow header', async () => {
    const server = await startEnvoyAuthServer((req) =>
      req.attributes.request.http.headers['x-mode'] === 'allow'
        ? { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-user-id', value: 'admin\u0001' } }] } }
        : { status: { code: 7 }, denied_response: { status: { code: 403 }, headers: [{ header: { key: 'x-a', value: 'x\r\nset-cookie: y=1' } }, { header: { key: 'x-ok', value: 'fine' } }], body: 'no' } },
    );
    const { logger, lines } = captureLogger();
    const authorizer = new GrpcAuthorizer(server.address, { logger, timeoutMs: 3_000 });
    try {
      expect(await authorizer.check(checkRequest('default.x'))).toEqual({ allowed: false, status: 403, headers: [{ key: 'x-ok', value: 'fine', append: false }], body: 'no' });
      expect(await authorizer.check(checkRequest('default.x', { 'x-mode': 'allow' }))).toEqual({ allowed: false, status: 403, headers: [], body: '' });
      expect(lines.filter((l) => l.code === 'GH_EXTAUTH_BAD_DECISION')).toHaveLength(2);
    } finally {
      await authorizer.close();
      await server.close();
    }
  });
});
