import type { HostAnswer } from '../sandbox-runtime.ts';

/**
 * The sandbox's default limits (SPEC 5.2, 5.3), one table for the gateway's plugin host and the
 * test kit: isolate heap, CPU per call, wall deadline per call (fetch and timers included),
 * fetches in flight and timers waiting per isolate.
 */
export const SANDBOX_DEFAULTS = { memoryLimitMb: 64, cpuTimeoutMs: 50, wallTimeoutMs: 1000, maxFetches: 16, maxTimers: 1024 } as const;

/** Where fetches go: the gateway's egress rules (core/src/extauth/plugins/egress.ts), in the gateway and in the test kit alike. */
export interface HostEgress {
  fetch(value: unknown, cancel: AbortSignal): Promise<HostAnswer>;
}

/** The time plugin timers run on: the wall clock in the gateway, the test's clock (real or fake) in the test kit. */
export interface HostClock {
  now(): number;
  /** Schedules `fire` at time `at` (ms, on this clock); answers a cancel function. */
  schedule(at: number, fire: () => void): () => void;
}

/** The wall clock, for the gateway's plugin host. */
export const WALL_CLOCK: HostClock = {
  now: () => performance.now(),
  schedule(at, fire) {
    const timer = setTimeout(fire, Math.max(0, at - performance.now()));
    return () => clearTimeout(timer);
  },
};

/** Limits of a plugin instance's asynchronous host calls (SPEC 5.3). */
export interface HostCallLimits {
  /** The per-call wall deadline: no timer waits longer. */
  deadlineMs: number;
  /** Fetches in flight at once per isolate (default 16). */
  maxFetches: number;
  /** Timers waiting at once per isolate. */
  maxTimers: number;
}

const CANCELLED: HostAnswer = { cancelled: true };

/**
 * The host's side of one isolate's asynchronous calls (`fetch`, timers, `crypto.subtle`): one
 * implementation for the gateway's plugin host and the test kit's in-process mode (issue 26), so
 * both enforce the same limits with the same messages. Work exists only for
 * running calls: while no call is in flight (and the plugin is not starting), a new timer or
 * fetch is answered "cancelled" and everything waiting is cancelled, so nothing a finished
 * call left behind can run or hold resources. Never throws: failures are answers.
 */
export class HostCalls {
  private running = 0;
  private readonly sleeps = new Map<number, { cancel: () => void; resolve: (answer: HostAnswer) => void }>();
  private readonly fetches = new Set<{ controller: AbortController }>();
  /** Fetches the plugin gave a signal, by the runtime's abort id. */
  private readonly abortable = new Map<number, AbortController>();
  private readonly egress: HostEgress | undefined;
  private readonly limits: HostCallLimits;
  private readonly clock: HostClock;
  private disposed = false;
  /** crypto.subtle operations running on Node's crypto.subtle (their answers wake the isolate). */
  private cryptos = 0;
  /** Bumped by cancelAll: an operation that finishes in a later epoch serves no call any more. */
  private epoch = 0;
  /** The host crypto's asynchronous half (`createHostCrypto().subtle`); without it `crypto` operations are refused. */
  subtle: ((request: unknown, live?: () => boolean) => Promise<HostAnswer>) | undefined;
  /** Called when a timer or fetch starts (the isolate will get a task later) and when one ends. */
  onStart: (() => void) | undefined;
  onSettle: (() => void) | undefined;
  /** Fetches by origin and result, for metrics (read by the step). */
  onFetch: ((origin: string, result: 'ok' | 'error') => void) | undefined;

  constructor(egress: HostEgress | undefined, limits: HostCallLimits, clock: HostClock = WALL_CLOCK) {
    this.egress = egress;
    this.limits = limits;
    this.clock = clock;
  }

  /** Timers and fetches waiting now: while any are, calls must not run inline. */
  get outstanding(): number {
    return this.sleeps.size + this.fetches.size + this.cryptos;
  }

  /** A call (or Start) began: its timers and fetches may run. */
  begin(): void {
    this.running++;
  }

  /** A call ended; when none is left, whatever is still waiting is cancelled. */
  end(): void {
    this.running = Math.max(0, this.running - 1);
    if (this.running === 0) this.cancelAll();
    this.onSettle?.();
  }

  /** Cancels every timer and fetch, for good once disposed. */
  cancelAll(dispose = false): void {
    if (dispose) this.disposed = true;
    this.epoch++;
    for (const [id, sleep] of this.sleeps) {
      sleep.cancel();
      this.sleeps.delete(id);
      sleep.resolve(CANCELLED);
    }
    for (const fetch of this.fetches) fetch.controller.abort();
    this.fetches.clear();
  }

