// CPU time per request of the filters rows (test/bench/scenarios/filters.ts): the POST of a 1 KB
// JSON body through the route without filters and through the route with the header + body
// transformation (issue 31), from /proc around wrk runs (README.md "Finding where time goes"),
// for a change whose throughput on the shared machine is too noisy to compare.
// Usage: node test/bench/filters-cpu.ts [rows] [seconds]
//   rows: comma-separated of plain, tx (default plain,tx); `tx@base` runs the checkout at
//   $PROBE_BASE (an A/B of two trees).
// PROBE_ROUNDS (default 3) interleaves the rows; PROBE_CONCURRENT=1 loads every row at once;
// PROBE_NODE_FLAGS (e.g. "--cpu-prof --cpu-prof-dir=DIR") goes to every Gatehouse process.
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { BenchContext, BenchScenario } from './scenario.ts';
import { scenarios } from './scenarios/filters.ts';
import { startGatehouseLogged, startNginx } from './tools.ts';
import { parseWrk } from './wrk.ts';
import { measureRounds, printMedians } from './probe-rounds.ts';

const rows = (process.argv[2] ?? 'plain,tx').split(',');
const seconds = Number(process.argv[3] ?? 5);
const rounds = Number(process.env.PROBE_ROUNDS ?? 3);
const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const work = await mkdtemp(join(tmpdir(), 'filters-cpu-'));
const upstream = await startNginx(work, 'up', (port) => `server { listen 127.0.0.1:${port}; location / { return 200 "hello world\\n"; } }`);

const SCENARIOS: Record<string, BenchScenario> = {
  plain: scenarios.find((s) => s.name.includes('route without filters'))!,
  tx: scenarios.find((s) => s.name.includes('header + body transformation'))!,
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

async function cpuOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) * 10_000; // clock ticks (100/s) → µs
}

async function measure(t: Target): Promise<{ rps: number; p99: number; us: number; errors: number; requests: number }> {
  const script = join(work, `${t.name.replace(/\W/g, '_')}.lua`);
  const request = t.scenario.request ?? {};
  const lines = [`wrk.method = ${JSON.stringify(request.method ?? 'GET')}`];
  if (request.body !== undefined) lines.push(`wrk.body = ${JSON.stringify(request.body)}`);
  for (const [k, v] of Object.entries(request.headers ?? {})) lines.push(`wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`);
  await writeFile(script, lines.join('\n'));
  const wrk = (s: number) => promisify(execFile)('wrk', ['-t1', '-c32', `-d${s}s`, '--latency', '-s', script, `http://127.0.0.1:${t.port}/`], { maxBuffer: 1 << 20 });
  await wrk(1);
  const before = await cpuOf(t.pid);
  const r = parseWrk((await wrk(seconds)).stdout);
  const used = (await cpuOf(t.pid)) - before;
  return { rps: Math.round(r.requestsPerSec), p99: r.p99Ms, us: Math.round((used / r.requests) * 10) / 10, errors: r.errors, requests: r.requests };
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
