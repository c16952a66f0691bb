import { PassThrough } from 'node:stream';
import { gunzipSync, brotliDecompressSync } from 'node:zlib';
import { describe, expect, test } from 'vitest';
import { chooseCoding, compressible, compressionHttpFilter, compressionPlan } from './compression.ts';
import type { FilterRequest, ResponseBodyEncoder } from './http-filter.ts';

const plan = compressionPlan({});

function request(acceptEncoding: string | undefined, method = 'GET'): FilterRequest & { encoders: ResponseBodyEncoder[] } {
  const metadata = new Map<string, unknown>();
  const encoders: ResponseBodyEncoder[] = [];
  return {
    method,
    metadata,
    ctx: { headers: acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding } },
    encoders,
    encodeResponseBody: (e: ResponseBodyEncoder) => encoders.push(e),
  } as unknown as FilterRequest & { encoders: ResponseBodyEncoder[] };
}

async function drain(stream: PassThrough | ResponseBodyEncoder['stream'], input: Buffer): Promise<Buffer> {
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise((resolve) => stream.once('end', resolve));
  stream.end(input);
  await done;
  return Buffer.concat(chunks);
}

describe('Accept-Encoding negotiation', () => {
  test.each([
    [undefined, undefined],
    ['', undefined],
    ['gzip', 'gzip'],
    ['br', 'br'],
    ['gzip, br', 'br'],
    ['gzip;q=1, br;q=0.5', 'gzip'],
    ['br;q=0, gzip', 'gzip'],
    ['gzip;q=0, br;q=0', undefined],
    ['identity', undefined],
    ['*', 'br'],
    ['*;q=0.5, gzip', 'gzip'],
    ['*, br;q=0', 'gzip'],
    ['deflate, x-gzip;q=0.8', 'gzip'],
    ['GZIP ; Q=0.3 , BR ; q=0.2', 'gzip'],
    ['gzip;q=2', undefined],
    ['gzip;q=abc', 'gzip'],
  ])('%j → %s', (header, expected) => {
    expect(chooseCoding(header)).toBe(expected);
  });
});

describe('which responses are compressed (Envoy compressor rules)', () => {
  const json = ['content-type', 'application/json; charset=utf-8', 'content-length', '1000'];
  test('a listed type over the minimum length', () => {
    expect(compressible(plan, 'GET', 200, json)).toBe(true);
    expect(compressible(plan, 'GET', 404, json)).toBe(true);
    expect(compressible(plan, 'GET', 200, ['content-type', 'text/plain'])).toBe(true);
    // No content-type: Envoy compresses.
    expect(compressible(plan, 'GET', 200, [])).toBe(true);
  });
  test('not HEAD, 204, 206, 304, 1xx, ranges, encoded, no-transform, unlisted types, short bodies', () => {
    expect(compressible(plan, 'HEAD', 200, json)).toBe(false);
    for (const status of [101, 204, 206, 304]) expect(compressible(plan, 'GET', status, json)).toBe(false);
    expect(compressible(plan, 'GET', 200, [...json, 'content-range', 'bytes 0-9/100'])).toBe(false);
    expect(compressible(plan, 'GET', 200, [...json, 'content-encoding', 'gzip'])).toBe(false);
    expect(compressible(plan, 'GET', 200, [...json, 'content-encoding', 'identity'])).toBe(true);
    expect(compressible(plan, 'GET', 200, [...json, 'cache-control', 'public, no-transform'])).toBe(false);
    expect(compressible(plan, 'GET', 200, ['content-type', 'image/png'])).toBe(false);
    expect(compressible(plan, 'GET', 200, ['content-type', 'application/grpc'])).toBe(false);
    expect(compressible(plan, 'GET', 200, ['content-type', 'text/plain', 'content-length', '29'])).toBe(false);
    expect(compressible(plan, 'GET', 200, ['content-type', 'text/plain', 'content-length', '30'])).toBe(true);
  });
  test('contentType, contentLength and disableOnEtagHeader are honoured', () => {
    const custom = compressionPlan({ contentType: ['Application/X-Custom'], contentLength: 100, disableOnEtagHeader: true });
    expect(compressible(custom, 'GET', 200, ['content-type', 'application/x-custom;v=1'])).toBe(true);
    expect(compressible(custom, 'GET', 200, ['content-type', 'application/json'])).toBe(false);
    expect(compressible(custom, 'GET', 200, ['content-length', '99'])).toBe(false);
    expect(compressible(custom, 'GET', 200, ['etag', 'W/"x"'])).toBe(false);
  });
  test('levels, strategies and window map to zlib (enum names or numbers, as protojson gives them)', () => {
    expect(compressionPlan({}).gzip).toEqual({ level: -1, memLevel: 5, windowBits: 12, strategy: 0 });
    expect(compressionPlan({ compressionLevel: 'BEST', compressionStrategy: 'RLE', memoryLevel: 9, windowBits: 15 }).gzip).toEqual({ level: 9, memLevel: 9, windowBits: 15, strategy: 3 });
    expect(compressionPlan({ compressionLevel: 2, compressionStrategy: 2 }).gzip).toMatchObject({ level: 1, strategy: 2 });
    expect(compressionPlan({ compressionLevel: 'SPEED' }).brotliQuality).toBe(1);
  });
});

