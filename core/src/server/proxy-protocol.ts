/**
 * The PROXY protocol (HAProxy's, versions 1 and 2) on a listener, as Envoy's `proxy_protocol`
 * listener filter reads it: a load balancer in front of the gateway writes the client's address
 * before the connection's own bytes (HTTP/1.1, the h2c preface, a TLS ClientHello, or a TCP
 * stream), and the gateway takes that address as the connection's remote address, for access
 * logs, `x-forwarded-for`, rate limits, IP policies and the auth server's `source`.
 *
 * Hand-written rather than taken from npm: the parsers there (proxy-protocol-js,
 * @balena/proxy-protocol-parser) take a whole buffer and throw; a listener needs to tell "not
 * enough bytes yet" (and how many) from "malformed" to read a header that arrives in pieces,
 * bounded in bytes and in time, without re-parsing per byte. Both formats are small.
 *
 * Trust: the header is read only on listeners that enable it (an address in it is believed);
 * there a connection without one is refused, as the specification and Envoy require, unless the
 * listener allows connections without it (Gloo's `allowRequestsWithoutProxyProtocol`).
 */
import { readPrefix } from './read-prefix.ts';
import { isIPv4, isIPv6, type Socket } from 'node:net';
import { metrics } from '../admin/metrics.ts';

/** One endpoint a PROXY header names. */
export interface ProxyEndpoint {
  readonly address: string;
  readonly port: number;
  readonly family: 'IPv4' | 'IPv6';
}

/** What the bytes read so far say. */
export type ProxyHeaderResult =
  /** Not enough bytes yet: read at least `need` bytes in total, then ask again. */
  | { readonly kind: 'incomplete'; readonly need: number }
  /**
   * A whole header of `length` bytes. `source`/`destination` are absent when the header says to
   * keep the connection's own addresses (v1 `UNKNOWN`, v2 `LOCAL` or `AF_UNSPEC`).
   */
  | { readonly kind: 'header'; readonly version: 1 | 2; readonly length: number; readonly source?: ProxyEndpoint; readonly destination?: ProxyEndpoint }
  /** The bytes do not start with either signature: no PROXY header at all. */
  | { readonly kind: 'absent' }
  /** A header that is malformed, or larger than allowed. */
  | { readonly kind: 'invalid'; readonly reason: string };

/** A v1 header's longest form, CRLF included (the specification's bound). */
export const MAX_V1_BYTES = 107;
/** Default bound of a v2 header's address and TLV block (its 16-byte preamble not counted). */
export const MAX_V2_PAYLOAD_BYTES = 4096;

const V1_SIGNATURE = Buffer.from('PROXY ', 'latin1');
const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const V2_PREAMBLE = 16;
const PORT = /^(0|[1-9][0-9]{0,4})$/;

/**
 * Reads the PROXY header at the start of `data` (the connection's first bytes). Non-header
 * input is told apart on its first byte that differs from both signatures.
 */
export function parseProxyHeader(data: Uint8Array, maxV2Payload = MAX_V2_PAYLOAD_BYTES): ProxyHeaderResult {
  if (data.length === 0) return { kind: 'incomplete', need: 1 };
  if (data[0] === V1_SIGNATURE[0]) return parseV1(data);
  if (data[0] === V2_SIGNATURE[0]) return parseV2(data, maxV2Payload);
  return { kind: 'absent' };
}

