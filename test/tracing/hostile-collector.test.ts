/**
 * A collector that is down, hangs or answers garbage costs spans, never requests
 * (docs/tracing.md): every request through a tracing `gatehouse run` is answered and carries
 * the trace context, whatever the OTLP endpoint does.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { freePort } from '../support/ports.ts';
import { send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';

const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/;

/** A TCP server that treats every connection with `behaviour`, keeping the sockets to close them. */
async function tcpServer(behaviour: (socket: Socket) => void): Promise<{ port: number; accepted: () => number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server: Server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
    behaviour(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    accepted: () => accepted,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

const GARBAGE = Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 9999\r\ncontent-type: application/x-protobuf\r\n\r\n\u0000\u00ff\u00fe garbage \u0001\u0002');

describe.each([
  { name: 'accepts and never answers (OTLP/HTTP)', protocol: 'http/protobuf', behaviour: (_s: Socket) => {} },
  { name: 'answers garbage (OTLP/HTTP)', protocol: 'http/protobuf', behaviour: (s: Socket) => s.once('data', () => s.end(GARBAGE)) },
  { name: 'accepts and never answers (OTLP/gRPC)', protocol: 'grpc', behaviour: (_s: Socket) => {} },
  { name: 'answers garbage (OTLP/gRPC)', protocol: 'grpc', behaviour: (s: Socket) => s.once('data', () => s.end(GARBAGE)) },
  { name: 'is down', protocol: 'http/protobuf', behaviour: undefined },
])('a collector that $name', ({ protocol, behaviour }) => {
  let echo: TestServer;
  let dir: ConfigDir;
  let gatehouse: GatehouseProcess;
  let collector: Awaited<ReturnType<typeof tcpServer>> | undefined;
  let collectorPort: number;

  beforeAll(async () => {
    echo = await startEcho('echo');
    if (behaviour) {
      collector = await tcpServer(behaviour);
      collectorPort = collector.port;
    } else collectorPort = await freePort();
    dir = await makeConfigDir({
      'upstream.yaml': manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
      'vs.yaml': manifests.virtualService('shop', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] }),
    });
    gatehouse = await startGatehouse('run', ['--config-dir', dir.path], {
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${collectorPort}`, OTEL_EXPORTER_OTLP_PROTOCOL: protocol, OTEL_BSP_SCHEDULE_DELAY: '50' },
    });
  }, 60_000);

  afterAll(async () => {
    await gatehouse?.stop();
    await collector?.close();
    await echo?.close();
    await dir?.cleanup();
  });

  it('every request is answered, traced and propagated, while exports fail', async () => {
    let traced = 0;
    // 300 requests in waves of 30: several export batches go to the collector meanwhile.
    for (let wave = 0; wave < 10; wave++) {
      const replies = await Promise.all(Array.from({ length: 30 }, (_, i) => send(gatehouse.url, { path: `/w${wave}/${i}` })));
      for (const reply of replies) {
        expect(reply.status).toBe(200);
        const seen = JSON.parse(reply.body) as Echo;
        if (TRACEPARENT.test(String(seen.headers.traceparent ?? ''))) traced++;
      }
    }
    // The SDK loads on the first request: nearly every request is traced.
    expect(traced).toBeGreaterThan(250);
    if (collector) await waitUntil(() => collector!.accepted() > 0);
    // Still serving, and the process is alive.
    const last = await send(gatehouse.url, { path: '/after' });
    expect(last.status).toBe(200);
    expect(gatehouse.child.exitCode).toBeNull();
  });
});

async function waitUntil(condition: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
