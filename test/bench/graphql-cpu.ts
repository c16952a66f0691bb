// CPU time per request of the GraphQL rows (test/bench/scenarios/graphql.ts), from /proc around
// wrk runs: the method of README.md "Finding where time goes", for the goals whose throughput
// ratio one bench run cannot settle on a shared machine (remote executor vs Hive Gateway, REST
// resolvers with limits on vs off).
// Usage: node test/bench/graphql-cpu.ts [rows] [seconds]
//   rows: comma-separated of hive, remote, proxy (the same POST through a plain proxy route: the
//   floor under the remote executor), rest, rest-off (default remote,hive); a row name with
//   `@base` runs the CLI at $PROBE_BASE (another checkout) for an A/B.
// PROBE_ROUNDS (default 3) interleaves the rows; PROBE_CONCURRENT=1 loads every row of a round at
// once (the same machine load for all); PROBE_NODE_FLAGS (e.g. "--cpu-prof --cpu-prof-dir=DIR")
// goes to every Gatehouse process. Gatehouse runs from its TypeScript sources in every row
// (GATEHOUSE_FROM_SOURCE=1), so a stale or fresh dist/ does not decide an A/B.
import { execFile, } from 'node:child_process';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { benchManifests, startGatehouseLogged, startNginx, stopChild, type StartedGatehouse } from './tools.ts';
import { parseWrk } from './wrk.ts';
import { booksResult, graphqlUpstreamBlock, REMOTE_REQUEST, remoteManifests, REST_REQUEST, restManifests, restUpstreamBlock, startHive } from './scenarios/graphql.ts';
import { measureRounds, printMedians } from './probe-rounds.ts';

const rows = (process.argv[2] ?? 'remote,hive').split(',');
const seconds = Number(process.argv[3] ?? 5);
const rounds = Number(process.env.PROBE_ROUNDS ?? 3);
const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const work = await mkdtemp(join(tmpdir(), 'graphql-cpu-'));
const graphqlUp = await startNginx(work, 'graphql', graphqlUpstreamBlock(await booksResult()));
const restUp = await startNginx(work, 'rest', restUpstreamBlock);
const nodeFlags = () => (process.env.PROBE_NODE_FLAGS ?? '').split(' ').filter(Boolean);

interface Target {
  name: string;
  port: number;
  pid: number;
  request: typeof REMOTE_REQUEST;
  stop(): Promise<void>;
}

/** `gatehouse gateway` with `docs`, logging to a file (./tools.ts). */
function gatehouse(cli: string, docs: object[], env: Record<string, string>): Promise<StartedGatehouse> {
  return startGatehouseLogged(work, { cli, command: 'gateway', files: { 'bench.yaml': docs }, nodeFlags: nodeFlags(), env: { GATEHOUSE_FROM_SOURCE: '1', ...env } });
}

async function start(row: string): Promise<Target> {
  const [kind, at] = row.split('@');
  const cli = at === 'base' ? join(process.env.PROBE_BASE!, 'core/bin/gatehouse.js') : CLI;
  const gh = async (docs: object[], request: typeof REMOTE_REQUEST, env: Record<string, string> = {}) => {
    const { port, child } = await gatehouse(cli, docs, env);
    return { name: row, port, pid: child.pid!, request, stop: () => stopChild(child) };
  };
  switch (kind) {
    case 'hive': {
      const hive = await startHive(work, `http://127.0.0.1:${graphqlUp.port}/graphql`);
      return { name: row, port: hive.port, pid: hive.child.pid!, request: REMOTE_REQUEST, stop: hive.stop };
    }
    case 'remote':
      return gh(remoteManifests(graphqlUp.port), REMOTE_REQUEST);
    case 'proxy':
      // The floor under the remote executor: the same POST proxied to the same upstream by a plain route.
      return gh(benchManifests(graphqlUp.port), REMOTE_REQUEST);
    case 'rest':
      return gh(restManifests(restUp.port), REST_REQUEST);
    case 'rest-off':
      return gh(restManifests(restUp.port), REST_REQUEST, { GATEHOUSE_GRAPHQL_LIMITS: 'off' });
    default:
      throw new Error(`unknown row ${row}`);
  }
}

/** User and system CPU µs of a process. */
async function cpuOf(pid: number | string): Promise<[number, number]> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return [Number(fields[11] ?? 0) * 10_000, Number(fields[12] ?? 0) * 10_000]; // clock ticks (100/s) → µs
}

/** User and system CPU µs of a process and all its descendants (Hive's fork, a cluster's workers). */
async function treeCpu(pid: number | string): Promise<[number, number]> {
  const total = await cpuOf(pid);
  for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [] as string[])) {
    const children = (await readFile(`/proc/${pid}/task/${tid}/children`, 'utf8').catch(() => '')).split(' ').filter(Boolean);
    for (const child of children) {
      const [user, system] = await treeCpu(child);
      total[0] += user;
      total[1] += system;
    }
  }
  return total;
}

async function measure(t: Target): Promise<{ rps: number; p99: number; us: number; user: number; system: number; errors: number; requests: number }> {
  const script = join(work, `${t.name.replace(/\W/g, '_')}.lua`);
  const lines = [`wrk.method = ${JSON.stringify(t.request.method)}`, `wrk.body = ${JSON.stringify(t.request.body)}`];
  for (const [k, v] of Object.entries(t.request.headers)) lines.push(`wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`);
  await writeFile(script, lines.join('\n'));
  const wrk = (s: number) => promisify(execFile)('wrk', ['-t1', '-c32', `-d${s}s`, '--latency', '-s', script, `http://127.0.0.1:${t.port}${t.request.path}`], { maxBuffer: 1 << 20 });
  await wrk(1);
  if (process.env.PROBE_SIGNAL === '1') process.kill(t.pid, 'SIGUSR2');
  const before = await treeCpu(t.pid);
  const r = parseWrk((await wrk(seconds)).stdout);
  const after = await treeCpu(t.pid);
  const per = (us: number) => Math.round((us / r.requests) * 10) / 10;
  const [user, system] = [after[0] - before[0], after[1] - before[1]];
  // `us` is the figure compared; user and system split it (system: mostly the sockets' syscalls).
  return { rps: Math.round(r.requestsPerSec), p99: r.p99Ms, us: per(user + system), user: per(user), system: per(system), errors: r.errors, requests: r.requests };
}

const targets: Target[] = [];
let results: Map<string, number[]>;
try {
  for (const row of rows) targets.push(await start(row));
  results = await measureRounds(targets, rounds, measure, { rotate: true });
} finally {
  for (const t of targets) await t.stop();
  await graphqlUp.stop();
  await restUp.stop();
}
printMedians(results, rows[0]!, 16);
