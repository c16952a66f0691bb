import { describe, expect, test } from 'vitest';
import { bufferHttpFilter, bufferLimit } from './buffer.ts';
import type { FilterRequest } from './http-filter.ts';

describe('bufferPerRoute precedence (route, then virtual host, then the Gateway)', () => {
  test.each([
    [undefined, undefined, undefined, undefined],
    [undefined, undefined, { maxRequestBytes: 10 }, 10],
    [undefined, { buffer: { maxRequestBytes: 20 } }, { maxRequestBytes: 10 }, 20],
    [{ buffer: { maxRequestBytes: 30 } }, { buffer: { maxRequestBytes: 20 } }, { maxRequestBytes: 10 }, 30],
    [{ disabled: true }, { buffer: { maxRequestBytes: 20 } }, { maxRequestBytes: 10 }, undefined],
    [undefined, { disabled: true }, { maxRequestBytes: 10 }, undefined],
    [{ buffer: { maxRequestBytes: 30 } }, { disabled: true }, undefined, 30],
  ])('route %j, host %j, listener %j → %s', (route, host, listener, expected) => {
    expect(bufferLimit(route, host, listener)).toBe(expected);
  });

  test('a declared length over the limit is refused without reading', () => {
    let read = false;
    const request = { ctx: { headers: { 'content-length': '11' } }, readBody: () => ((read = true), Promise.resolve(Buffer.alloc(0))) } as unknown as FilterRequest;
    expect(bufferHttpFilter(10).onRequest!(request)).toMatchObject({ status: 413, code: 'GH_BUFFER_TOO_LARGE' });
    expect(read).toBe(false);
  });

  test('a chunked body within the limit gets its length; one over it 413', async () => {
    const headers: Record<string, string> = { 'transfer-encoding': 'chunked' };
    const ok = { ctx: { headers }, readBody: () => Promise.resolve(Buffer.from('12345')) } as unknown as FilterRequest;
    expect(await bufferHttpFilter(10).onRequest!(ok)).toBeUndefined();
    expect(headers['content-length']).toBe('5');
    const big = { ctx: { headers: {} }, readBody: () => Promise.resolve('too-large') } as unknown as FilterRequest;
    expect(await bufferHttpFilter(10).onRequest!(big)).toMatchObject({ status: 413 });
  });
});
