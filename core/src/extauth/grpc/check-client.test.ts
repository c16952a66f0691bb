import * as grpc from '@grpc/grpc-js';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { authorizationService, captureLogger, checkRequest } from '../../../../test/extauth/support.ts';
import { GrpcAuthorizer } from '../authorizers.ts';
import { CheckClient, GATEWAY_CHANNEL } from './check-client.ts';

const OK = { status: { code: 0 }, ok_response: {} };
const ALLOWED = { allowed: true, headersToSet: [], headersToRemove: [] };

/** A real grpc-js ext_authz server answering OK (after `unavailable` answers of UNAVAILABLE), on `port` (0: any). */
async function authServer(port = 0, unavailable = 0, host = '127.0.0.1'): Promise<{ port: number; calls: number; close(): Promise<void> }> {
  const server = new grpc.Server();
  const state = { calls: 0 };
  server.addService(authorizationService().service, {
    Check: (_call: unknown, callback: grpc.sendUnaryData<object>) => {
      state.calls++;
      if (state.calls <= unavailable) return callback({ code: grpc.status.UNAVAILABLE, details: 'shutting down' }, null);
      callback(null, OK);
    },
  } as grpc.UntypedServiceImplementation);
  const bound = await new Promise<number>((resolve, reject) => server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  return {
    port: bound,
    get calls() {
      return state.calls;
    },
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())).then(() => server.forceShutdown()),
  };
}

/**
 * A stand-in for a Service address whose NAT picks the backend per connection: while `silent`,
 * a new connection is accepted and never answered (as a SYN to a deleted pod's address never
 * completes the handshake); otherwise it is piped to `backend`.
 */
