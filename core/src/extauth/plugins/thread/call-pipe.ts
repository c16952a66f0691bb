import type { Socket } from 'node:net';

// The plugin process's call pipe (./plugin-thread.ts): the hot path between the gateway and its
// plugin process, both ways, in length-prefixed JSON frames instead of Node's IPC channel.

/**
 * The plugin process's call pipe (its fd 4): checks and step closes go to it, and the answers come
 * back, as length-prefixed JSON texts on a pipe of their own, not through Node's IPC channel
 * (which carries the rest: builds, log lines, store requests, pings). Measured in a `gatehouse
 * run` under wrk (RequiredHeader, ~13 checks per message): `child.send` took 85–340 µs of the
 * event loop's CPU per message, the same bytes written to a plain pipe 18–20 µs (JSON.stringify
 * included); on the way back, the structured clone's `writeChannelMessage` was 8% of the plugin
 * process's CPU.
 */
export const CALL_PIPE_FD = 4;

/** The largest frame the call pipe carries: past it, the other side is broken or hostile. */
export const MAX_FRAME_BYTES = 256 * 1024 * 1024;

/** The first payload byte of a {@link writeCalls} frame (a JSON frame's is `{`). */
const CALLS_FRAME = 0x01;

/** A turn's checks as the plugin process reads them from a calls frame: step id, call id, JSON text, … */
export interface CallsMessage {
  t: 'calls';
  calls: (number | string)[];
}

/**
 * Reads length-prefixed frames (a 4-byte big-endian length, then that many bytes) from `socket`:
 * the call pipe's format in both directions. A frame is UTF-8 JSON, or a calls frame
 * ({@link writeCalls}), which arrives as a {@link CallsMessage}. A frame over
 * {@link MAX_FRAME_BYTES}, one that is not JSON or a calls frame that does not add up calls
 * `onBad` and stops reading: the gateway then kills the plugin process (a process that escaped
 * its isolates must not reach the gateway's loop with a throw or unbounded buffering).
 */
export function readFrames(socket: Socket, onMessage: (message: unknown) => void, onBad: (why: string) => void): void {
  let pending: Buffer | undefined;
  let broken = false;
  socket.on('data', (chunk: Buffer) => {
    if (broken) return;
    let data = pending ? Buffer.concat([pending, chunk]) : chunk;
    pending = undefined;
    while (data.length >= 4) {
      const length = data.readUInt32BE(0);
      if (length > MAX_FRAME_BYTES) {
        broken = true;
        onBad(`a frame of ${length} bytes (the bound is ${MAX_FRAME_BYTES})`);
        return;
      }
      if (data.length < 4 + length) break;
      const message = length > 0 && data[4] === CALLS_FRAME ? readCalls(data, 5, 4 + length) : parseJson(data, 4, 4 + length);
      if (message === undefined) {
        broken = true;
        onBad(length > 0 && data[4] === CALLS_FRAME ? 'a calls frame that does not add up' : 'a frame that is not JSON');
        return;
      }
      data = data.subarray(4 + length);
      onMessage(message);
    }
    if (data.length > 0) pending = data;
  });
}

function parseJson(data: Buffer, start: number, end: number): unknown {
  try {
    return JSON.parse(data.toString('utf8', start, end)) as unknown;
  } catch {
    return undefined;
  }
}

/** A calls frame's checks (see {@link writeCalls}), or undefined when its lengths do not add up. */
function readCalls(data: Buffer, start: number, end: number): CallsMessage | undefined {
  const calls: (number | string)[] = [];
  let at = start;
  while (at < end) {
    if (at + 12 > end) return undefined;
    const sid = data.readUInt32BE(at);
    const id = data.readUInt32BE(at + 4);
    const length = data.readUInt32BE(at + 8);
    at += 12;
    if (at + length > end) return undefined;
    calls.push(sid, id, data.toString('utf8', at, at + length));
    at += length;
  }
  return { t: 'calls', calls };
}

/**
 * Writes a turn's checks (`calls`: step id, call id, JSON text, …) as one calls frame: after the
 * kind byte, each check as its step id, call id and byte length (4 bytes each, big-endian) and
 * its JSON text's bytes. Not JSON: a check's text inside a JSON message is a string, which
 * JSON.stringify escaped quote by quote here and JSON.parse unescaped there (measured under
 * load: the call pipe's write was 1.5 µs of the event loop per check, most of it that escaping).
 */
export function writeCalls(socket: Socket, calls: readonly (number | string)[]): void {
  let most = 5;
  for (let i = 2; i < calls.length; i += 3) most += 12 + 3 * (calls[i] as string).length;
  // Three bytes per UTF-16 unit bound any text's UTF-8; the frame is cut to what was written.
  const frame = Buffer.allocUnsafe(most);
  frame[4] = CALLS_FRAME;
  let at = 5;
  for (let i = 0; i + 2 < calls.length; i += 3) {
    frame.writeUInt32BE(calls[i] as number, at);
    frame.writeUInt32BE(calls[i + 1] as number, at + 4);
    const written = frame.write(calls[i + 2] as string, at + 12, 'utf8');
    frame.writeUInt32BE(written, at + 8);
    at += 12 + written;
  }
  frame.writeUInt32BE(at - 4, 0);
  socket.write(frame.subarray(0, at));
}

/** Writes `message` to `socket` as one frame of the call pipe (see {@link readFrames}). */
export function writeFrame(socket: Socket, message: unknown): void {
  const text = JSON.stringify(message);
  const length = Buffer.byteLength(text);
  const frame = Buffer.allocUnsafe(4 + length);
  frame.writeUInt32BE(length, 0);
  frame.write(text, 4);
  socket.write(frame);
}

