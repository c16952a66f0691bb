// CPU time per request of the filters rows (test/bench/scenarios/filters.ts: the POST of a 1 KB
// JSON body through the route without filters and through the route with the header + body
// transformation, issue 31) and of the auth rows (scenarios/extauth.ts, plugins.ts: the route
// without auth and the plugin routes), process tree included (a plugin process), from /proc
// around wrk runs (README.md "Finding where time goes"), for a change whose throughput on the
// shared machine is too noisy to compare.
// Usage: node test/bench/filters-cpu.ts [rows] [seconds]
//   rows: comma-separated of plain, tx, open, rh, apikey, mem, redis (default plain,tx);
//   `tx@base` runs the checkout at $PROBE_BASE (an A/B of two trees).
// PROBE_ROUNDS (default 3) interleaves the rows; PROBE_CONCURRENT=1 loads every row at once;
// PROBE_IO=1 also prints syscalls and context switches per request of each process;
// PROBE_NODE_FLAGS (e.g. "--cpu-prof --cpu-prof-dir=DIR") goes to every Gatehouse process.
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { BenchContext, BenchScenario } from './scenario.ts';
import { scenarios } from './scenarios/filters.ts';
import { scenarios as authScenarios } from './scenarios/extauth.ts';
import { scenarios as pluginScenarios } from './scenarios/plugins.ts';
import { startGatehouseLogged, startNginx } from './tools.ts';
import { parseWrk } from './wrk.ts';
import { measureRounds, printMedians } from './probe-rounds.ts';
import { cpuByProcess, cpuPerRequest } from './proc-cpu.ts';

const rows = (process.argv[2] ?? 'plain,tx').split(',');
const seconds = Number(process.argv[3] ?? 5);
const rounds = Number(process.env.PROBE_ROUNDS ?? 3);
const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const work = await mkdtemp(join(tmpdir(), 'filters-cpu-'));
const upstream = await startNginx(work, 'up', (port) => `server { listen 127.0.0.1:${port}; location / { return 200 "hello world\\n"; } }`);

const named = (list: BenchScenario[], part: string) => list.find((s) => s.name.includes(part))!;
const SCENARIOS: Record<string, BenchScenario> = {
  plain: named(scenarios, 'route without filters'),
  tx: named(scenarios, 'header + body transformation'),
  open: named(authScenarios, 'route without auth'),
  rh: named(pluginScenarios, 'RequiredHeader'),
  apikey: named(pluginScenarios, 'API key'),
  mem: named(pluginScenarios, 'memory-store'),
  redis: named(pluginScenarios, 'Redis rate-limit'),
};

interface Target {
  name: string;
  port: number;
  pid: number;
  scenario: BenchScenario;
  stop(): Promise<void>;
}

async function start(row: string): Promise<Target> {
  const [kind, at] = row.split('@');
  const scenario = SCENARIOS[kind!];
  if (!scenario) throw new Error(`unknown row ${row}`);
  const cli = at === 'base' ? join(process.env.PROBE_BASE!, 'core/bin/gatehouse.js') : CLI;
  let started: { port: number; child: ChildProcess } | undefined;
  const ctx: BenchContext = {
    workDir: work,
    upstreamUrl: `http://127.0.0.1:${upstream.port}`,
    upstreamPort: upstream.port,
    gatehouse: async (files, args = []) => {
      const flags = (process.env.PROBE_NODE_FLAGS ?? '').split(' ').filter(Boolean);
      const gatehouse = await startGatehouseLogged(work, { cli, command: 'run', files, args, nodeFlags: flags });
      started = { port: gatehouse.port, child: gatehouse.child };
      return { url: `http://127.0.0.1:${gatehouse.port}`, stop: gatehouse.stop };
    },
  };
  const target = await scenario.start(ctx);
  return { name: row, port: started!.port, pid: started!.child.pid!, scenario, stop: target.stop };
}

async function ioOf(pid: string): Promise<number[]> {
  const io = await readFile(`/proc/${pid}/io`, 'utf8').catch(() => '');
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const field = (text: string, name: string) => Number(new RegExp(`${name}:\\s*(\\d+)`).exec(text)?.[1] ?? 0);
  return [field(io, 'syscr'), field(io, 'syscw'), field(status, 'voluntary_ctxt_switches')];
}

async function measure(t: Target): Promise<{ rps: number; p99: number; us: number; errors: number; requests: number; byProcess: number[] }> {
  const script = join(work, `${t.name.replace(/\W/g, '_')}.lua`);
  const request = t.scenario.request ?? {};
  const lines = [`wrk.method = ${JSON.stringify(request.method ?? 'GET')}`];
  if (request.body !== undefined) lines.push(`wrk.body = ${JSON.stringify(request.body)}`);
  for (const [k, v] of Object.entries(request.headers ?? {})) lines.push(`wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`);
  await writeFile(script, lines.join('\n'));
  const wrk = (s: number) => promisify(execFile)('wrk', ['-t1', '-c32', `-d${s}s`, '--latency', '-s', script, `http://127.0.0.1:${t.port}/`], { maxBuffer: 1 << 20 });
  await wrk(1);
  const before = await cpuByProcess(t.pid);
  // PROBE_IO=1: read and write syscalls and voluntary context switches per request, per process (how often the plugin process's pipe wakes it).
  const ioBefore = new Map<string, number[]>();
  if (process.env.PROBE_IO) for (const pid of before.keys()) ioBefore.set(pid, await ioOf(pid));
  const r = parseWrk((await wrk(seconds)).stdout);
  const after = await cpuByProcess(t.pid);
  if (process.env.PROBE_IO) {
    for (const pid of after.keys()) {
      const [a, b] = [await ioOf(pid), ioBefore.get(pid) ?? [0, 0, 0]];
      const per = (i: number) => ((a[i]! - b[i]!) / r.requests).toFixed(3);
      console.log(JSON.stringify({ row: t.name, pid, readsPerRequest: per(0), writesPerRequest: per(1), voluntarySwitchesPerRequest: per(2) }));
    }
  }
  // Per process of the tree, µs per request; `us` is the whole tree's.
  const { us, byProcess } = cpuPerRequest(before, after, r.requests);
  return { rps: Math.round(r.requestsPerSec), p99: r.p99Ms, us, errors: r.errors, requests: r.requests, byProcess };
}

const targets: Target[] = [];
for (const row of rows) targets.push(await start(row));
let results: Map<string, number[]>;
try {
  results = await measureRounds(targets, rounds, measure);
} finally {
  for (const t of targets) await t.stop();
  await upstream.stop();
}
printMedians(results, rows[0]!, 10);
