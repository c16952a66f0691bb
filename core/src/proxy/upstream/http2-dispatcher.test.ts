import { once } from 'node:events';
import { createServer, type Http2Server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { Http2Dispatcher } from './http2-dispatcher.ts';
import { refusedPort } from '../../../../test/support/upstream.ts';

/** A real h2c server; `onStream` answers each stream. */
async function h2cServer(onStream: (stream: ServerHttp2Stream, headers: Record<string, string | string[] | undefined>) => void, settings = {}): Promise<{ server: Http2Server; origin: string; sessions: () => number }> {
  const server = createServer({ settings });
  let sessions = 0;
  server.on('session', () => sessions++);
  server.on('stream', (stream, headers) => {
    stream.on('error', () => {});
    onStream(stream, headers as Record<string, string>);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sessions: () => sessions };
}

const open: { close(): unknown }[] = [];
afterEach(async () => {
  for (const thing of open.splice(0)) await thing.close();
});

describe('Http2Dispatcher', () => {
  test('a request with a body gets the answer, its headers and trailers; host becomes :authority, te: trailers passes, connection headers do not', async () => {
    let seen: Record<string, unknown> = {};
    const { server, origin } = await h2cServer((stream, headers) => {
      seen = headers;
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        stream.respond({ ':status': 200, 'content-type': 'text/plain' }, { waitForTrailers: true });
        stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'x-checksum': String(Buffer.concat(chunks).length) }));
        stream.end(`got ${Buffer.concat(chunks)}`);
      });
    });
    open.push(server);
    const pool = new Http2Dispatcher(origin);
    open.push(pool);
    const res = await pool.request({ path: '/echo?x=1', method: 'POST', headers: ['host', 'api.test', 'te', 'trailers', 'connection', 'keep-alive', 'x-a', '1', 'x-a', '2'], body: 'hello' });
    expect(res.statusCode).toBe(200);
    expect(await res.body.text()).toBe('got hello');
    expect(res.trailers).toEqual({ 'grpc-status': '0', 'x-checksum': '5' });
    expect(seen).toMatchObject({ ':authority': 'api.test', ':path': '/echo?x=1', ':method': 'POST', te: 'trailers', 'x-a': '1, 2' });
    expect(seen).not.toHaveProperty('connection');
  });

  test('a refused connection fails the call with ECONNREFUSED (a connect failure, as for HTTP/1.1 pools)', async () => {
    const pool = new Http2Dispatcher(`http://127.0.0.1:${await refusedPort()}`);
    open.push(pool);
    await expect(pool.request({ path: '/', method: 'GET' })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  test('no response headers within headersTimeout: UND_ERR_HEADERS_TIMEOUT, and the server sees the stream cancelled', async () => {
    const codes: number[] = [];
    const { server, origin } = await h2cServer((stream) => stream.on('close', () => codes.push(stream.rstCode)));
    open.push(server);
    const pool = new Http2Dispatcher(origin);
    open.push(pool);
    await expect(pool.request({ path: '/slow', method: 'GET', headersTimeout: 200 })).rejects.toMatchObject({ code: 'UND_ERR_HEADERS_TIMEOUT' });
    await expect.poll(() => codes).toEqual([8]); // NGHTTP2_CANCEL
  });

  test('calls beyond streams × connections wait their turn and all complete; connections are capped', async () => {
    let inFlight = 0;
    let peak = 0;
    const { server, origin, sessions } = await h2cServer((stream) => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      setTimeout(() => {
        inFlight--;
        stream.respond({ ':status': 200 });
        stream.end('ok');
      }, 20);
    });
    open.push(server);
    const pool = new Http2Dispatcher(origin, { maxSessions: 2, maxStreams: 5 });
    open.push(pool);
    const answers = await Promise.all(Array.from({ length: 40 }, () => pool.request({ path: '/', method: 'GET' }).then((r) => r.body.text())));
    expect(answers.every((a) => a === 'ok')).toBe(true);
    expect(peak).toBeLessThanOrEqual(10);
    expect(sessions()).toBe(2);
  });

  test('the server’s own stream limit (SETTINGS) is respected', async () => {
    let inFlight = 0;
    let peak = 0;
    const { server, origin } = await h2cServer(
      (stream) => {
        inFlight++;
        peak = Math.max(peak, inFlight);
        setTimeout(() => {
          inFlight--;
          stream.respond({ ':status': 204 });
          stream.end();
        }, 20);
      },
      { maxConcurrentStreams: 3 },
    );
    open.push(server);
    const pool = new Http2Dispatcher(origin, { maxSessions: 1 });
    open.push(pool);
    // The first call goes out before SETTINGS arrive; the rest follow the server's limit.
    await pool.request({ path: '/', method: 'GET' }).then((r) => r.body.dump());
    await Promise.all(Array.from({ length: 12 }, () => pool.request({ path: '/', method: 'GET' }).then((r) => r.body.dump())));
    expect(peak).toBeLessThanOrEqual(3);
  });

  test('after GOAWAY new calls open a new connection; the call in flight on the old one finishes', async () => {
    const { server, origin, sessions } = await h2cServer((stream, headers) => {
      if (headers[':path'] === '/goaway') {
        stream.respond({ ':status': 200 });
        stream.end('bye');
        stream.session?.goaway();
        return;
      }
      stream.respond({ ':status': 200 });
      stream.end('hi');
    });
    open.push(server);
    const pool = new Http2Dispatcher(origin, { maxSessions: 1 });
    open.push(pool);
    expect(await (await pool.request({ path: '/goaway', method: 'GET' })).body.text()).toBe('bye');
    await new Promise((r) => setTimeout(r, 50));
    expect(await (await pool.request({ path: '/', method: 'GET' })).body.text()).toBe('hi');
    expect(sessions()).toBe(2);
  });

  test('a connection that cannot even be opened (TLS options OpenSSL refuses) fails the call; nothing is thrown', async () => {
    const pool = new Http2Dispatcher(`https://127.0.0.1:${await refusedPort()}`, { tls: { ciphers: 'NO-SUCH-CIPHER' } });
    open.push(pool);
    await expect(pool.request({ path: '/', method: 'GET' })).rejects.toThrow(/cipher/i);
  });

  test('a handler that throws ends its call (the stream is reset) instead of reaching the process', async () => {
    const resets: number[] = [];
    const { server, origin } = await h2cServer((stream) => {
      stream.on('close', () => resets.push(stream.rstCode));
      stream.respond({ ':status': 200 });
      stream.write('first');
    });
    open.push(server);
    const pool = new Http2Dispatcher(origin);
    open.push(pool);
    const failed = await new Promise<Error>((resolve) => {
      pool.dispatch(
        { path: '/', method: 'GET' },
        {
          onResponseStart() {
            throw new Error('handler bug');
          },
          onResponseError(_controller, error) {
            resolve(error);
          },
        },
      );
    });
    expect(failed.message).toBe('handler bug');
    await expect.poll(() => resets).toEqual([8]);
  });
});
