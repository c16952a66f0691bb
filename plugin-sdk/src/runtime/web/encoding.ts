/**
 * WHATWG Encoding (UTF-8 only) and HTML's base64 helpers, in plain JavaScript for the sandbox
 * (SPEC 5.3): `TextEncoder`, `TextDecoder`, `atob`, `btoa`. They run inside the isolate, so they
 * cost no host call; differential tests (./encoding.test.ts) hold them to Node's own.
 */

const REPLACEMENT = 0xfffd;

/** A DOMException-like error (the sandbox has no DOMException). */
function domError(name: string, message: string): Error {
  const error = new Error(message);
  error.name = name;
  return error;
}

/** UTF-8 bytes of `input`, lone surrogates as U+FFFD (WHATWG "UTF-8 encode" of a USVString). */
export function utf8Encode(input: string): Uint8Array {
  // ASCII (a JWT's signing input, most header values) is one byte a character: no worst-case buffer and no copy.
  const ascii = new Uint8Array(input.length);
  let i = 0;
  for (; i < input.length; i++) {
    const c = input.charCodeAt(i);
    if (c >= 0x80) break;
    ascii[i] = c;
  }
  if (i === input.length) return ascii;
  // The exact size first, not a worst-case buffer of 3 bytes a character: a 3 M character string
  // with one non-ASCII character must not need (and be refused) a 9 MB buffer (issue 24 finding 5's class).
  let size = i;
  for (let j = i; j < input.length; j++) {
    const c = input.charCodeAt(j);
    if (c < 0x80) size += 1;
    else if (c < 0x800) size += 2;
    else if (c >= 0xd800 && c <= 0xdbff && j + 1 < input.length && input.charCodeAt(j + 1) >= 0xdc00 && input.charCodeAt(j + 1) <= 0xdfff) {
      size += 4;
      j++;
    } else size += 3;
  }
  const out = new Uint8Array(size);
  out.set(ascii.subarray(0, i));
  let at = i;
  for (; i < input.length; i++) {
    let c = input.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = i + 1 < input.length ? input.charCodeAt(i + 1) : 0;
      if (next >= 0xdc00 && next <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
        i++;
      } else c = REPLACEMENT;
    } else if (c >= 0xdc00 && c <= 0xdfff) c = REPLACEMENT;
    if (c < 0x80) out[at++] = c;
    else if (c < 0x800) {
      out[at++] = 0xc0 | (c >> 6);
      out[at++] = 0x80 | (c & 0x3f);
    } else if (c < 0x10000) {
      out[at++] = 0xe0 | (c >> 12);
      out[at++] = 0x80 | ((c >> 6) & 0x3f);
      out[at++] = 0x80 | (c & 0x3f);
    } else {
      out[at++] = 0xf0 | (c >> 18);
      out[at++] = 0x80 | ((c >> 12) & 0x3f);
      out[at++] = 0x80 | ((c >> 6) & 0x3f);
      out[at++] = 0x80 | (c & 0x3f);
    }
  }
  return out;
}

/**
 * WHATWG "UTF-8 decode" of `bytes`: maximal subparts of invalid sequences become one U+FFFD
 * each, or, with `fatal`, a TypeError.
 */
export function utf8Decode(bytes: Uint8Array, fatal: boolean): string {
  let out = '';
  let chunk: number[] = [];
  const flush = () => {
    out += String.fromCharCode.apply(null, chunk);
    chunk = [];
  };
  const bad = (): void => {
    if (fatal) throw new TypeError('The encoded data was not valid for encoding utf-8');
    chunk.push(REPLACEMENT);
  };
  let i = 0;
  while (i < bytes.length) {
    if (chunk.length > 8192) flush();
    const b = bytes[i]!;
    if (b < 0x80) {
      chunk.push(b);
      i++;
      continue;
    }
    let need: number;
    let code: number;
    let lower = 0x80;
    let upper = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) {
      need = 1;
      code = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      code = b & 0x0f;
      if (b === 0xe0) lower = 0xa0;
      if (b === 0xed) upper = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      code = b & 0x07;
      if (b === 0xf0) lower = 0x90;
      if (b === 0xf4) upper = 0x8f;
    } else {
      bad();
      i++;
      continue;
    }
    let j = 1;
    for (; j <= need; j++) {
      const next = bytes[i + j];
      if (next === undefined || next < lower || next > upper) break;
      lower = 0x80;
      upper = 0xbf;
      code = (code << 6) | (next & 0x3f);
    }
    if (j <= need) {
      // The maximal subpart (the lead byte and the valid continuation bytes so far) is one error.
      bad();
      i += j;
      continue;
    }
    i += need + 1;
    if (code >= 0x10000) {
      code -= 0x10000;
      chunk.push(0xd800 + (code >> 10), 0xdc00 + (code & 0x3ff));
    } else chunk.push(code);
  }
  flush();
  return out;
}

