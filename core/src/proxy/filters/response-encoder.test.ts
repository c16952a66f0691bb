import { createServer, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough, Transform } from 'node:stream';
import { createGzip, gunzipSync } from 'node:zlib';
import { afterEach, describe, expect, test } from 'vitest';
import { EncodedBody } from './response-encoder.ts';

let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A real server whose one response `respond` writes; the client's view of it. */
async function exchange(respond: (res: ServerResponse) => void, read: (res: import('node:http').IncomingMessage) => Promise<unknown> = collect): Promise<unknown> {
  server = createServer((_req, res) => respond(res));
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, agent: false }, (res) => read(res).then(resolve, reject));
    req.on('error', reject);
    req.end();
  });
}

function collect(res: import('node:http').IncomingMessage): Promise<{ body: Buffer; trailers: NodeJS.Dict<string> }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve({ body: Buffer.concat(chunks), trailers: res.trailers }));
  });
}

const upper = () =>
  new Transform({
    transform(chunk: Buffer, _enc, done) {
      done(null, Buffer.from(chunk.toString('latin1').toUpperCase(), 'latin1'));
    },
  });

describe('EncodedBody', () => {
  test('encoders chain in order; the first one\'s finish writes last bytes and takes the trailers, the rest reach the client', async () => {
    const finished: string[] = [];
    const got = (await exchange((res) => {
      res.writeHead(200, { trailer: 'x-left' });
      const first = upper();
      const encoded = new EncodedBody(
        [
          {
            stream: first,
            finish(trailers) {
              finished.push('first');
              first.write(`[end ${String(trailers?.['x-status'])}]`);
              return { 'x-left': 'yes' };
            },
          },
          { stream: createGzip() },
        ],
        res,
        () => {},
      );
      encoded.write(Buffer.from('hello '));
      encoded.write(Buffer.from('world '));
      encoded.end({ 'x-status': '0' });
    })) as { body: Buffer; trailers: NodeJS.Dict<string> };
    expect(finished).toEqual(['first']);
    expect(gunzipSync(got.body).toString()).toBe('HELLO WORLD [END 0]');
    expect(got.trailers['x-left']).toBe('yes');
  });

  test('write returns false while the encoders are full and drain comes when they empty', async () => {
    const sizes: boolean[] = [];
    let drained = false;
    await exchange((res) => {
      res.writeHead(200);
      // An encoder that takes a while per chunk: its input backs up.
      const slow = new Transform({
        highWaterMark: 16,
        transform(chunk: Buffer, _enc, done) {
          setTimeout(() => done(null, chunk), 5);
        },
      });
      const encoded = new EncodedBody([{ stream: slow }], res, () => {});
      sizes.push(encoded.write(Buffer.alloc(1024, 1)));
      encoded.once('drain', () => {
        drained = true;
        encoded.end(undefined);
      });
    });
    expect(sizes).toEqual([false]);
    expect(drained).toBe(true);
  });

  test('a client that leaves destroys the encoders', async () => {
    let stream: PassThrough | undefined;
    let closed!: () => void;
    const gone = new Promise<void>((resolve) => (closed = resolve));
    await exchange(
      (res) => {
        res.writeHead(200);
        stream = new PassThrough();
        const encoded = new EncodedBody([{ stream }], res, () => {});
        encoded.write(Buffer.alloc(64 * 1024, 2));
        res.once('close', () => setImmediate(closed));
      },
      async (res) => {
        await new Promise((resolve) => res.once('data', resolve));
        res.destroy();
        await gone;
      },
    );
    expect(stream!.destroyed).toBe(true);
  });

  test('an encoder that fails cuts the response and reports it once', async () => {
    const errors: string[] = [];
    const outcome = await exchange(
      (res) => {
        res.writeHead(200);
        res.flushHeaders();
        const bad = new Transform({
          transform(_chunk, _enc, done) {
            done(new Error('encoder broke'));
          },
        });
        const encoded = new EncodedBody([{ stream: bad }, { stream: new PassThrough() }], res, (e) => errors.push(e.message));
        encoded.write(Buffer.from('x'));
      },
      (res) =>
        new Promise((resolve) => {
          res.on('error', () => {});
          res.on('close', () => resolve(res.complete ? 'ended' : 'cut'));
          res.resume();
        }),
    );
    expect(outcome).toBe('cut');
    expect(errors).toEqual(['encoder broke']);
  });
});
