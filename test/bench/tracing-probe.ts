// CPU time per request of `gatehouse run` with tracing off, and on with a given sampling
// percentage (spans over OTLP/HTTP to a sink in this process): the method of
// test/bench/README.md "Finding where time goes", one process per variant, wrk runs alternated.
// Usage: node test/bench/tracing-probe.ts [seconds] [percent,percent,…]   (default 5 s; 1)
// PROBE_ROUNDS (default 4); PROBE_NODE_FLAGS="--cpu-prof --cpu-prof-dir=DIR" profiles every process;
// PROBE_NO_COLLECTOR=1 adds the route's options without a collector; PROBE_TRACEPARENT=sampled|unsampled sends a caller's traceparent; PROBE_CLI_B=path/to/gatehouse.js
// adds `on<p>-b` processes run from another checkout (A/B of two versions of the tracer).
// PROBE_CONCURRENT=1 loads every process at once (one wrk each), so each round's processes share
// the machine's load; PROBE_PIN=N also pins every gateway to CPU N (taskset), so they share one
// core's caches and contention too: on a shared machine, the per-round ratios are then far steadier.
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
  // PROBE_ENV_B="NAME=value …": more environment for the `-b` processes (with PROBE_CLI_B=default: this checkout, another setting).
  const extraEnv = name.endsWith('-b') ? Object.fromEntries((process.env.PROBE_ENV_B ?? '').split(' ').filter(Boolean).map((kv) => kv.split('=', 2) as [string, string])) : {};
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: collector ? `http://127.0.0.1:${sinkPort}` : undefined, ...extraEnv };
  const extra = (process.env.PROBE_NODE_FLAGS ?? '').split(' ').filter(Boolean);
  const pin = process.env.PROBE_PIN ? ['taskset', ['-c', process.env.PROBE_PIN, process.execPath]] as const : [process.execPath, []] as const;
  const { child, port } = await startListening(pin[0], [...pin[1], ...NODE_FLAGS, ...extra, cli, 'run', '--config-dir', dir, '--port', '0', '--https-port', '0', '--admin-port', '0', '--extauth-port', '0', '--plugin-dir', join(dir, 'plugins'), '--host', '127.0.0.1', '--access-log', 'false'], env);
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

