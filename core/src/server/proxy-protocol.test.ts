import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_V1_BYTES, parseProxyHeader, readProxyHeader, type ProxyProtocolPolicy } from './proxy-protocol.ts';

const SIG = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);

/** A v2 header: version/command byte, family/protocol byte, then `body` (addresses and TLVs). */
function v2(versionCommand: number, familyProtocol: number, body: Buffer, length = body.length): Buffer {
  const head = Buffer.alloc(4);
  head[0] = versionCommand;
  head[1] = familyProtocol;
  head.writeUInt16BE(length, 2);
  return Buffer.concat([SIG, head, body]);
}

function ipv4Body(src: number[], dst: number[], sport: number, dport: number): Buffer {
  const b = Buffer.alloc(12);
  b.set(src, 0);
  b.set(dst, 4);
  b.writeUInt16BE(sport, 8);
  b.writeUInt16BE(dport, 10);
  return b;
}

describe('parseProxyHeader: v1', () => {
  it('reads TCP4 and TCP6 lines and says where the payload starts', () => {
    const line = 'PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n';
    expect(parseProxyHeader(Buffer.from(`${line}GET / HTTP/1.1\r\n`))).toEqual({
      kind: 'header',
      version: 1,
      length: line.length,
      source: { address: '192.0.2.7', port: 56324, family: 'IPv4' },
      destination: { address: '198.51.100.1', port: 443, family: 'IPv4' },
    });
    const six = parseProxyHeader(Buffer.from('PROXY TCP6 2001:db8::7 2001:db8::1 65535 0\r\n'));
    expect(six).toMatchObject({ kind: 'header', source: { address: '2001:db8::7', port: 65535, family: 'IPv6' }, destination: { port: 0 } });
  });

  it('UNKNOWN keeps the connection addresses (anything after it is ignored)', () => {
    expect(parseProxyHeader(Buffer.from('PROXY UNKNOWN\r\n'))).toEqual({ kind: 'header', version: 1, length: 15 });
    expect(parseProxyHeader(Buffer.from('PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n'))).toMatchObject({ kind: 'header', version: 1 });
    expect(parseProxyHeader(Buffer.from('PROXY UNKNOWN\r\n'))).not.toHaveProperty('source');
  });

  it('asks for more bytes until the CRLF, in any split', () => {
    const line = Buffer.from('PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\n');
    for (let n = 1; n < line.length; n++) expect(parseProxyHeader(line.subarray(0, n)).kind, `after ${n} bytes`).toBe('incomplete');
    expect(parseProxyHeader(line).kind).toBe('header');
  });

  it('refuses malformed lines', () => {
    const bad = [
      'PROXY TCP4 10.0.0.1 10.0.0.2 1\r\n', // four fields
      'PROXY TCP5 10.0.0.1 10.0.0.2 1 2\r\n', // protocol
      'PROXY TCP4 10.0.0.300 10.0.0.2 1 2\r\n', // address
      'PROXY TCP4 ::1 ::1 1 2\r\n', // IPv6 under TCP4
      'PROXY TCP6 10.0.0.1 10.0.0.2 1 2\r\n', // IPv4 under TCP6
      'PROXY TCP4 10.0.0.1 10.0.0.2 65536 2\r\n', // port range
      'PROXY TCP4 10.0.0.1 10.0.0.2 01 2\r\n', // leading zero
      'PROXY TCP4 10.0.0.1 10.0.0.2 -1 2\r\n',
      'PROXY TCP4  10.0.0.1 10.0.0.2 1 2\r\n', // two spaces
      'PROXY TCP4 10.0.0.1 10.0.0.2 1 2\n', // LF without CR
      'PROXY TCP4 10.0.0.1\r10.0.0.2 1 2\r\n', // stray CR
      'PROXY TCP4 10.0.0.1 10.0.0.2 1 2\x00\r\n', // NUL
      'PROXYTCP4 10.0.0.1 10.0.0.2 1 2\r\n', // signature
    ];
    for (const line of bad) expect(parseProxyHeader(Buffer.from(line, 'latin1')).kind, JSON.stringify(line)).toBe('invalid');
  });

  it(`refuses a line over ${MAX_V1_BYTES} bytes as soon as it is that long`, () => {
    const long = Buffer.from(`PROXY UNKNOWN ${'x'.repeat(200)}`);
    expect(parseProxyHeader(long.subarray(0, MAX_V1_BYTES - 1)).kind).toBe('incomplete');
    expect(parseProxyHeader(long.subarray(0, MAX_V1_BYTES))).toMatchObject({ kind: 'invalid' });
    // The longest legal line is taken.
    const longest = `PROXY TCP6 ${'ffff:'.repeat(7)}ffff ${'ffff:'.repeat(7)}ffff 65535 65535\r\n`;
    expect(longest.length).toBe(MAX_V1_BYTES - 3);
    expect(parseProxyHeader(Buffer.from(longest)).kind).toBe('header');
  });

  it('tells ordinary first bytes (HTTP/1.1, the h2c preface, a ClientHello) as absent', () => {
    for (const start of ['GET / HTTP/1.1\r\n', 'POST /', 'PUT /', 'PRI * HTTP/2.0\r\n', 'PATCH /', '\x16\x03\x01']) {
      expect(parseProxyHeader(Buffer.from(start, 'latin1')).kind, start).toBe('absent');
    }
    expect(parseProxyHeader(Buffer.from('PR')).kind).toBe('incomplete');
  });
});

