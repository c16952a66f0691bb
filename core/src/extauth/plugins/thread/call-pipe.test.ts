import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_FRAME_BYTES, readFrames, writeCalls, writeFrame } from './call-pipe.ts';

// The call pipe's framing on a real socket pair: frames split and joined by the transport arrive
// whole and in order; a frame that is not JSON or claims more than the bound is reported once
// (the gateway then kills the plugin process) and never throws into the reading loop.

let server: Server | undefined;
const sockets: Socket[] = [];
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy();
  server?.close();
  server = undefined;
});

/** A connected pair: `writer` → `reader`. */
async function pair(): Promise<{ writer: Socket; reader: Socket }> {
  const accepted = new Promise<Socket>((resolve) => {
    server = createServer(resolve);
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const writer = connect((server!.address() as AddressInfo).port, '127.0.0.1');
  writer.setNoDelay(true);
  const reader = await accepted;
  sockets.push(writer, reader);
  return { writer, reader };
}

/** Polls until `check` holds (at most 5 s). */
async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(check()).toBe(true);
}

describe('call pipe frames', () => {
  it('arrive whole and in order when the transport splits them byte by byte and joins them', async () => {
    const { writer, reader } = await pair();
    const got: unknown[] = [];
    const bad: string[] = [];
    readFrames(reader, (message) => got.push(message), (why) => bad.push(why));
    // A calls frame: texts with quotes, backslashes, non-ASCII (2-, 3- and 4-byte UTF-8), an empty one, the largest ids.
    const calls = [1, 2, '{"a":"x\\"y"}', 0xffff_ffff, 0, '{"h":"é€😀"}', 7, 0xffff_fffe, ''];
    const messages = [{ t: 'answers', answers: [1, 1, 2, { allowed: true, headersToSet: [{ key: 'x', value: 'é😀' }] }] }, { t: 'calls', calls }, { t: 'pong' }];
    // Frames built as writeFrame and writeCalls build them, then sent one byte per write.
    const frames: Buffer[] = [];
    const capture = { write: (frame: Buffer) => frames.push(Buffer.from(frame)) } as unknown as Socket;
    writeFrame(capture, messages[0]);
    writeCalls(capture, calls);
    writeFrame(capture, messages[2]);
    const bytes = Buffer.concat(frames);
    for (let i = 0; i < bytes.length; i++) {
      writer.write(bytes.subarray(i, i + 1));
      if (i % 16 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    // And many frames in one write.
    writer.write(Buffer.concat([bytes, bytes]));
    await until(() => got.length === 9);
    expect(got).toEqual([...messages, ...messages, ...messages]);
    expect(bad).toEqual([]);
  });

  it('a frame that is not JSON is reported once, not thrown, and nothing after it is read', async () => {
    const { writer, reader } = await pair();
    const got: unknown[] = [];
    const bad: string[] = [];
    readFrames(reader, (message) => got.push(message), (why) => bad.push(why));
    const garbage = Buffer.from('{"t":"answers",');
    const head = Buffer.alloc(4);
    head.writeUInt32BE(garbage.length, 0);
    writeFrame(writer, { t: 'pong' });
    writer.write(Buffer.concat([head, garbage]));
    writeFrame(writer, { t: 'pong' });
    await until(() => bad.length === 1);
    // The reader's own loop ran on: another turn passes without a second report or message.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(bad).toEqual(['a frame that is not JSON']);
    expect(got).toEqual([{ t: 'pong' }]);
  });

  it('a calls frame whose lengths do not add up is reported, not read past its end', async () => {
    const { writer, reader } = await pair();
    const got: unknown[] = [];
    const bad: string[] = [];
    readFrames(reader, (message) => got.push(message), (why) => bad.push(why));
    // A check that claims 100 bytes in a frame that holds 3 of them (kind byte, sid, id, length, text).
    const body = Buffer.alloc(1 + 12 + 3);
    body[0] = 0x01;
    body.writeUInt32BE(1, 1);
    body.writeUInt32BE(2, 5);
    body.writeUInt32BE(100, 9);
    body.write('abc', 13);
    const head = Buffer.alloc(4);
    head.writeUInt32BE(body.length, 0);
    // A JSON frame behind it, in the same write: never read.
    const after: Buffer[] = [];
    writeFrame({ write: (frame: Buffer) => after.push(Buffer.from(frame)) } as unknown as Socket, { t: 'pong' });
    writer.write(Buffer.concat([head, body, ...after]));
    await until(() => bad.length === 1);
    expect(bad).toEqual(['a calls frame that does not add up']);
    expect(got).toEqual([]);
  });

  it('a length past the bound is reported at once, without buffering towards it', async () => {
    const { writer, reader } = await pair();
    const bad: string[] = [];
    readFrames(reader, () => {}, (why) => bad.push(why));
    const head = Buffer.alloc(4);
    head.writeUInt32BE(MAX_FRAME_BYTES + 1, 0);
    writer.write(head);
    await until(() => bad.length === 1);
    expect(bad[0]).toMatch(/a frame of \d+ bytes \(the bound is \d+\)/);
    // 4 GiB - 1, the largest length the prefix can claim: also refused, never awaited.
    const { writer: w2, reader: r2 } = await pair();
    const bad2: string[] = [];
    readFrames(r2, () => {}, (why) => bad2.push(why));
    w2.write(Buffer.from([0xff, 0xff, 0xff, 0xff, 0x7b]));
    await until(() => bad2.length === 1);
  });
});
