import { execFile } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { WRK_SETTINGS, type WrkResult } from './wrk.ts';

/** h2load's load for a row: as many streams in flight as wrk has connections, over 4 connections that multiplex them (as HTTP/2 clients do: a browser uses one). */
export const H2LOAD_SETTINGS = { connections: 4, streamsPerConnection: Math.max(1, Math.round(WRK_SETTINGS.connections / 4)) };

export interface H2loadOptions {
  headers?: Record<string, string>;
  /** A file whose bytes are every request's body (the request becomes a POST). */
  dataFile?: string;
  /** Resolve the URL's host to this `host:port` (TLS rows send the name as SNI). */
  connectTo?: string;
}

/**
 * Runs h2load (Debian nghttp2-client) against `url` for the bench's duration after a warm-up,
 * with the same concurrency as wrk; latency percentiles come from its per-request log.
 */
export async function runH2load(url: string, workDir: string, options: H2loadOptions = {}): Promise<WrkResult> {
  const log = join(workDir, `h2load-${Math.random().toString(36).slice(2)}.log`);
  const args = ['-t', '1', '-c', String(H2LOAD_SETTINGS.connections), '-m', String(H2LOAD_SETTINGS.streamsPerConnection), '--warm-up-time', `${WRK_SETTINGS.warmupS}s`, '-D', `${WRK_SETTINGS.durationS}s`, '--log-file', log];
  for (const [name, value] of Object.entries(options.headers ?? {})) args.push('-H', `${name}: ${value}`);
  if (options.dataFile) args.push('-d', options.dataFile);
  if (options.connectTo) args.push('--connect-to', options.connectTo);
  const { stdout } = await promisify(execFile)('h2load', [...args, url], { maxBuffer: 1 << 22 });
  const result = parseH2load(stdout, await readFile(log, 'utf8'));
  await rm(log, { force: true });
  return result;
}

export function parseH2load(out: string, log: string): WrkResult {
  const finished = /finished in [\d.]+\w+, ([\d.]+) req\/s/.exec(out);
  const requests = /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out);
  const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out);
  // Log lines: start time (µs), status, elapsed (µs).
  const elapsed = log
    .split('\n')
    .filter(Boolean)
    .map((line) => Number(line.split('\t')[2]) / 1000)
    .filter((ms) => Number.isFinite(ms))
    .sort((a, b) => a - b);
  const pct = (p: number) => (elapsed.length ? elapsed[Math.min(elapsed.length - 1, Math.floor((elapsed.length * p) / 100))]! : NaN);
  return {
    requestsPerSec: finished ? Number(finished[1]) : NaN,
    p50Ms: pct(50),
    p99Ms: pct(99),
    requests: requests ? Number(requests[2]) : NaN,
    errors: (requests ? Number(requests[4]) + Number(requests[5]) + Number(requests[6]) : 0) + (codes ? Number(codes[3]) + Number(codes[4]) : 0),
  };
}