async function front(backend: number): Promise<{ address: string; silent: boolean; held: Socket[]; close(): Promise<void> }> {
  const held: Socket[] = [];
  const upstreams: Socket[] = [];
  const state = { silent: true };
  const server: Server = createServer((socket) => {
    held.push(socket);
    socket.on('error', () => {});
    if (state.silent) return;
    const upstream = connect(backend, '127.0.0.1');
    upstreams.push(upstream);
    upstream.on('error', () => socket.destroy());
    socket.on('close', () => upstream.destroy());
    socket.pipe(upstream).pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    address: `127.0.0.1:${port}`,
    get silent() {
      return state.silent;
    },
    set silent(value: boolean) {
      state.silent = value;
    },
    held,
    close: () => {
      for (const s of [...held, ...upstreams]) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('CheckClient channel resilience (issue 27 item 3)', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it('a check caught by a restart of the auth server is sent once more and answered within its deadline', async () => {
    const first = await authServer();
    const { logger, lines } = captureLogger();
    const authorizer = new GrpcAuthorizer(`127.0.0.1:${first.port}`, { logger, timeoutMs: 3_000 });
    cleanups.push(() => authorizer.close());
    expect(await authorizer.check(checkRequest('default.a'))).toEqual(ALLOWED);
    await first.close();
    // The check starts while nothing listens (connection refused: UNAVAILABLE); the server is back a moment later.
    const pending = authorizer.check(checkRequest('default.a'));
    const second = await authServer(first.port);
    cleanups.push(() => second.close());
    expect(await pending).toEqual(ALLOWED);
    expect(lines.filter((l) => l.code === 'GH_EXTAUTH_UNAVAILABLE' || l.code === 'GH_EXTAUTH_TIMEOUT')).toEqual([]);
  });

  it('a retry that meets UNAVAILABLE again (a pod shutting down behind a Service) is retried, up to 3 times, then denied', async () => {
    const flaky = await authServer(0, 2);
    cleanups.push(() => flaky.close());
    const { logger, lines } = captureLogger();
    const authorizer = new GrpcAuthorizer(`127.0.0.1:${flaky.port}`, { logger, timeoutMs: 3_000 });
    cleanups.push(() => authorizer.close());
    expect(await authorizer.check(checkRequest('default.a'))).toEqual(ALLOWED);
    expect(flaky.calls).toBe(3);
    const down = await authServer(0, 1_000);
    cleanups.push(() => down.close());
    const fails = new GrpcAuthorizer(`127.0.0.1:${down.port}`, { logger, timeoutMs: 3_000 });
    cleanups.push(() => fails.close());
    expect(await fails.check(checkRequest('default.a'))).toEqual({ allowed: false, status: 403, headers: [], body: '' });
    expect(down.calls).toBe(4);
    expect(lines.filter((l) => l.code === 'GH_EXTAUTH_UNAVAILABLE').map((l) => l.msg)).toEqual([expect.stringContaining('retried 3 times')]);
  });

  it('an auth server that stays down fails closed with UNAVAILABLE once the reconnect wait runs out', async () => {
    const gone = await authServer();
    await gone.close();
    const { logger, lines } = captureLogger();
    const authorizer = new GrpcAuthorizer(`127.0.0.1:${gone.port}`, { logger, timeoutMs: 2_000 });
    cleanups.push(() => authorizer.close());
    expect(await authorizer.check(checkRequest('default.a'))).toEqual({ allowed: false, status: 403, headers: [], body: '' });
    const failures = lines.filter((l) => l.code === 'GH_EXTAUTH_UNAVAILABLE');
    expect(failures).toHaveLength(1);
    expect(failures[0]!.msg).toContain('retried once, no reconnect within the deadline');
  });

  it('drops a connection that never completes its handshake after the connect timeout and opens a new one', async () => {
    const backend = await authServer();
    cleanups.push(() => backend.close());
    const address = await front(backend.port);
    cleanups.push(() => address.close());
    const client = new CheckClient(address.address, { channel: GATEWAY_CHANNEL });
    cleanups.push(() => client.close());
    // The first connection is held silent: the channel stays CONNECTING.
    await expect.poll(() => address.held.length, { timeout: 10_000 }).toBeGreaterThan(0);
    address.silent = false;
    // Without a connect timeout the channel waits on the silent connection for good.
    let answered = false;
    const started = performance.now();
    while (!answered && performance.now() - started < 15_000) {
      answered = await client.check(checkRequest('default.a'), 500).then(
        () => true,
        () => false,
      );
    }
    expect(answered).toBe(true);
    expect(client.reconnects).toBeGreaterThanOrEqual(1);
    expect(address.held.length).toBeGreaterThanOrEqual(2);
  });

  it('the gateway channel sends keepalive pings: a peer that stops answering (frozen) is noticed and the channel reconnects', async () => {
    // A connection whose peer goes silent after the handshake (a node gone, a pod frozen): no RST ever comes.
    const backend = await authServer();
    cleanups.push(() => backend.close());
    const address = await front(backend.port);
    cleanups.push(() => address.close());
    address.silent = false;
    const client = new CheckClient(address.address, { channel: { ...GATEWAY_CHANNEL, keepaliveTimeMs: 300, keepaliveTimeoutMs: 300 } });
    cleanups.push(() => client.close());
    expect(await client.check(checkRequest('default.a'), 3_000)).toEqual(ALLOWED);
    // Freeze the live connection: its bytes are no longer read, so PINGs go unanswered.
    for (const s of address.held) s.pause();
    const heldBefore = address.held.length;
    // keepalive closes it; a check after that opens a new connection (not paused), which serves.
    // Without pings every check would wait on the frozen connection until its deadline, for good.
    let answered = false;
    const started = performance.now();
    while (!answered && performance.now() - started < 15_000) {
      answered = await client.check(checkRequest('default.a'), 500).then(
        () => true,
        () => false,
      );
    }
    expect(answered).toBe(true);
    expect(address.held.length).toBeGreaterThan(heldBefore);
  });

  it('spreads checks over every address of the name, goes on over the others at once when one server leaves, and follows new addresses', async () => {
    const a = await authServer(0, 0, '127.0.0.1');
    const b = await authServer(a.port, 0, '127.0.0.2');
    const c = await authServer(a.port, 0, '127.0.0.3');
    cleanups.push(() => Promise.all([a.close(), b.close(), c.close()]).then(() => {}));
    // The name stands for a headless Service; its lookup is the test's (the servers are real).
    let addresses = ['127.0.0.1', '127.0.0.2'];
    const client = new CheckClient(`extauth.test:${a.port}`, { channel: { ...GATEWAY_CHANNEL, endpoints: { refreshMs: 100, resolve: async () => addresses } } });
    cleanups.push(() => client.close());
    await expect.poll(() => client.currentTarget, { timeout: 10_000 }).toBe(`ipv4:127.0.0.1:${a.port},127.0.0.2:${a.port}`);
    for (let i = 0; i < 20; i++) expect(await client.check(checkRequest('default.a'), 3_000)).toEqual(ALLOWED);
    expect(a.calls).toBeGreaterThan(0);
    expect(b.calls).toBeGreaterThan(0);
    // One server leaves (GOAWAY, as a deleted pod's does) while checks run. (A 2 s deadline, not
    // the gateway's 200 ms: at load 18 this process alone missed 200 ms without any server leaving.)
    const checks = Array.from({ length: 40 }, (_, i) => new Promise((r) => setTimeout(r, i * 5)).then(() => client.check(checkRequest('default.a'), 2_000)));
    await a.close();
    const results = await Promise.allSettled(checks);
    expect(results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason?.message))).toEqual([]);
    // The name now points elsewhere (the replacement pod): checks follow.
    addresses = ['127.0.0.2', '127.0.0.3'];
    await expect.poll(() => client.currentTarget, { timeout: 10_000 }).toBe(`ipv4:127.0.0.2:${a.port},127.0.0.3:${a.port}`);
    const before = c.calls;
    await expect.poll(async () => (await client.check(checkRequest('default.a'), 3_000), c.calls), { timeout: 10_000 }).toBeGreaterThan(before);
    expect(client.endpointChanges).toBe(2);
  });
});