describe('parseProxyHeader: v2', () => {
  it('reads PROXY over TCP/IPv4 and skips TLVs', () => {
    const tlv = Buffer.from([0x04, 0x00, 0x03, 0x61, 0x62, 0x63]);
    const header = v2(0x21, 0x11, Buffer.concat([ipv4Body([203, 0, 113, 9], [10, 0, 0, 1], 40000, 8080), tlv]));
    expect(parseProxyHeader(Buffer.concat([header, Buffer.from('GET')]))).toEqual({
      kind: 'header',
      version: 2,
      length: header.length,
      source: { address: '203.0.113.9', port: 40000, family: 'IPv4' },
      destination: { address: '10.0.0.1', port: 8080, family: 'IPv4' },
    });
  });

  it('reads IPv6 addresses as Node writes them', () => {
    const body = Buffer.alloc(36);
    Buffer.from('20010db8000000000000000000000007', 'hex').copy(body, 0);
    Buffer.from('00000000000000000000ffffc0000201', 'hex').copy(body, 16);
    body.writeUInt16BE(1, 32);
    body.writeUInt16BE(2, 34);
    expect(parseProxyHeader(v2(0x21, 0x21, body))).toMatchObject({ source: { address: '2001:db8::7', port: 1, family: 'IPv6' }, destination: { address: '::ffff:192.0.2.1', port: 2 } });
    const full = Buffer.alloc(36, 0x11);
    expect(parseProxyHeader(v2(0x21, 0x21, full))).toMatchObject({ source: { address: '1111:1111:1111:1111:1111:1111:1111:1111' } });
  });

  it('LOCAL and AF_UNSPEC keep the connection addresses', () => {
    expect(parseProxyHeader(v2(0x20, 0x00, Buffer.alloc(0)))).toEqual({ kind: 'header', version: 2, length: 16 });
    // LOCAL with addresses: still ignored, as the specification says.
    expect(parseProxyHeader(v2(0x20, 0x11, ipv4Body([1, 2, 3, 4], [5, 6, 7, 8], 1, 2)))).not.toHaveProperty('source');
    expect(parseProxyHeader(v2(0x21, 0x00, Buffer.alloc(0)))).not.toHaveProperty('source');
  });

  it('asks for the preamble, then the announced length, in any split', () => {
    const header = v2(0x21, 0x11, ipv4Body([1, 2, 3, 4], [5, 6, 7, 8], 1, 2));
    for (let n = 1; n < header.length; n++) expect(parseProxyHeader(header.subarray(0, n)).kind, `after ${n} bytes`).toBe('incomplete');
    expect(parseProxyHeader(header.subarray(0, 16))).toEqual({ kind: 'incomplete', need: 28 });
  });

  it('refuses what is not a well-formed v2 header', () => {
    const addresses = ipv4Body([1, 2, 3, 4], [5, 6, 7, 8], 1, 2);
    const cases: [string, Buffer][] = [
      ['version 1 in the binary form', v2(0x11, 0x11, addresses)],
      ['version 3', v2(0x31, 0x11, addresses)],
      ['command 2', v2(0x22, 0x11, addresses)],
      ['AF_UNIX', v2(0x21, 0x31, Buffer.alloc(216))],
      ['family 4', v2(0x21, 0x41, addresses)],
      ['DGRAM', v2(0x21, 0x12, addresses)],
      ['IPv4 shorter than 12 bytes', v2(0x21, 0x11, addresses.subarray(0, 11))],
      ['IPv6 shorter than 36 bytes', v2(0x21, 0x21, Buffer.alloc(35))],
      ['a broken signature', Buffer.concat([Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0b]), Buffer.alloc(4)])],
    ];
    for (const [name, bytes] of cases) expect(parseProxyHeader(bytes).kind, name).toBe('invalid');
  });

  it('refuses an announced length over the limit before reading it', () => {
    const preamble = v2(0x21, 0x11, Buffer.alloc(0), 65535);
    expect(parseProxyHeader(preamble)).toMatchObject({ kind: 'invalid' });
    expect(parseProxyHeader(v2(0x21, 0x11, Buffer.alloc(0), 100), 99)).toMatchObject({ kind: 'invalid' });
  });
});