describe('the filter', () => {
  test('gzip: headers adjusted as Envoy does, body round-trips', async () => {
    const filter = compressionHttpFilter(plan);
    const req = request('gzip');
    filter.onRequest!(req);
    const headers = ['content-type', 'text/plain', 'content-length', '5000', 'etag', '"strong"', 'vary', 'origin'];
    filter.onResponseHeaders!(req, 200, headers);
    expect(headers).toEqual(['content-type', 'text/plain', 'vary', 'origin, accept-encoding', 'content-encoding', 'gzip']);
    expect(req.encoders).toHaveLength(1);
    const body = Buffer.from('hello '.repeat(1000).slice(0, 5000));
    expect(gunzipSync(await drain(req.encoders[0]!.stream as PassThrough, body))).toEqual(body);
  });

  test('br: a weak etag stays; brotli round-trips', async () => {
    const filter = compressionHttpFilter(plan);
    const req = request('br;q=1, gzip;q=0.9');
    filter.onRequest!(req);
    const headers = ['content-type', 'application/json', 'etag', 'W/"weak"'];
    filter.onResponseHeaders!(req, 200, headers);
    expect(headers).toEqual(['content-type', 'application/json', 'etag', 'W/"weak"', 'vary', 'accept-encoding', 'content-encoding', 'br']);
    const body = Buffer.from(JSON.stringify({ items: Array.from({ length: 500 }, (_, i) => ({ i, name: `item ${i}` })) }));
    expect(brotliDecompressSync(await drain(req.encoders[0]!.stream as PassThrough, body))).toEqual(body);
  });

  test('a client that accepts no coding still gets Vary on a compressible response, and nothing is encoded', () => {
    const filter = compressionHttpFilter(plan);
    const req = request(undefined);
    filter.onRequest!(req);
    const headers = ['content-type', 'text/html', 'vary', 'Accept-Encoding'];
    filter.onResponseHeaders!(req, 200, headers);
    expect(headers).toEqual(['content-type', 'text/html', 'vary', 'Accept-Encoding']);
    expect(req.encoders).toHaveLength(0);
  });

  test('removeAcceptEncodingHeader drops the header sent upstream, after the choice is made', () => {
    const filter = compressionHttpFilter(compressionPlan({ removeAcceptEncodingHeader: true }));
    const req = request('gzip');
    filter.onRequest!(req);
    expect(req.ctx.headers['accept-encoding']).toBeUndefined();
    filter.onResponseHeaders!(req, 200, ['content-type', 'text/plain']);
    expect(req.encoders).toHaveLength(1);
  });
});
