import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { connect, type ConnectionOptions } from 'node:tls';
import { beforeAll, describe, expect, test } from 'vitest';
import { MAX_CLIENT_HELLO_BYTES, parseClientHello, type ClientHelloResult } from './client-hello.ts';

/** The first flight of a real Node/OpenSSL client (its ClientHello record), read off a raw socket. */
async function realHello(options: ConnectionOptions): Promise<Buffer> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const received = new Promise<Buffer>((resolve) => {
    server.once('connection', (socket) => {
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => {
        chunks.push(c);
        const all = Buffer.concat(chunks);
        // One record: the header's length says when it is whole.
        if (all.length >= 5 && all.length >= 5 + all.readUInt16BE(3)) {
          resolve(all);
          socket.destroy();
        }
      });
    });
  });
  const client = connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, ...options });
  client.on('error', () => {});
  const hello = await received;
  client.destroy();
  server.close();
  return hello;
}

/** The handshake message inside a single-record hello, split into records of the given sizes. */
function refragment(hello: Buffer, sizes: () => number): Buffer {
  const message = hello.subarray(5, 5 + hello.readUInt16BE(3));
  const records: Buffer[] = [];
  for (let at = 0; at < message.length; ) {
    const n = Math.min(message.length - at, Math.max(1, sizes()));
    records.push(Buffer.from([22, 3, 1, n >> 8, n & 0xff]), message.subarray(at, at + n));
    at += n;
  }
  return Buffer.concat(records);
}

/** A deterministic generator (same cases on every run). */
function seeded(seed: number): () => number {
  return () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
}

/** Feeds `bytes` as the sniffing listener does: parse again only once `need` bytes are there. */
function feed(bytes: Uint8Array, step: number): ClientHelloResult {
  let need = 1;
  for (let n = step; ; n = Math.min(bytes.length, n + step)) {
    if (n >= need) {
      const result = parseClientHello(bytes.subarray(0, n));
      if (result.kind !== 'incomplete') return result;
      need = result.need;
      expect(need).toBeGreaterThan(n);
    }
    if (n === bytes.length) return { kind: 'incomplete', need };
  }
}

