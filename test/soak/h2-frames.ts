/**
 * A raw HTTP/2 client for hostile inputs: frames built by hand (HPACK literals without Huffman or
 * indexing, so any name, value, order or case can be sent), written on a TCP or TLS (ALPN h2)
 * socket, and the server's frames read back by type and stream (their header blocks are not
 * decoded: the soak asks only whether each stream got an answer or a reset).
 */
import { connect as tcpConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** Frame types (RFC 9113 §6). */
export const T = { DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PUSH_PROMISE: 5, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
/** Flags. */
export const F = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;

/** One frame: 9-byte header, then `payload`. */
export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** HPACK integer with an `n`-bit prefix (RFC 7541 §5.1), first byte or-ed with `mask`. */
function hpackInt(value: number, n: number, mask: number): Buffer {
  const max = (1 << n) - 1;
  if (value < max) return Buffer.from([mask | value]);
  const bytes = [mask | max];
  value -= max;
  while (value >= 128) {
    bytes.push((value % 128) + 128);
    value = Math.floor(value / 128);
  }
  bytes.push(value);
  return Buffer.from(bytes);
}

/** A header block of literal fields without indexing (names and values sent exactly as given). */
export function headerBlock(fields: readonly (readonly [string, string])[]): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of fields) {
    const n = Buffer.from(name, 'latin1');
    const v = Buffer.from(value, 'latin1');
    parts.push(Buffer.from([0x00]), hpackInt(n.length, 7, 0), n, hpackInt(v.length, 7, 0), v);
  }
  return Buffer.concat(parts);
}

/** SETTINGS with `(id, value)` pairs. */
export function settings(pairs: readonly (readonly [number, number])[] = []): Buffer {
  const payload = Buffer.alloc(pairs.length * 6);
  pairs.forEach(([id, value], i) => (payload.writeUInt16BE(id, i * 6), payload.writeUInt32BE(value >>> 0, i * 6 + 2)));
  return frame(T.SETTINGS, 0, 0, payload);
}

export const rstStream = (stream: number, code = 8) => frame(T.RST_STREAM, 0, stream, Buffer.from([code >>> 24, (code >>> 16) & 255, (code >>> 8) & 255, code & 255]));
export const windowUpdate = (stream: number, increment: number) => {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(increment >>> 0);
  return frame(T.WINDOW_UPDATE, 0, stream, p);
};
export const ping = (ack: boolean, data = Buffer.alloc(8, 7)) => frame(T.PING, ack ? F.ACK : 0, 0, data);

/** HEADERS for `fields` on `stream`, split into `pieces` (HEADERS + CONTINUATIONs). */
export function headers(stream: number, fields: readonly (readonly [string, string])[], options: { endStream?: boolean; pieces?: number } = {}): Buffer {
  const block = headerBlock(fields);
  const pieces = Math.max(1, Math.min(options.pieces ?? 1, block.length || 1));
  const size = Math.ceil(block.length / pieces);
  const frames: Buffer[] = [];
  for (let i = 0; i < pieces; i++) {
    const chunk = block.subarray(i * size, (i + 1) * size);
    const last = i === pieces - 1;
    if (i === 0) frames.push(frame(T.HEADERS, (last ? F.END_HEADERS : 0) | (options.endStream ? F.END_STREAM : 0), stream, chunk));
    else frames.push(frame(T.CONTINUATION, last ? F.END_HEADERS : 0, stream, chunk));
  }
  return Buffer.concat(frames);
}

/** What the server sent on one connection. */
export interface H2Outcome {
  /** Streams that got a response HEADERS frame. */
  readonly answered: Set<number>;
  /** Streams the server reset (RST_STREAM). */
  readonly reset: Set<number>;
  /** GOAWAY's last stream id, when one came (streams above it were refused). */
  goawayLastStream?: number;
  /** The connection ended (closed or errored). */
  closed: boolean;
  /** The connection never opened (refused): a dead listener, not an answer. */
  refused: boolean;
  /** Some bytes came back. */
  bytes: number;
}

/** Opens a connection (TLS with ALPN h2 when `tls`) and hands back the socket and the running outcome. */
export function openH2(port: number, tls: false | { servername?: string }): { socket: Socket; outcome: H2Outcome; done: Promise<void> } {
  const socket = tls ? tlsConnect({ host: '127.0.0.1', port, ALPNProtocols: ['h2'], rejectUnauthorized: false, ...(tls.servername ? { servername: tls.servername } : {}) }) : tcpConnect(port, '127.0.0.1');
  const outcome: H2Outcome = { answered: new Set(), reset: new Set(), closed: false, refused: false, bytes: 0 };
  let buffer = Buffer.alloc(0);
  let connected = false;
  socket.once(tls ? 'secureConnect' : 'connect', () => (connected = true));
  socket.on('data', (chunk: Buffer) => {
    outcome.bytes += chunk.length;
    buffer = Buffer.concat([buffer, chunk]);
    while (buffer.length >= 9) {
      const length = buffer.readUIntBE(0, 3);
      if (buffer.length < 9 + length) break;
      const type = buffer[3]!;
      const stream = buffer.readUInt32BE(5) & 0x7fffffff;
      const payload = buffer.subarray(9, 9 + length);
      if (type === T.HEADERS) outcome.answered.add(stream);
      else if (type === T.RST_STREAM) outcome.reset.add(stream);
      else if (type === T.GOAWAY && payload.length >= 4) outcome.goawayLastStream = payload.readUInt32BE(0) & 0x7fffffff;
      // Answer the server's PINGs and SETTINGS as a real client would.
      else if (type === T.SETTINGS && !(buffer[4]! & F.ACK)) socket.write(frame(T.SETTINGS, F.ACK, 0));
      buffer = buffer.subarray(9 + length);
    }
  });
  const done = new Promise<void>((resolve) => {
    socket.on('error', () => {});
    socket.on('close', () => {
      outcome.closed = true;
      if (!connected) outcome.refused = true;
      resolve();
    });
  });
  return { socket, outcome, done };
}

/** Whether `stream` got an answer, a reset, or was refused by GOAWAY / the connection closing. */
export function settled(outcome: H2Outcome, stream: number): boolean {
  return outcome.answered.has(stream) || outcome.reset.has(stream) || (outcome.goawayLastStream !== undefined && stream > outcome.goawayLastStream) || outcome.closed;
}