  /** The function the isolate calls (through an isolated-vm Reference). */
  readonly dispatch = (op: unknown, args: unknown): Promise<HostAnswer> => {
    if (this.disposed || this.running === 0) return Promise.resolve(CANCELLED);
    this.onStart?.();
    const answer = this.run(op, args);
    // After the answer is on its way into the isolate (whoever hands it in reacts to this promise
    // after us: isolated-vm for a `call`, the plugin host's crossing for a `callJob`): a ping sent
    // earlier would overtake the continuation it starts.
    void answer.finally(() => setImmediate(() => this.onSettle?.()));
    return answer;
  };

  private run(op: unknown, args: unknown): Promise<HostAnswer> {
    const id = (args as { id?: unknown } | null)?.id;
    switch (op) {
      case 'sleep':
        return this.sleep(typeof id === 'number' ? id : NaN, (args as { ms?: unknown }).ms);
      case 'clear':
        if (typeof id === 'number') this.clear(id);
        return Promise.resolve({ value: null });
      case 'fetch':
        return this.fetch(args);
      case 'crypto':
        return this.crypto(args);
      case 'fetch-abort':
        this.abortFetch(id);
        return Promise.resolve({ value: null });
      default:
        return Promise.resolve({ error: { name: 'TypeError', message: `unknown host operation ${String(op).slice(0, 40)}` } });
    }
  }

  private sleep(id: number, ms: unknown): Promise<HostAnswer> {
    if (!Number.isSafeInteger(id)) return Promise.resolve({ error: { name: 'TypeError', message: 'timer: bad id' } });
    if (this.sleeps.size >= this.limits.maxTimers && !this.sleeps.has(id)) {
      return Promise.resolve({ error: { name: 'RangeError', message: `too many timers: at most ${this.limits.maxTimers} per plugin isolate` } });
    }
    this.clear(id);
    const delay = typeof ms === 'number' && ms >= 0 ? ms : 0;
    return new Promise<HostAnswer>((resolve) => {
      // A timer longer than the wall deadline can serve no call: it never fires, and is
      // dropped at the deadline so a busy isolate cannot pile them up.
      const fires = delay <= this.limits.deadlineMs;
      const cancel = this.clock.schedule(this.clock.now() + (fires ? delay : this.limits.deadlineMs), () => {
        this.sleeps.delete(id);
        resolve(fires ? { value: 'fired' } : CANCELLED);
      });
      this.sleeps.set(id, { cancel, resolve });
    });
  }

  private clear(id: number): void {
    const sleep = this.sleeps.get(id);
    if (!sleep) return;
    sleep.cancel();
    this.sleeps.delete(id);
    sleep.resolve(CANCELLED);
  }

  /** The plugin's AbortSignal aborted a fetch: the host stops it (its answer is dropped). */
  private abortFetch(id: unknown): void {
    if (typeof id === 'number') this.abortable.get(id)?.abort();
  }

  private async crypto(args: unknown): Promise<HostAnswer> {
    if (!this.subtle) return { error: { name: 'NotSupportedError', message: 'crypto.subtle: not available in this host' } };
    const epoch = this.epoch;
    this.cryptos++;
    try {
      const answer = await this.subtle(args, () => epoch === this.epoch);
      return epoch === this.epoch ? answer : CANCELLED;
    } finally {
      this.cryptos--;
    }
  }

  private async fetch(args: unknown): Promise<HostAnswer> {
    if (!this.egress) return { error: { name: 'TypeError', message: 'fetch is not allowed: this step declares no egress (pluginAuth.egress)' } };
    if (this.fetches.size >= this.limits.maxFetches) {
      return { error: { name: 'TypeError', message: `fetch: at most ${this.limits.maxFetches} requests may be in flight per plugin isolate` } };
    }
    const entry = { controller: new AbortController() };
    this.fetches.add(entry);
    const abortId = (args as { abortId?: unknown }).abortId;
    if (typeof abortId === 'number') this.abortable.set(abortId, entry.controller);
    try {
      const answer = await this.egress.fetch(args, entry.controller.signal);
      const origin = URL.parse(String((args as { url?: unknown } | null)?.url ?? ''))?.origin ?? 'invalid';
      this.onFetch?.(origin, 'value' in answer ? 'ok' : 'error');
      // Aborted because the call ended: the plugin's promise is left pending (nobody waits).
      return entry.controller.signal.aborted ? CANCELLED : answer;
    } finally {
      this.fetches.delete(entry);
      if (typeof abortId === 'number') this.abortable.delete(abortId);
    }
  }
}
