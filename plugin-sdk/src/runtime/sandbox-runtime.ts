/**
 * The host's half of the plugin protocol that runs INSIDE the isolate, before the plugin
 * script (bundled to a classic script from ./sandbox-entry.ts by ./runtime-script.ts). It captures builtins first (the
 * plugin runs in the same realm and may replace them), locks the global down, gives the
 * plugin its only host API (a logger), and talks to the host in JSON strings only.
 * Everything it returns is re-validated by the host: it is as untrusted as the plugin.
 */
import type { AuthService, Context, ExtAuthPlugin, PluginLogger, PluginStore } from '../contract/types.ts';
import { boundBuiltins } from './bounded-builtins.ts';
import { installWebGlobals } from './web/install-web-globals.ts';
import { createTimers } from './web/timers.ts';
import { createFetch } from './web/fetch.ts';
import { AbortSignal, useAbortTimer } from './web/abort.ts';
import { Request, requestParts, responseFrom } from './web/fetch-types.ts';
import { atob } from './web/encoding.ts';
import type { HostApi, HostLog } from './host-api.ts';
import { decodeConfig } from './decode-config.ts';
import { createWebAssembly, type WasmNamespace } from './web/wasm.ts';
import { callTraceOf, createCallTracking, withTraceHeaders, type CallTrace } from './call-trace.ts';

export type { HostLog };

/** What the host calls. Every method answers with a JSON-encoded {@link Outcome}. */
export interface RuntimeApi {
  init(symbol: string, globalName: string, configJson: string, secretsJson?: string): Promise<string>;
  start(): Promise<string>;
  /**
   * An outcome, or `{pending: id}` when the plugin answered with a promise; the outcome of a
   * pending call reaches the host through `HostApi.done(id, outcome)` when it settles.
   */
  authorize(requestJson: string, notify?: boolean): string;
  /**
   * The outcome of pending call `id` if its promise has settled (most do, within their own
   * call's microtasks), else `{pending: id}` again, and its outcome will come through `done`.
   */
  settle(id: number): string;
  /**
   * Several Authorize calls in one crossing: `requestsJson` is a JSON array of requests as
   * {@link authorize} takes them; the answer is a JSON array of their outcomes, in order (each
   * an outcome object or `{pending: id}`). Every call gets its own log budget, as if alone.
   */
  authorizeBatch(requestsJson: string): string;
  /** Several {@link settle}s in one crossing: `idsJson` is a JSON array of ids; the answer a JSON array of outcomes. */
  settleBatch(idsJson: string): string;
  /**
   * After a batch was stopped (CPU limit): how far it got, as JSON `{done, running, runningSince}`:
   * the outcomes of the calls that finished (`done`, in order), the index of the call that was
   * running when it was stopped, and when that one started (`Date.now()`: the host measures how
   * long it ran up to the instant the batch stopped, not up to this later call).
   */
  batchProgress(): string;
  /**
   * The results of verifies the host ran off the event loop (`crypto.subtle.verify` answered
   * `{job}`), as a JSON array `[jobId, valid (0|1), …]`: resolves the plugins' promises. Their
   * continuations run in this call's microtasks; calls they finish answer through `done`.
   */
  resolveJobs(resultsJson: string): string;
  /**
   * Answers of store operations that answered `{job}` (a store elsewhere), as a JSON array of
   * `[id, 1, value]` / `[id, 0, {name, message}]`: settles the plugins' promises; calls they
   * finish answer through `done`.
   */
  resolveStore(resultsJson: string): string;
  /**
   * Answers of host operations started by `HostApi.callJob`, as an array (a structured-clone
   * copy, not JSON: a fetch answer holds bytes) of `jobId, answer, …`: settles the plugins'
   * promises. Their continuations run in this call's microtasks, under the host's timeout.
   */
  resolveHost(results: unknown): string;
  /** Does nothing: when it returns, nothing queued before it is still running in the isolate. */
  ping(): string;
}

/** Stages name where a failure happened, so the host can pick the error code. */
export type Stage = 'export' | 'new-config' | 'config' | 'get-auth-service' | 'start' | 'authorize' | 'response';
/**
 * A failure carries `stack`: the frames of the plugin's own script (the runtime's are left out),
 * positions in the compiled file; the host maps them to the plugin's sources (source map).
 */
