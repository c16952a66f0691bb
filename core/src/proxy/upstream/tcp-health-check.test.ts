import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { matchesInOrder, payloadBytes, tcpHealthProbe } from './tcp-health-check.ts';
import type { UpstreamHost } from './upstream-cluster.ts';
import { refusedPort } from '../../../../test/support/upstream.ts';

const servers: Server[] = [];
const sockets = new Set<Socket>();

/** A real TCP server on 127.0.0.1 running `onData` for what it receives. */
async function tcpServer(onData: (socket: Socket, data: Buffer) => void): Promise<number> {
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('data', (d) => onData(socket, d));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return (server.address() as AddressInfo).port;
}

const host = (port: number) => ({ origin: `http://127.0.0.1:${port}`, servername: undefined }) as unknown as UpstreamHost;
const ping = { send: Buffer.from('PING'), receive: [Buffer.from('PO'), Buffer.from('NG')] };
let pong: number;
let wrong: number;
let silent: number;
let closing: number;

beforeAll(async () => {
  pong = await tcpServer((s, d) => d.toString() === 'PING' && s.write('xxPOyyNG'));
  wrong = await tcpServer((s) => s.write('NGPO'));
  silent = await tcpServer(() => {});
  closing = await tcpServer((s) => s.end('PO'));
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});

describe('TCP health checks (Envoy TcpHealthCheck)', () => {
  test('payloads: text is hex, binary is base64; expected payloads match in order with anything between', () => {
    expect(payloadBytes({ text: '50494e47' }).toString()).toBe('PING');
    expect(payloadBytes({ binary: Buffer.from('PONG').toString('base64') }).toString()).toBe('PONG');
    expect(matchesInOrder(Buffer.from('aPObNGc'), [Buffer.from('PO'), Buffer.from('NG')])).toBe(true);
    expect(matchesInOrder(Buffer.from('NGPO'), [Buffer.from('PO'), Buffer.from('NG')])).toBe(false);
  });

  test('a host that answers the expected bytes passes; wrong order, silence, a close before the answer, a refused connection fail', async () => {
    expect(await tcpHealthProbe(host(pong), ping, AbortSignal.timeout(5_000))).toBe(true);
    expect(await tcpHealthProbe(host(wrong), ping, AbortSignal.timeout(1_000))).toBe(false);
    // Silence: the check's timeout ends it.
    expect(await tcpHealthProbe(host(silent), ping, AbortSignal.timeout(300))).toBe(false);
    expect(await tcpHealthProbe(host(closing), ping, AbortSignal.timeout(5_000))).toBe(false);
    expect(await tcpHealthProbe(host(await refusedPort()), ping, AbortSignal.timeout(5_000))).toBe(false);
  });

  test('with nothing to receive, a connection that opens passes (and is closed)', async () => {
    const before = new Set(sockets);
    expect(await tcpHealthProbe(host(silent), { send: undefined, receive: [] }, AbortSignal.timeout(5_000))).toBe(true);
    const opened = [...sockets].filter((s) => !before.has(s));
    expect(opened).toHaveLength(1);
    await new Promise((resolve) => (opened[0]!.closed ? resolve(undefined) : opened[0]!.once('close', resolve)));
  });
});
