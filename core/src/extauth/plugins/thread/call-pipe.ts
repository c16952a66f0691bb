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

/**
 * Reads length-prefixed JSON frames (a 4-byte big-endian length, then that many bytes of UTF-8
 * JSON) from `socket`: the call pipe's format in both directions. A frame over
 * {@link MAX_FRAME_BYTES} or one that is not JSON calls `onBad` and stops reading: the gateway
 * then kills the plugin process (a process that escaped its isolates must not reach the
 * gateway's loop with a throw or unbounded buffering).
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
      let message: unknown;
      try {
        message = JSON.parse(data.toString('utf8', 4, 4 + length));
      } catch {
        broken = true;
        onBad('a frame that is not JSON');
        return;
      }
      data = data.subarray(4 + length);
      onMessage(message);
    }
    if (data.length > 0) pending = data;
  });
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

