/**
 * A TLS ClientHello reader for the HTTPS listener (Envoy's `tls_inspector`): it finds the SNI
 * name in a connection's first bytes, without consuming them, so that the handshake can be run
 * under that name's own TLS policy (./listen.ts). It reads only what it needs (record framing,
 * the ClientHello's fixed fields, the extension list, `server_name`), bounds everything by
 * `maxBytes`, and rejects what OpenSSL would reject too (a non-handshake record, a message that
 * is not a ClientHello, lengths that do not add up, a duplicated extension). The name it finds
 * is a choice, not a trust decision: the listener checks after the handshake that OpenSSL saw
 * the same one.
 */

/** What the bytes read so far say. */
export type ClientHelloResult =
  /** Not enough bytes yet: read at least `need` bytes in total, then ask again. */
  | { readonly kind: 'incomplete'; readonly need: number }
  /** A whole ClientHello; `servername` is its `server_name` host name, if it sent one. */
  | { readonly kind: 'hello'; readonly servername: string | undefined }
  /** Not a TLS ClientHello, or larger than allowed: close the connection. */
  | { readonly kind: 'invalid'; readonly reason: string };

/** Default bound of a ClientHello's bytes on the wire (records included); real ones are under 2 KiB, post-quantum ones under 4 KiB. */
export const MAX_CLIENT_HELLO_BYTES = 16 * 1024;

const HANDSHAKE = 22;
const CLIENT_HELLO = 1;
const RECORD_HEADER = 5;
/** TLSPlaintext.length may not exceed 2^14 (RFC 8446 5.1). */
const MAX_RECORD = 16 * 1024;
const SERVER_NAME = 0;
const HOST_NAME = 0;

/**
 * Reads the ClientHello at the start of `data` (the connection's first bytes). The message may
 * be split over several handshake records, and the records over any number of reads.
 */
export function parseClientHello(data: Uint8Array, maxBytes = MAX_CLIENT_HELLO_BYTES): ClientHelloResult {
  const fragments: Uint8Array[] = [];
  let handshakeBytes = 0;
  let bodyLength: number | undefined;
  let offset = 0;
  for (;;) {
    // The record header, checked byte by byte so that non-TLS input fails on its first byte.
    if (data.length > offset && data[offset] !== HANDSHAKE) return invalid('not a TLS handshake record');
    if (data.length > offset + 1 && data[offset + 1] !== 3) return invalid('not a TLS record version');
    if (data.length > offset + 2 && data[offset + 2]! > 4) return invalid('not a TLS record version');
    if (data.length < offset + RECORD_HEADER) return incomplete(offset + RECORD_HEADER, maxBytes);
    const length = (data[offset + 3]! << 8) | data[offset + 4]!;
    // Zero-length handshake fragments are forbidden (RFC 8446 5.1): they would let a hello be padded out for ever.
    if (length === 0 || length > MAX_RECORD) return invalid('bad TLS record length');
    const end = offset + RECORD_HEADER + length;
    if (data.length < end) return incomplete(end, maxBytes);
    fragments.push(data.subarray(offset + RECORD_HEADER, end));
    handshakeBytes += length;
    offset = end;
    // The handshake message header (type, 24-bit length), maybe itself split over records.
    if (handshakeBytes < 4) continue;
    if (bodyLength === undefined) {
      if (byteAt(fragments, 0) !== CLIENT_HELLO) return invalid('the first handshake message is not a ClientHello');
      bodyLength = (byteAt(fragments, 1) << 16) | (byteAt(fragments, 2) << 8) | byteAt(fragments, 3);
    }
    const missing = 4 + bodyLength - handshakeBytes;
    if (missing > 0) {
      // The rest needs at least one record header per 2^14 bytes: refuse now what cannot fit.
      if (offset + missing + RECORD_HEADER * Math.ceil(missing / MAX_RECORD) > maxBytes) return invalid('ClientHello larger than allowed');
      continue;
    }
    // Joined once, when whole: a hello sent one byte per record costs linear time, not quadratic.
    const message = fragments.length === 1 ? fragments[0]! : concat(fragments, handshakeBytes);
    return readClientHello(message.subarray(4, 4 + bodyLength));
  }
}

