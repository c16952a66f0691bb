// CPU time of processes from /proc, for the CPU probes (proxy-cpu.ts, filters-cpu.ts): the
// method of README.md "Finding where time goes". Linux only.
import { readdir, readFile } from 'node:fs/promises';

/** User + system CPU a process has used so far, in µs (0 when it is gone). */
export async function cpuOf(pid: number | string): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) * 10_000; // clock ticks (100/s) → µs
}

/** {@link cpuOf} of each process of the tree under `pid` (a cluster's workers, a plugin process), by pid; the first is `pid`. */
export async function cpuByProcess(pid: number | string, out = new Map<string, number>()): Promise<Map<string, number>> {
  out.set(String(pid), await cpuOf(pid));
  for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [] as string[])) {
    const children = (await readFile(`/proc/${pid}/task/${tid}/children`, 'utf8').catch(() => '')).split(' ').filter(Boolean);
    for (const child of children) await cpuByProcess(child, out);
  }
  return out;
}

/** CPU µs per request of each process between two {@link cpuByProcess} readings, and of the whole tree. */
export function cpuPerRequest(before: Map<string, number>, after: Map<string, number>, requests: number): { us: number; byProcess: number[] } {
  const round = (us: number) => Math.round((us / requests) * 10) / 10;
  const used = [...after].map(([pid, us]) => us - (before.get(pid) ?? 0));
  return { us: round(used.reduce((sum, us) => sum + us, 0)), byProcess: used.map(round) };
}
