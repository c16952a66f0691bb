/**
 * The capabilities the host grants the sandbox runtime (SPEC 5.3). Each is a function the
 * host passes into the isolate (isolated-vm `Callback`s and one `Reference`); arguments and
 * results cross as structured-clone copies, so plugin code never reaches a host object.
 * The runtime captures them before the plugin runs; the plugin sees only the Web APIs built
 * on them (crypto, URL, fetch, timers…).
 */

/** Fire-and-forget log line; `fields` is JSON (maybe truncated). */
export type HostLog = (level: 'debug' | 'info' | 'warn' | 'error', message: string, fields: string | undefined) => void;

/** `n` random bytes (0 ≤ n ≤ 65536) as base64. */
export type HostRandom = (n: number) => string;

/**
 * Crypto operations for `crypto.subtle` (digest, importKey, sign, verify, exportKey), run by
 * the host's `node:crypto`. `op` names the operation; the arguments and the result are plain
 * data (strings, numbers, Uint8Array, plain objects). `importKey` answers a key handle as
 * well; `signHandle` and `verifyHandle` take one, and a verify may answer `{job: id}`: it runs
 * off the event loop and its result comes through the runtime's `resolveJobs`. Implemented
 * by ./host/crypto.ts; the isolate half is ./web/subtle.ts.
 */
export type HostCrypto = (op: string, args: unknown, ...more: unknown[]) => unknown;

/**
 * WHATWG URL parsing by the host's own `URL` (so the sandbox's URL equals Node's): `input`
 * parsed against `base`, answered with the URL's components, or null when it does not
 * parse; with `set`, the named setter is applied to the parsed URL first (WHATWG setter rules). Implemented by ./host/url.ts; the isolate half is ./web/url.ts.
 */
export type HostUrl = (input: string, base: string | undefined, set?: [keyof HostUrlParts, string]) => HostUrlParts | null;

/** The components of a parsed URL, as Node's `URL` reports them. */
export interface HostUrlParts {
  href: string;
  origin: string;
  protocol: string;
  username: string;
  password: string;
  host: string;
  hostname: string;
  port: string;
  pathname: string;
  search: string;
  hash: string;
}

/**
 * Asynchronous host operations (`fetch`, timers): the isolate gets a promise of a copy of the
 * result. Rejections carry `{name, message}` so the runtime can rethrow them as the Web API
 * would (a `TypeError` for a refused fetch).
 */
export type HostCall = (op: string, args: unknown) => Promise<unknown>;

/**
 * The same operations as {@link HostCall}, started synchronously: the host answers `{job}` at
 * once and hands the answer in later through the runtime's `resolveHost`, in a crossing it bounds
 * by the CPU limit, so the code a plugin runs after `await fetch(…)` or in a timer callback is
 * bounded like the call itself (with {@link HostCall}, isolated-vm settles the promise itself and
 * that code ran unbounded until the wall deadline). The gateway's plugin host uses this one.
 */
export type HostCallJob = (op: string, args: unknown) => { job: number };

/** The runtime tells the host that pending Authorize call `id` has its answer (a JSON outcome). */
export type HostDone = (id: number, outcomeJson: string) => void;

/**
 * The step's `ctx.store`: `op` is `get`, `set`, `delete`, `increment` or `setIfAbsent`; `arg` the
 * value's JSON text (`set`, `setIfAbsent`) or the addend (`increment`). Answers `{v}` at once (a
 * store in this process: `get` JSON text or null, `set` true, `delete`/`setIfAbsent` a boolean,
 * `increment` the new number), or `{job}` when the answer comes later through the runtime's
 * `resolveStore` (a store elsewhere: Redis, another process). Throws TypeError/RangeError for bad arguments.
 */
export type HostStore = (op: string, key: string, arg?: string | number, ttlMs?: number) => { v: string | number | boolean | null } | { job: number };

/** Everything the host passes to the runtime's `install`. Missing parts leave their APIs out. */
export interface HostApi {
  log: HostLog;
  store?: HostStore;
  random?: HostRandom;
  crypto?: HostCrypto;
  url?: HostUrl;
  call?: HostCall;
  /** Preferred over `call` when both are given. */
  callJob?: HostCallJob;
  done?: HostDone;
  /** Bounds the runtime enforces itself: `wasmMemoryMb` is the Wasm linear memory all memories of the isolate may reserve (none: no `WebAssembly`). */
  limits?: { wasmMemoryMb?: number };
}