/** `PROXY TCP4|TCP6|UNKNOWN <src> <dst> <sport> <dport>\r\n`. */
function parseV1(data: Uint8Array): ProxyHeaderResult {
  const n = Math.min(data.length, V1_SIGNATURE.length);
  for (let i = 0; i < n; i++) {
    if (data[i] === V1_SIGNATURE[i]) continue;
    // "P", "PR"… then something else: an ordinary request (`PRI *`, `POST`, `PUT`), not a header.
    return i < 5 ? { kind: 'absent' } : invalid('bad v1 signature');
  }
  const limit = Math.min(data.length, MAX_V1_BYTES);
  let end = -1;
  for (let i = V1_SIGNATURE.length; i < limit; i++) {
    const byte = data[i]!;
    if (byte === 0x0a) {
      if (data[i - 1] !== 0x0d) return invalid('v1 header line ends without CRLF');
      end = i + 1;
      break;
    }
    if (byte === 0x0d) {
      if (i + 1 < data.length && data[i + 1] !== 0x0a) return invalid('v1 header has a CR not followed by LF');
      continue;
    }
    if (byte < 0x20 || byte > 0x7e) return invalid('v1 header has a byte that is not printable ASCII');
  }
  if (end === -1) return data.length >= MAX_V1_BYTES ? invalid(`v1 header longer than ${MAX_V1_BYTES} bytes`) : { kind: 'incomplete', need: data.length + 1 };
  const line = Buffer.from(data.buffer, data.byteOffset + V1_SIGNATURE.length, end - 2 - V1_SIGNATURE.length).toString('latin1');
  const parts = line.split(' ');
  // UNKNOWN: the sender could not tell (or it is its own health check); whatever follows is ignored.
  if (parts[0] === 'UNKNOWN') return { kind: 'header', version: 1, length: end };
  if (parts.length !== 5) return invalid('v1 header does not have five fields');
  const [proto, src, dst, sport, dport] = parts as [string, string, string, string, string];
  const family = proto === 'TCP4' ? 'IPv4' : proto === 'TCP6' ? 'IPv6' : undefined;
  if (!family) return invalid(`v1 protocol "${proto}" is not TCP4, TCP6 or UNKNOWN`);
  const isIp = family === 'IPv4' ? isIPv4 : isIPv6;
  if (!isIp(src) || !isIp(dst)) return invalid(`v1 address is not ${family}`);
  if (!PORT.test(sport) || !PORT.test(dport) || Number(sport) > 65535 || Number(dport) > 65535) return invalid('v1 port is not 0-65535');
  return { kind: 'header', version: 1, length: end, source: { address: src, port: Number(sport), family }, destination: { address: dst, port: Number(dport), family } };
}

/** The binary header: signature, version and command, family and protocol, length, addresses, TLVs. */
function parseV2(data: Uint8Array, maxPayload: number): ProxyHeaderResult {
  const n = Math.min(data.length, V2_SIGNATURE.length);
  for (let i = 0; i < n; i++) if (data[i] !== V2_SIGNATURE[i]) return i < 4 ? { kind: 'absent' } : invalid('bad v2 signature');
  if (data.length < V2_PREAMBLE) return { kind: 'incomplete', need: V2_PREAMBLE };
  const versionCommand = data[12]!;
  if (versionCommand >> 4 !== 2) return invalid(`v2 version ${versionCommand >> 4} is not 2`);
  const command = versionCommand & 0x0f;
  if (command > 1) return invalid(`v2 command ${command} is neither LOCAL nor PROXY`);
  const familyProtocol = data[13]!;
  const length = (data[14]! << 8) | data[15]!;
  if (length > maxPayload) return invalid(`v2 header of ${length} bytes is over the ${maxPayload}-byte limit`);
  const total = V2_PREAMBLE + length;
  if (data.length < total) return { kind: 'incomplete', need: total };
  // LOCAL: the sender's own connection (a health check); the connection's addresses stand.
  if (command === 0) return { kind: 'header', version: 2, length: total };
  const family = familyProtocol >> 4;
  const protocol = familyProtocol & 0x0f;
  // AF_UNSPEC: the sender does not know; the specification says to keep the real addresses.
  if (family === 0) return { kind: 'header', version: 2, length: total };
  if (protocol !== 1) return invalid(`v2 transport ${protocol} is not STREAM`);
  const body = Buffer.from(data.buffer, data.byteOffset + V2_PREAMBLE, length);
  if (family === 1) {
    if (length < 12) return invalid('v2 IPv4 addresses need 12 bytes');
    const ip = (at: number) => `${body[at]}.${body[at + 1]}.${body[at + 2]}.${body[at + 3]}`;
    return { kind: 'header', version: 2, length: total, source: { address: ip(0), port: body.readUInt16BE(8), family: 'IPv4' }, destination: { address: ip(4), port: body.readUInt16BE(10), family: 'IPv4' } };
  }
  if (family === 2) {
    if (length < 36) return invalid('v2 IPv6 addresses need 36 bytes');
    return { kind: 'header', version: 2, length: total, source: { address: ipv6(body, 0), port: body.readUInt16BE(32), family: 'IPv6' }, destination: { address: ipv6(body, 16), port: body.readUInt16BE(34), family: 'IPv6' } };
  }
  // AF_UNIX (3) has no address a request can be attributed to (Envoy closes it too); others are undefined.
  return invalid(`v2 address family ${family} is not supported`);
}

