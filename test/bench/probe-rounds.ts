// The round loop and summary the CPU probes share (proxy-cpu.ts, filters-cpu.ts, graphql-cpu.ts):
// every row measured once per round, the rows of a round under the same machine load, then each
// row's median CPU per request and its per-round ratio to the first row.

/** A row a probe loads, by the name it is reported under. */
export interface ProbeRow {
  readonly name: string;
}

/** One measurement of a row: at least its CPU µs per request (`us`); the rest is printed as is. */
export interface ProbeMeasurement {
  readonly us: number;
}

/**
 * Measures `rows` for `rounds` rounds and prints each measurement as a JSON line. With
 * `PROBE_CONCURRENT=1` every row is loaded at once (so all see the same load); otherwise one
 * after another, each round starting at the next row when `rotate` is set (on the shared
 * machine the first row of a round came out dearer, whichever it was).
 */
export async function measureRounds<R extends ProbeRow, M extends ProbeMeasurement>(rows: readonly R[], rounds: number, measure: (row: R) => Promise<M>, options: { rotate?: boolean } = {}): Promise<Map<string, number[]>> {
  const results = new Map<string, number[]>();
  const record = (round: number, row: R, m: M) => {
    results.set(row.name, [...(results.get(row.name) ?? []), m.us]);
    console.log(JSON.stringify({ round, row: row.name, ...m }));
  };
  for (let round = 0; round < rounds; round++) {
    if (process.env.PROBE_CONCURRENT === '1') {
      const ms = await Promise.all(rows.map((row) => measure(row)));
      rows.forEach((row, i) => record(round, row, ms[i]!));
      continue;
    }
    for (let i = 0; i < rows.length; i++) {
      const row = rows[(i + (options.rotate ? round : 0)) % rows.length]!;
      record(round, row, await measure(row));
    }
  }
  return results;
}

/** Prints each row's median µs per request and its per-round ratios to the first row's. */
export function printMedians(results: Map<string, number[]>, first: string, width = 16): void {
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)]!;
  const base = results.get(first);
  if (!base) return;
  for (const [name, v] of results) {
    // Per-round ratio to the first row (rows of one round ran under the same load).
    const ratios = v.map((us, i) => Math.round((us / base[i]!) * 100) / 100);
    console.log(`${name.padEnd(width)} median ${median(v)} µs/request  (${v.join(', ')})  × ${first}: median ${median(ratios)} (${ratios.join(', ')})`);
  }
}
