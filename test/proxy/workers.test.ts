// `--workers 2` (SPEC 8): traffic served by cluster workers fed config by the primary;
// each worker owns its listening sockets (SO_REUSEPORT), the primary none; metrics summed
// across workers; reloads reach every worker without losing a request; graceful stop drains them.
import { readdir, readFile, readlink } from 'node:fs/promises';
import { connect as connectHttp2 } from 'node:http2';
import { Agent } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startEcho, startServer, type TestServer } from '../support/upstream.ts';

let gw: GatehouseProcess;
let config: ConfigDir;
let a: TestServer;
let b: TestServer;
let slow: TestServer;

function vs(upstream: string) {
  return manifests.virtualService('vs', {
    domains: ['*'],
    routes: [
      { name: 'slow', matchers: [{ prefix: '/slow' }], routeAction: { single: { upstream: { name: 'slow' } } } },
      { name: 'main', routeAction: { single: { upstream: { name: upstream } } } },
    ],
  });
}

/** `n` requests to `path`, `concurrency` at a time, each on a new connection (so the kernel spreads them over workers). */
async function burst(n: number, path: string, concurrency = 8): Promise<string[]> {
  const upstreams: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        next++;
        const reply = await send(gw.url, { path });
        expect(reply.status).toBe(200);
        upstreams.push(reply.headers['x-upstream'] as string);
      }
    }),
  );
  return upstreams;
}

/** Access log lines of requests to `path`, once `count` of them have been written. */
function accessLines(path: string, count: number): Promise<Record<string, unknown>[]> {
  return eventually(async () => {
    const lines = gw.logs.filter((l) => l.msg === 'access' && l.path === path);
    return lines.length >= count && lines;
  });
}

/**
 * Bursts of requests to `path` until both workers have served some (the kernel, not
 * Gatehouse, spreads connections, so one burst may land on a single worker).
 */
async function burstOverBothWorkers(path: string): Promise<{ upstreams: string[]; pids: Set<unknown> }> {
  const upstreams: string[] = [];
  for (let round = 0; round < 10; round++) {
    upstreams.push(...(await burst(20, path)));
    const pids = new Set((await accessLines(path, upstreams.length)).map((l) => l.pid));
    if (pids.size >= 2) return { upstreams, pids };
  }
  throw new Error('10 bursts of 20 new connections all landed on one worker');
}

/**
 * The pids holding a listening TCP socket on `port`, one entry per socket (from /proc/net/tcp
 * and each process's fd table): who owns the listener, as the kernel sees it.
 */
async function listenerOwners(port: number, pids: number[]): Promise<number[]> {
  return (await listenerSockets(port, pids)).map((s) => s.pid).sort();
}

/** The listening sockets on `port` (inodes, from /proc/net/tcp) held by `pids`. */
async function listenerSockets(port: number, pids: number[]): Promise<{ pid: number; inode: string }[]> {
  const inodes = await listeningInodes(port);
  const out: { pid: number; inode: string }[] = [];
  for (const pid of pids) {
    for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [])) {
      const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode && inodes.has(inode)) out.push({ pid, inode });
    }
  }
  return out;
}

/** Inodes of the sockets listening on `port`. */
async function listeningInodes(port: number): Promise<Set<string>> {
  const hexPort = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  return new Set(
    (await readFile('/proc/net/tcp', 'utf8'))
      .split('\n')
      .map((line) => line.trim().split(/\s+/))
      // local_address has the port; state 0A is LISTEN; the inode is the 10th column.
      .filter((f) => f[1]?.endsWith(hexPort) && f[3] === '0A')
      .map((f) => f[9]!),
  );
}