/** Byte `i` of the handshake stream made of `fragments`. */
function byteAt(fragments: readonly Uint8Array[], i: number): number {
  for (const fragment of fragments) {
    if (i < fragment.length) return fragment[i]!;
    i -= fragment.length;
  }
  return 0;
}

/** The fields of a ClientHello body (RFC 8446 4.1.2), up to the `server_name` extension. */
function readClientHello(body: Uint8Array): ClientHelloResult {
  const r = new Reader(body);
  // legacy_version, random, legacy_session_id (at most 32 bytes).
  if (!r.skip(2 + 32)) return invalid('truncated ClientHello');
  const sessionId = r.u8();
  if (sessionId === undefined || sessionId > 32 || !r.skip(sessionId)) return invalid('bad ClientHello session id');
  const suites = r.u16();
  if (suites === undefined || suites < 2 || suites % 2 !== 0 || !r.skip(suites)) return invalid('bad ClientHello cipher suites');
  const compression = r.u8();
  if (compression === undefined || compression < 1 || !r.skip(compression)) return invalid('bad ClientHello compression methods');
  // No extensions at all (TLS 1.0-style hello): no SNI.
  if (r.left === 0) return { kind: 'hello', servername: undefined };
  const extensionsLength = r.u16();
  if (extensionsLength === undefined || extensionsLength !== r.left) return invalid('bad ClientHello extensions length');
  const seen = new Set<number>();
  let servername: string | undefined;
  while (r.left > 0) {
    const type = r.u16();
    const length = r.u16();
    if (type === undefined || length === undefined || length > r.left) return invalid('truncated ClientHello extension');
    // OpenSSL refuses a hello that repeats an extension; so must this, or two names could be read two ways.
    if (seen.has(type)) return invalid('duplicate ClientHello extension');
    seen.add(type);
    const data = r.take(length)!;
    if (type !== SERVER_NAME) continue;
    const name = readServerName(data);
    if (typeof name !== 'string') return name;
    servername = name;
  }
  return { kind: 'hello', servername };
}

/** The host name of a `server_name` extension (RFC 6066 3), read as OpenSSL does: the list's first entry, which must be a host name. */
function readServerName(data: Uint8Array): string | ClientHelloResult {
  const r = new Reader(data);
  const listLength = r.u16();
  if (listLength === undefined || listLength === 0 || listLength !== r.left) return invalid('bad server_name list');
  const type = r.u8();
  const length = r.u16();
  if (type !== HOST_NAME || length === undefined || length === 0 || length > 255 || length > r.left) return invalid('bad server_name entry');
  const name = r.take(length)!;
  if (name.includes(0)) return invalid('server_name contains a NUL byte');
  return Buffer.from(name.buffer, name.byteOffset, name.byteLength).toString('latin1');
}

function incomplete(need: number, maxBytes: number): ClientHelloResult {
  return need > maxBytes ? invalid('ClientHello larger than allowed') : { kind: 'incomplete', need };
}

function invalid(reason: string): ClientHelloResult {
  return { kind: 'invalid', reason };
}

function concat(parts: readonly Uint8Array[], length: number): Uint8Array {
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** Bounds-checked big-endian reads; `undefined` past the end. */
class Reader {
  private at = 0;
  private readonly bytes: Uint8Array;
  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }
  get left(): number {
    return this.bytes.length - this.at;
  }
  u8(): number | undefined {
    return this.left < 1 ? undefined : this.bytes[this.at++];
  }
  u16(): number | undefined {
    if (this.left < 2) return undefined;
    const value = (this.bytes[this.at]! << 8) | this.bytes[this.at + 1]!;
    this.at += 2;
    return value;
  }
  skip(n: number): boolean {
    if (this.left < n) return false;
    this.at += n;
    return true;
  }
  take(n: number): Uint8Array | undefined {
    if (this.left < n) return undefined;
    const out = this.bytes.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
}
