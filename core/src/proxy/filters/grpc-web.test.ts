import { describe, expect, test } from 'vitest';
import { Base64Decoder, Base64Encoder, parseGrpcWebType, trailerFrame } from './grpc-web.ts';
import type { Transform } from 'node:stream';

async function run(stream: Transform, pieces: (string | Buffer)[]): Promise<Buffer> {
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer | string) => chunks.push(Buffer.isBuffer(c) ? c : Buffer.from(c, 'latin1')));
  const done = new Promise<void>((resolve, reject) => {
    stream.once('end', resolve);
    stream.once('error', reject);
  });
  for (const p of pieces) stream.write(typeof p === 'string' ? Buffer.from(p, 'latin1') : p);
  stream.end();
  await done;
  return Buffer.concat(chunks);
}

describe('gRPC-Web content types', () => {
  test.each([
    ['application/grpc-web', { text: false, suffix: '' }],
    ['application/grpc-web+proto', { text: false, suffix: '+proto' }],
    ['application/grpc-web+json; charset=utf-8', { text: false, suffix: '+json' }],
    ['application/grpc-web-text', { text: true, suffix: '' }],
    ['Application/gRPC-Web-Text+proto', { text: true, suffix: '+proto' }],
    ['application/grpc-web+', undefined],
    ['application/grpc-webx', undefined],
    ['application/grpc', undefined],
  ])('%s', (type, expected) => {
    expect(parseGrpcWebType(type)).toEqual(expected);
  });
});

describe('base64 streaming', () => {
  const bytes = Buffer.from(Array.from({ length: 1000 }, (_, i) => (i * 37) % 256));

  test('the decoder takes any chunking, and messages padded one by one', async () => {
    const text = bytes.toString('base64');
    const pieces = [text.slice(0, 1), text.slice(1, 7), text.slice(7, 500), text.slice(500)];
    expect(await run(new Base64Decoder(), pieces)).toEqual(bytes);
    // Two messages, each padded on its own (what grpc-web clients send).
    const a = Buffer.from('ab');
    const b = Buffer.from('cde');
    expect(await run(new Base64Decoder(), [a.toString('base64') + b.toString('base64')])).toEqual(Buffer.concat([a, b]));
  });

  test('the decoder refuses characters outside base64, padding inside a group, and a truncated group', async () => {
    await expect(run(new Base64Decoder(), ['AAAA!AAA'])).rejects.toThrow(/not base64/);
    await expect(run(new Base64Decoder(), ['A=AA'])).rejects.toThrow(/not base64/);
    await expect(run(new Base64Decoder(), ['AAAA AAA'])).rejects.toThrow(/not base64/);
    await expect(run(new Base64Decoder(), ['AAAAAA'])).rejects.toThrow(/ends inside/);
  });

  test('the encoder makes one base64 stream whatever the chunking', async () => {
    const pieces = [bytes.subarray(0, 1), bytes.subarray(1, 5), bytes.subarray(5, 998), bytes.subarray(998)];
    expect((await run(new Base64Encoder(), pieces)).toString('latin1')).toBe(bytes.toString('base64'));
  });
});

test('trailer frame: flag 0x80, big-endian length, name: value lines', () => {
  const frame = trailerFrame({ 'grpc-status': '0', 'Grpc-Message': 'ok', 'x-multi': ['a', 'b'] });
  expect(frame[0]).toBe(0x80);
  const body = 'grpc-status: 0\r\ngrpc-message: ok\r\nx-multi: a\r\nx-multi: b\r\n';
  expect(frame.readUInt32BE(1)).toBe(body.length);
  expect(frame.subarray(5).toString()).toBe(body);
  expect(trailerFrame(undefined)).toEqual(Buffer.from([0x80, 0, 0, 0, 0]));
});