export type Outcome = { ok: true; response?: unknown } | { ok: false; stage: Stage; error: string; stack?: string; storeUnavailable?: boolean } | { pending: number };

/** What a `ctx.store` operation rejects with when its store cannot be reached in time (Redis down, say). */
export class StoreUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreUnavailableError';
  }
}

/** Frames kept in a failure's stack. */
const STACK_FRAMES = 12;

/** What the host's async operations answer: a copy of the value, an error to rethrow, or "the call is over". */
export type HostAnswer = { value: unknown } | { error: { name: string; message: string } } | { cancelled: true };

/** Log lines a plugin may write per host call; more are dropped (a loop must not flood the log). */
export const LOG_LINES_PER_CALL = 50;
const MAX_MESSAGE = 2048;
const MAX_FIELDS = 4096;

/** Sets up the sandbox and returns the API the host calls; the host's capabilities are the only way out. */
export function install(host: HostApi): RuntimeApi {
  const hostLog = host.log;
  const { parse, stringify } = JSON;
  const { freeze, defineProperty } = Object;
  const StringOf = String;
  const isArray = Array.isArray;

  // V8's WebAssembly allocates linear memory outside the heap that the isolate's memory limit
  // counts: it is replaced by a wrapper that budgets every memory (./web/wasm.ts), or left out
  // when the host grants no budget. SharedArrayBuffer enables Atomics.wait, which blocks the thread.
  const nativeWasm = (globalThis as { WebAssembly?: WasmNamespace }).WebAssembly;
  for (const name of ['WebAssembly', 'SharedArrayBuffer']) delete (globalThis as Record<string, unknown>)[name];
  const wasmMemoryMb = host.limits?.wasmMemoryMb;
  if (nativeWasm && typeof wasmMemoryMb === 'number' && wasmMemoryMb > 0) {
    defineProperty(globalThis, 'WebAssembly', { value: createWebAssembly(nativeWasm, wasmMemoryMb), writable: true, configurable: true });
  }
  // Builtins that termination cannot interrupt get bounded inputs (issue 17 findings 5, 12, 16).
  boundBuiltins();
  // Which call the running code belongs to, for the trace context of its fetches (./call-trace.ts).
  const tracking = createCallTracking();
  const promiseThenOf = Promise.prototype.then;
  const applyOf = Reflect.apply;
  /** Host operations started by `callJob`, waiting for `resolveHost`: job id → the plugin promise's resolve. */
  const hostJobs = new Map<number, (answer: unknown) => void>();
  const hostJobsGet = Map.prototype.get;
  const hostJobsSet = Map.prototype.set;
  const hostJobsDelete = Map.prototype.delete;
  const callJob = host.callJob;
  const PromiseCtor = Promise;
  const rawCall: HostApi['call'] = callJob
    ? (op, args) => {
        const job = callJob(op, args).job;
        return new PromiseCtor((resolve) => void applyOf(hostJobsSet, hostJobs, [job, resolve]));
      }
    : host.call;
  // Once a call has carried trace context, every host operation is tagged with the call it was
  // started under and its answer, when delivered, names that call (no cost before then).
  const hostCall = rawCall
    ? (op: string, args: unknown): Promise<unknown> => {
        if (!tracking.traced) return rawCall(op, args);
        const trace = tracking.capture();
        const sent = rawCall(op, op === 'fetch' && trace !== undefined ? withTraceHeaders(args as { headers?: unknown }, trace) : args);
        return promiseThenOf.call(
          sent,
          (answer: unknown) => {
            tracking.enter(trace);
            return answer;
          },
          (error: unknown) => {
            tracking.enter(trace);
            throw error;
          },
        ) as Promise<unknown>;
      }
    : undefined;
  // A verify the host runs off the event loop answers `{job}`: its call is tagged like an operation's.
  const jobTraces = new Map<number, CallTrace | undefined>();
  const rawCrypto = host.crypto;
  const hostCrypto = rawCrypto
    ? function (this: unknown): unknown {
        // `arguments` through Reflect.apply, not a spread: the plugin may have replaced the array iterator.
        const answer = applyOf(rawCrypto, undefined, arguments);
        if (tracking.traced && typeof answer === 'object' && answer !== null && typeof (answer as { job?: unknown }).job === 'number') jobTraces.set((answer as { job: number }).job, tracking.capture());
        return answer;
      }
    : undefined;
  // The Web platform subset that needs no host (SPEC 5.3): plain JavaScript in this realm.
  const { resolveJobs } = installWebGlobals({ ...host, call: hostCall, crypto: hostCrypto });
  if (hostCall) {
    const timers = createTimers(hostCall, (error) => emitUncaught('a timer callback', error));
    for (const [name, value] of Object.entries(timers)) defineProperty(globalThis, name, { value, writable: true, configurable: true });
    useAbortTimer((run, ms) => timers.setTimeout(run, ms), (error) => emitUncaught('an abort listener', error));
    defineProperty(globalThis, 'fetch', { value: createFetch(hostCall, { Request, requestParts, responseFrom }, AbortSignal), writable: true, configurable: true });
  }
  // `gc` appears in every isolate when the process runs with --expose-gc (the launcher's flag),
  // writable but not configurable: overwritten, so no plugin can force full collections.
  if ('gc' in globalThis) (globalThis as Record<string, unknown>).gc = undefined;

  let budget = LOG_LINES_PER_CALL;
  let emitUncaught: (where: string, error: unknown) => void = () => {};
  const ErrorType = Error;
  /** An Error as Node's console shows it: `Name: message` and the plugin's frames (not `{}`, which is what JSON makes of it). */
  const errorText = (error: Error): string => {
    const head = `${StringOf(error.name)}: ${StringOf(error.message)}`;
    const stack = typeof error.stack === 'string' ? error.stack.split('\n').filter((line) => line.startsWith('    at ') && !line.includes('gatehouse:sandbox-runtime')) : [];
    return stack.length ? `${head}\n${stack.slice(0, STACK_FRAMES).join('\n')}` : head;
  };
  /** Errors inside log fields: their name, message, stack, cause and own fields (a `code`), instead of `{}`. */
  const errorFields = (_key: string, value: unknown): unknown => {
    if (!(value instanceof ErrorType)) return value;
    const out: Record<string, unknown> = { name: value.name, message: value.message };
    const stack = errorText(value).split('\n').slice(1).join('\n');
    if (stack) out.stack = stack;
    if ('cause' in value) out.cause = value.cause;
    for (const key of Object.keys(value)) if (!(key in out)) out[key] = (value as unknown as Record<string, unknown>)[key];
    return out;
  };
  const text = (value: unknown, max: number): string => {
    let out: string;
    try {
      out = typeof value === 'string' ? value : value instanceof ErrorType ? errorText(value) : (stringify(value, errorFields) ?? StringOf(value));
    } catch {
      out = '[unprintable]';
    }
    return out.length > max ? `${out.slice(0, max)}…` : out;
  };
  const emit =
    (level: 'debug' | 'info' | 'warn' | 'error') =>
    (message: unknown, fields?: unknown): void => {
      if (budget <= 0) return;
      budget--;
      hostLog(level, text(message, MAX_MESSAGE), fields === undefined ? undefined : text(fields, MAX_FIELDS));
    };
  const logger: PluginLogger = freeze({ debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error') });
  const hostStore = host.store;
  /** Store operations answered later (`{job}`): settled by `resolveStore`. */
  const storeJobs = new Map<number, { resolve: (value: unknown) => void; reject: (error: unknown) => void; trace: CallTrace | undefined }>();
  const PromiseOf = Promise;
  const storeCall = (op: string, key: string, arg?: string | number, ttlMs?: number): Promise<unknown> => {
    let reply: { v: unknown } | { job: number };
    try {
      reply = ttlMs === undefined ? (arg === undefined ? hostStore!(op, key) : hostStore!(op, key, arg)) : hostStore!(op, key, arg, ttlMs);
    } catch (error) {
      return PromiseOf.reject(error);
    }
    if ('v' in reply) return PromiseOf.resolve(reply.v);
    const job = reply.job;
    const trace = tracking.capture();
    return new PromiseOf((resolve, reject) => void storeJobs.set(job, { resolve, reject, trace }));
  };
  const ttlOf = (options: { ttlMs?: number } | undefined): number | undefined => {
    const ttl = options?.ttlMs;
    return ttl === undefined || ttl === null ? undefined : ttl;
  };
  const jsonOf = (op: string, value: unknown): string => {
    const json = stringify(value);
    if (json === undefined) throw new TypeError(`ctx.store.${op}: the value must be JSON-serialisable (not undefined or a function)`);
    return json;
  };
  // Every method answers a promise: the store may be another process or Redis (SPEC 5.3). A store
  // in this process answers within the same call, so the plugin's await costs no extra crossing.
  const store: PluginStore | undefined = hostStore
    ? freeze({
        get(key: string): Promise<unknown> {
          return storeCall('get', key).then((json) => (typeof json === 'string' ? parse(json) : undefined));
        },
        async set(key: string, value: unknown, options?: { ttlMs?: number }): Promise<void> {
          await storeCall('set', key, jsonOf('set', value), ttlOf(options));
        },
        async delete(key: string): Promise<boolean> {
          return (await storeCall('delete', key)) === true;
        },
        async increment(key: string, by = 1, options?: { ttlMs?: number }): Promise<number> {
          return (await storeCall('increment', key, by, ttlOf(options))) as number;
        },
        async setIfAbsent(key: string, value: unknown, options?: { ttlMs?: number }): Promise<boolean> {
          return (await storeCall('setIfAbsent', key, jsonOf('setIfAbsent', value), ttlOf(options))) === true;
        },
      })
    : undefined;
  /** Settles store jobs: `[id, 1, value]` or `[id, 0, {name, message}]`, as a JSON array of those. */
  const resolveStore = (results: unknown): void => {
    if (!isArray(results)) return;
    if (tracking.traced) {
      // The continuations these answers wake belong to their calls, when it is one call.
      const traces: (CallTrace | undefined)[] = [];
      for (let i = 0; i < results.length; i++) {
        const result = results[i] as unknown;
        if (isArray(result) && typeof result[0] === 'number' && storeJobs.has(result[0])) traces[traces.length] = storeJobs.get(result[0])!.trace;
      }
      tracking.enter(sameTrace(traces));
    }
    for (const result of results) {
      if (!isArray(result)) continue;
      const [id, ok, payload] = result as [unknown, unknown, unknown];
      const job = typeof id === 'number' ? storeJobs.get(id) : undefined;
      if (!job) continue;
      storeJobs.delete(id as number);
      if (ok === 1) job.resolve(payload);
      else {
        const { name, message } = (payload ?? {}) as { name?: unknown; message?: unknown };
        const error = name === 'TypeError' ? new TypeError(StringOf(message)) : name === 'RangeError' ? new RangeError(StringOf(message)) : new StoreUnavailableError(StringOf(message));
        job.reject(error);
      }
    }
  };
  // What a timer callback threw: Node would crash, Workers log it; the sandbox logs it.
  emitUncaught = (where, error) => {
    const stack = stackOf(error);
    emit('error')(`uncaught exception in ${where}: ${messageOf(error)}`, stack === undefined ? undefined : { stack });
  };
  // Rebuilt by init() once the step's secrets are known.
  let ctx: Context = freeze({ logger, secrets: freeze({}), ...(store ? { store } : {}) }) as Context;

  // console.* goes to the same logger, so copied snippets and debugging lines are not lost.
  const line = (level: 'debug' | 'info' | 'warn' | 'error') => (...args: unknown[]) => emit(level)(args.map((a) => text(a, MAX_MESSAGE)).join(' '));
  defineProperty(globalThis, 'console', {
    value: freeze({ log: line('info'), info: line('info'), debug: line('debug'), trace: line('debug'), warn: line('warn'), error: line('error') }),
    writable: true,
    configurable: true,
  });

  const messageOf = (error: unknown): string => {
    try {
      if (error instanceof Error) return `${error.name}: ${error.message}`;
      return `non-Error thrown: ${text(error, 512)}`;
    } catch {
      return 'an unprintable value was thrown';
    }
  };
  /** The plugin's frames of an error's stack (not the runtime's), or undefined. */
  const stackOf = (error: unknown): string | undefined => {
    try {
      const stack = error instanceof Error ? error.stack : undefined;
      if (typeof stack !== 'string') return undefined;
      const frames = stack
        .split('\n')
        .filter((line) => line.startsWith('    at ') && !line.includes('gatehouse:sandbox-runtime'))
        .slice(0, STACK_FRAMES);
      return frames.length ? frames.join('\n').slice(0, 4096) : undefined;
    } catch {
      return undefined;
    }
  };
  /**
   * A line-by-line port of a Go plugin returns `{}` from NewConfigInstance (Go's `&Config{}`), or
   * `{}` for a list field: an empty object decodes as a map, so a list the config leaves out is
   * `{}` or undefined and iterating it fails far from the cause. The failure gets the fix.
   */
  let emptyConfigFields: string[] = [];
  let emptyConfig = false;
  const hinted = (message: string): string => {
    if (!message.includes('is not iterable') || (!emptyConfig && emptyConfigFields.length === 0)) return message;
    if (emptyConfig) {
      return `${message} (hint: NewConfigInstance returned {}, and an empty object decodes as a map: fields the config leaves out stay undefined. Return every field with its zero value, lists as arrays, e.g. { RequiredHeader: '', AllowedValues: [] })`;
    }
    const named = emptyConfigFields.filter((path) => message.includes(path.slice(path.lastIndexOf('.') + 1)));
    const fields = named.length ? named : emptyConfigFields;
    return `${message} (hint: NewConfigInstance returned {} for ${fields.join(', ')}, and an empty object decodes as a map, not a list: initialise list fields as arrays, e.g. ${fields[0]!.slice(fields[0]!.indexOf('.') + 1)}: [])`;
  };
  const failed = (stage: Stage, error: unknown): string => {
    const stack = stackOf(error);
    // The operator's fail mode (`store.redis.failOpen`) decides a call that failed on an unreachable store.
    const unavailable = error instanceof StoreUnavailableError ? { storeUnavailable: true } : {};
    return stringify({ ok: false, stage, error: hinted(messageOf(error)), ...(stack === undefined ? {} : { stack }), ...unavailable });
  };
  /** Paths (`config.X`) of the fields that hold an empty object in the config defaults. */
  const emptyObjects = (value: unknown, path: string, out: string[], depth: number): string[] => {
    if (depth > 8 || typeof value !== 'object' || value === null || isArray(value)) return out;
    for (const key of Object.keys(value)) {
      const field = (value as Record<string, unknown>)[key];
      if (typeof field === 'object' && field !== null && !isArray(field) && Object.keys(field).length === 0) out.push(`${path}.${key}`);
      else emptyObjects(field, `${path}.${key}`, out, depth + 1);
    }
    return out;
  };
  const fails = (stage: Stage, error: string): string => stringify({ ok: false, stage, error });

  const base64Bytes = (text: string): Uint8Array => {
    const binary = atob(text);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  };
  const resolve = Promise.resolve.bind(Promise) as <T>(value: T) => Promise<Awaited<T>>;
  const promiseThen = Promise.prototype.then;
  // Reading `then` may run a hostile getter: callers catch.
  const isThenable = (value: unknown): value is PromiseLike<unknown> =>
    (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';
  const answer = (response: unknown): string => {
    if (typeof response !== 'object' || response === null || isArray(response)) {
      return fails('response', `Authorize returned ${response === null ? 'null' : isArray(response) ? 'an array' : typeof response}, not an AuthorizationResponse`);
    }
    try {
      return stringify({ ok: true, response });
    } catch (error) {
      return fails('response', `the response is not JSON (${messageOf(error)})`);
    }
  };

  /** The one call all of `traces` name, or undefined (none, or several: ambiguous). */
  const sameTrace = (traces: (CallTrace | undefined)[]): CallTrace | undefined => {
    const first = traces[0];
    for (let i = 1; i < traces.length; i++) if (traces[i] !== first) return undefined;
    return first;
  };

  let service: AuthService | undefined;
  let lastPending = 0;
  /** Outcomes of pending calls that settled before the host asked (settle() takes them). */
  const settled = new Map<number, string>();
  /** Pending calls the host waits for: their outcome goes through host.done. */
  const notify = new Set<number>();

  /** Calls Authorize: the answer (a JSON outcome) now, or later (the plugin's promise, settled to one). */
  const call = (requestJson: string): { now: string } | { later: Promise<string>; trace: CallTrace | undefined } => {
    let request: unknown;
    try {
      request = parse(requestJson);
    } catch (error) {
      return { now: failed('authorize', error) };
    }
    return callWith(request);
  };
  const callWith = (request: unknown): { now: string } | { later: Promise<string>; trace: CallTrace | undefined } => {
    budget = LOG_LINES_PER_CALL;
    if (!service) return { now: fails('authorize', 'not initialized') };
    let trace: CallTrace | undefined;
    let begun = false;
    try {
      // The host sends {CheckRequest, State, Trace?}; State is the previous step's (or {}),
      // Trace the context the call's fetches carry (the auth step's span), when it is traced.
      const { CheckRequest, State, Trace } = request as { CheckRequest: unknown; State?: unknown; Trace?: unknown };
      trace = Trace === undefined ? undefined : callTraceOf(Trace);
      // proto3 JSON carries bytes as base64; the plugin gets raw_body as bytes (SPEC 5.3).
      const http = (CheckRequest as { attributes?: { request?: { http?: { raw_body?: unknown } } } } | null)?.attributes?.request?.http;
      if (http && typeof http.raw_body === 'string') http.raw_body = base64Bytes(http.raw_body);
      const state = typeof State === 'object' && State !== null && !isArray(State) ? (State as Record<string, unknown>) : {};
      tracking.begin(trace);
      begun = true;
      const result = service.Authorize(ctx, { CheckRequest: CheckRequest as never, State: state });
      if (!isThenable(result)) {
        tracking.end(trace);
        tracking.afterSync(undefined);
        return { now: answer(result) };
      }
      const later = promiseThen.call(resolve(result), answer, (error: unknown) => failed('authorize', error)) as Promise<string>;
      tracking.afterSync(trace);
      return { later, trace };
    } catch (error) {
      if (begun) {
        tracking.end(trace);
        tracking.afterSync(undefined);
      }
      return { now: failed('authorize', error) };
    }
  };

  /** An outcome for the host now: the answer, or `{pending: id}` (answered by settle or done). */
  const outcomeOf = (result: { now: string } | { later: Promise<string>; trace: CallTrace | undefined }, notifyPending: boolean): string => {
    if ('now' in result) return result.now;
    const id = ++lastPending;
    // The host on the isolate's thread cannot ask with settle() (its call could queue behind
    // a continuation): it asks here to be told through done.
    if (notifyPending) notify.add(id);
    const done = host.done;
    // `later` never rejects: the handlers in call() turn everything into an outcome. It is
    // kept for settle(); only an outcome the host is already waiting for goes through done.
    const trace = result.trace;
    void promiseThen.call(result.later, (value: unknown) => {
      tracking.end(trace);
      if (notify.delete(id)) done?.(id, value as string);
      else settled.set(id, value as string);
    });
    return stringify({ pending: id });
  };
  const settleOne = (id: number): string => {
    const value = settled.get(id);
    if (value !== undefined) {
      settled.delete(id);
      return value;
    }
    // Bounded: calls the host gave up on (deadline) and that never settle leave an id here.
    if (notify.size >= 4096) notify.delete(notify.values().next().value!);
    notify.add(id);
    return stringify({ pending: id });
  };
  // The batch in progress: read by batchProgress() after the CPU limit stopped it.
  let batchDone: string[] = [];
  let batchStartedAt = 0;
  const now = Date.now;

  return freeze({
    async init(symbol: string, globalName: string, configJson: string, secretsJson?: string): Promise<string> {
      budget = LOG_LINES_PER_CALL;
      const secrets = secretsJson ? (parse(secretsJson) as Record<string, string>) : {};
      ctx = freeze({ logger, secrets: freeze(secrets), ...(store ? { store } : {}) }) as Context;
      const exported = (globalThis as Record<string, unknown>)[globalName] as Record<string, unknown> | undefined;
      if (typeof exported !== 'object' || exported === null) return fails('export', 'the script defined no plugin exports; build it with gatehouse-plugin build');
      const plugin = exported[symbol] as ExtAuthPlugin | undefined;
      if ((typeof plugin !== 'object' && typeof plugin !== 'function') || plugin === null) {
        return fails('export', `"${symbol}" is ${plugin === null ? 'null' : typeof plugin}, not an ExtAuthPlugin object`);
      }
      if (typeof plugin.NewConfigInstance !== 'function' || typeof plugin.GetAuthService !== 'function') {
        return fails('export', `"${symbol}" has no NewConfigInstance and GetAuthService methods; export an ExtAuthPlugin`);
      }
      let config: unknown;
      try {
        config = await plugin.NewConfigInstance(ctx);
      } catch (error) {
        return failed('new-config', error);
      }
      try {
        emptyConfig = typeof config === 'object' && config !== null && !isArray(config) && Object.keys(config).length === 0;
        emptyConfigFields = emptyObjects(config, 'config', [], 0);
      } catch {
        // A hostile getter: no hint.
      }
      try {
        config = decodeConfig(config, parse(configJson));
      } catch (error) {
        return fails('config', error instanceof Error ? error.message : messageOf(error));
      }
      let built: AuthService;
      try {
        built = await plugin.GetAuthService(ctx, config);
      } catch (error) {
        return failed('get-auth-service', error);
      }
      if ((typeof built !== 'object' && typeof built !== 'function') || built === null || typeof built.Start !== 'function' || typeof built.Authorize !== 'function') {
        return fails('get-auth-service', 'GetAuthService returned no AuthService (an object with Start and Authorize methods)');
      }
      service = built;
      return stringify({ ok: true });
    },

    async start(): Promise<string> {
      budget = LOG_LINES_PER_CALL;
      if (!service) return fails('start', 'not initialized');
      try {
        await service.Start(ctx);
      } catch (error) {
        return failed('start', error);
      }
      return stringify({ ok: true });
    },

    // Never returns a promise: the host may call it synchronously (inline). A plugin's promise
    // is answered later through host.done, when it settles (after fetch, timers…).
    authorize(requestJson: string, notifyPending?: boolean): string {
      return outcomeOf(call(requestJson), notifyPending === true);
    },

    settle(id: number): string {
      return settleOne(id);
    },

    authorizeBatch(requestsJson: string): string {
      const done: string[] = (batchDone = []);
      let requests: unknown;
      try {
        requests = parse(requestsJson);
      } catch {
        requests = undefined;
      }
      if (!isArray(requests)) return stringify({ ok: false, stage: 'authorize', error: 'a batch is a JSON array' });
      for (let i = 0; i < requests.length; i++) {
        batchStartedAt = now();
        done.push(outcomeOf(callWith(requests[i]), false));
      }
      // Outcomes are JSON texts already: joined, not parsed and stringified again.
      return `[${done.join(',')}]`;
    },

    settleBatch(idsJson: string): string {
      const ids = parse(idsJson) as unknown;
      if (!isArray(ids)) return '[]';
      const out: string[] = [];
      for (const id of ids) out.push(typeof id === 'number' ? settleOne(id) : fails('authorize', 'not a call id'));
      return `[${out.join(',')}]`;
    },

    batchProgress(): string {
      return stringify({ done: batchDone.map((outcome) => parse(outcome) as unknown), running: batchDone.length, runningSince: batchStartedAt });
    },

    resolveJobs(resultsJson: string): string {
      let results: unknown;
      try {
        results = parse(resultsJson);
      } catch {
        return 'bad';
      }
      if (!isArray(results)) return 'bad';
      if (tracking.traced) {
        const traces: (CallTrace | undefined)[] = [];
        for (let i = 0; i < results.length; i += 2) {
          if (!jobTraces.has(results[i] as number)) continue;
          traces[traces.length] = jobTraces.get(results[i] as number);
          jobTraces.delete(results[i] as number);
        }
        tracking.enter(sameTrace(traces));
      }
      resolveJobs(results as number[]);
      return 'ok';
    },

    resolveHost(results: unknown): string {
      if (!isArray(results)) return 'bad';
      for (let i = 0; i + 1 < results.length; i += 2) {
        const resolve = applyOf(hostJobsGet, hostJobs, [results[i]]) as ((answer: unknown) => void) | undefined;
        if (!resolve) continue;
        applyOf(hostJobsDelete, hostJobs, [results[i]]);
        resolve(results[i + 1]);
      }
      return 'ok';
    },

    resolveStore(resultsJson: string): string {
      let results: unknown;
      try {
        results = parse(resultsJson);
      } catch {
        return 'bad';
      }
      resolveStore(results);
      return 'ok';
    },

    ping(): string {
      return 'pong';
    },
  });
}
