/**
 * Differential tests (issue 10 acceptance): the sandbox's TextEncoder, TextDecoder, atob and btoa
 * against Node's own, on edge cases and random input, failures included.
 */
import { describe, expect, test } from 'vitest';
import { atob, btoa, TextDecoder, TextEncoder } from './encoding.ts';

/** A deterministic generator, so a failure can be replayed. */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    return x / 0x7fffffff;
  };
}

const outcome = (run: () => unknown): { ok: unknown } | { error: string } => {
  try {
    const value = run();
    return { ok: value instanceof Uint8Array ? [...value] : value };
  } catch (error) {
    return { error: (error as Error).name };
  }
};

const strings = ['', 'a', 'héllo wörld', '€', '𝄞 music', '\u0000\u007f\u0080', '\ud800', '\udc00', 'a\ud800b', '\udbff\udfff', '\ud83d\ude00', '\ufeffbom'];
const byteCases = [
  [],
  [0xef, 0xbb, 0xbf, 0x61],
  [0xc0, 0x80],
  [0xe0, 0x80, 0x80],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf0, 0x9f, 0x98],
  [0xe2, 0x82],
  [0xff, 0xfe, 0x41],
  [0x80, 0x80, 0x41],
  [0xc3, 0x28],
  [0xf0, 0x28, 0x8c, 0xbc],
];

describe('TextEncoder / TextDecoder match Node', () => {
  test.each(strings)('encode %j', (s) => {
    expect(outcome(() => new TextEncoder().encode(s))).toEqual(outcome(() => new globalThis.TextEncoder().encode(s)));
  });

  test.each(byteCases.map((b) => [b]))('decode %j (replacement and fatal)', (bytes) => {
    const input = new Uint8Array(bytes);
    expect(outcome(() => new TextDecoder().decode(input))).toEqual(outcome(() => new globalThis.TextDecoder().decode(input)));
    expect(outcome(() => new TextDecoder('utf-8', { fatal: true }).decode(input))).toEqual(outcome(() => new globalThis.TextDecoder('utf-8', { fatal: true }).decode(input)));
    expect(outcome(() => new TextDecoder('utf-8', { ignoreBOM: true }).decode(input))).toEqual(outcome(() => new globalThis.TextDecoder('utf-8', { ignoreBOM: true }).decode(input)));
  });

  test('random byte strings decode alike (2,000 cases)', () => {
    const next = random(7);
    for (let n = 0; n < 2_000; n++) {
      const bytes = new Uint8Array(Math.floor(next() * 12)).map(() => (next() < 0.5 ? Math.floor(next() * 256) : [0xc2, 0xe0, 0xed, 0xf0, 0xf4, 0x80, 0xbf][Math.floor(next() * 7)]!));
      expect(new TextDecoder().decode(bytes)).toBe(new globalThis.TextDecoder().decode(bytes));
    }
  });

  test('random strings round-trip alike (2,000 cases)', () => {
    const next = random(11);
    for (let n = 0; n < 2_000; n++) {
      const s = String.fromCharCode(...Array.from({ length: Math.floor(next() * 8) }, () => Math.floor(next() * 0x10000)));
      expect([...new TextEncoder().encode(s)]).toEqual([...new globalThis.TextEncoder().encode(s)]);
    }
  });

  test('streaming decode splits multi-byte sequences like Node', () => {
    const bytes = new globalThis.TextEncoder().encode('a€𝄞b');
    for (let cut = 0; cut <= bytes.length; cut++) {
      const ours = new TextDecoder();
      const node = new globalThis.TextDecoder();
      const a = ours.decode(bytes.subarray(0, cut), { stream: true }) + ours.decode(bytes.subarray(cut));
      const b = node.decode(bytes.subarray(0, cut), { stream: true }) + node.decode(bytes.subarray(cut));
      expect(a).toBe(b);
    }
  });

  test('encodeInto and unsupported labels', () => {
    const ours = new Uint8Array(5);
    const node = new Uint8Array(5);
    expect(new TextEncoder().encodeInto('a€b', ours)).toEqual(new globalThis.TextEncoder().encodeInto('a€b', node));
    expect([...ours]).toEqual([...node]);
    expect(() => new TextDecoder('latin1')).toThrow(RangeError);
  });

  // Issue 26 item 7: every UTF-8 label of the Encoding standard, and its whitespace and case rules, as Node has them.
  test.each(['utf-8', 'utf8', 'unicode-1-1-utf-8', 'unicode11utf8', 'unicode20utf8', 'x-unicode20utf8', ' UTF-8\t', '\nUtf8\f', '\u00a0utf-8', 'utf-8\ufeff', 'utf\u212a', 'utf-16', 'latin1', ''])('the label %j is taken or refused as Node does', (label) => {
    const answer = (make: () => { encoding: string }): string => {
      try {
        return make().encoding;
      } catch (error) {
        return (error as Error).name;
      }
    };
    const node = answer(() => new globalThis.TextDecoder(label));
    // The sandbox decodes UTF-8 only: a label Node maps to another encoding is a RangeError here (docs/plugins.md).
    expect(answer(() => new TextDecoder(label))).toBe(node === 'utf-8' || node === 'RangeError' ? node : 'RangeError');
  });
});

describe('atob / btoa match Node', () => {
  test.each(['', 'f', 'fo', 'foo', 'foob', 'fooba', 'foobar', '\u00ff\u0000', 'ÿþ'])('btoa %j', (s) => {
    expect(outcome(() => btoa(s))).toEqual(outcome(() => globalThis.btoa(s)));
  });

  test.each(['€', '\ud800'])('btoa refuses %j above U+00FF', (s) => {
    expect(outcome(() => btoa(s))).toEqual({ error: 'InvalidCharacterError' });
    expect(() => globalThis.btoa(s)).toThrow();
  });

  test.each(['', 'Zg==', 'Zg', 'Zm8=', 'Zm9v', ' Zm 9v\n', 'Zg=', 'Zg===', 'Z', 'Zm9v!', 'Zm=9', '====', 'YQ==YQ==', '\tYW Jj\r\n'])('atob %j', (s) => {
    const ours = outcome(() => atob(s));
    const node = outcome(() => globalThis.atob(s));
    if ('error' in node) expect(ours).toEqual({ error: 'InvalidCharacterError' });
    else expect(ours).toEqual(node);
  });

  test('random bytes round-trip alike (1,000 cases)', () => {
    const next = random(3);
    for (let n = 0; n < 1_000; n++) {
      const s = String.fromCharCode(...Array.from({ length: Math.floor(next() * 20) }, () => Math.floor(next() * 256)));
      const encoded = btoa(s);
      expect(encoded).toBe(globalThis.btoa(s));
      expect(atob(encoded)).toBe(globalThis.atob(encoded));
    }
  });
});
