// `npm run bench`: every row of test/bench/scenarios/*.ts in one run on 127.0.0.1, loaded
// by wrk with fixed settings, printed with ratios. Not part of `npm test`.
// BENCH_FILTER=regex limits rows; BENCH_DURATION / BENCH_CONNECTIONS tune wrk.
import { mkdir, mkdtemp, readdir, writeFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchContext, BenchGoal, BenchModule, BenchScenario, RunningTarget } from './scenario.ts';
import { ensureDebianPackages, startGatehouseLogged, startNginx } from './tools.ts';
import { WRK_SETTINGS, runWrk, type WrkResult } from './wrk.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));

async function main(): Promise<void> {
  ensureDebianPackages({ '/usr/bin/wrk': 'wrk', '/usr/sbin/nginx': 'nginx', '/usr/bin/h2load': 'nghttp2-client' });
  await mkdir(join(HERE, '.work'), { recursive: true });
  const workDir = await mkdtemp(join(HERE, '.work', 'run-'));
  const filter = process.env.BENCH_FILTER ? new RegExp(process.env.BENCH_FILTER) : undefined;

  const modules: BenchModule[] = [];
  for (const file of (await readdir(join(HERE, 'scenarios'))).filter((f) => f.endsWith('.ts')).sort()) {
    modules.push((await import(join(HERE, 'scenarios', file))) as BenchModule);
  }
  const scenarios = modules.flatMap((m) => m.scenarios).filter((s) => !filter || filter.test(s.name));
  const goals = modules.flatMap((m) => m.goals ?? []);

  const upstream = await startNginx(workDir, 'upstream', (port) => `server { listen 127.0.0.1:${port}; location / { return 200 "hello world\\n"; } }`);
  const ctx: BenchContext = {
    workDir,
    upstreamUrl: `http://127.0.0.1:${upstream.port}`,
    upstreamPort: upstream.port,
    gatehouse: (files, args = [], command = 'run', env = {}) => startGatehouseLoggingToFile(workDir, files, args, command, env),
  };

  // Rounds interleave the rows (A B C, A B C, …) and each row reports medians over its rounds:
  // on a small shared machine one pass per row is too noisy to compare rows within ±10%.
  const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
  console.log(`wrk -t${WRK_SETTINGS.threads} -c${WRK_SETTINGS.connections} -d${WRK_SETTINGS.durationS}s (after ${WRK_SETTINGS.warmupS}s warm-up), ${scenarios.length} rows × ${rounds} rounds (median), 127.0.0.1\n`);
  const samples = new Map<string, WrkResult[]>();
  try {
    for (let round = 1; round <= rounds; round++) {
      console.log(`round ${round}/${rounds}`);
      for (const scenario of scenarios) {
        const result = await runRow(scenario, ctx);
        if (!result) continue;
        samples.set(scenario.name, [...(samples.get(scenario.name) ?? []), result]);
        console.log(`  ${scenario.name.padEnd(48)} ${fmt(result.requestsPerSec, 0).padStart(9)} req/s  p50 ${fmt(result.p50Ms, 2)} ms  p99 ${fmt(result.p99Ms, 2)} ms${result.errors ? `  ERRORS ${result.errors}` : ''}`);
      }
    }
  } finally {
    await upstream.stop();
  }
  const results = new Map<string, WrkResult & { group: string }>();
  for (const scenario of scenarios) {
    const runs = samples.get(scenario.name);
    if (runs) results.set(scenario.name, { ...median(runs), group: scenario.group });
  }
  report(results, goals);
  await writeFile(join(HERE, '.work', 'results.json'), JSON.stringify({ settings: { ...WRK_SETTINGS, rounds }, rows: Object.fromEntries(results), samples: Object.fromEntries(samples) }, null, 2));
  await rm(workDir, { recursive: true, force: true });
}

async function runRow(scenario: BenchScenario, ctx: BenchContext): Promise<WrkResult | undefined> {
  let target: RunningTarget | undefined;
  try {
    target = await scenario.start(ctx);
    return scenario.measure ? await scenario.measure(target, ctx) : await runWrk(target.url, scenario.request ?? {}, ctx.workDir);
  } catch (error) {
    console.log(`  ${scenario.name.padEnd(44)} FAILED: ${(error as Error).message.split('\n')[0]}`);
    return undefined;
  } finally {
    await target?.stop();
  }
}

