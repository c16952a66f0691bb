import { describe, expect, it } from 'vitest';
import { boundaryOf, MultipartParser } from './execute/incremental.ts';
import { EventStreamParser } from './execute/remote.ts';

/** Feeds `text` in chunks of `size` bytes (1: every byte on its own) and collects what the parser completes. */
function feed<T>(push: (chunk: Buffer) => T[] | undefined | Error, text: string, size: number): T[] | 'too large' {
  const bytes = Buffer.from(text);
  const out: T[] = [];
  for (let i = 0; i < bytes.length; i += size) {
    const got = push(bytes.subarray(i, i + size));
    if (!Array.isArray(got)) return 'too large';
    out.push(...got);
  }
  return out;
}

describe('MultipartParser (incremental delivery answers)', () => {
  const body = '\r\n---\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 43\r\n\r\n{"data":{"hello":"a---b\\r\\n---"},"hasNext":true}\r\n---\r\ncontent-type: application/json\r\n\r\n{"incremental":[{"data":{"ping":"pong"},"path":[]}],"hasNext":false}\r\n-----\r\n';

  it('finds the parts whatever the chunking (one byte at a time included), the boundary text inside JSON left alone', () => {
    for (const size of [1, 2, 3, 5, 7, 64, 1000]) {
      const parser = new MultipartParser('-', 1024);
      const parts = feed((c) => parser.push(c), body, size) as Buffer[];
      expect(parts, `chunks of ${size}`).not.toBe('too large');
      expect(parts.map((p) => JSON.parse(p.toString()))).toEqual([{ data: { hello: 'a---b\r\n---' }, hasNext: true }, { incremental: [{ data: { ping: 'pong' }, path: [] }], hasNext: false }]);
      expect(parser.done).toBe(true);
    }
  });

  it('refuses a part larger than its limit, and a delimiter that never comes', () => {
    for (const size of [3, 1000]) {
      const small = new MultipartParser('-', 16);
      expect(feed((c) => small.push(c), `\r\n---\r\n\r\n{"data":"${'x'.repeat(100)}"}\r\n-----`, size), `chunks of ${size}`).toBe('too large');
    }
    const parser = new MultipartParser('graphql', 64);
    expect(feed((c) => parser.push(c), `--graphql\r\n\r\n${'y'.repeat(1000)}`, 10)).toBe('too large');
  });

  it('reads the boundary of a content type', () => {
    expect(boundaryOf('multipart/mixed; boundary="-"')).toBe('-');
    expect(boundaryOf('multipart/mixed;boundary=graphql;deferSpec=20220824')).toBe('graphql');
    expect(boundaryOf('application/json')).toBeUndefined();
    expect(boundaryOf('multipart/mixed')).toBeUndefined();
  });
});

describe('EventStreamParser (GraphQL over SSE from upstreams)', () => {
  const stream = ': keep-alive\n\nevent: next\r\ndata: {"data":\ndata: {"n":1}}\r\n\r\nevent: next\ndata:{"data":{"n":2}}\n\n:\n\nevent: complete\ndata:\n\n';

  it('finds the events whatever the chunking (CRLF, comments, multi-line data, a space after the colon or not)', () => {
    for (const size of [1, 2, 3, 13, stream.length]) {
      const parser = new EventStreamParser(1024);
      expect(feed((c) => parser.push(c), stream, size)).toEqual([
        { event: 'next', data: '{"data":\n{"n":1}}' },
        { event: 'next', data: '{"data":{"n":2}}' },
        { event: 'complete', data: '' },
      ]);
    }
  });

  it('refuses an event larger than its limit, and a line that never ends', () => {
    const big = new EventStreamParser(32);
    expect(feed((c) => big.push(c), `event: next\ndata: ${'x'.repeat(100)}\n\n`, 7)).toBe('too large');
    const parser = new EventStreamParser(32);
    expect(feed((c) => parser.push(c), `data: ${'y'.repeat(100)}`, 5)).toBe('too large');
    // Many small data lines add up to one event.
    const lines = new EventStreamParser(32);
    expect(feed((c) => lines.push(c), 'data: 12345678\n'.repeat(10), 1000)).toBe('too large');
  });
});