const cpuOf = async (pid: number, thread = false) => {
  // thread: the main thread alone (its task id is the pid), what a saturated gateway's throughput follows.
  const fields = (await readFile(thread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000; // clock ticks (100/s) → µs
};

const script = join(work, 'headers.lua');
const traceparent = process.env.PROBE_TRACEPARENT === 'sampled' ? '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' : process.env.PROBE_TRACEPARENT === 'unsampled' ? '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00' : undefined;
// PROBE_DELAY_MS: each connection waits that long between requests (wrk's delay()), so every
// process serves about the same rate below saturation: CPU per request then does not follow how
// many requests one event-loop turn happened to batch.
const delay = process.env.PROBE_DELAY_MS ? `function delay() return ${Number(process.env.PROBE_DELAY_MS)} end\n` : '';
await writeFile(script, (traceparent ? `wrk.headers["traceparent"] = "${traceparent}"\n` : '\n') + delay);
const wrk = (port: number, s: number) => promisify(execFile)('wrk', ['-t1', '-c32', `-d${s}s`, '-s', script, `http://127.0.0.1:${port}/`], { maxBuffer: 1 << 20 });

/**
 * The processes of one set: off, one per percentage, and those the PROBE_* variables add,
 * started in an order rotated by `round` (in fresh mode, where a process started first or last
 * would otherwise always be).
 */
async function startAll(round = 0) {
  const plan: [string, () => ReturnType<typeof start>][] = [['off', () => start('off', undefined)]];
  for (const p of percents) plan.push([`on${p}`, () => start(`on${p}`, p)]);
  // PROBE_NO_COLLECTOR=1: the route's tracing options without a collector (nothing traces): what the option costs the route.
  if (process.env.PROBE_NO_COLLECTOR) plan.push(['options-only', () => start('options-only', percents[0], CLI, false)]);
  // PROBE_OFF2=1: a second process with tracing off (how far two identical processes differ).
  if (process.env.PROBE_OFF2) plan.push(['off2', () => start('off2', undefined)]);
  if (process.env.PROBE_CLI_B) for (const p of percents) plan.push([`on${p}-b`, () => start(`on${p}-b`, p, process.env.PROBE_CLI_B === 'default' ? CLI : process.env.PROBE_CLI_B)]);
  const started = new Map<string, Awaited<ReturnType<typeof start>>>();
  for (let i = 0; i < plan.length; i++) {
    const [name, run] = plan[(i + round) % plan.length]!;
    started.set(name, await run());
  }
  // Reported (and measured) in the plan's order.
  return plan.map(([name]) => started.get(name)!);
}
// PROBE_FRESH=1: every round starts new processes and warms them for 1 s only, as `npm run bench`
// does (its rows measure a process's first seconds, JIT and first exports included).
const fresh = process.env.PROBE_FRESH === '1';
let targets = await startAll();
const warm = () => (fresh ? Promise.all(targets.map((t) => wrk(t.port, 1))) : targets.reduce<Promise<unknown>>((p, t) => p.then(() => wrk(t.port, 2)), Promise.resolve()));
await warm(); // warm-up (and the SDK's import)
const results: Record<string, number[]> = {};
const mainResults: Record<string, number[]> = {};
const stopAll = async () => {
  for (const t of targets) {
    t.child.kill('SIGTERM');
    await new Promise((r) => t.child.once('exit', r));
  }
};
const measure = async (t: (typeof targets)[number]) => {
  const before = await cpuOf(t.child.pid!);
  const mainBefore = await cpuOf(t.child.pid!, true);
  const gcBefore = { ...t.gc };
  const r = parseWrk((await wrk(t.port, seconds)).stdout);
  const per = ((await cpuOf(t.child.pid!)) - before) / r.requests;
  const mainPer = ((await cpuOf(t.child.pid!, true)) - mainBefore) / r.requests;
  (mainResults[t.name] ??= []).push(mainPer);
  const gcUs = (kind: 'Scavenge' | 'Mark-Compact') => Math.round(((t.gc[kind] - gcBefore[kind]) * 1000 / r.requests) * 100) / 100;
  (results[t.name] ??= []).push(per);
  return { rps: Math.round(r.requestsPerSec), cpuUs: Math.round(per * 10) / 10, mainUs: Math.round(mainPer * 10) / 10, errors: r.errors, ...(t.gc.count ? { scavengeUs: gcUs('Scavenge'), markCompactUs: gcUs('Mark-Compact'), gcs: t.gc.count - gcBefore.count } : {}) };
};
for (let round = 0; round < Number(process.env.PROBE_ROUNDS ?? 4); round++) {
  if (fresh && round > 0) {
    await stopAll();
    targets = await startAll(round);
    await warm();
  }
  const line: Record<string, unknown> = { round };
  if (process.env.PROBE_CONCURRENT === '1') {
    const ms = await Promise.all(targets.map(measure));
    targets.forEach((t, i) => (line[t.name] = ms[i]));
  } else for (const t of round % 2 ? [...targets].reverse() : targets) line[t.name] = await measure(t);
  console.log(JSON.stringify(line));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const off = median(results.off!);
// vsOff: off's median over the row's; roundRatio: the median of the rounds' ratios (off / row, one round's processes under the same load).
const roundRatio = (v: number[], of = results) => median(v.map((us, i) => of.off![i]! / us));
console.log(JSON.stringify(Object.fromEntries(Object.entries(results).map(([k, v]) => [k, { medianCpuUs: Math.round(median(v) * 10) / 10, vsOff: Math.round((off / median(v)) * 100) / 100, roundRatio: Math.round(roundRatio(v) * 1000) / 1000, mainRoundRatio: Math.round(roundRatio(mainResults[k]!, mainResults) * 1000) / 1000 }]))), `spans bytes ${spansBytes}`);
await stopAll();
sink.closeAllConnections();
sink.close();
await upstream.stop();