function report(results: Map<string, WrkResult & { group: string }>, goals: readonly BenchGoal[]): void {
  const direct = results.get('direct to upstream');
  const nginx = results.get('nginx proxy (1 worker)');
  console.log('\n' + ['row (median of rounds)', 'req/s', 'p50 ms', 'p99 ms', '× direct', '× nginx'].map((h, i) => (i === 0 ? h.padEnd(48) : h.padStart(9))).join(' '));
  let group = '';
  for (const [name, r] of results) {
    if (r.group !== group) console.log(`-- ${(group = r.group)}`);
    const cells = [fmt(r.requestsPerSec, 0), fmt(r.p50Ms, 2), fmt(r.p99Ms, 2), direct ? fmt(r.requestsPerSec / direct.requestsPerSec, 2) : '-', nginx ? fmt(r.requestsPerSec / nginx.requestsPerSec, 2) : '-'];
    console.log(name.padEnd(48) + ' ' + cells.map((c) => c.padStart(9)).join(' ') + (r.errors ? `  (${r.errors} errors)` : ''));
  }
  if (goals.length === 0) return;
  console.log('\ngoals and ratios (medians, within this run):');
  for (const goal of goals) {
    const row = results.get(goal.row);
    const against = results.get(goal.against);
    if (!row || !against) {
      console.log(`  ${goal.row} vs ${goal.against}: not measured`);
      continue;
    }
    if (goal.minThroughputRatio === undefined && goal.maxP99Ratio === undefined) {
      console.log(`  info ${goal.row} req/s = ${fmt(row.requestsPerSec / against.requestsPerSec, 2)}× ${goal.against}`);
    }
    if (goal.minThroughputRatio !== undefined) {
      const ratio = row.requestsPerSec / against.requestsPerSec;
      console.log(`  ${ratio >= goal.minThroughputRatio ? 'met ' : 'MISS'} ${goal.row} req/s = ${fmt(ratio, 2)}× ${goal.against} (goal ≥ ${goal.minThroughputRatio}×)`);
    }
    if (goal.maxP99Ratio !== undefined) {
      const ratio = row.p99Ms / against.p99Ms;
      console.log(`  ${ratio <= goal.maxP99Ratio ? 'met ' : 'MISS'} ${goal.row} p99 = ${fmt(ratio, 2)}× ${goal.against} (goal ≤ ${goal.maxP99Ratio}×)`);
    }
  }
}

/**
 * Each figure is the median of its own rounds (req/s, p50 and p99 independently: the p99 of
 * the median-throughput round alone swung ±40% between runs). Rounds where wrk saw errors
 * are left out when clean rounds exist; `errors` sums every round's.
 */
function median(runs: WrkResult[]): WrkResult {
  const clean = runs.filter((r) => r.errors === 0);
  const counted = clean.length > 0 ? clean : runs;
  const mid = (values: number[]) => values.sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)]!;
  return {
    ...counted[0]!,
    requestsPerSec: mid(counted.map((r) => r.requestsPerSec)),
    p50Ms: mid(counted.map((r) => r.p50Ms)),
    p99Ms: mid(counted.map((r) => r.p99Ms)),
    errors: runs.reduce((sum, r) => sum + r.errors, 0),
  };
}

const fmt = (n: number, digits: number) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

/** Starts Gatehouse with a fresh config dir; logs go to a file so the bench does not pay for them. */
async function startGatehouseLoggingToFile(workDir: string, files: Record<string, string | object[]>, args: string[], command: 'run' | 'gateway', env: Record<string, string> = {}): Promise<RunningTarget> {
  const started = await startGatehouseLogged(workDir, { cli: CLI, command, files, args, env, timeoutMs: 10_000 });
  const { port, httpsPort } = started.listening;
  return { url: `http://127.0.0.1:${port}`, ...(httpsPort ? { httpsUrl: `https://127.0.0.1:${httpsPort}` } : {}), stop: started.stop };
}

await main();
