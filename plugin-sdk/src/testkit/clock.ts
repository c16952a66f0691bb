/**
 * A fake clock for plugin tests: `Date.now()`, `new Date()`, `performance.now()`, the plugin's
 * timers and `ctx.store` TTLs all follow it instead of the wall clock (in-process mode; sandbox
 * mode: `Date`, `performance.now()` and store TTLs, see docs/plugins.md "Test"). Time moves only when the
 * test calls {@link FakeClock.advance}.
 *
 *   const clock = createFakeClock();
 *   const plugin = await startPlugin(mode, { entry, name, clock });
 *   const pending = plugin.authorize(req);   // the plugin awaits a 100 ms timer
 *   await clock.advance(100);                // the timer fires, the plugin answers
 *   await pending;
 */
export interface FakeClock {
  /** The fake time, in ms since the epoch (what `Date.now()` answers). */
  now(): number;
  /** Moves time forward by `ms`, firing due timers in order; resolves once their continuations ran. */
  advance(ms: number): Promise<void>;
  /** Internal: schedules `fire` at fake time `at`; answers a cancel function. */
  schedule(at: number, fire: () => void): () => void;
}

/** Lets promise continuations (and the host's answers to them) run before the next timer fires. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A fake clock starting at `start` (default: 2025-01-01T00:00:00Z, so tests do not depend on today). */
export function createFakeClock(start = Date.UTC(2025, 0, 1)): FakeClock {
  if (!Number.isFinite(start)) throw new RangeError(`createFakeClock: start must be a finite number of ms, got ${start}`);
  let time = start;
  let order = 0;
  const timers = new Map<number, { at: number; seq: number; fire: () => void }>();
  return {
    now: () => time,
    schedule(at, fire) {
      const seq = ++order;
      timers.set(seq, { at, seq, fire });
      return () => void timers.delete(seq);
    },
    async advance(ms) {
      if (!(ms >= 0) || !Number.isFinite(ms)) throw new RangeError(`clock.advance: ms must be a finite number ≥ 0, got ${ms}`);
      const end = time + ms;
      await settle();
      for (;;) {
        let next: { at: number; seq: number; fire: () => void } | undefined;
        for (const timer of timers.values()) if (timer.at <= end && (!next || timer.at < next.at || (timer.at === next.at && timer.seq < next.seq))) next = timer;
        if (!next) break;
        timers.delete(next.seq);
        time = Math.max(time, next.at);
        next.fire();
        await settle();
      }
      time = end;
      await settle();
    },
  };
}

/** The real clock, with the same shape (timers are real `setTimeout`s). */
export const realClock: FakeClock = {
  now: () => Date.now(),
  advance: () => Promise.reject(new Error('clock.advance: this is the real clock; pass createFakeClock() to startPlugin')),
  schedule(at, fire) {
    const timer = setTimeout(fire, Math.max(0, at - Date.now()));
    return () => clearTimeout(timer);
  },
};
