/**
 * External auth through the real gateway request path (core/src/proxy Gateway on a real
 * HTTP listener), with both authorizer shapes: the embedded engine (in-process) and a
 * separate ext_authz gRPC server. Upstreams and the user's ext_authz server are real servers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigLoader } from '../../core/src/config/loader.ts';
import type { Authorizer } from '../../core/src/extauth/authorizer.ts';
import { GrpcAuthorizer, InProcessAuthorizer } from '../../core/src/extauth/authorizers.ts';
import { startExtAuthServer, type ExtAuthServer } from '../../core/src/extauth/server.ts';
import { Gateway } from '../../core/src/proxy/gateway.ts';
import { UpstreamRegistry } from '../../core/src/proxy/upstream/upstream-cluster.ts';
import { closeGracefully, listen } from '../../core/src/server/listen.ts';
import type { ConfigDir } from '../support/config-dir.ts';
import { refusedPort, type Echo } from '../support/upstream.ts';
import { basic, captureLogger, htpasswdApr1, startEnvoyAuthServer, startGuardedSetup, type GuardedSetup } from './support.ts';


interface Running {
  url: string;
  close(): Promise<void>;
}

/** A gateway serving `dir` with `authorizer`. */
async function startGateway(dir: string, authorizer: Authorizer): Promise<Running> {
  const { logger } = captureLogger();
  const loader = new ConfigLoader({ dir, apiGroupDomain: 'gatehouse.dev', logger, watch: false });
  const gateway = new Gateway({ logger, upstreams: new UpstreamRegistry(), authorizer, accessLog: false });
  gateway.update(await loader.start());
  const { server, port } = await listen(gateway.handle, 0, '127.0.0.1');
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      await closeGracefully(server, 1_000);
      await authorizer.close();
      await loader.close();
    },
  };
}

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: string }> {
  const response = await fetch(url, { headers });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

const echoOf = (r: { body: string }) => JSON.parse(r.body) as Echo;

/** SPEC 5.1's 401, as the client receives it. */
function expect401(r: { status: number; headers: Headers; body: string }, realm: string): void {
  expect(r.status).toBe(401);
  expect(r.headers.get('www-authenticate')).toBe(`Basic realm="${realm}"`);
  expect(r.headers.get('content-length')).toBe('0');
  expect(r.body).toBe('');
}

const alice = htpasswdApr1('alice', 'wonderland');

let dir: ConfigDir;
let userServer: GuardedSetup['userServer'];
let setup: GuardedSetup | undefined;

beforeAll(async () => {
  setup = await startGuardedSetup(alice);
  ({ dir, userServer } = setup);
});

afterAll(async () => {
  await setup?.close();
});

describe.each(['in-process', 'separate gRPC server'] as const)('auth on the request path (%s)', (shape) => {
  let gateway: Running;
  let extauth: ExtAuthServer;

  beforeAll(async () => {
    extauth = await startExtAuthServer({ configDir: dir.path, port: 0, host: '127.0.0.1', logger: captureLogger().logger, watch: false });
    const { logger } = captureLogger();
    // A generous deadline: these tests are about behaviour, timeouts have their own below.
    const options = { logger, timeoutMs: 3_000 };
    const authorizer = shape === 'in-process' ? new InProcessAuthorizer(extauth.engine, options) : new GrpcAuthorizer(`127.0.0.1:${extauth.port}`, options);
    gateway = await startGateway(dir.path, authorizer);
  });

  afterAll(async () => {
    await gateway?.close();
    await extauth?.close();
  });

  it('inherits the virtual host’s AuthConfig: 401 without credentials, nothing reaches the upstream', async () => {
    expect401(await get(`${gateway.url}/things`), 'demo');
    expect401(await get(`${gateway.url}/things`, { authorization: basic('alice', 'wrong') }), 'demo');
    expect401(await get(`${gateway.url}/things`, { authorization: basic('mallory', 'wonderland') }), 'demo');
  });

  it('sets x-user-id upstream on success, replacing a client-sent one', async () => {
    const r = await get(`${gateway.url}/things?q=1`, { authorization: basic('alice', 'wonderland', 'basic'), 'x-user-id': 'demo;admin' });
    expect(r.status).toBe(200);
    const seen = echoOf(r);
    expect(seen.url).toBe('/things?q=1');
    expect(seen.headers['x-user-id']).toBe('demo;alice');
  });

  it('a route configRef overrides the virtual host’s', async () => {
    expect401(await get(`${gateway.url}/override`, { authorization: basic('alice', 'wonderland') }), 'other');
    const r = await get(`${gateway.url}/override`, { 'proxy-authorization': basic('bob', 'builder') });
    expect(r.status).toBe(200);
    expect(echoOf(r).headers['x-user-id']).toBe('other;bob');
  });

  it('a route with disable: true skips auth', async () => {
    const r = await get(`${gateway.url}/open`);
    expect(r.status).toBe(200);
    expect(echoOf(r).headers['x-user-id']).toBeUndefined();
  });

  it('runs a chain in order and merges the headers of every allowing step into the upstream request', async () => {
    const before = userServer.requests.length;
    expect401(await get(`${gateway.url}/chain`, { authorization: basic('alice', 'nope') }), 'demo');
    expect(userServer.requests.length).toBe(before);

    const r = await get(`${gateway.url}/chain`, { authorization: basic('alice', 'wonderland'), 'x-internal': 'secret' });
    expect(r.status).toBe(200);
    const seen = echoOf(r);
    expect(seen.headers['x-user-id']).toBe('demo;alice');
    // The second step saw the first step's header.
    expect(seen.headers['x-team']).toBe('blue for demo;alice');
    expect(seen.headers['x-internal']).toBeUndefined();
  });

  it('returns a later step’s denial (status, headers, body) to the client', async () => {
    const r = await get(`${gateway.url}/chain`, { authorization: basic('alice', 'wonderland'), 'x-deny': '1' });
    expect(r.status).toBe(418);
    expect(r.headers.get('x-why')).toBe('teapot');
    expect(r.body).toBe('no tea');
  });
});

describe('fail closed', () => {
  it('answers 403 when the auth server is stopped, and lets requests through with failureModeAllow', async () => {
    const extauth = await startExtAuthServer({ configDir: dir.path, port: 0, host: '127.0.0.1', logger: captureLogger().logger, watch: false });
    const { logger } = captureLogger();
    const closed = await startGateway(dir.path, new GrpcAuthorizer(`127.0.0.1:${extauth.port}`, { logger, timeoutMs: 3_000 }));
    const open = await startGateway(dir.path, new GrpcAuthorizer(`127.0.0.1:${extauth.port}`, { logger, timeoutMs: 3_000, failureModeAllow: true }));
    try {
      expect((await get(`${closed.url}/things`, { authorization: basic('alice', 'wonderland') })).status).toBe(200);
      await extauth.close();
      const denied = await get(`${closed.url}/things`, { authorization: basic('alice', 'wonderland') });
      expect(denied.status).toBe(403);
      expect(denied.headers.get('content-length')).toBe('0');
      expect(denied.body).toBe('');
      const allowed = await get(`${open.url}/things`, { authorization: basic('alice', 'wonderland') });
      expect(allowed.status).toBe(200);
    } finally {
      await closed.close();
      await open.close();
    }
  });

  it('answers 403 when nothing listens at the auth address', async () => {
    const gateway = await startGateway(dir.path, new GrpcAuthorizer(`127.0.0.1:${await refusedPort()}`, { logger: captureLogger().logger }));
    try {
      expect((await get(`${gateway.url}/things`, { authorization: basic('alice', 'wonderland') })).status).toBe(403);
      expect((await get(`${gateway.url}/open`)).status).toBe(200);
    } finally {
      await gateway.close();
    }
  });

  it('answers 403 when the auth server does not answer within the 200 ms default', async () => {
    const slow = await startEnvoyAuthServer(async () => {
      await new Promise((r) => setTimeout(r, 1_500));
      return { status: { code: 0 }, ok_response: {} };
    });
    const gateway = await startGateway(dir.path, new GrpcAuthorizer(slow.address, { logger: captureLogger().logger }));
    try {
      const started = performance.now();
      const r = await get(`${gateway.url}/things`, { authorization: basic('alice', 'wonderland') });
      expect(r.status).toBe(403);
      expect(performance.now() - started).toBeLessThan(1_400);
    } finally {
      await gateway.close();
      await slow.close();
    }
  });
});
