// Rows measured in turns: all their targets up at once, loaded one after the other in an order
// that puts each row first, middle and last equally often (A B, B A, B A, A B for a pair), each run
// an ordinary row measurement (wrk warm-up, then the fixed load), each row's figure the median of
// its four runs. Used for goal pairs whose difference is smaller than one pass's noise on the
// shared 2-core machine: measured one after the other in a fixed order, whichever row ran first in
// a round came out 5-10% dearer (the limits pair of the GraphQL rows, the CPU probes' first rows),
// and a fresh process per row adds its first seconds to one side only.
import type { BenchContext, BenchScenario, RunningTarget } from './scenario.ts';
import { runWrk, type WrkResult } from './wrk.ts';

/** The passes over `n` rows (indexes): in order, reversed, rotated by one, rotated and reversed. */
export function turnOrder(n: number): number[] {
  const forward = Array.from({ length: n }, (_, i) => i);
  const rotated = forward.map((i) => (i + 1) % n);
  return [...forward, ...[...forward].reverse(), ...rotated, ...[...rotated].reverse()];
}

/** The median of each figure over `runs`; errors and requests summed. */
export function medianRun(runs: WrkResult[]): WrkResult {
  // An even count (four runs a row) takes the mean of the middle two.
  const mid = (values: number[]) => {
    values.sort((x, y) => x - y);
    const half = values.length >> 1;
    return values.length % 2 === 1 ? values[half]! : (values[half - 1]! + values[half]!) / 2;
  };
  return {
    requestsPerSec: mid(runs.map((r) => r.requestsPerSec)),
    p50Ms: mid(runs.map((r) => r.p50Ms)),
    p99Ms: mid(runs.map((r) => r.p99Ms)),
    errors: runs.reduce((sum, r) => sum + r.errors, 0),
    requests: runs.reduce((sum, r) => sum + r.requests, 0),
  };
}

/** A row of a group measured in turns. */
export interface TurnRow extends BenchScenario {
  /** How this row's target is started for the turns, when not by its own `start` (the first row's always is). */
  startInTurns?(ctx: BenchContext): Promise<RunningTarget>;
  /** What this row's own `start` returns when the turns measured it already (default: nothing running). */
  placeholder?(ctx: BenchContext): Promise<RunningTarget>;
}

/**
 * `rows` measured together in turns ({@link turnOrder}). The first row's measurement starts the
 * other rows' targets next to its own, runs the turns and stops them; the other rows then report
 * their runs from that measurement. The rows must keep this order in the table (others may come
 * between them); a row whose first row a filter left out measures itself as an ordinary row.
 */
export function inTurns(rows: readonly TurnRow[]): BenchScenario[] {
  const measured = new Map<string, WrkResult>();
  const load = (row: BenchScenario, target: RunningTarget, ctx: BenchContext) => (row.measure ? row.measure(target, ctx) : runWrk(target.url, row.request ?? {}, ctx.workDir));
  const plain = ({ startInTurns: _s, placeholder: _p, ...row }: TurnRow): BenchScenario => row;
  const [lead, ...others] = rows;
  if (!lead || others.length === 0) throw new Error('inTurns needs two rows or more');
  const first: BenchScenario = {
    ...plain(lead),
    measure: async (target, ctx) => {
      const targets: RunningTarget[] = [target];
      const runs: WrkResult[][] = rows.map(() => []);
      try {
        for (const row of others) targets.push(await (row.startInTurns ?? row.start)(ctx));
        for (const i of turnOrder(rows.length)) {
          const run = await load(rows[i]!, targets[i]!, ctx);
          runs[i]!.push(run);
          console.log(`    turn: ${rows[i]!.name.padEnd(46)} ${run.requestsPerSec.toFixed(0).padStart(9)} req/s  p99 ${run.p99Ms.toFixed(2)} ms`);
        }
      } finally {
        for (const other of targets.slice(1)) await other.stop();
      }
      others.forEach((row, i) => measured.set(row.name, medianRun(runs[i + 1]!)));
      return medianRun(runs[0]!);
    },
  };
  const rest = others.map(
    (row): BenchScenario => ({
      ...plain(row),
      start: (ctx) => {
        if (!measured.has(row.name)) return row.start(ctx);
        return row.placeholder ? row.placeholder(ctx) : Promise.resolve({ url: `measured in turns with "${lead.name}"`, stop: async () => {} });
      },
      measure: async (target, ctx) => {
        const runs = measured.get(row.name);
        measured.delete(row.name);
        return runs ?? load(row, target, ctx);
      },
    }),
  );
  return [first, ...rest];
}
