// CPU time per request of `gatehouse run` with tracing off, and on with a given sampling
// percentage (spans over OTLP/HTTP to a sink in this process): the method of
// test/bench/README.md "Finding where time goes", one process per variant, wrk runs alternated.
// Usage: node test/bench/tracing-probe.ts [seconds] [percent,percent,…]   (default 5 s; 1)
// PROBE_ROUNDS (default 4); PROBE_NODE_FLAGS="--cpu-prof --cpu-prof-dir=DIR" profiles every process;
// PROBE_NO_COLLECTOR=1 adds the route's options without a collector; PROBE_TRACEPARENT=sampled|unsampled sends a caller's traceparent; PROBE_CLI_B=path/to/gatehouse.js
// adds `on<p>-b` processes run from another checkout (A/B of two versions of the tracer).
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { startListening, startNginx } from './tools.ts';
import { parseWrk } from './wrk.ts';

const seconds = Number(process.argv[2] ?? 5);
const percents = (process.argv[3] ?? '1').split(',').map(Number);
const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const work = await mkdtemp(join(tmpdir(), 'tracing-probe-'));
const upstream = await startNginx(work, 'up', (port) => `server { listen 127.0.0.1:${port}; location / { return 200 'hello world'; } }`);

let spansBytes = 0;
const sink = createServer((req, res) => {
  req.on('data', (c: Buffer) => (spansBytes += c.length));
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
});
await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
const sinkPort = (sink.address() as { port: number }).port;

async function start(name: string, percent: number | undefined, cli = CLI, collector = percent !== undefined): Promise<{ name: string; child: ChildProcess; port: number; gc: { Scavenge: number; 'Mark-Compact': number; count: number } }> {
  const dir = await mkdtemp(join(work, `${name}-`));
  const docs = [
    { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'fast' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: upstream.port }] } } },
    {
      apiVersion: 'gateway.gatehouse.dev/v1',
      kind: 'VirtualService',
      metadata: { name: 'bench' },
      spec: { virtualHost: { domains: ['*'], routes: [{ name: 'hit', matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'fast' } } }, ...(percent !== undefined ? { options: { tracing: { tracePercentages: { randomSamplePercentage: percent } } } } : {}) }] } },
    },
  ];
  await writeFile(join(dir, 'bench.yaml'), docs.map((d) => stringify(d)).join('---\n'));
  // Undefined drops the variable from the child's environment (Node skips undefined values).
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: collector ? `http://127.0.0.1:${sinkPort}` : undefined };
  const extra = (process.env.PROBE_NODE_FLAGS ?? '').split(' ').filter(Boolean);
  const { child, port } = await startListening(process.execPath, [...NODE_FLAGS, ...extra, cli, 'run', '--config-dir', dir, '--port', '0', '--https-port', '0', '--admin-port', '0', '--extauth-port', '0', '--plugin-dir', join(dir, 'plugins'), '--host', '127.0.0.1', '--access-log', 'false'], env);
  // With PROBE_NODE_FLAGS=--trace-gc: GC pauses (ms) of this process by kind, for the measured runs.
  const gc = { Scavenge: 0, 'Mark-Compact': 0, count: 0 };
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      const m = /ms: (Scavenge|Mark-Compact|Mark-Compact \(reduce\)|Minor Mark-Sweep).*?, ([\d.]+) \/ ([\d.]+) ms/.exec(line);
      if (!m) continue;
      const kind = m[1]!.startsWith('Mark-Compact') ? 'Mark-Compact' : 'Scavenge';
      gc[kind] += Number(m[2]);
      gc.count++;
    }
  });
  return { name, child, port, gc };
}

const cpuOf = async (pid: number) => {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000; // clock ticks (100/s) → µs
};

const script = join(work, 'headers.lua');
const traceparent = process.env.PROBE_TRACEPARENT === 'sampled' ? '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' : process.env.PROBE_TRACEPARENT === 'unsampled' ? '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00' : undefined;
await writeFile(script, traceparent ? `wrk.headers["traceparent"] = "${traceparent}"\n` : '\n');
const wrk = (port: number, s: number) => promisify(execFile)('wrk', ['-t1', '-c32', `-d${s}s`, '-s', script, `http://127.0.0.1:${port}/`], { maxBuffer: 1 << 20 });

const targets = [await start('off', undefined)];
for (const p of percents) targets.push(await start(`on${p}`, p));
// PROBE_NO_COLLECTOR=1: the route's tracing options without a collector (nothing traces): what the option costs the route.
if (process.env.PROBE_NO_COLLECTOR) targets.push(await start('options-only', percents[0], CLI, false));
if (process.env.PROBE_CLI_B) for (const p of percents) targets.push(await start(`on${p}-b`, p, process.env.PROBE_CLI_B));
for (const t of targets) await wrk(t.port, 2); // warm-up (and the SDK's import)
const results: Record<string, number[]> = {};
for (let round = 0; round < Number(process.env.PROBE_ROUNDS ?? 4); round++) {
  const line: Record<string, unknown> = { round };
  for (const t of round % 2 ? [...targets].reverse() : targets) {
    const before = await cpuOf(t.child.pid!);
    const gcBefore = { ...t.gc };
    const r = parseWrk((await wrk(t.port, seconds)).stdout);
    const per = ((await cpuOf(t.child.pid!)) - before) / r.requests;
    const gcUs = (kind: 'Scavenge' | 'Mark-Compact') => Math.round(((t.gc[kind] - gcBefore[kind]) * 1000 / r.requests) * 100) / 100;
    (results[t.name] ??= []).push(per);
    line[t.name] = { rps: Math.round(r.requestsPerSec), cpuUs: Math.round(per * 10) / 10, errors: r.errors, ...(t.gc.count ? { scavengeUs: gcUs('Scavenge'), markCompactUs: gcUs('Mark-Compact'), gcs: t.gc.count - gcBefore.count } : {}) };
  }
  console.log(JSON.stringify(line));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const off = median(results.off!);
console.log(JSON.stringify(Object.fromEntries(Object.entries(results).map(([k, v]) => [k, { medianCpuUs: Math.round(median(v) * 10) / 10, vsOff: Math.round((off / median(v)) * 100) / 100 }]))), `spans bytes ${spansBytes}`);
for (const t of targets) {
  t.child.kill('SIGTERM');
  await new Promise((r) => t.child.once('exit', r));
}
sink.closeAllConnections();
sink.close();
await upstream.stop();
