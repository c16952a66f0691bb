/**
 * `DOMException`, `AbortController` and `AbortSignal` for the sandbox (SPEC 5.3), in plain
 * JavaScript: `abort()`, `AbortSignal.abort()`, `AbortSignal.timeout()` (on the sandbox's
 * timers, so it fires only while a call is in flight) and `AbortSignal.any()`, with
 * `addEventListener('abort', …)` and `onabort`. The sandbox's `fetch` takes a signal and
 * cancels the host's request when it aborts. Runs inside the isolate.
 */

/** The legacy codes of the DOMException names the sandbox throws (WebIDL's table). */
const CODES: Record<string, number> = {
  IndexSizeError: 1,
  HierarchyRequestError: 3,
  WrongDocumentError: 4,
  InvalidCharacterError: 5,
  NoModificationAllowedError: 7,
  NotFoundError: 8,
  NotSupportedError: 9,
  InvalidStateError: 11,
  SyntaxError: 12,
  InvalidModificationError: 13,
  NamespaceError: 14,
  InvalidAccessError: 15,
  TypeMismatchError: 17,
  SecurityError: 18,
  NetworkError: 19,
  AbortError: 20,
  URLMismatchError: 21,
  QuotaExceededError: 22,
  TimeoutError: 23,
  InvalidNodeTypeError: 24,
  DataCloneError: 25,
};

/** WebIDL's DOMException: an Error with a `name` and its legacy `code`. */
export class DOMException extends Error {
  readonly #name: string;
  constructor(message = '', name = 'Error') {
    super(String(message));
    this.#name = String(name);
  }
  override get name(): string {
    return this.#name;
  }
  get code(): number {
    return CODES[this.#name] ?? 0;
  }
  get [Symbol.toStringTag](): string {
    return 'DOMException';
  }
}

type Listener = ((event: AbortEvent) => void) | { handleEvent(event: AbortEvent): void };
/** The event an abort dispatches. */
interface AbortEvent {
  readonly type: 'abort';
  readonly target: AbortSignal;
  readonly currentTarget: AbortSignal;
}

/** Set by the module: the one way to make a signal and to abort it (the constructor is closed, as in the standard). */
let internal: { make(): AbortSignal; abort(signal: AbortSignal, reason: unknown): void } | undefined;
/** The timer `AbortSignal.timeout` uses (the sandbox's setTimeout, set by {@link useAbortTimer}). */
let schedule: ((run: () => void, ms: number) => unknown) | undefined;
/** What an abort listener threw: reported like a timer callback's uncaught error. */
let report: (error: unknown) => void = () => {};

/** Gives `AbortSignal.timeout` its timer, and where listener errors go. */
export function useAbortTimer(timer: (run: () => void, ms: number) => unknown, onError: (error: unknown) => void): void {
  schedule = timer;
  report = onError;
}

/** WHATWG DOM's AbortSignal. */
export class AbortSignal {
  #aborted = false;
  #reason: unknown = undefined;
  #listeners: { listener: Listener; once: boolean }[] = [];
  onabort: ((event: AbortEvent) => void) | null = null;

  constructor(token?: unknown) {
    if (token !== TOKEN) throw new TypeError('Illegal constructor');
  }

  get aborted(): boolean {
    return this.#aborted;
  }
  get reason(): unknown {
    return this.#reason;
  }
  throwIfAborted(): void {
    if (this.#aborted) throw this.#reason;
  }
  addEventListener(type: string, listener: Listener | null, options?: boolean | { once?: boolean; signal?: AbortSignal }): void {
    if (type !== 'abort' || listener === null || listener === undefined) return;
    if (this.#listeners.some((entry) => entry.listener === listener)) return;
    const once = typeof options === 'object' && options !== null && options.once === true;
    this.#listeners.push({ listener, once });
    const remover = typeof options === 'object' && options !== null ? options.signal : undefined;
    remover?.addEventListener('abort', () => this.removeEventListener(type, listener));
  }
  removeEventListener(type: string, listener: Listener | null): void {
    if (type !== 'abort') return;
    this.#listeners = this.#listeners.filter((entry) => entry.listener !== listener);
  }
  get [Symbol.toStringTag](): string {
    return 'AbortSignal';
  }

  static abort(reason?: unknown): AbortSignal {
    const signal = internal!.make();
    internal!.abort(signal, reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason);
    return signal;
  }

  /** Aborts with a TimeoutError after `ms` (while a call is in flight: the sandbox's timers serve running calls only). */
  static timeout(ms: number): AbortSignal {
    const delay = Number(ms);
    if (!(delay >= 0 && delay <= Number.MAX_SAFE_INTEGER)) throw new TypeError(`The "delay" argument must be a non-negative integer (got ${String(ms)})`);
    const signal = internal!.make();
    if (!schedule) throw new TypeError('AbortSignal.timeout needs the sandbox timers');
    schedule(() => internal!.abort(signal, new DOMException('The operation was aborted due to timeout', 'TimeoutError')), Math.floor(delay));
    return signal;
  }

  /** Aborts when any of `signals` does, with its reason. */
  static any(signals: Iterable<AbortSignal>): AbortSignal {
    const list = [...signals];
    for (const s of list) if (!(s instanceof AbortSignal)) throw new TypeError('AbortSignal.any: every item must be an AbortSignal');
    const signal = internal!.make();
    const done = list.find((s) => s.aborted);
    if (done) {
      internal!.abort(signal, done.reason);
      return signal;
    }
    for (const s of list) s.addEventListener('abort', () => internal!.abort(signal, s.reason), { once: true });
    return signal;
  }

  static {
    internal = {
      make: () => new AbortSignal(TOKEN),
      abort(signal, reason) {
        if (signal.#aborted) return;
        signal.#aborted = true;
        signal.#reason = reason;
        const event: AbortEvent = Object.freeze({ type: 'abort', target: signal, currentTarget: signal });
        const call = (listener: Listener) => {
          try {
            if (typeof listener === 'function') listener.call(signal, event);
            else listener.handleEvent(event);
          } catch (error) {
            report(error);
          }
        };
        if (typeof signal.onabort === 'function') call(signal.onabort);
        const listeners = signal.#listeners;
        signal.#listeners = listeners.filter((entry) => !entry.once);
        for (const { listener } of listeners) call(listener);
      },
    };
  }
}
const TOKEN = Symbol('AbortSignal');

/** WHATWG DOM's AbortController. */
export class AbortController {
  readonly #signal = internal!.make();
  get signal(): AbortSignal {
    return this.#signal;
  }
  abort(reason?: unknown): void {
    internal!.abort(this.#signal, reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason);
  }
  get [Symbol.toStringTag](): string {
    return 'AbortController';
  }
}
