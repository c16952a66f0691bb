import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ClientWatch, readParams, RequestFailure, sendAnswer, type RequestParams } from './http.ts';

let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A real server on 127.0.0.1 whose requests go to `handle`; its base URL. */
async function serve(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  server = createServer(handle);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
}

async function post(url: string, body: string): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
}

describe('sendAnswer', () => {
  it('writes a Buffer body byte for byte, small (one write with the head) or large, with its length', async () => {
    // UTF-8 multibyte characters, and bytes that are not UTF-8 at all: an upstream's answer goes out unchanged.
    const small = Buffer.concat([Buffer.from('{"data":{"title":"Café ☕ 𝄞"}}'), Buffer.from([0xff, 0xfe, 0x80, 0x00, 0x7f])]);
    const large = Buffer.alloc(200 * 1024, Buffer.from('{"é":"𝄞"}'));
    const url = await serve((req, res) => sendAnswer(res, 'application/json', { status: 200, body: req.url === '/large' ? large : small, contentType: 'application/json', headers: { 'cache-control': 'no-store' } }));
    for (const [path, expected] of [['/small', small], ['/large', large]] as const) {
      const response = await fetch(url + path);
      expect(response.headers.get('content-length')).toBe(String(expected.length));
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(Buffer.from(await response.arrayBuffer()).equals(expected)).toBe(true);
    }
  });
});

describe('ClientWatch', () => {
  it('aborts once when the client leaves before the response, and runs only the listeners added before', async () => {
    const seen: string[] = [];
    let watch: ClientWatch | undefined;
    let watching!: () => void;
    const received = new Promise<void>((resolve) => (watching = resolve));
    let aborted!: () => void;
    const left = new Promise<void>((resolve) => (aborted = resolve));
    const url = await serve((_req, res) => {
      watch = new ClientWatch(res);
      watch.addEventListener('abort', () => seen.push('first'));
      watch.addEventListener('abort', () => {
        seen.push('second');
        aborted();
      });
      watching();
    });
    const req = request(url, { method: 'GET' });
    req.on('error', () => undefined);
    req.end();
    // Gone before any answer, once the server has the request: it sees the connection close.
    await received;
    req.destroy();
    await left;
    expect(watch!.aborted).toBe(true);
    watch!.addEventListener('abort', () => seen.push('late'));
    expect(seen).toEqual(['first', 'second']);
  });

  it('does not abort once the response was written, however the connection ends', async () => {
    let watch: ClientWatch | undefined;
    let aborts = 0;
    let closed!: () => void;
    const responseClosed = new Promise<void>((resolve) => (closed = resolve));
    const url = await serve((_req, res) => {
      watch = new ClientWatch(res);
      watch.addEventListener('abort', () => aborts++);
      // Registered after the watch's own listener: by then it has run.
      res.on('close', () => closed());
      res.end('ok');
    });
    const response = await fetch(url, { headers: { connection: 'close' } });
    expect(await response.text()).toBe('ok');
    await responseClosed;
    expect(watch!.aborted).toBe(false);
    expect(aborts).toBe(0);
  });
});

describe('readParams', () => {
  it('reads a body sent again from its first reading (same query string, frozen empty members, the same bytes to forward)', async () => {
    const read: (RequestParams | RequestFailure)[] = [];
    const url = await serve(async (req, res) => {
      read.push((await readParams(req)) as RequestParams | RequestFailure);
      res.end();
    });
    const body = JSON.stringify({ query: '{ a }', operationName: null, variables: {}, extensions: {} });
    await post(url, body);
    await post(url, body);
    const [first, second] = read as RequestParams[];
    expect(second).toEqual(first);
    expect(second!.query).toBe(first!.query);
    expect(Object.isFrozen(second)).toBe(true);
    expect(Object.isFrozen(second!.variables)).toBe(true);
    expect(second!.rawBody!.toString()).toBe(body);
  });

  it('parses a body with variables every time (its values are the request\'s own) and refuses bad ones every time', async () => {
    const read: unknown[] = [];
    const url = await serve(async (req, res) => {
      read.push(await readParams(req));
      res.end();
    });
    const body = JSON.stringify({ query: 'query ($id: ID) { a(id: $id) }', variables: { id: '1' } });
    await post(url, body);
    await post(url, body);
    await post(url, '{"query": 1}');
    await post(url, '{"query": 1}');
    const [first, second, bad1, bad2] = read as [RequestParams, RequestParams, RequestFailure, RequestFailure];
    expect(second).toEqual(first);
    expect(second.variables).not.toBe(first.variables);
    expect(Object.isFrozen(second.variables)).toBe(false);
    expect(bad1).toBeInstanceOf(RequestFailure);
    expect(bad2).toBeInstanceOf(RequestFailure);
  });
});
