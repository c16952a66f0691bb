// CPU time per request of the proxy rows (test/bench/scenarios/proxy.ts, routing.ts), process
// tree included (a cluster's primary and workers), from /proc around wrk runs: the method of
// README.md "Finding where time goes", for rows where throughput on a shared machine is too noisy.
// Usage: node test/bench/proxy-cpu.ts [rows] [seconds]
//   rows: comma-separated of bare1, bare2, gh1, gh1-format, gh1-nolog, gh2, r1, cors (default bare1,gh1);
//   a row name with `@base` runs the CLI at $PROBE_BASE (another checkout) for an A/B; with
//   `~FLAG` (repeatable) that row's processes get extra Node flags, e.g. `gh1~--max-semi-space-size=16`.
// PROBE_ROUNDS (default 3) interleaves the rows; medians are printed at the end.
// PROBE_NODE_FLAGS (e.g. "--cpu-prof --cpu-prof-dir=DIR") goes to every Gatehouse process.
// PROBE_STAT=1 also prints user and system CPU, minor faults per 1,000 requests, threads and RSS of the started process per load.
import { execFile, } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { NODE_ENV_DEFAULTS, NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { benchManifests, startGatehouseLogged, startListening, startNginx, stopChild, type StartedGatehouse } from './tools.ts';
import { parseWrk } from './wrk.ts';
import { FORMAT_GATEWAY } from './scenarios/proxy.ts';
import { ROUTE_OPTIONS } from './scenarios/routing.ts';
import { measureRounds, printMedians } from './probe-rounds.ts';
import { cpuByProcess, cpuPerRequest } from './proc-cpu.ts';

const rows = (process.argv[2] ?? 'bare1,gh1').split(',');
const seconds = Number(process.argv[3] ?? 5);
const rounds = Number(process.env.PROBE_ROUNDS ?? 3);
const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const BARE = fileURLToPath(new URL('./bare-undici-proxy.ts', import.meta.url));
const work = await mkdtemp(join(tmpdir(), 'proxy-cpu-'));
const upstream = await startNginx(work, 'up', (port) => `server { listen 127.0.0.1:${port}; location / { return 200 "hello world\\n"; } }`);
const upstreamUrl = `http://127.0.0.1:${upstream.port}`;

/** The routing bench's route 1 of 50 (routing.ts `config`), optionally with its route options. */
function routing(routeOptions?: object): object[] {
  const target = { single: { upstream: { name: 'fast' } } };
  const decoys = Array.from({ length: 49 }, (_, i) => ({ name: `decoy-${i}`, matchers: [{ regex: `/tenant-${i}/[0-9]+`, headers: [{ name: 'x-tenant', value: `t${i}` }] }], routeAction: target }));
  const hit = { name: 'hit', matchers: [{ prefix: '/' }], routeAction: target, ...(routeOptions ? { options: routeOptions } : {}) };
  return [
    { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'fast' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: upstream.port }] } } },
    { apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name: 'bench' }, spec: { virtualHost: { domains: ['*'], routes: [hit, ...decoys] } } },
  ];
}

const nodeFlags = (row = '') => [...(process.env.PROBE_NODE_FLAGS ?? '').split(' ').filter(Boolean), ...row.split('~').slice(1)];

interface Target {
  name: string;
  port: number;
  pid: number;
  headers: Record<string, string>;
  stop(): Promise<void>;
}

/** `gatehouse run` with `docs`, logging to a file (./tools.ts). */
function gatehouse(cli: string, docs: object[], args: string[], flags: string[]): Promise<StartedGatehouse> {
  return startGatehouseLogged(work, { cli, command: 'run', files: { 'bench.yaml': docs }, args, nodeFlags: flags });
}