/** The primary's children (the workers), as the kernel lists them. */
async function workerPids(): Promise<number[]> {
  const pid = gw.child.pid!;
  return (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8')).trim().split(/\s+/).filter(Boolean).map(Number);
}

function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

beforeAll(async () => {
  [a, b] = await Promise.all([startEcho('a'), startEcho('b')]);
  slow = await startServer((req, res) => {
    req.resume();
    setTimeout(() => res.end('slow done'), 800);
  });
  config = await makeConfigDir({
    'upstreams.yaml': [
      manifests.upstream('a', [{ addr: '127.0.0.1', port: a.port }]),
      manifests.upstream('b', [{ addr: '127.0.0.1', port: b.port }]),
      manifests.upstream('slow', [{ addr: '127.0.0.1', port: slow.port }]),
    ],
    'vs.yaml': vs('a'),
  });
  gw = await startGatehouse('run', ['--config-dir', config.path, '--workers', '2'], { timeoutMs: 30_000 });
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([a?.close(), b?.close(), slow?.close(), config?.cleanup()]);
});

describe('--workers 2', () => {
  it('serves traffic from worker processes and sums their request counters in /metrics', async () => {
    expect(gw.listening.workers).toBe(2);
    const series = 'gatehouse_requests_total{virtual_host="default/vs",route="main",status="200"}';
    const before = sample((await send(gw.adminUrl, { path: '/metrics' })).body, series);
    // Both workers serve, so the total below can only be right if it is a sum.
    const { upstreams, pids } = await burstOverBothWorkers('/burst');
    expect(upstreams.filter((u) => u !== 'a')).toEqual([]);
    // Access log lines come from the workers, not the primary.
    expect(pids.has(gw.listening.pid)).toBe(false);
    expect(pids.size).toBe(2);

    const expected = before + upstreams.length;
    const total = await eventually(async () => {
      const value = sample((await send(gw.adminUrl, { path: '/metrics' })).body, series);
      return value >= expected && value;
    });
    expect(total).toBe(expected);
  });

  it('each worker owns its own listening socket on the traffic and HTTPS ports; the primary holds none (SO_REUSEPORT)', async () => {
    const workers = await workerPids();
    expect(workers).toHaveLength(2);
    const everyone = [gw.child.pid!, ...workers];
    // Port 0 was asked for: the second worker bound the port the first one got.
    expect(await listenerOwners(gw.port, everyone)).toEqual([...workers].sort());
    expect(await listenerOwners(Number(gw.listening.httpsPort), everyone)).toEqual([...workers].sort());
  });

  it('serves h2c (prior knowledge) from the workers', async () => {
    const session = connectHttp2(gw.url);
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const stream = session.request({ ':path': '/h2c' });
        stream.on('response', (headers) => resolve(Number(headers[':status'])));
        stream.on('error', reject);
        stream.resume();
        stream.end();
      });
      expect(status).toBe(200);
    } finally {
      session.close();
    }
    const line = await accessLines('/h2c', 1);
    expect(line[0]!.protocol).toBe('HTTP/2');
    expect(line[0]!.pid).not.toBe(gw.listening.pid);
  });

  it('loses no request while configurations reload under load (new and kept-alive connections)', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 4 });
    let stop = false;
    const failures: string[] = [];
    let served = 0;
    const client = async (keepAlive: boolean) => {
      while (!stop) {
        try {
          const reply = await send(gw.url, { path: '/rolling', ...(keepAlive ? { agent } : {}) });
          if (reply.status === 200) served++;
          else failures.push(`status ${reply.status}`);
        } catch (error) {
          failures.push((error as Error).message);
        }
      }
    };
    const clients = [client(true), client(true), client(false), client(false)];
    try {
      const loaded = () => gw.logs.filter((l) => l.msg === 'configuration loaded').length;
      for (const upstream of ['b', 'a', 'b', 'a']) {
        const before = loaded();
        await config.write('vs.yaml', vs(upstream));
        await gw.waitForLog(() => loaded() > before, 15_000);
        // Each reload is seen served by the workers before the next one.
        await eventually(async () => (await send(gw.url, { path: '/rolling-check' })).headers['x-upstream'] === upstream);
      }
    } finally {
      stop = true;
      await Promise.all(clients);
      agent.destroy();
    }
    expect(failures).toEqual([]);
    expect(served).toBeGreaterThan(0);
  });

  it('/config shows the effective routes', async () => {
    const body = JSON.parse((await send(gw.adminUrl, { path: '/config' })).body) as { routes: { virtualService: string; routes: { name: string }[] }[] };
    expect(body.routes.find((r) => r.virtualService === 'default/vs')?.routes.map((r) => r.name)).toEqual(['slow', 'main']);
  });

  it('a config reload reaches every worker', async () => {
    const before = gw.logs.filter((l) => l.msg === 'configuration loaded').length;
    await config.write('vs.yaml', vs('b'));
    await gw.waitForLog((l) => l.msg === 'configuration loaded' && gw.logs.filter((x) => x.msg === 'configuration loaded').length > before);
    // Workers apply the pushed snapshot a moment after the primary logs it.
    await eventually(async () => (await burst(8, '/settle')).every((u) => u === 'b'));
    // Then every request goes to b, whichever worker serves it.
    const { upstreams, pids } = await burstOverBothWorkers('/after-reload');
    expect(upstreams.filter((u) => u !== 'b')).toEqual([]);
    expect(pids.size).toBe(2);
  });

  it('a worker that dies is forked again, and /readyz says so until it is back (issue 17 finding 6)', async () => {
    const { pids } = await burstOverBothWorkers('/before-kill');
    const victim = [...pids][0] as number;
    const victimSocket = (await listenerSockets(gw.port, [victim]))[0]!.inode;
    process.kill(victim, 'SIGKILL');
    const notReady = await eventually(
      async () => {
        const r = await send(gw.adminUrl, { path: '/readyz' });
        return r.status === 503 && r.body;
      },
      5_000,
      10,
    );
    expect(notReady).toMatch(/^[01] of 2 workers running/);
    // Once the kernel has closed the victim's socket (when its last thread is gone, which may be
    // after its main thread is a zombie), the other worker's socket takes every new connection
    // while the victim is replaced. (Connections queued on the victim's own socket as it died are
    // reset: docs/operations.md, tcp_migrate_req.)
    await eventually(async () => !(await listeningInodes(gw.port)).has(victimSocket), 5_000, 5);
    expect((await burst(10, '/during-restart')).length).toBe(10);
    await eventually(async () => (await send(gw.adminUrl, { path: '/readyz' })).status === 200, 15_000);
    const restarts = sample((await send(gw.adminUrl, { path: '/metrics' })).body, 'gatehouse_worker_restarts_total');
    expect(restarts).toBeGreaterThanOrEqual(1);
    // Both workers serve again, one of them new.
    const after = await burstOverBothWorkers('/after-kill');
    expect(after.pids.has(victim)).toBe(false);
    expect(gw.logs.some((l) => l.code === 'GH_WORKER_EXITED')).toBe(true);
  });

  it('SIGTERM drains in-flight requests in the workers and exits 0', async () => {
    const inFlight = send(gw.url, { path: '/slow' });
    await new Promise((r) => setTimeout(r, 200));
    const exited = new Promise<number | null>((resolve) => gw.child.once('exit', (code) => resolve(code)));
    gw.child.kill('SIGTERM');
    const reply = await inFlight;
    expect(reply.status).toBe(200);
    expect(reply.body).toBe('slow done');
    expect(await exited).toBe(0);
  });
});