describe('parseClientHello', () => {
  let named: Buffer;
  let unnamed: Buffer;
  let tls12: Buffer;
  beforeAll(async () => {
    named = await realHello({ servername: 'api.example.test' });
    // Node sends no SNI for an IP address.
    unnamed = await realHello({ servername: '' });
    tls12 = await realHello({ servername: 'MiXeD.Example.TEST.', maxVersion: 'TLSv1.2', ciphers: 'ECDHE-RSA-AES256-GCM-SHA384' });
  });

  test("reads real clients' SNI, or its absence, exactly as sent", () => {
    expect(parseClientHello(named)).toEqual({ kind: 'hello', servername: 'api.example.test' });
    expect(parseClientHello(unnamed)).toEqual({ kind: 'hello', servername: undefined });
    expect(parseClientHello(tls12)).toEqual({ kind: 'hello', servername: 'MiXeD.Example.TEST.' });
  });

  test('a hello split over records of any size (one byte each included), fed in any read sizes, reads the same (seeded)', () => {
    const random = seeded(29);
    expect(feed(refragment(named, () => 1), 1)).toEqual({ kind: 'hello', servername: 'api.example.test' });
    for (let i = 0; i < 300; i++) {
      const max = 1 + Math.floor(random() * 400);
      const wire = refragment(i % 2 ? named : tls12, () => Math.floor(random() * max));
      const step = 1 + Math.floor(random() * 64);
      expect(feed(wire, step)).toEqual(parseClientHello(i % 2 ? named : tls12));
    }
  });

  test('every proper prefix is incomplete, and asks for more than it has', () => {
    for (const hello of [named, refragment(named, () => 7)]) {
      for (let n = 0; n < hello.length; n++) {
        const result = parseClientHello(hello.subarray(0, n));
        expect(result.kind, `prefix ${n}`).toBe('incomplete');
        if (result.kind === 'incomplete') expect(result.need).toBeGreaterThan(n);
      }
    }
  });

  test('non-TLS bytes fail on the first byte that shows it', () => {
    for (const text of ['G', 'GET / HTTP/1.1\r\n', 'PRI * HTTP/2.0', '\x80\x2e\x01\x03\x01', 'SSH-2.0-', '\x16\x02', '\x16\x03\x09']) {
      expect(parseClientHello(Buffer.from(text, 'latin1')).kind, JSON.stringify(text)).toBe('invalid');
    }
    // An alert or application data record first: not a hello.
    expect(parseClientHello(Buffer.from([21, 3, 3, 0, 2, 2, 40])).kind).toBe('invalid');
    expect(parseClientHello(Buffer.from([23, 3, 3, 0, 1, 0])).kind).toBe('invalid');
  });

  test('oversized: a record over 2^14, a hello whose length exceeds the bound, or records that never end', () => {
    expect(parseClientHello(Buffer.from([22, 3, 1, 0x40, 0x01])).kind).toBe('invalid');
    // A ClientHello announcing 16 MiB is refused at its header, not after 16 MiB.
    expect(parseClientHello(Buffer.from([22, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff])).kind).toBe('invalid');
    // Zero-length records (which could pad a hello out for ever) are refused.
    expect(parseClientHello(Buffer.from([22, 3, 1, 0, 0])).kind).toBe('invalid');
    // One-byte records of a 3 KiB hello: 6 bytes on the wire per byte, over a 16 KiB bound.
    const big = Buffer.alloc(4 + 3000);
    big.set([1, 0, (3000 >> 8) & 0xff, 3000 & 0xff]);
    const wire = refragment(Buffer.concat([Buffer.from([22, 3, 1, big.length >> 8, big.length & 0xff]), big]), () => 1);
    const result = feed(wire, 4096);
    expect(result.kind).toBe('invalid');
    expect(parseClientHello(wire.subarray(0, 4 * 6)).kind).toBe('incomplete');
    // Whatever is still incomplete never asks beyond the bound.
    expect(parseClientHello(named.subarray(0, 40), 32).kind).toBe('invalid');
  });

  test('lengths that do not add up, a repeated extension, and bad server_name entries are invalid', () => {
    // Re-frame a hello body (after the 4-byte handshake header) with `edit` applied to it.
    const body = named.subarray(9, 5 + named.readUInt16BE(3));
    const frame = (b: Buffer): Buffer => {
      const message = Buffer.concat([Buffer.from([1, 0, b.length >> 8, b.length & 0xff]), b]);
      return Buffer.concat([Buffer.from([22, 3, 1, message.length >> 8, message.length & 0xff]), message]);
    };
    expect(parseClientHello(frame(Buffer.from(body)))).toEqual({ kind: 'hello', servername: 'api.example.test' });
    const sessionAt = 34;
    const suitesAt = sessionAt + 1 + body[sessionAt]!;
    const compressionAt = suitesAt + 2 + body.readUInt16BE(suitesAt);
    const extensionsAt = compressionAt + 1 + body[compressionAt]!;
    const sni = Buffer.from([0, 0, 0, 8, 0, 6, 0, 0, 3, 0x61, 0x2e, 0x62]);
    const withExtensions = (extensions: Buffer) => frame(Buffer.concat([body.subarray(0, extensionsAt), Buffer.from([extensions.length >> 8, extensions.length & 0xff]), extensions]));
    expect(parseClientHello(withExtensions(sni))).toEqual({ kind: 'hello', servername: 'a.b' });
    expect(parseClientHello(withExtensions(Buffer.concat([sni, sni]))).kind).toBe('invalid');
    // Name type 1 (not host_name), a NUL in the name, an empty name, a list length that lies.
    expect(parseClientHello(withExtensions(Buffer.from([0, 0, 0, 8, 0, 6, 1, 0, 3, 0x61, 0x2e, 0x62]))).kind).toBe('invalid');
    expect(parseClientHello(withExtensions(Buffer.from([0, 0, 0, 8, 0, 6, 0, 0, 3, 0x61, 0, 0x62]))).kind).toBe('invalid');
    expect(parseClientHello(withExtensions(Buffer.from([0, 0, 0, 5, 0, 3, 0, 0, 0]))).kind).toBe('invalid');
    expect(parseClientHello(withExtensions(Buffer.from([0, 0, 0, 8, 0, 7, 0, 0, 3, 0x61, 0x2e, 0x62]))).kind).toBe('invalid');
    // An extension longer than what is left; an extensions block longer than the body.
    expect(parseClientHello(withExtensions(Buffer.from([0, 0, 0, 9, 0, 6, 0, 0, 3, 0x61, 0x2e, 0x62]))).kind).toBe('invalid');
    expect(parseClientHello(frame(Buffer.concat([body.subarray(0, extensionsAt), Buffer.from([0, 20]), sni]))).kind).toBe('invalid');
    // A session id over 32 bytes; an odd cipher suite length.
    const longSession = Buffer.from(body);
    longSession[sessionAt] = 33;
    expect(parseClientHello(frame(longSession)).kind).toBe('invalid');
    const odd = Buffer.from(body);
    odd.writeUInt16BE(odd.readUInt16BE(suitesAt) - 1, suitesAt);
    expect(parseClientHello(frame(odd)).kind).toBe('invalid');
    // No extensions at all: a hello without SNI.
    expect(parseClientHello(frame(body.subarray(0, extensionsAt)))).toEqual({ kind: 'hello', servername: undefined });
  });

  test('fuzz: mutated, truncated and random inputs never throw, and every answer is one of the three (seeded)', () => {
    const random = seeded(19);
    const samples = [named, unnamed, tls12, refragment(named, () => 50)];
    for (let i = 0; i < 20_000; i++) {
      const base = samples[i % samples.length]!;
      let input: Buffer;
      switch (i % 4) {
        case 0: {
          input = Buffer.from(base);
          for (let flips = 1 + Math.floor(random() * 4); flips > 0; flips--) input[Math.floor(random() * input.length)] = Math.floor(random() * 256);
          break;
        }
        case 1:
          input = base.subarray(0, Math.floor(random() * base.length));
          break;
        case 2: {
          input = Buffer.alloc(Math.floor(random() * 600));
          for (let j = 0; j < input.length; j++) input[j] = Math.floor(random() * 256);
          // Mostly start like a handshake record, so the fuzzing reaches past the first byte.
          if (input.length > 3 && random() < 0.8) input.set([22, 3, 1]);
          break;
        }
        default: {
          // A length field somewhere inside set to an extreme.
          input = Buffer.from(base);
          const at = Math.floor(random() * (input.length - 1));
          input.writeUInt16BE(random() < 0.5 ? 0xffff : 0, at);
        }
      }
      const result = parseClientHello(input);
      expect(['incomplete', 'hello', 'invalid']).toContain(result.kind);
      if (result.kind === 'incomplete') expect(result.need).toBeLessThanOrEqual(MAX_CLIENT_HELLO_BYTES);
      if (result.kind === 'hello' && result.servername !== undefined) {
        expect(result.servername.length).toBeGreaterThan(0);
        expect(result.servername.length).toBeLessThanOrEqual(255);
        expect(result.servername).not.toContain('\0');
      }
    }
  });
});
