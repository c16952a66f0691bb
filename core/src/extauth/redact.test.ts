import { describe, expect, it } from 'vitest';
import { bound, createRedactor, MAX_LOGGED_TEXT, redactingLogger } from './redact.ts';

const SECRET = 'Tr0ub4dor&3-horse-Battery';
const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('createRedactor', () => {
  const redact = createRedactor([SECRET, 'abc', 'a/b\\c(d)*e-f|g']);

  it('masks the value, its reverse, case changes and its encodings, keeping the rest of the text', () => {
    const hex = Buffer.from(SECRET).toString('hex');
    for (const form of [SECRET, SECRET.toUpperCase(), [...SECRET].reverse().join(''), hex, hex.toUpperCase(), hex.replace(/../g, '%$&'), encodeURIComponent(SECRET), b64(SECRET), b64(SECRET).replace(/=+$/, '')]) {
      const out = redact(`before ${form} after`);
      expect(out).toMatch(/^before .*after$/);
      expect(out.toLowerCase()).not.toContain(form.toLowerCase());
    }
  });

  it('masks base64 at each of the three alignments inside longer base64 text (and base64url)', () => {
    for (const prefix of ['', 'a', 'ab', 'abc', 'user:']) {
      const encoded = b64(`${prefix}${SECRET}!?`);
      const out = redact(encoded);
      expect(out).toContain('[secret]');
      expect(redact(encoded.replace(/\+/g, '-').replace(/\//g, '_'))).toContain('[secret]');
    }
  });

  it('masks the whole text when the value hides behind separators or partial percent-encoding', () => {
    for (const form of [[...SECRET].join(' '), [...SECRET].join('-'), Buffer.from(SECRET).toString('hex').match(/../g)!.join(':'), `Tr0ub4dor%263-horse-Battery`, `%54r0ub4dor&3-horse-battery`]) {
      const out = redact(`x ${form} y`);
      expect(out.toLowerCase()).not.toContain('tr0ub4dor');
      expect(out).toMatch(/\[secret\]|^\[redacted: it held a secret\]$/);
    }
  });

  it('escapes regular-expression syntax in values, ignores values under 4 characters and keeps other text', () => {
    expect(redact('see a/b\\c(d)*e-f|g here')).toBe('see [secret] here');
    expect(redact('abc and more')).toBe('abc and more');
  });

  it('bounds the text after redacting it (no half secret at the cut)', () => {
    const out = redact(`${'x'.repeat(MAX_LOGGED_TEXT - 5)}${SECRET}${'y'.repeat(200_000)}`);
    expect(out.length).toBeLessThan(MAX_LOGGED_TEXT + 64);
    expect(out).not.toContain(SECRET.slice(0, 5));
    expect(bound('short')).toBe('short');
  });

  it('a logger wrapper redacts messages, nested fields and errors', () => {
    const lines: [object, string][] = [];
    const sink = { debug: () => {}, info: () => {}, warn: () => {}, error: (f: object, m: string) => void lines.push([f, m]) };
    redactingLogger(sink, redact).error({ cause: `key ${SECRET}`, nested: { list: [SECRET] }, err: new Error(`boom ${SECRET}`) }, `failed: ${SECRET}`);
    expect(JSON.stringify(lines)).not.toContain(SECRET);
    expect(lines[0]![1]).toBe('failed: [secret]');
  });
});
