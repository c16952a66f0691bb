import { createHash } from 'node:crypto';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import { bufferRequestBody, refuseTooLarge, type BufferFailure, type BufferedBody } from './request-body.ts';

let server: Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

/** A real server whose handler gets each request; resolves with its port. */
async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<number> {
  server = createServer(handler);
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return (server!.address() as AddressInfo).port;
}

/** POSTs `body` (chunked in 16 KiB writes when `chunked`), resolving with the status and body of the answer. */
function post(port: number, body: Buffer, chunked: boolean): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ port, method: 'POST', agent: false, headers: chunked ? {} : { 'content-length': String(body.length) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, text }));
    });
    req.on('error', reject);
    if (!chunked) return void req.end(body);
    for (let at = 0; at < body.length; at += 16_384) req.write(body.subarray(at, at + 16_384));
    req.end();
  });
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const bytes = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + 7) & 0xff));

/** Reads the request as a destination would, later (auth takes time): every byte, and `end`. */
async function readLater(req: IncomingMessage): Promise<Buffer> {
  await new Promise((r) => setTimeout(r, 20));
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe('bufferRequestBody', () => {
  test.each([false, true])('a body within the limit: auth gets all of it, and the request stream still holds every byte (chunked=%s)', async (chunked) => {
    const body = bytes(100_000);
    let buffered: BufferedBody | BufferFailure | undefined;
    const port = await serve(async (req, res) => {
      buffered = await bufferRequestBody(req, 200_000, false);
      res.end(sha(await readLater(req)));
    });
    expect((await post(port, body, chunked)).text).toBe(sha(body));
    expect(buffered).toMatchObject({ partial: false, size: body.length });
    expect((buffered as BufferedBody).forAuth.equals(body)).toBe(true);
  });

  test('allowPartial: the first maxBytes for auth, little more held in memory, and the whole 8 MB still readable', async () => {
    const body = bytes(8 * 1024 * 1024);
    let buffered: BufferedBody | BufferFailure | undefined;
    let held = -1;
    const port = await serve(async (req, res) => {
      buffered = await bufferRequestBody(req, 1000, true);
      held = req.readableLength;
      res.end(sha(await readLater(req)));
    });
    expect((await post(port, body, true)).text).toBe(sha(body));
    expect(buffered).toMatchObject({ partial: true, size: undefined });
    expect((buffered as BufferedBody).forAuth.equals(body.subarray(0, 1000))).toBe(true);
    // One socket read past the limit, not the body: the rest waited in the socket.
    expect(held).toBeGreaterThan(1000);
    expect(held).toBeLessThan(1000 + 256 * 1024);
  });

  test('over the limit: too-large at once for a declared length, after the limit for a chunked body', async () => {
    const results: (BufferedBody | BufferFailure)[] = [];
    const port = await serve(async (req, res) => {
      results.push(await bufferRequestBody(req, 1000, false));
      req.resume();
      req.on('end', () => res.end());
    });
    await post(port, bytes(5000), false);
    await post(port, bytes(5000), true);
    expect(results).toEqual(['too-large', 'too-large']);
  });

  test('a client that leaves mid-body: aborted, nothing held', async () => {
    let resolveResult: (r: BufferedBody | BufferFailure) => void;
    const result = new Promise<BufferedBody | BufferFailure>((r) => (resolveResult = r));
    let arrived!: () => void;
    const reading = new Promise<void>((r) => (arrived = r));
    const port = await serve((req) => {
      arrived();
      void bufferRequestBody(req, 100_000, false).then(resolveResult);
    });
    const req = request({ port, method: 'POST', agent: false, headers: { 'content-length': '50000' } });
    req.on('error', () => {});
    req.write(bytes(10_000));
    // Leave once the server is reading this body (a fixed delay lost the race on a loaded machine: nothing had arrived yet).
    await reading;
    req.destroy();
    expect(await result).toBe('aborted');
  });
});

describe('refuseTooLarge', () => {
  test('a client still sending a 4 MB body (and asking to close) reads the 413, not a reset', async () => {
    const port = await serve((req, res) => refuseTooLarge(req, res, 'too large'));
    for (const chunked of [false, true]) {
      const reply = await post(port, Buffer.alloc(4 * 1024 * 1024, 'a'), chunked);
      expect(reply).toEqual({ status: 413, text: 'too large\n' });
    }
  });

  test('the connection stays open while the client finishes its body (no reset under its writes), then closes as asked', async () => {
    const port = await serve((req, res) => refuseTooLarge(req, res, 'too large'));
    const socket = connect(port, '127.0.0.1');
    let received = '';
    let failed: Error | undefined;
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => (received += c));
    socket.on('error', (e) => (failed = e));
    let sending = true;
    const closedWhileSending = new Promise<boolean>((resolve) => socket.on('close', () => resolve(sending)));
    socket.write('POST / HTTP/1.1\r\nhost: t\r\nconnection: close\r\ncontent-length: 2097152\r\n\r\n');
    // 2 MiB in 64 KiB writes, 5 ms apart: still sending long after the 413 went out.
    for (let i = 0; i < 32; i++) {
      await new Promise((r) => setTimeout(r, 5));
      socket.write(Buffer.alloc(65_536, 'a'));
    }
    sending = false;
    expect(await closedWhileSending).toBe(false);
    expect(failed).toBeUndefined();
    expect(received).toMatch(/^HTTP\/1\.1 413 /);
    expect(received.endsWith('too large\n')).toBe(true);
  });

  test('a body still arriving after the linger: the connection is closed', async () => {
    const port = await serve((req, res) => refuseTooLarge(req, res, 'too large', [], 100));
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    // Read (and drop) the answer: a paused socket would never see the server close.
    socket.resume();
    const start = Date.now();
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now() - start)));
    socket.write('POST / HTTP/1.1\r\nhost: t\r\ncontent-length: 100000000\r\n\r\n' + 'a'.repeat(1000));
    const after = await closed;
    expect(after).toBeGreaterThanOrEqual(90);
    expect(after).toBeLessThan(2_000);
  });
});
