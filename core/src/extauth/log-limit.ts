/**
 * Rate limits for log lines whose repeats an attacker or a failing dependency controls (a
 * plugin failing on every retry, a denied request per request, caller-chosen `config_id`s):
 * one line per key per interval, the next one saying how many were left out. The number of
 * keys is bounded: the oldest are forgotten first.
 */
export class LogLimiter {
  private readonly last = new Map<string, { at: number; suppressed: number }>();
  private readonly intervalMs: number;
  private readonly maxKeys: number;

  constructor(options: { intervalMs: number; maxKeys?: number }) {
    this.intervalMs = options.intervalMs;
    this.maxKeys = options.maxKeys ?? 1024;
  }

  /**
   * `undefined` when a line for `key` should be left out now; otherwise how many were left out
   * since the last one written (0 the first time).
   */
  take(key: string, now = performance.now()): number | undefined {
    const seen = this.last.get(key);
    if (seen && now - seen.at < this.intervalMs) {
      seen.suppressed++;
      return undefined;
    }
    const suppressed = seen?.suppressed ?? 0;
    this.last.delete(key);
    if (this.last.size >= this.maxKeys) this.last.delete(this.last.keys().next().value!);
    this.last.set(key, { at: now, suppressed: 0 });
    return suppressed;
  }

  /** Forgets `key`: its next line is written at once (a changed cause deserves a line). */
  reset(key: string): void {
    this.last.delete(key);
  }
}
