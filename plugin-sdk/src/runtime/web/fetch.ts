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

/** Builds `fetch` over the raw host call (answers `{value}`, `{error}` or `{cancelled}`). */
export function createFetch(call: HostCall, types: FetchTypes): (input: unknown, init?: unknown) => Promise<unknown> {
  const { Request, requestParts, responseFrom } = types;
  const then = Promise.prototype.then;
  const reject = Promise.reject.bind(Promise);
  const errors: Record<string, ErrorConstructor> = { TypeError, RangeError, SyntaxError };
  return function fetch(input: unknown, init?: unknown): Promise<unknown> {
    let parts: FetchRequestParts;
    try {
      parts = requestParts(new Request(input, init as never) as never);
    } catch (error) {
      return reject(error);
    }
    return then.call(call('fetch', parts), (answer: unknown) => {
      const a = answer as { value?: FetchResponseParts; error?: { name?: unknown; message?: unknown }; cancelled?: true };
      // The call this fetch served is over: nobody waits for it any more.
      if (a.cancelled) return new Promise(() => {});
      if (a.error) {
        const Type = errors[String(a.error.name)] ?? TypeError;
        throw new Type(String(a.error.message));
      }
      return responseFrom(a.value!);
    }) as Promise<unknown>;
  };
}
