import { Agent, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect as h2connect, type ClientHttp2Session } from 'node:http2';
import { connect } from 'node:net';
import { describe, expect, test } from 'vitest';
import { closeGracefully, defaultMaxConnections, listen } from './listen.ts';

function get(port: number, path: string, agent: Agent | false = false): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

/** Answers `/slow` after `ms`, everything else at once. */
const handler = (ms: number) => (req: IncomingMessage, res: ServerResponse) => {
  if (req.url === '/slow') setTimeout(() => res.end('slow'), ms);
  else res.end('fast');
};

describe('listen', () => {
  test('port 0 picks a free port and reports it', async () => {
    const { server, port } = await listen(handler(0), 0, '127.0.0.1');
    expect(port).toBeGreaterThan(0);
    expect(await get(port, '/')).toEqual({ status: 200, body: 'fast' });
    await closeGracefully(server, 100);
  });

  test('a taken port rejects', async () => {
    const first = await listen(handler(0), 0, '127.0.0.1');
    await expect(listen(handler(0), first.port, '127.0.0.1')).rejects.toThrow(/EADDRINUSE/);
    await closeGracefully(first.server, 100);
  });

  test('CONNECT gets a 405 instead of a silently closed socket', async () => {
    const { server, port } = await listen(handler(0), 0, '127.0.0.1');
    const answer = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      let data = '';
      socket.setEncoding('latin1').on('data', (c: string) => (data += c));
      socket.on('close', () => resolve(data));
      socket.write('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    });
    expect(answer).toMatch(/^HTTP\/1\.1 405 Method Not Allowed\r\n/);
    expect(answer).toContain('x-gatehouse-error: GH_BAD_REQUEST');
    await closeGracefully(server, 100);
  });
});

describe('closeGracefully (SPEC 8)', () => {
  test('stops accepting at once, lets in-flight requests finish and closes idle keep-alive connections', async () => {
    const { server, port } = await listen(handler(300), 0, '127.0.0.1');
    const agent = new Agent({ keepAlive: true });
    await get(port, '/', agent); // leaves an idle keep-alive connection
    const inFlight = get(port, '/slow');
    await new Promise((r) => setTimeout(r, 50));
    const started = performance.now();
    const closed = closeGracefully(server, 5_000);
    expect(await canConnect(port)).toBe(false);
    expect(await inFlight).toEqual({ status: 200, body: 'slow' });
    await closed;
    // Done when the slow request was, not after the keep-alive timeout or the grace period.
    expect(performance.now() - started).toBeLessThan(1_500);
    agent.destroy();
  });

  test('a keep-alive connection busy when closing starts is closed once its response is done', async () => {
    const { server, port } = await listen(handler(200), 0, '127.0.0.1');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const inFlight = get(port, '/slow', agent);
    await new Promise((r) => setTimeout(r, 50));
    const started = performance.now();
    const closed = closeGracefully(server, 10_000);
    expect((await inFlight).body).toBe('slow');
    await closed;
    // Not held open for the 65 s keep-alive timeout, nor cut at the grace period.
    expect(performance.now() - started).toBeLessThan(1_500);
    agent.destroy();
  });

  test('cuts connections still open when the grace period ends', async () => {
    const { server, port } = await listen(handler(5_000), 0, '127.0.0.1');
    const inFlight = get(port, '/slow');
    await new Promise((r) => setTimeout(r, 50));
    const started = performance.now();
    await closeGracefully(server, 200);
    await expect(inFlight).rejects.toThrow();
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});

/** Resolves with how long the server kept a socket that never sent a byte, or -1 if still open after `maxMs`. */
function silentSocketLifetime(port: number, maxMs: number): Promise<number> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    const timer = setTimeout(() => (socket.destroy(), resolve(-1)), maxMs);
    socket.on('close', () => (clearTimeout(timer), resolve(performance.now() - started)));
  });
}

