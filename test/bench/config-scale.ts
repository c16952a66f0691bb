// `node test/bench/config-scale.ts [--sizes 500,5000] [--sources dir,kube]`: configuration at
// scale (issue 13). N VirtualServices of 4 routes each (5,000 → 20,000 routes) through the
// directory source and through the kube source (a real kube-apiserver + etcd from
// test/kube/install-kube.sh): time from start to the first ready answer, time from one changed
// VirtualService to serving it, and the gateway's RSS (current and peak). Not part of npm test.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { renderCrds } from '../../core/src/install/crds.ts';
import { findKube, startKubeApiServer, type KubeObject } from '../kube/apiserver.ts';
import { send } from '../support/http.ts';
import { startEcho } from '../support/upstream.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const NS = 'scale';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : process.argv[i + 1]!;
}

function upstreamManifest(port: number): KubeObject {
  return { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo', namespace: NS }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } } };
}

function vsManifest(i: number, marker = 'v1'): KubeObject {
  const dest = { routeAction: { single: { upstream: { name: 'echo', namespace: NS } } } };
  return {
    apiVersion: 'gateway.gatehouse.dev/v1',
    kind: 'VirtualService',
    metadata: { name: `vs-${i}`, namespace: NS },
    spec: {
      virtualHost: {
        domains: [`host-${i}.test`],
        routes: [
          { matchers: [{ exact: `/exact-${i}` }], ...dest },
          { matchers: [{ regex: `/items/[0-9]+/${i}` }], ...dest },
          { matchers: [{ prefix: '/api', headers: [{ name: 'x-tenant', value: `t${i}` }] }], ...dest },
          { matchers: [{ prefix: '/' }], ...dest, options: { headerManipulation: { requestHeadersToAdd: [{ header: { key: 'x-marker', value: marker } }] } } },
        ],
      },
    },
  };
}

interface Started {
  child: ChildProcess;
  url: string;
  adminUrl: string;
  pid: number;
}

async function startGateway(args: string[]): Promise<Started> {
  const child = spawn(process.execPath, [...NODE_FLAGS, CLI, 'run', '--port', '0', '--https-port', '0', '--admin-port', '0', '--extauth-port', '0', '--host', '127.0.0.1', '--access-log', 'false', ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'info' } });
  return await new Promise<Started>((resolve, reject) => {
    let buffer = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      for (const line of buffer.split('\n')) {
        if (!line.includes('"listening"')) continue;
        const parsed = JSON.parse(line) as { port: number; adminPort: number };
        resolve({ child, url: `http://127.0.0.1:${parsed.port}`, adminUrl: `http://127.0.0.1:${parsed.adminPort}`, pid: child.pid! });
      }
      buffer = buffer.slice(buffer.lastIndexOf('\n') + 1);
    });
    child.once('exit', (code) => reject(new Error(`gatehouse exited ${code}`)));
  });
}

async function rssMb(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(/\d+/.exec(status.split('\n').find((l) => l.startsWith(field))!)![0]);
  return { rss: kb('VmRSS:') / 1024, peak: kb('VmHWM:') / 1024 };
}

async function until(probe: () => Promise<boolean>, timeoutMs = 300_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await probe().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('timed out');
}

const marker = async (url: string, i: number) => {
  const reply = await send(url, { headers: { host: `host-${i}.test` } });
  return reply.status === 200 ? ((JSON.parse(reply.body) as { headers: Record<string, string> }).headers['x-marker'] ?? '') : '';
};

async function measure(source: 'dir' | 'kube', n: number, echoPort: number): Promise<Record<string, number>> {
  let cleanup: () => Promise<void> = async () => {};
  let args: string[];
  let change: () => Promise<void>;
  if (source === 'dir') {
    const dir = await mkdtemp(join(tmpdir(), 'gatehouse-scale-'));
    cleanup = () => rm(dir, { recursive: true, force: true });
    await writeFile(join(dir, 'upstream.yaml'), stringify(upstreamManifest(echoPort)));
    // 100 VirtualServices a file, as a repository of manifests would hold them.
    for (let f = 0; f * 100 < n; f++) {
      const docs = Array.from({ length: Math.min(100, n - f * 100) }, (_, k) => stringify(vsManifest(f * 100 + k)));
      await writeFile(join(dir, `vs-${String(f).padStart(3, '0')}.yaml`), docs.join('---\n'));
    }
    await writeFile(join(dir, 'changing.yaml'), stringify(vsManifest(n)));
    args = ['--config-dir', dir];
    change = () => writeFile(join(dir, 'changing.yaml'), stringify(vsManifest(n, 'v2')));
  } else {
    const kube = await startKubeApiServer();
    cleanup = () => kube.stop();
    await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    for (const crd of renderCrds('gatehouse.dev', {})) {
      await kube.apply(crd as unknown as KubeObject);
      await kube.waitForCrd(crd.metadata!.name!);
    }
    await kube.apply(upstreamManifest(echoPort));
    const all = Array.from({ length: n + 1 }, (_, i) => vsManifest(i));
    // A few applies in flight: the API server is the bottleneck here, not the test.
    for (let i = 0; i < all.length; i += 8) await Promise.all(all.slice(i, i + 8).map((o) => kube.apply(o)));
    args = ['--kube', '--kubeconfig', kube.kubeconfig, '--namespace', NS];
    change = async () => void (await kube.apply(vsManifest(n, 'v2')));
  }
  try {
    const t0 = Date.now();
    const gateway = await startGateway(args);
    await until(async () => (await send(gateway.adminUrl, { path: '/readyz' })).status === 200);
    await until(async () => (await marker(gateway.url, n)) === 'v1');
    const readyMs = Date.now() - t0;
    const idle = await rssMb(gateway.pid);
    const t1 = Date.now();
    await change();
    await until(async () => (await marker(gateway.url, n)) === 'v2');
    const changeMs = Date.now() - t1;
    const after = await rssMb(gateway.pid);
    gateway.child.kill('SIGTERM');
    await new Promise((r) => gateway.child.once('exit', r));
    return { readyMs, changeMs, rssMb: Math.round(after.rss), peakRssMb: Math.round(Math.max(idle.peak, after.peak)) };
  } finally {
    await cleanup();
  }
}

async function main(): Promise<void> {
  const sizes = arg('sizes', '500,5000').split(',').map(Number);
  const sources = arg('sources', findKube() ? 'dir,kube' : 'dir').split(',') as ('dir' | 'kube')[];
  const echo = await startEcho('scale');
  const rows: string[] = [];
  try {
    for (const source of sources) {
      for (const n of sizes) {
        const r = await measure(source, n, echo.port);
        const line = `${source.padEnd(5)} ${String(n).padStart(5)} VirtualServices (${n * 4} routes): first ready ${r.readyMs} ms, one change served in ${r.changeMs} ms, RSS ${r.rssMb} MB (peak ${r.peakRssMb} MB)`;
        console.log(line);
        rows.push(line);
      }
    }
  } finally {
    await echo.close();
  }
  console.log(`\n${rows.join('\n')}\ngoals (issue 13): one change served < 1 s at 5,000 and about the same at 500 (O(changed)); RSS < 400 MB`);
}

await main();
