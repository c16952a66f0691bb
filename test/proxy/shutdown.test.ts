// Graceful shutdown on SIGTERM (SPEC 8): stop accepting, finish in-flight requests, exit 0.
import { Agent } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

const SLOW_MS = 1_000;

let config: ConfigDir;
let upstream: TestServer;
/** Resolves when the upstream has received a slow request. */
let slowArrived: () => void = () => {};

beforeAll(async () => {
  upstream = await startServer((req, res) => {
    req.resume();
    if (req.url === '/slow') {
      slowArrived();
      setTimeout(() => res.end('finished after SIGTERM'), SLOW_MS);
    } else res.end('quick');
  });
  config = await makeConfigDir({
    'config.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.virtualService('vs', { domains: ['*'], routes: [{ routeAction: { single: { upstream: { name: 'up' } } } }] }),
    ],
  });
});

afterAll(async () => {
  await Promise.all([upstream?.close(), config?.cleanup()]);
});

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

/** Starts a slow request, waits until the upstream has it, then sends SIGTERM. */
async function slowRequestThenSigterm(gw: GatehouseProcess) {
  const arrived = new Promise<void>((resolve) => (slowArrived = resolve));
  const inFlight = send(gw.url, { path: '/slow' });
  await arrived;
  const exited = new Promise<number | null>((resolve) => gw.child.once('exit', (code) => resolve(code)));
  const signalledAt = performance.now();
  gw.child.kill('SIGTERM');
  await gw.waitForLog((l) => l.msg === 'shutting down: draining in-flight requests');
  return { inFlight, exited, signalledAt };
}

describe('graceful shutdown on SIGTERM', () => {
  it('finishes the in-flight request, refuses new connections, closes idle ones and exits 0', async () => {
    const gw = await startGatehouse('run', ['--config-dir', config.path]);
    // An idle keep-alive connection must not hold the shutdown up for its 65 s timeout.
    const agent = new Agent({ keepAlive: true });
    expect((await send(gw.url, { path: '/quick', agent })).body).toBe('quick');

    const { inFlight, exited, signalledAt } = await slowRequestThenSigterm(gw);
    let done = false;
    void inFlight.finally(() => (done = true));
    // The log line may reach us a moment before the listener closes (logs are written off-thread).
    await eventually(async () => !(await canConnect(gw.port)), 500, 10);
    expect(done).toBe(false);
    const reply = await inFlight;
    expect(reply.status).toBe(200);
    expect(reply.body).toBe('finished after SIGTERM');
    expect(await exited).toBe(0);
    // Exit follows the drain, not the keep-alive timeout or the 30 s grace period.
    expect(performance.now() - signalledAt).toBeLessThan(SLOW_MS + 3_000);
    expect(gw.logs.some((l) => l.msg === 'stopped')).toBe(true);
    agent.destroy();
  });

  it('cuts requests still running when the grace period ends, then exits 0', async () => {
    const gw = await startGatehouse('run', ['--config-dir', config.path, '--shutdown-grace', '200ms']);
    const { inFlight, exited, signalledAt } = await slowRequestThenSigterm(gw);
    await expect(inFlight).rejects.toThrow();
    expect(await exited).toBe(0);
    expect(performance.now() - signalledAt).toBeLessThan(SLOW_MS);
  });
});
