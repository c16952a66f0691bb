import type { HostAnswer } from '../runtime/sandbox-runtime.ts';
import type { FakeClock } from './clock.ts';

/** The host's egress (core/src/extauth/plugins/egress.ts), used as is: the same rules in both modes. */
export interface EgressLike {
  fetch(value: unknown, cancel: AbortSignal): Promise<HostAnswer>;
}

/** Loads the host's Egress for `origins` (the step's `egress` URL entries). */
export async function loadEgress(origins: readonly string[], timeoutMs: number): Promise<EgressLike> {
  let module: { Egress: new (rules: { origin: string }[], limits: { timeoutMs: number }) => EgressLike };
  try {
    module = (await import(EGRESS_MODULE)) as typeof module;
  } catch (error) {
    throw new Error(`the test kit's fetch needs @gatehouse/core (the real plugin host's egress rules): ${(error as Error).message}`, { cause: error });
  }
  const rules = origins.map((origin) => {
    const url = URL.parse(origin);
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw new TypeError(`egress: ${JSON.stringify(origin)} is not an absolute http(s) URL`);
    return { origin: url.origin.toLowerCase() };
  });
  return new module.Egress(rules, { timeoutMs });
}
/** Loaded by name so the SDK has no build-time dependency on @gatehouse/core. */
const EGRESS_MODULE = '@gatehouse/core/extauth/plugins/egress.ts';

const CANCELLED: HostAnswer = { cancelled: true };

/**
 * The in-process twin of the host's HostCalls (core/src/extauth/plugins/host-calls.ts): timers
 * and fetches exist only while a call runs, a timer longer than the wall deadline never fires,
 * the same limits and messages. Timers run on the test's clock (real or fake).
 */
export class TestHostCalls {
  private running = 0;
  private readonly sleeps = new Map<number, { cancel: () => void; resolve: (answer: HostAnswer) => void }>();
  private readonly fetches = new Set<AbortController>();
  /** Fetches the plugin gave a signal, by the runtime's abort id. */
  private readonly abortable = new Map<number, AbortController>();
  private disposed = false;
  private epoch = 0;
  /** The host crypto's asynchronous half (`createHostCrypto().subtle`). */
  subtle: ((request: unknown, live?: () => boolean) => Promise<HostAnswer>) | undefined;

  private readonly egress: EgressLike | undefined;
  private readonly clock: FakeClock;
  private readonly limits: { deadlineMs: number; maxFetches: number; maxTimers: number };

  constructor(egress: EgressLike | undefined, clock: FakeClock, limits: { deadlineMs: number; maxFetches: number; maxTimers: number }) {
    this.egress = egress;
    this.clock = clock;
    this.limits = limits;
  }

  begin(): void {
    this.running++;
  }

  end(): void {
    this.running = Math.max(0, this.running - 1);
    if (this.running === 0) this.cancelAll();
  }

  cancelAll(dispose = false): void {
    if (dispose) this.disposed = true;
    this.epoch++;
    for (const [id, sleep] of this.sleeps) {
      sleep.cancel();
      this.sleeps.delete(id);
      sleep.resolve(CANCELLED);
    }
    for (const controller of this.fetches) controller.abort();
    this.fetches.clear();
  }

  readonly dispatch = (op: unknown, args: unknown): Promise<HostAnswer> => {
    if (this.disposed || this.running === 0) return Promise.resolve(CANCELLED);
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
  };

  private sleep(id: number, ms: unknown): Promise<HostAnswer> {
    if (!Number.isSafeInteger(id)) return Promise.resolve({ error: { name: 'TypeError', message: 'timer: bad id' } });
    if (this.sleeps.size >= this.limits.maxTimers && !this.sleeps.has(id)) {
      return Promise.resolve({ error: { name: 'RangeError', message: `too many timers: at most ${this.limits.maxTimers} per plugin isolate` } });
    }
    this.clear(id);
    const delay = typeof ms === 'number' && ms >= 0 ? ms : 0;
    return new Promise<HostAnswer>((resolve) => {
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
    const answer = await this.subtle(args, () => epoch === this.epoch);
    return epoch === this.epoch ? answer : CANCELLED;
  }

  private async fetch(args: unknown): Promise<HostAnswer> {
    if (!this.egress) return { error: { name: 'TypeError', message: 'fetch is not allowed: this step declares no egress (pluginAuth.egress)' } };
    if (this.fetches.size >= this.limits.maxFetches) {
      return { error: { name: 'TypeError', message: `fetch: at most ${this.limits.maxFetches} requests may be in flight per plugin isolate` } };
    }
    const controller = new AbortController();
    this.fetches.add(controller);
    const abortId = (args as { abortId?: unknown }).abortId;
    if (typeof abortId === 'number') this.abortable.set(abortId, controller);
    try {
      const answer = await this.egress.fetch(args, controller.signal);
      return controller.signal.aborted ? CANCELLED : answer;
    } finally {
      this.fetches.delete(controller);
      if (typeof abortId === 'number') this.abortable.delete(abortId);
    }
  }
}
