import type { HostCall } from '../host-api.ts';

/**
 * The sandbox's `fetch` (SPEC 5.3 "Egress"): builds a Fetch `Request`, hands a copy of its
 * parts to the host, which checks the step's egress, sends it and returns a copy of the
 * response, and answers with a Fetch `Response`. Runs inside the isolate. A refused origin,
 * a deadline or a size limit rejects with the host's `TypeError` (as a network error does).
 */

/** A request as it crosses to the host. */
export interface FetchRequestParts {
  url: string;
  method: string;
  headers: [string, string][];
  body: Uint8Array | null;
  redirect: 'follow' | 'manual' | 'error';
}

/** A response as it comes back from the host. */
export interface FetchResponseParts {
  status: number;
  statusText: string;
  headers: [string, string][];
  body: Uint8Array;
  url: string;
  redirected: boolean;
}

/** The Fetch classes' internal doors (./fetch-types.ts). */
export interface FetchTypes {
  Request: new (input: unknown, init?: never) => object;
  requestParts(request: never): FetchRequestParts;
  responseFrom(parts: FetchResponseParts): unknown;
}

/** The sandbox's AbortSignal as fetch needs it (./abort.ts). */
interface Signal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * Builds `fetch` over the raw host call (answers `{value}`, `{error}` or `{cancelled}`). A
 * `signal` in the init rejects the fetch with its reason when it aborts, and has the host
 * cancel the request (`fetch-abort` with the fetch's `abortId`).
 */
export function createFetch(call: HostCall, types: FetchTypes, SignalClass?: abstract new (...args: never[]) => Signal): (input: unknown, init?: unknown) => Promise<unknown> {
  const { Request, requestParts, responseFrom } = types;
  const then = Promise.prototype.then;
  const reject = Promise.reject.bind(Promise);
  const errors: Record<string, ErrorConstructor> = { TypeError, RangeError, SyntaxError };
  let lastAbortId = 0;
  return function fetch(input: unknown, init?: unknown): Promise<unknown> {
    let parts: FetchRequestParts & { abortId?: number };
    let signal: Signal | undefined;
    try {
      const given = typeof init === 'object' && init !== null ? (init as { signal?: unknown }).signal : undefined;
      if (given !== undefined && given !== null) {
        if (!SignalClass || !(given instanceof SignalClass)) throw new TypeError("Failed to construct 'Request': member signal is not of type AbortSignal.");
        signal = given;
      }
      parts = requestParts(new Request(input, init as never) as never);
    } catch (error) {
      return reject(error);
    }
    if (signal?.aborted) return reject(signal.reason);
    if (signal) parts = { ...parts, abortId: ++lastAbortId };
    const sent = then.call(call('fetch', parts), (answer: unknown) => {
      const a = answer as { value?: FetchResponseParts; error?: { name?: unknown; message?: unknown }; cancelled?: true };
      // The call this fetch served is over: nobody waits for it any more.
      if (a.cancelled) return new Promise(() => {});
      if (a.error) {
        const Type = errors[String(a.error.name)] ?? TypeError;
        throw new Type(String(a.error.message));
      }
      return responseFrom(a.value!);
    }) as Promise<unknown>;
    if (!signal) return sent;
    const aborting = signal;
    const abortId = parts.abortId;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        reject(aborting.reason);
        void call('fetch-abort', { id: abortId });
      };
      aborting.addEventListener('abort', onAbort, { once: true });
      then.call(
        sent,
        (value: unknown) => {
          aborting.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (error: unknown) => {
          aborting.removeEventListener('abort', onAbort);
          reject(error);
        },
      );
    });
  };
}