/** Bytes of a BufferSource (a view or an ArrayBuffer), without copying. */
function bytesOf(input: unknown): Uint8Array {
  if (input === undefined) return new Uint8Array(0);
  if (input instanceof ArrayBuffer) return new Uint8Array(input);
  if (ArrayBuffer.isView(input)) return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  throw new TypeError('The "input" argument must be an ArrayBuffer or an ArrayBufferView');
}

/** WHATWG `TextEncoder` (always UTF-8). */
export class TextEncoder {
  get encoding(): string {
    return 'utf-8';
  }

  encode(input: unknown = ''): Uint8Array {
    return utf8Encode(String(input));
  }

  encodeInto(source: unknown, destination: Uint8Array): { read: number; written: number } {
    const text = String(source);
    let read = 0;
    let written = 0;
    for (const char of text) {
      const bytes = utf8Encode(char);
      if (written + bytes.length > destination.length) break;
      destination.set(bytes, written);
      written += bytes.length;
      read += char.length;
    }
    return { read, written };
  }
}

/** The WHATWG Encoding standard's labels of UTF-8, the one encoding the sandbox decodes. */
const UTF8_LABELS = new Set(['unicode-1-1-utf-8', 'unicode11utf8', 'unicode20utf8', 'utf-8', 'utf8', 'x-unicode20utf8']);

/** WHATWG `TextDecoder`, UTF-8 only (any of its labels: {@link UTF8_LABELS}). */
export class TextDecoder {
  readonly #fatal: boolean;
  readonly #ignoreBOM: boolean;
  #pending: Uint8Array = new Uint8Array(0);
  #bomSeen = false;

  constructor(label: unknown = 'utf-8', options: { fatal?: unknown; ignoreBOM?: unknown } = {}) {
    // "Get an encoding": strip ASCII whitespace only (String#trim strips more), ASCII case-insensitive.
    const name = String(label)
      .replace(/^[\t\n\f\r ]+|[\t\n\f\r ]+$/g, '')
      .replace(/[A-Z]+/g, (upper) => upper.toLowerCase());
    if (!UTF8_LABELS.has(name)) {
      throw new RangeError(`The "${String(label)}" encoding is not supported (the sandbox decodes utf-8 only)`);
    }
    this.#fatal = Boolean(options?.fatal);
    this.#ignoreBOM = Boolean(options?.ignoreBOM);
  }

  get encoding(): string {
    return 'utf-8';
  }

  get fatal(): boolean {
    return this.#fatal;
  }

  get ignoreBOM(): boolean {
    return this.#ignoreBOM;
  }

