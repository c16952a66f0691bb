import { writeSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { metrics } from '../admin/metrics.ts';
import { flushLogs, type Logger } from '../log/logger.ts';

/** More unhandled errors than this within a minute: the process is in a bad state; exit and be restarted. */
const MAX_UNHANDLED_PER_MINUTE = 100;

/**
 * Process-level guards (issue 17): an exception or rejection nothing caught is logged loudly
 * (with its stack and code) and counted, and the process keeps serving: one client's
 * malformed input must never take every other client's connections down. A flood of them
 * (over 100 a minute) means broken state rather than one bad request: the process exits
 * non-zero for its supervisor (the cluster primary, Kubernetes) to restart it.
 */
export function installProcessGuards(logger: Logger): void {
  let windowStart = Date.now();
  let count = 0;
  const handle = (kind: 'exception' | 'rejection', error: unknown) => {
    metrics.unhandledErrors.inc({ kind });
    logger.error({ err: error, code: 'GH_UNHANDLED', kind }, `unhandled ${kind}: logged and survived`);
    const now = Date.now();
    if (now - windowStart > 60_000) {
      windowStart = now;
      count = 0;
    }
    if (++count > MAX_UNHANDLED_PER_MINUTE) {
      logger.fatal?.({ code: 'GH_UNHANDLED' }, `more than ${MAX_UNHANDLED_PER_MINUTE} unhandled errors in a minute: exiting to be restarted`);
      hardExit(1, 2_000);
    }
  };
  process.on('uncaughtException', (error) => handle('exception', error));
  process.on('unhandledRejection', (reason) => handle('rejection', reason));
}

/**
 * Exits with `code`, and kills the process outright if the exit has not finished after
 * `graceMs` (exit handlers, a native add-on or a stuck thread can hold it, and the ports with it).
 */
export function hardExit(code: number, graceMs: number): void {
  const timer = setTimeout(() => process.kill(process.pid, 'SIGKILL'), graceMs);
  timer.unref();
  process.exitCode = code;
  process.exit(code);
}

/**
 * The backstop for isolated-vm's catastrophic errors ("Script failed to terminate", a fatal
 * out-of-memory): V8 has lost control of an isolate, its thread is parked for good and the
 * process can no longer exit normally (a later `exit()` hangs, holding the ports). isolated-vm's
 * advice is to log and end the process, so this writes one fatal line, flushes the logs and
 * kills the process with SIGKILL after `graceMs` (in-flight answers that are already on their
 * way get that long). The supervisor restarts it: the cluster primary for `--workers N`,
 * Kubernetes or the init system otherwise. Known triggers are refused before they run (the
 * sandbox's bounded builtins); this is for the ones nobody knows yet.
 */
export function killAfterCatastrophe(detail: Record<string, unknown>, graceMs = 250): void {
  metrics.unhandledErrors.inc({ kind: 'catastrophe' });
  try {
    writeSync(2, JSON.stringify({ level: 60, time: Date.now(), code: 'GH_PLUGIN_CATASTROPHIC', ...detail, msg: 'a plugin isolate failed catastrophically: killing the process to be restarted' }) + '\n');
    flushLogs();
  } catch {
    // Nothing may stop the kill below.
  }
  setTimeout(() => process.kill(process.pid, 'SIGKILL'), graceMs).unref();
}

/** What {@link startWatchdog} needs; defaults in docs/operations.md. */
export interface WatchdogOptions {
  /** Event loop silent this long: the process is killed (SIGKILL). 0 turns the watchdog off. */
  stallMs: number;
  /** How often the event loop reports that it runs. */
  beatMs?: number;
  /** Whose event loop, for the line written before the kill (default "event loop"). */
  loop?: string;
  /**
   * Resident memory (bytes) past which the process is killed the same way (`GH_WATCHDOG_MEMORY`),
   * checked every 50 ms from the watchdog thread, so a builtin that allocates without returning
   * cannot stop it. For the plugin process (docs/plugins.md "Plugin process"); 0 or absent: none.
   */
  maxRssBytes?: number;
}

/** The stall period of this process's watchdog (0: none yet), for threads that watch their own loop the same way. */
let activeStallMs = 0;
const watchdogListeners = new Set<(stallMs: number) => void>();

/** Calls `listener` with the watchdog's stall period once it runs (at once if it already does). */
export function onWatchdogStarted(listener: (stallMs: number) => void): void {
  if (activeStallMs > 0) listener(activeStallMs);
  else watchdogListeners.add(listener);
}

/**
 * A watchdog thread: the event loop bumps a shared counter every `beatMs`; when the counter has
 * not moved for `stallMs` (a native call that never returns, an endless loop in a dependency),
 * the thread writes one line to stderr and kills the process with SIGKILL, which needs no
 * cooperation from the stuck main thread. The supervisor restarts it: the cluster primary for
 * `--workers N`, Kubernetes (liveness probe, restartPolicy) or the init system otherwise.
 * Cost on the event loop: one timer every `beatMs` (default 500 ms).
 */
export function startWatchdog(options: WatchdogOptions): { stop(): void } {
  if (options.stallMs <= 0 && (options.maxRssBytes ?? 0) <= 0) return { stop() {} };
  if (options.loop === undefined && activeStallMs === 0) {
    activeStallMs = options.stallMs;
    for (const listener of watchdogListeners) listener(activeStallMs);
    watchdogListeners.clear();
  }
  const beatMs = options.beatMs ?? 500;
  const shared = new Int32Array(new SharedArrayBuffer(4));
  const beat = setInterval(() => Atomics.add(shared, 0, 1), beatMs);
  beat.unref();
  const worker = new Worker(WATCHDOG_SOURCE, { eval: true, workerData: { shared, stallMs: options.stallMs, pid: process.pid, loop: options.loop ?? 'event loop', maxRssBytes: options.maxRssBytes ?? 0 } });
  worker.unref();
  worker.on('error', (error) => writeSync(2, `gatehouse watchdog failed: ${String(error)}\n`));
  return {
    stop() {
      clearInterval(beat);
      void worker.terminate();
    },
  };
}

// Plain JavaScript run in the watchdog thread (eval: no module resolution, no TypeScript).
const WATCHDOG_SOURCE = `
const { workerData } = require('node:worker_threads');
const { writeSync } = require('node:fs');
const { shared, stallMs, pid, loop, maxRssBytes } = workerData;
if (maxRssBytes > 0) {
  setInterval(() => {
    const rss = process.memoryUsage.rss();
    if (rss <= maxRssBytes) return;
    try { writeSync(2, JSON.stringify({ level: 60, time: Date.now(), code: 'GH_WATCHDOG_MEMORY', rssMb: Math.round(rss / 1048576), maxRssMb: Math.round(maxRssBytes / 1048576), msg: 'resident memory ' + Math.round(rss / 1048576) + ' MB is over the bound of ' + Math.round(maxRssBytes / 1048576) + ' MB: killing the process to be restarted' }) + '\\n'); } catch {}
    process.kill(pid, 'SIGKILL');
  }, 50);
}
let last = Atomics.load(shared, 0);
let since = Date.now();
if (stallMs > 0) setInterval(() => {
  const now = Date.now();
  const value = Atomics.load(shared, 0);
  if (value !== last) { last = value; since = now; return; }
  if (now - since >= stallMs) {
    try { writeSync(2, JSON.stringify({ level: 60, time: now, code: 'GH_WATCHDOG', msg: loop + ' stalled for ' + (now - since) + ' ms: killing the process to be restarted' }) + '\\n'); } catch {}
    process.kill(pid, 'SIGKILL');
  }
}, Math.max(50, Math.min(1000, Math.floor(stallMs / 4))));
`;
