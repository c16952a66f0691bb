import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { afterEach, describe, expect, test } from 'vitest';
import { startChunkCollector, type CollectGarbage } from './chunk-collector.ts';

const MB = 1024 * 1024;
const CHUNK = 64 * 1024;

let server: Server | undefined;
let stop: (() => void) | undefined;
afterEach(async () => {
  stop?.();
  stop = undefined;
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = undefined;
});

/** A real server: GET sends `size` bytes, POST answers with the byte count it received. */
async function bulkServer(size: number): Promise<string> {
  server = createServer((req, res) => {
    if (req.method === 'POST') {
      let received = 0;
      req.on('data', (c: Buffer) => (received += c.length));
      req.on('end', () => res.end(String(received)));
      return;
    }
    let sent = 0;
    const write = () => {
      while (sent < size) {
        sent += CHUNK;
        if (!res.write(Buffer.alloc(CHUNK))) return void res.once('drain', write);
      }
      res.end();
    };
    write();
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

function recorder(): { collect: CollectGarbage; calls: Parameters<CollectGarbage>[0][] } {
  const calls: Parameters<CollectGarbage>[0][] = [];
  return { calls, collect: (options) => void calls.push(options) };
}

function body(bytes: number): Readable {
  let left = bytes;
  return new Readable({
    read() {
      this.push(left > 0 ? Buffer.alloc(CHUNK) : null);
      left -= CHUNK;
    },
  });
}

describe('startChunkCollector', () => {
  test('asks for an async scavenge once per budget of response bytes', async () => {
    const url = await bulkServer(10 * MB);
    const { collect, calls } = recorder();
    stop = startChunkCollector({ everyBytes: MB, collect });
    const res = await request(url);
    let bytes = 0;
    for await (const chunk of res.body) bytes += (chunk as Buffer).length;
    expect(bytes).toBe(10 * MB);
    expect(calls).toHaveLength(10);
    expect(calls[0]).toEqual({ type: 'minor', execution: 'async' });
  });

  test('counts request bodies sent upstream too', async () => {
    const url = await bulkServer(0);
    const { collect, calls } = recorder();
    stop = startChunkCollector({ everyBytes: MB, collect });
    const res = await request(url, { method: 'POST', body: body(3 * MB) });
    expect(await res.body.text()).toBe(String(3 * MB));
    expect(calls).toHaveLength(3);
  });

  test('stops counting when stopped, and does nothing without a gc function', async () => {
    const url = await bulkServer(2 * MB);
    const { collect, calls } = recorder();
    startChunkCollector({ everyBytes: MB, collect })!();
    await (await request(url)).body.arrayBuffer();
    expect(calls).toHaveLength(0);
    // Test workers run without --expose-gc.
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
    expect(startChunkCollector()).toBeUndefined();
  });
});