/** The IPv6 address of 16 bytes at `at`, written as Node writes socket addresses (RFC 5952; IPv4-mapped as `::ffff:a.b.c.d`). */
function ipv6(body: Buffer, at: number): string {
  const groups: number[] = [];
  for (let i = 0; i < 8; i++) groups.push(body.readUInt16BE(at + i * 2));
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) return `::ffff:${body[at + 12]}.${body[at + 13]}.${body[at + 14]}.${body[at + 15]}`;
  // The longest run of zero groups (two or more) becomes `::` (RFC 5952).
  let best = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) [best, bestLength] = [i, j - i];
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best === -1) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLength).join(':')}`;
}

const invalid = (reason: string): ProxyHeaderResult => ({ kind: 'invalid', reason });

/** A listener's PROXY protocol setting (Gateway `useProxyProto` / `options.proxyProtocol`, `--proxy-protocol`). */
export interface ProxyProtocolPolicy {
  /** Serve connections that open without a header, with their own address (Gloo's `allowRequestsWithoutProxyProtocol`). */
  readonly allowWithout?: boolean | undefined;
  /** Bound of a v2 header's address and TLV block (default {@link MAX_V2_PAYLOAD_BYTES}). */
  readonly maxV2PayloadBytes?: number | undefined;
}

/** Why a connection was refused for its PROXY header (`gatehouse_downstream_connections_refused_total`). */
export type ProxyRefusal = 'proxy_protocol_invalid' | 'proxy_protocol_missing' | 'proxy_protocol_timeout';

/**
 * Reads a connection's PROXY header (bounded in bytes, and in time by `timeoutMs` however slowly
 * it comes), takes its addresses as the socket's, puts back the bytes after it, and calls `next`
 * with the socket paused and its data listeners free (the caller's reader attaches, then
 * resumes it). A malformed, missing (unless allowed) or unfinished header closes the connection
 * and counts it.
 */
export function readProxyHeader(socket: Socket, policy: ProxyProtocolPolicy, timeoutMs: number, next: (socket: Socket) => void): void {
  const refuse = (reason: ProxyRefusal): void => {
    metrics.refusedConnections.inc({ reason });
    socket.destroy();
  };
  readPrefix(socket, timeoutMs, {
    parse: (bytes) => parseProxyHeader(bytes, policy.maxV2PayloadBytes),
    timedOut: () => refuse('proxy_protocol_timeout'),
    done(header, bytes) {
      if (header.kind === 'invalid') return refuse('proxy_protocol_invalid');
      if (header.kind === 'absent' && !policy.allowWithout) return refuse('proxy_protocol_missing');
      socket.pause();
      const rest = header.kind === 'header' ? bytes.subarray(header.length) : bytes;
      if (rest.length) socket.unshift(rest);
      if (header.kind === 'header' && header.source) takeAddresses(socket, header.source, header.destination);
      next(socket);
    },
  });
}

/** Marks a socket whose addresses came from a PROXY header (a TLS socket made over it copies them). */
const PROXIED = Symbol('gatehouse.proxyProtocol');

type Proxied = Socket & { [PROXIED]?: { source: ProxyEndpoint; destination: ProxyEndpoint | undefined } };

/** Makes `source` the socket's remote address (and `destination` its local one), as every reader of `socket.remoteAddress` sees it. */
function takeAddresses(socket: Socket, source: ProxyEndpoint, destination: ProxyEndpoint | undefined): void {
  (socket as Proxied)[PROXIED] = { source, destination };
  define(socket, source, destination);
}

function define(socket: Socket, source: ProxyEndpoint, destination: ProxyEndpoint | undefined): void {
  const own = (value: unknown) => ({ value, configurable: true, enumerable: false, writable: false });
  Object.defineProperties(socket, {
    remoteAddress: own(source.address),
    remotePort: own(source.port),
    remoteFamily: own(source.family),
    ...(destination ? { localAddress: own(destination.address), localPort: own(destination.port), localFamily: own(destination.family) } : {}),
  });
}

/**
 * Copies the PROXY addresses of `raw` (a connection's TCP socket) to `tls`, the TLS socket Node
 * made over it: a TLS socket reads its addresses from the TCP handle, not from the JS socket.
 */
export function inheritProxyAddresses(tls: Socket, raw: Socket | undefined): void {
  const taken = (raw as Proxied | undefined)?.[PROXIED];
  if (taken) define(tls, taken.source, taken.destination);
}
