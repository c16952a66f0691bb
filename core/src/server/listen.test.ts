import { Agent, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { describe, expect, test } from 'vitest';
import { closeGracefully, listen } from './listen.ts';

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