describe('downstream limits (issue 17 findings 7, 8)', () => {
  test('a connection that never sends a byte is closed after the request headers timeout', async () => {
    const { server, port } = await listen(handler(0), 0, '127.0.0.1', { requestHeadersTimeoutMs: 300 });
    const lifetime = await silentSocketLifetime(port, 5_000);
    expect(lifetime).toBeGreaterThan(0);
    await closeGracefully(server, 100);
  });

  test('after its first request a connection keeps the longer idle timeout: a slow response is not cut at the headers timeout', async () => {
    const { server, port } = await listen(handler(800), 0, '127.0.0.1', { requestHeadersTimeoutMs: 300, idleTimeoutMs: 5_000 });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    expect(await get(port, '/slow', agent)).toEqual({ status: 200, body: 'slow' });
    expect(await get(port, '/slow', agent)).toEqual({ status: 200, body: 'slow' });
    agent.destroy();
    await closeGracefully(server, 100);
  });

  test('a request in flight with no bytes either way for the idle timeout is cut', async () => {
    const { server, port } = await listen(handler(3_000), 0, '127.0.0.1', { requestHeadersTimeoutMs: 300, idleTimeoutMs: 500 });
    await expect(get(port, '/slow')).rejects.toThrow();
    await closeGracefully(server, 100);
  });

  test('connections beyond maxConnections are closed on accept; the listener keeps serving', async () => {
    const { server, port } = await listen(handler(0), 0, '127.0.0.1', { maxConnections: 2 });
    const held = [connect(port, '127.0.0.1'), connect(port, '127.0.0.1')];
    await Promise.all(held.map((s) => new Promise((r) => s.once('connect', r))));
    await new Promise((r) => setTimeout(r, 50));
    expect(await silentSocketLifetime(port, 2_000)).toBeGreaterThanOrEqual(0);
    for (const s of held) s.destroy();
    await new Promise((r) => setTimeout(r, 50));
    expect(await get(port, '/')).toEqual({ status: 200, body: 'fast' });
    await closeGracefully(server, 100);
  });

  test('the default connection cap follows the open-file limit', () => {
    expect(defaultMaxConnections('/nonexistent')).toBe(10_000);
    const max = defaultMaxConnections();
    expect(max).toBeGreaterThanOrEqual(64);
    expect(max).toBeLessThanOrEqual(50_000);
  });
});

/** One HTTP/2 (prior knowledge) GET on a fresh session; resolves with status, body and the session. */
function h2get(port: number, path: string, session = h2connect(`http://127.0.0.1:${port}`)): Promise<{ status: number; body: string; session: ClientHttp2Session }> {
  return new Promise((resolve, reject) => {
    session.on('error', reject);
    const stream = session.request({ ':path': path });
    let status = 0;
    let body = '';
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.setEncoding('utf8').on('data', (c: string) => (body += c));
    stream.on('end', () => resolve({ status, body, session }));
    stream.on('error', reject);
  });
}

describe('HTTP/2 with prior knowledge on the plain port (SPEC 3.2.1)', () => {
  test('the same port serves HTTP/1.1 and h2c; a slow h2c stream is not cut at the headers timeout', async () => {
    const { server, port } = await listen(handler(800), 0, '127.0.0.1', { requestHeadersTimeoutMs: 300, idleTimeoutMs: 5_000 });
    expect(await get(port, '/')).toEqual({ status: 200, body: 'fast' });
    const slow = await h2get(port, '/slow');
    expect([slow.status, slow.body]).toEqual([200, 'slow']);
    // The session stays usable for more streams.
    const again = await h2get(port, '/', slow.session);
    expect([again.status, again.body]).toEqual([200, 'fast']);
    slow.session.close();
    await closeGracefully(server, 100);
  });

  test('a graceful close lets an open h2c stream finish, then the session goes', async () => {
    const { server, port } = await listen(handler(300), 0, '127.0.0.1');
    const pending = h2get(port, '/slow');
    await new Promise((r) => setTimeout(r, 50));
    const closed = closeGracefully(server, 5_000);
    const { status, body, session } = await pending;
    expect([status, body]).toEqual([200, 'slow']);
    await closed;
    await new Promise((r) => (session.closed ? r(undefined) : session.once('close', r)));
    expect(session.closed || session.destroyed).toBe(true);
  });

  test('a connection that stops halfway through the preface is closed at the headers timeout', async () => {
    const { server, port } = await listen(handler(0), 0, '127.0.0.1', { requestHeadersTimeoutMs: 300 });
    const lifetime = await new Promise<number>((resolve) => {
      const started = performance.now();
      const socket = connect(port, '127.0.0.1', () => socket.write('PRI * HTTP/2.0\r\n'));
      socket.on('error', () => {});
      const timer = setTimeout(() => (socket.destroy(), resolve(-1)), 5_000);
      socket.on('close', () => (clearTimeout(timer), resolve(performance.now() - started)));
    });
    expect(lifetime).toBeGreaterThan(0);
    await closeGracefully(server, 100);
  });
});