  decode(input?: unknown, options: { stream?: unknown } = {}): string {
    let bytes = bytesOf(input);
    if (this.#pending.length > 0) {
      const joined = new Uint8Array(this.#pending.length + bytes.length);
      joined.set(this.#pending);
      joined.set(bytes, this.#pending.length);
      bytes = joined;
      this.#pending = new Uint8Array(0);
    }
    const stream = Boolean(options?.stream);
    if (stream) {
      // Keep an incomplete trailing sequence for the next call.
      let cut = bytes.length;
      for (let back = 1; back <= 3 && back <= bytes.length; back++) {
        const b = bytes[bytes.length - back]!;
        if ((b & 0xc0) === 0x80) continue;
        const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
        if (need > back) cut = bytes.length - back;
        break;
      }
      this.#pending = bytes.slice(cut);
      bytes = bytes.subarray(0, cut);
    }
    let text = utf8Decode(bytes, this.#fatal);
    if (!this.#ignoreBOM && !this.#bomSeen && text.length > 0) {
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      this.#bomSeen = true;
    }
    if (!stream) this.#bomSeen = false;
    return text;
  }
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** HTML's `btoa`: each code unit must be at most U+00FF (InvalidCharacterError otherwise). */
export function btoa(data: unknown): string {
  const text = String(data);
  let out = '';
  for (let i = 0; i < text.length; i += 3) {
    const a = text.charCodeAt(i);
    const b = i + 1 < text.length ? text.charCodeAt(i + 1) : 0;
    const c = i + 2 < text.length ? text.charCodeAt(i + 2) : 0;
    if (a > 0xff || b > 0xff || c > 0xff) throw domError('InvalidCharacterError', 'Invalid character');
    const n = (a << 16) | (b << 8) | c;
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + (i + 1 < text.length ? ALPHABET[(n >> 6) & 63]! : '=') + (i + 2 < text.length ? ALPHABET[n & 63]! : '=');
  }
  return out;
}

/** HTML's forgiving-base64 decode (`atob`): ASCII whitespace ignored, padding optional when exact. */
export function atob(data: unknown): string {
  let text = String(data);
  if (WHITESPACE.test(text)) text = text.replace(WHITESPACE_ALL, '');
  if (text.length % 4 === 0 && text.endsWith('==')) text = text.slice(0, -2);
  else if (text.length % 4 === 0 && text.endsWith('=')) text = text.slice(0, -1);
  if (text.length % 4 === 1) throw domError('InvalidCharacterError', 'The string to be decoded is not correctly encoded.');
  // Four characters at a time through a lookup table (255 marks a character outside the
  // alphabet), into an array for chunked fromCharCode: ~3× faster than a character at a time,
  // and JWT signatures are decoded on every request. The array holds one chunk at a time: one of
  // the whole output would meet the sandbox's array bound from 1.3 MB of base64 on (issue 24).
  const n = text.length;
  const CHUNK = 8190;
  const codes = new Array<number>(Math.min(CHUNK, (n * 3) >> 2));
  let out = '';
  let at = 0;
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const c0 = text.charCodeAt(i);
    const c1 = text.charCodeAt(i + 1);
    const c2 = text.charCodeAt(i + 2);
    const c3 = text.charCodeAt(i + 3);
    if ((c0 | c1 | c2 | c3) >= 128) throw badBase64();
    const a = DECODE[c0]!;
    const b = DECODE[c1]!;
    const c = DECODE[c2]!;
    const d = DECODE[c3]!;
    if ((a | b | c | d) > 63) throw badBase64();
    const v = (a << 18) | (b << 12) | (c << 6) | d;
    codes[at++] = v >> 16;
    codes[at++] = (v >> 8) & 0xff;
    codes[at++] = v & 0xff;
    if (at === CHUNK) {
      out += String.fromCharCode.apply(null, codes);
      at = 0;
    }
  }
  if (i < n) {
    // Two or three characters left: one or two bytes (bits beyond them are dropped, as forgiving-base64 does).
    let v = 0;
    for (let k = 0; k < 4; k++) {
      const code = i + k < n ? text.charCodeAt(i + k) : 65;
      const value = code < 128 ? DECODE[code]! : 255;
      if (value > 63) throw badBase64();
      v = (v << 6) | value;
    }
    codes[at++] = v >> 16;
    if (n - i === 3) codes[at++] = (v >> 8) & 0xff;
  }
  codes.length = at;
  return out + String.fromCharCode.apply(null, codes);
}

const badBase64 = (): Error => domError('InvalidCharacterError', 'The string to be decoded is not correctly encoded.');
const WHITESPACE = /[\t\n\f\r ]/;
const WHITESPACE_ALL = /[\t\n\f\r ]/g;

/** Base64 alphabet value by character code (only valid characters reach the decoder). */
const DECODE = (() => {
  const table = new Uint8Array(128).fill(255);
  for (let i = 0; i < ALPHABET.length; i++) table[ALPHABET.charCodeAt(i)] = i;
  return table;
})();
