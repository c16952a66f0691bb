import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

/** What one request of a bench row looks like (default: GET /). */
export interface BenchRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface WrkResult {
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Non-2xx/3xx responses plus socket errors: a row with errors is reported, not hidden. */
  errors: number;
  requests: number;
}

/** Fixed load settings, the same for every row of a run. */
export const WRK_SETTINGS = {
  threads: 1,
  connections: Number(process.env.BENCH_CONNECTIONS ?? 32),
  durationS: Number(process.env.BENCH_DURATION ?? 5),
  warmupS: 1,
};

/** Runs wrk against `url` (after a short warm-up) and parses req/s and latency percentiles. */
export async function runWrk(url: string, request: BenchRequest, workDir: string): Promise<WrkResult> {
  const script = join(workDir, `wrk-${Math.random().toString(36).slice(2)}.lua`);
  const lines = [`wrk.method = ${JSON.stringify(request.method ?? 'GET')}`];
  if (request.body !== undefined) lines.push(`wrk.body = ${JSON.stringify(request.body)}`);
  for (const [k, v] of Object.entries(request.headers ?? {})) lines.push(`wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`);
  await writeFile(script, lines.join('\n'));
  const target = url.replace(/\/$/, '') + (request.path ?? '/');
  const run = (seconds: number) =>
    promisify(execFile)('wrk', ['-t', String(WRK_SETTINGS.threads), '-c', String(WRK_SETTINGS.connections), '-d', `${seconds}s`, '--latency', '-s', script, target], { maxBuffer: 1 << 20 });
  await run(WRK_SETTINGS.warmupS);
  const { stdout } = await run(WRK_SETTINGS.durationS);
  return parseWrk(stdout);
}

export function parseWrk(out: string): WrkResult {
  const num = (re: RegExp) => {
    const m = re.exec(out);
    return m ? Number(m[1]) : NaN;
  };
  const latency = (pct: string) => {
    const m = new RegExp(`\\s${pct}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
    if (!m) return NaN;
    const v = Number(m[1]);
    return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
  };
  const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const non2xx = num(/Non-2xx or 3xx responses: (\d+)/);
  return {
    requestsPerSec: num(/Requests\/sec:\s+([\d.]+)/),
    p50Ms: latency('50'),
    p99Ms: latency('99'),
    requests: num(/(\d+) requests in/),
    // wrk's own count of non-2xx/3xx answers: a fast row that only returns errors must not look good.
    errors: (Number.isNaN(non2xx) ? 0 : non2xx) + (socketErrors ? socketErrors.slice(1).reduce((a, b) => a + Number(b), 0) : 0),
  };
}