async function start(row: string): Promise<Target> {
  const [kind, at] = row.split('~')[0]!.split('@');
  const flags = nodeFlags(row);
  const cli = at === 'base' ? join(process.env.PROBE_BASE!, 'core/bin/gatehouse.js') : CLI;
  const bare = async (workers: string) => {
    const p = await startListening(process.execPath, [...NODE_FLAGS, ...flags, BARE, upstreamUrl, workers], NODE_ENV_DEFAULTS);
    return { name: row, port: p.port, pid: p.child.pid!, headers: {}, stop: p.stop };
  };
  const gh = async (docs: object[], args: string[], headers: Record<string, string> = {}) => {
    const { port, child } = await gatehouse(cli, docs, args, flags);
    return { name: row, port, pid: child.pid!, headers, stop: () => stopChild(child) };
  };
  switch (kind) {
    case 'bare1':
      return bare('1');
    case 'bare2':
      return bare('2');
    case 'gh1':
      return gh(benchManifests(upstream.port), []);
    case 'gh1-format':
      // A Gloo Gateway's access log in an Envoy format string (the bench row "Gateway access log format").
      return gh([...benchManifests(upstream.port), FORMAT_GATEWAY], []);
    case 'gh1-nolog':
      return gh(benchManifests(upstream.port), ['--access-log', 'false']);
    case 'gh2':
      return gh(benchManifests(upstream.port), ['--workers', '2']);
    case 'r1':
      return gh(routing(), ['--access-log', 'false']);
    case 'cors':
      return gh(routing(ROUTE_OPTIONS), ['--access-log', 'false'], { origin: 'https://app.example', cookie: 'a=1' });
    default:
      throw new Error(`unknown row ${row}`);
  }
}

/** utime, stime (ticks), minor faults, threads and RSS of one process, from /proc/PID/stat. */
async function statOf(pid: number): Promise<{ user: number; sys: number; minflt: number; threads: number; rssMb: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(f[11]), sys: Number(f[12]), minflt: Number(f[7]), threads: Number(f[17]), rssMb: Math.round((Number(f[21]) * 4096) / 1048576) };
}


async function measure(t: Target): Promise<{ rps: number; p99: number; us: number; errors: number; requests: number; warmRequests: number; pid: number; byProcess: number[] }> {
  const script = join(work, `${t.name.replace(/\W/g, '_')}.lua`);
  await writeFile(script, Object.entries(t.headers).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`).join('\n'));
  const wrk = (s: number) => promisify(execFile)('wrk', ['-t1', '-c32', `-d${s}s`, '--latency', '-s', script, `http://127.0.0.1:${t.port}/`], { maxBuffer: 1 << 20 });
  const warm = parseWrk((await wrk(1)).stdout);
  // PROBE_SIGNAL=1: SIGUSR2 after the warm-up (a `--import`ed sampler starts then).
  if (process.env.PROBE_SIGNAL === '1') process.kill(t.pid, 'SIGUSR2');
  const before = await cpuByProcess(t.pid);
  const statBefore = await statOf(t.pid);
  const r = parseWrk((await wrk(seconds)).stdout);
  const statAfter = await statOf(t.pid);
  if (process.env.PROBE_STAT) console.log(JSON.stringify({ row: t.name, rps: Math.round(r.requestsPerSec), userUsPerReq: +(((statAfter.user - statBefore.user) * 10_000) / r.requests).toFixed(1), sysUsPerReq: +(((statAfter.sys - statBefore.sys) * 10_000) / r.requests).toFixed(1), minfltPerKReq: +(((statAfter.minflt - statBefore.minflt) * 1000) / r.requests).toFixed(2), threads: statAfter.threads, rssMb: statAfter.rssMb }));
  // Per process of the tree (the first is the one started: a cluster's primary), µs per request.
  const { us, byProcess } = cpuPerRequest(before, await cpuByProcess(t.pid), r.requests);
  return { rps: Math.round(r.requestsPerSec), p99: r.p99Ms, us, errors: r.errors, requests: r.requests, warmRequests: warm.requests, pid: t.pid, byProcess };
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
printMedians(results, rows[0]!, 16);
