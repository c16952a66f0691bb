import type { HostCall } from '../host-api.ts';

/**
 * `setTimeout`/`clearTimeout`/`setInterval`/`clearInterval` for the sandbox (SPEC 5.3), over the
 * host's `sleep`: the host holds the wait (the isolate has no event loop of its own) and
 * answers `{value: 'fired'}` or `{cancelled: true}`. The host cancels every wait when no call is
 * in flight and bounds each by the wall deadline, so timers only ever serve a running call.
 * Runs inside the isolate.
 */

/** Timers one isolate may have waiting at once; more throw (a loop must not flood the host). */
export const MAX_TIMERS = 1024;

export interface SandboxTimers {
  setTimeout(handler: unknown, delay?: unknown, ...args: unknown[]): number;
  clearTimeout(id: unknown): void;
  setInterval(handler: unknown, delay?: unknown, ...args: unknown[]): number;
  clearInterval(id: unknown): void;
}

/** Builds the timer functions over the raw host call; `report` gets what a timer's handler threw (Node would crash, Workers log). */
export function createTimers(call: HostCall, report: (error: unknown) => void): SandboxTimers {
  const live = new Map<number, true>();
  const then = Promise.prototype.then;
  const apply = Reflect.apply;
  const toNumber = Number;
  let last = 0;

  const arm = (id: number, handler: (...args: unknown[]) => unknown, delay: number, args: unknown[], repeat: boolean): void => {
    then.call(call('sleep', { id, ms: delay }), (answer: unknown) => {
      if (!live.has(id) || (answer as { value?: unknown } | null)?.value !== 'fired') {
        live.delete(id);
        return;
      }
      if (!repeat) live.delete(id);
      try {
        apply(handler, undefined, args);
      } catch (error) {
        report(error);
      }
      // HTML clamps nested repeats to ≥ 4 ms; 1 ms keeps a 0-ms interval from spinning on host hops.
      if (repeat && live.has(id)) arm(id, handler, delay < 1 ? 1 : delay, args, true);
    });
  };

  const schedule = (repeat: boolean) => (handler: unknown, delay?: unknown, ...args: unknown[]): number => {
    if (typeof handler !== 'function') throw new TypeError(`The "callback" argument must be of type function (the sandbox does not evaluate strings)`);
    if (live.size >= MAX_TIMERS) throw new RangeError(`too many timers: at most ${MAX_TIMERS} may wait at once in a plugin`);
    let ms = toNumber(delay);
    // Like Node and browsers: NaN, negative or beyond 2^31-1 means "as soon as possible".
    if (!(ms >= 1 && ms <= 2_147_483_647)) ms = repeat ? 1 : 0;
    const id = ++last;
    live.set(id, true);
    arm(id, handler as (...a: unknown[]) => unknown, Math.floor(ms), args, repeat);
    return id;
  };

  const clear = (id: unknown): void => {
    const key = toNumber(id);
    if (!live.delete(key)) return;
    // Fire and forget: the host frees the wait; the answer (cancelled) is ignored above.
    void call('clear', { id: key });
  };

  return { setTimeout: schedule(false), clearTimeout: clear, setInterval: schedule(true), clearInterval: clear };
}