describe('readProxyHeader on a real socket', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  /** A server that reads each connection's header, then echoes the address it took and the first payload bytes. */
  async function start(policy: ProxyProtocolPolicy, timeoutMs = 5_000): Promise<number> {
    server = createServer((socket) => {
      socket.on('error', () => {});
      readProxyHeader(socket, policy, timeoutMs, (s) => {
        s.once('data', (chunk: Buffer) => s.end(`${s.remoteAddress}:${s.remotePort}>${s.localAddress}:${s.localPort} ${chunk.toString('latin1')}`));
        s.resume();
      });
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', () => resolve()));
    return (server!.address() as AddressInfo).port;
  }

  function exchange(port: number, send: (socket: Socket) => void): Promise<{ text: string; closedWithoutAnswer: boolean }> {
    return new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1');
      let text = '';
      socket.on('data', (c) => (text += c.toString('latin1')));
      socket.on('error', () => {});
      socket.on('close', () => resolve({ text, closedWithoutAnswer: text === '' }));
      socket.on('connect', () => send(socket));
    });
  }

  it('takes the address of a header sent a byte at a time, with the payload in the same reads', async () => {
    const port = await start({});
    const bytes = Buffer.from('PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\nhello');
    const { text } = await exchange(port, (socket) => {
      let i = 0;
      const tick = (): void => {
        if (i >= bytes.length) return;
        socket.write(bytes.subarray(i, ++i));
        setImmediate(tick);
      };
      tick();
    });
    expect(text.startsWith('192.0.2.7:56324>198.51.100.1:443 h')).toBe(true);
  });

  it('refuses a connection without a header, unless allowed; then its own address stands', async () => {
    let port = await start({});
    expect((await exchange(port, (s) => s.write('GET / HTTP/1.1\r\n\r\n'))).closedWithoutAnswer).toBe(true);
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    port = await start({ allowWithout: true });
    const { text } = await exchange(port, (s) => s.write('GET /'));
    expect(text).toMatch(/^127\.0\.0\.1:\d+>127\.0\.0\.1:\d+ GET \/$/);
  });

  it('closes a connection whose header never completes, at the deadline', async () => {
    const port = await start({}, 200);
    const { closedWithoutAnswer } = await exchange(port, (s) => s.write('PROXY TCP4 1.2.3.4'));
    expect(closedWithoutAnswer).toBe(true);
  });

  it('survives a client that leaves mid-header', async () => {
    const port = await start({});
    const { closedWithoutAnswer } = await exchange(port, (s) => s.end('PROXY TCP4 1.2.'));
    expect(closedWithoutAnswer).toBe(true);
    // Still serving.
    expect((await exchange(port, (s) => s.write('PROXY UNKNOWN\r\nx'))).text).toMatch(/^127\.0\.0\.1:\d+>127\.0\.0\.1:\d+ x$/);
  });
});
