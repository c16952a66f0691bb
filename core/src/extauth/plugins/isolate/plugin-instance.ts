import { isMainThread } from 'node:worker_threads';
import ivm from 'isolated-vm';
import { PLUGIN_GLOBAL, withLocation } from '@gatehouse/plugin-sdk/build';
import { RUNTIME_INSTALL_GLOBAL, sandboxRuntimeScript } from '@gatehouse/plugin-sdk/runtime';
import { createHostCrypto, HostCalls, hostRandom, SANDBOX_DEFAULTS, hostUrl, type HostLog, type Outcome } from '@gatehouse/plugin-sdk/runtime';
import { BadResponseError, toDecision, type PluginDecision } from '@gatehouse/plugin-sdk/runtime';
import { GatehouseError } from '../../../errors.ts';
import { createRedactor } from '../../redact.ts';
import { killAfterCatastrophe } from '../../../server/process-guards.ts';
import { isolateFailure } from './isolate-errors.ts';
import { PluginCodes, type PluginCode } from '../codes.ts';
import type { StepStore } from '../store/step-store.ts';
import type { StoreResult } from '@gatehouse/plugin-sdk/runtime';
import type { PluginFile } from '../plugin-file.ts';
import { PluginCallError, type BatchResult, RETRY } from './plugin-call-error.ts';
import { outcomeOfValue, parseOutcome } from './outcome.ts';
import { IsolateInbox } from './isolate-inbox.ts';
import type { PluginGrants, PluginHostLogger, SandboxLimits } from './sandbox-limits.ts';

/** Masks secret values, in every encoding ../redact.ts lists, in a plugin's log text (and bounds it). */
function redactor(secrets: Readonly<Record<string, string>> | undefined): (text: string) => string {
  return createRedactor(Object.values(secrets ?? {}));
}

/** How long the busy check after a missed deadline watches the isolate's CPU time. */
const PROBE_MS = 50;

/** Answers from the plugin above this size are garbage, not responses. */
const MAX_RESPONSE_CHARS = 1024 * 1024;
/**
 * A call the wall-clock limit stopped is the plugin's fault only if the isolate had used at least
 * this share of the CPU limit by then; below it the call was descheduled (docs/plugins.md "Limits").
 */
const DESCHEDULED_SHARE = 0.25;
const LEVELS = new Set(['debug', 'info', 'warn', 'error']);

/** References to the runtime's entry points inside the isolate. */
interface RuntimeRefs {
  authorize: ivm.Reference<(json: string, notify?: boolean) => string>;
  settle: ivm.Reference<(id: number) => string>;
  authorizeBatch: ivm.Reference<(json: string) => string>;
  settleBatch: ivm.Reference<(json: string) => string>;
  batchProgress: ivm.Reference<() => string>;
  resolveJobs: ivm.Reference<(json: string) => string>;
  resolveStore: ivm.Reference<(json: string) => string>;
  resolveHost: ivm.Reference<(results: unknown[]) => string>;
  ping: ivm.Reference<() => string>;
}

/** Verifies one isolate may have running off the event loop; more run synchronously. */
const MAX_JOBS = 256;
/** Store operations one isolate may have waiting for a store elsewhere (Redis, the primary); more fail at once. */
const MAX_STORE_JOBS = 1024;
/**
 * Verifies go to the thread pool only from the main thread, to keep them off the event loop
 * that serves traffic. On the plugin thread (../thread/plugin-thread.ts) a synchronous verify is
 * cheaper: measured with cpu-probe, RS256 0.36× → 0.43× and ES256 0.30× → 0.36× of the open
 * route, as the hand-off's extra wake-ups cost more than the verify itself.
 */
const OFF_LOOP_VERIFIES = isMainThread;


/** A pending Authorize call the host waits for (its answer comes through `done`). */
interface Waiter {
  resolve(json: string): void;
  reject(error: PluginCallError): void;
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * One plugin loaded in its own isolate: the runtime script, then the plugin script, then
 * NewConfigInstance + config decoding + GetAuthService + Start. Only strings cross the
 * boundary (JSON in, JSON out); everything coming out is validated here.
 */
export class PluginInstance {
  private readonly isolate: ivm.Isolate;
  /** Set once the runtime is installed (the instance exists earlier, for `done`). */
  private api: RuntimeRefs | undefined;
  /** The runtime's entry points from the moment it is installed (`api` is set once the plugin has started). */
  private entries: RuntimeRefs | undefined;
  /** While NewConfigInstance, GetAuthService and Start run: their deadline (answers handed in meanwhile get what is left of it). */
  private startingUntil: number | undefined;
  private readonly limits: SandboxLimits;
  private readonly calls: HostCalls;
  private readonly logger: PluginHostLogger;
  private readonly where: { plugin: string; file: string };
  private deadReason: string | undefined;
  private readonly waiters = new Map<number, Waiter>();
  /** Answers that arrived before their call registered a waiter (ids above {@link registered}). */
  private readonly early = new Map<number, string>();
  private registered = 0;
  /**
   * CPU time of this thread during the synchronous part of the last inline call, in ms (not
   * isolated-vm's `cpuTime`, which counts wall time while the isolate runs: a descheduled call
   * would look slow and move the step off the loop).
   */
  lastInlineMs = 0;
  /** Inline calls made on this isolate (the first ones pay for lazy compilation). */
  inlineCalls = 0;
  /** Calls on the isolate's thread still waiting for an answer. */
  queued = 0;
  /** The process's CPU time when the isolate's thread last finished a call ({@link callAsync}). */
  private asyncFinishedCpu: NodeJS.CpuUsage | undefined;
  /** Verifies running off the event loop (crypto.subtle.verify answered `{job}`): results `id, 1|0`. */
  private jobSeq = 0;
  private readonly jobs = new IsolateInbox((results) => this.cross('resolveJobs', JSON.stringify(results), 'a crypto.subtle.verify'));
  /** Store operations answered later (`{job}`): results `[id, ok, value]`. */
  private storeSeq = 0;
  private readonly storeOps = new IsolateInbox((results) => this.cross('resolveStore', JSON.stringify(results), 'a ctx.store operation'));
  /** Fetches, timers and crypto.subtle operations (the runtime's `callJob`): results `id, answer`. */
  private hostSeq = 0;
  private readonly hostOps = new IsolateInbox((results) => this.cross('resolveHost', results, 'a fetch, a timer or a crypto.subtle operation'));

  private constructor(isolate: ivm.Isolate, limits: SandboxLimits, calls: HostCalls, logger: PluginHostLogger, where: { plugin: string; file: string }, mapStack: (text: string) => string) {
    this.isolate = isolate;
    this.logger = logger;
    this.where = where;
    this.limits = limits;
    this.calls = calls;
    this.mapStack = mapStack;
  }

  /** Positions in the plugin's script → its sources. */
  private readonly mapStack: (text: string) => string;

  /**
   * Nothing of the plugin's can be running in the isolate: calls may run inline, and answers
   * may be handed in synchronously. A timer or fetch gives the isolate a task of its own (the
   * continuation) that may run for any time, and a synchronous call would block this thread
   * until it ends; so after one, the instance is idle again only once a ping through the
   * isolate's queue has come back with no call waiting and nothing out. A call or an answer
   * sent to the isolate's thread counts until it has returned: while its code waits there for
   * a synchronous host callback (ctx.store, crypto), isolated-vm unlocks the isolate, and a
   * synchronous call would run in the middle of it (a store answer handed in before the
   * operation that it answers was registered was lost, and the call hung to its wall deadline).
   */
  get idle(): boolean {
    // Waiting calls alone do not count: a promise settles either in its own call's microtasks
    // or after a timer or fetch, and those clear `quiet` when they start.
    return this.quiet && this.calls.outstanding === 0 && this.queued === 0 && this.crossings === 0;
  }

  /** Answers (store results, finished verifies) sent to the isolate's thread that have not returned. */
  private crossings = 0;

  private get refs(): RuntimeRefs {
    if (!this.api) throw new PluginCallError(PluginCodes.UNAVAILABLE, 'the plugin has not started');
    return this.api;
  }

  private quiet = true;
  private pinging = false;
  private started = 0;

  /** After host work ends: pings the isolate, and marks it quiet when the ping comes back in a still world. */
  private quiesce(): void {
    if (this.quiet || this.pinging || !this.alive || this.api === undefined || this.calls.outstanding > 0) return;
    this.pinging = true;
    const seen = this.started;
    this.api.ping.apply(undefined, [], { timeout: this.limits.cpuTimeoutMs }).then(
      () => {
        this.pinging = false;
        if (seen === this.started && this.calls.outstanding === 0) this.quiet = true;
        else this.quiesce();
      },
      () => {
        this.pinging = false;
      },
    );
  }

  private get wallTimeoutMs(): number {
    return this.limits.wallTimeoutMs ?? SANDBOX_DEFAULTS.wallTimeoutMs;
  }

  /** The runtime's `done(id, outcome)`: a pending call's answer. */
  private answered(id: unknown, json: unknown): void {
    if (typeof id !== 'number' || typeof json !== 'string') return;
    const waiter = this.waiters.get(id);
    if (waiter) {
      this.waiters.delete(id);
      waiter.resolve(json);
    } else if (id > this.registered && this.early.size < 1024) {
      this.early.set(id, json);
    }
  }

  /** Whether calls can still go to this isolate. */
  get alive(): boolean {
    return this.deadReason === undefined && !this.isolate.isDisposed;
  }

  /** Builds and starts an instance; throws a GatehouseError with a GH_PLUGIN_* code naming the stage. */
  static async create(file: PluginFile, config: unknown, limits: SandboxLimits, logger: PluginHostLogger, grants: PluginGrants = {}): Promise<PluginInstance> {
    const where = { plugin: file.metadata.name, file: file.path };
    const runtime = await sandboxRuntimeScript();
    let catastrophe: string | undefined;
    const isolate = new ivm.Isolate({
      memoryLimit: limits.memoryLimitMb,
      // V8 has lost control of the isolate: its thread is parked for good and a later exit()
      // would hang. The process is killed to be restarted (issue 17 finding 5's backstop).
      onCatastrophicError: (message) => {
        catastrophe = message;
        killAfterCatastrophe({ ...where, cause: message });
      },
    });
    const calls = new HostCalls(grants.egress, { deadlineMs: limits.wallTimeoutMs ?? SANDBOX_DEFAULTS.wallTimeoutMs, maxFetches: limits.maxFetches ?? SANDBOX_DEFAULTS.maxFetches, maxTimers: limits.maxTimers ?? SANDBOX_DEFAULTS.maxTimers });
    // The instance exists before the runtime so that `done` can reach it.
    const instance = new PluginInstance(isolate, limits, calls, logger, where, file.mapStack);
    calls.onStart = () => {
      instance.quiet = false;
      instance.started++;
    };
    calls.onSettle = () => instance.quiesce();
    const deadline = performance.now() + limits.startTimeoutMs;
    const remaining = (): number => Math.max(1, Math.floor(deadline - performance.now()));
    const fail = (code: PluginCode, message: string, cause?: unknown): never => {
      calls.cancelAll(true);
      if (!isolate.isDisposed) isolate.dispose();
      throw new GatehouseError(code, `pluginAuth ${file.metadata.name} (${file.path}): ${message}`, { cause });
    };
    const timedOut = (stage: string): never =>
      fail(PluginCodes.START_TIMEOUT, `${stage} did not finish within the start timeout of ${limits.startTimeoutMs} ms`);

    // Wall-clock guard for a whole stage: a promise that never settles is not caught by `timeout`.
    const guard = async <T>(stage: string, run: () => Promise<T>): Promise<T> => {
      let timer: NodeJS.Timeout | undefined;
      const expired = new Promise<'expired'>((resolve) => {
        timer = setTimeout(() => resolve('expired'), remaining());
      });
      let result: T | 'expired';
      try {
        result = await Promise.race([run(), expired]);
      } catch (error) {
        const message = describeError(error);
        const failure = isolateFailure(message);
        if (catastrophe || failure === 'memory') {
          return fail(PluginCodes.OUT_OF_MEMORY, `${stage} ran out of the ${limits.memoryLimitMb} MB memory limit`, error);
        }
        if (failure === 'cpu') return timedOut(stage);
        return fail(PluginCodes.INIT_FAILED, `${stage} threw: ${message}`, error);
      } finally {
        clearTimeout(timer);
      }
      return result === 'expired' ? timedOut(stage) : result;
    };

    const redact = redactor(grants.secrets);
    const hostLog: HostLog = (level, rawMessage, rawFields) => {
      if (!LEVELS.has(level) || typeof rawMessage !== 'string') return;
      // A plugin that logs a secret (by mistake or on purpose) does not get it into the log.
      const message = file.mapStack(redact(rawMessage));
      const fields = typeof rawFields === 'string' ? file.mapStack(redact(rawFields)) : rawFields;
      let parsed: unknown = fields;
      if (typeof fields === 'string') {
        try {
          parsed = JSON.parse(fields);
        } catch {
          // Truncated by the runtime: keep the text.
        }
      }
      // `source: plugin` tells lines the plugin wrote from the host's own.
      logger[level]({ ...where, source: 'plugin', ...(parsed === undefined ? {} : { fields: parsed }) }, message);
    };

    const hostCrypto = createHostCrypto({ defer: (work) => instance.defer(work) });
    calls.subtle = hostCrypto.subtle;
    const context = await guard('creating the isolate', () => isolate.createContext());
    await guard('the sandbox runtime', async () => {
      const script = await isolate.compileScript(runtime, { filename: 'gatehouse:sandbox-runtime.js' });
      await script.run(context, { timeout: remaining() });
    });
    const api = await guard('the sandbox runtime', () =>
      context.evalClosure(
        `const install = globalThis.${RUNTIME_INSTALL_GLOBAL}; delete globalThis.${RUNTIME_INSTALL_GLOBAL};
         return install({ log: $0, random: $1, crypto: $2, url: $3, callJob: $4, done: $5, store: $6, limits: { wasmMemoryMb: ${Number(limits.memoryLimitMb)} } });`,
        [
          new ivm.Callback(hostLog, { ignored: true }),
          new ivm.Callback(hostRandom),
          new ivm.Callback(hostCrypto),
          new ivm.Callback(hostUrl),
          new ivm.Callback((op: unknown, args: unknown) => instance.hostJob(op, args)),
          new ivm.Callback((id: unknown, json: unknown) => instance.answered(id, json), { ignored: true }),
          grants.store ? new ivm.Callback((op: unknown, key: unknown, arg: unknown, ttl: unknown) => instance.storeCall(grants.store!, op, key, arg, ttl)) : undefined,
        ],
        { result: { reference: true }, timeout: remaining() },
      ),
    );
    await guard('loading the plugin script', async () => {
      const script = await isolate.compileScript(file.body, { filename: `file://${file.path}` });
      await script.run(context, { timeout: remaining() });
    });

    const call = async (name: 'init' | 'start', args: string[], stage: string): Promise<Exclude<Outcome, { pending: number }>> => {
      const json = await guard(stage, async () => {
        const fn = await api.get(name, { reference: true });
        return fn.apply(undefined, args, { timeout: remaining(), result: { promise: true } });
      });
      const outcome = parseOutcome(json);
      return outcome && !('pending' in outcome) ? outcome : fail(PluginCodes.INIT_FAILED, `${stage} returned an unreadable answer`);
    };

    const refs = await guard('the sandbox runtime', async () => ({
      authorize: (await api.get('authorize', { reference: true })) as RuntimeRefs['authorize'],
      settle: (await api.get('settle', { reference: true })) as RuntimeRefs['settle'],
      authorizeBatch: (await api.get('authorizeBatch', { reference: true })) as RuntimeRefs['authorizeBatch'],
      settleBatch: (await api.get('settleBatch', { reference: true })) as RuntimeRefs['settleBatch'],
      batchProgress: (await api.get('batchProgress', { reference: true })) as RuntimeRefs['batchProgress'],
      resolveJobs: (await api.get('resolveJobs', { reference: true })) as RuntimeRefs['resolveJobs'],
      resolveStore: (await api.get('resolveStore', { reference: true })) as RuntimeRefs['resolveStore'],
      resolveHost: (await api.get('resolveHost', { reference: true })) as RuntimeRefs['resolveHost'],
      ping: (await api.get('ping', { reference: true })) as RuntimeRefs['ping'],
    }));
    instance.entries = refs;
    instance.startingUntil = deadline;
    // NewConfigInstance, GetAuthService and Start may fetch and use timers (load a JWKS).
    calls.begin();
    const init = await call('init', [file.symbol, PLUGIN_GLOBAL, JSON.stringify(config ?? null), JSON.stringify(grants.secrets ?? {})], 'NewConfigInstance/GetAuthService');
    if (!init.ok) {
      const code = init.stage === 'export' ? PluginCodes.BAD_EXPORT : init.stage === 'config' ? PluginCodes.BAD_CONFIG : PluginCodes.INIT_FAILED;
      const what = init.stage === 'config' ? 'config does not fit the plugin' : init.stage === 'export' ? `export "${file.symbol}"` : `${init.stage === 'new-config' ? 'NewConfigInstance' : 'GetAuthService'} failed`;
      fail(code, withStack(`${what}: ${init.error}`, init.stack, file));
    }
    const start = await call('start', [], 'Start');
    calls.end();
    if (!start.ok) fail(PluginCodes.START_FAILED, withStack(`Start failed: ${start.error}`, start.stack, file));

    instance.startingUntil = undefined;
    api.release();
    instance.api = refs;
    // Start may have fetched or set timers: inline calls wait for a quiet isolate.
    instance.quiesce();
    return instance;
  }

  /**
   * Runs Authorize on the isolate's own thread (asynchronous calls): the event loop never
   * waits for the plugin. Rejects with a {@link PluginCallError} on any failure, or when the
   * answer misses the wall deadline.
   */
  async authorize(requestJson: string): Promise<PluginDecision> {
    this.assertAlive();
    const deadline = performance.now() + this.wallTimeoutMs;
    this.calls.begin();
    try {
      // `queued` counts calls waiting for the isolate's thread, not those waiting for a fetch.
      this.queued++;
      let json: unknown;
      try {
        json = await this.callAsync(this.refs.authorize, [requestJson, true]);
      } finally {
        this.queued--;
      }
      // A pending answer comes through done: a second call here could wait in the isolate's
      // queue behind a continuation that never ends, past the wall deadline.
      const outcome = this.outcomeOf(json);
      return this.decisionOf('pending' in outcome ? await this.wait(outcome.pending, deadline) : outcome);
    } finally {
      this.calls.end();
    }
  }

  /**
   * Runs Authorize synchronously on this thread (several times cheaper than a call to the
   * isolate's thread) and records the CPU time that took in {@link lastInlineMs}. A plugin
   * that answers with a promise (it awaits fetch or a timer) is waited for, up to the wall
   * deadline. Only for an {@link idle} instance: otherwise a continuation may hold the
   * isolate and this thread would wait for it. Throws a {@link PluginCallError} on any failure.
   */
  authorizeInline(requestJson: string): PluginDecision | Promise<PluginDecision> {
    this.assertAlive();
    const deadline = performance.now() + this.wallTimeoutMs;
    // CPU time, not wall time: the plugin's share of the blocking, not the scheduler's.
    const started = process.threadCpuUsage();
    this.inlineCalls++;
    this.calls.begin();
    let outcome: Outcome;
    try {
      outcome = this.outcomeOf(this.callSync(this.refs.authorize, [requestJson]));
      // Most promises settle within their own call (an async plugin awaiting crypto.subtle):
      // one more synchronous call fetches the outcome, cheaper than waiting for `done`.
      if ('pending' in outcome) outcome = this.outcomeOf(this.callSync(this.refs.settle, [outcome.pending]));
    } catch (error) {
      this.calls.end();
      throw error;
    } finally {
      this.lastInlineMs = this.isolate.isDisposed ? this.limits.cpuTimeoutMs : cpuMsSince(started, process.threadCpuUsage());
    }
    if (!('pending' in outcome)) {
      this.calls.end();
      return this.decisionOf(outcome);
    }
    return this.awaitDecision(outcome.pending, deadline);
  }

  /** The decision of pending call `id` (through `done`, by `deadline`); the call ends either way. */
  private awaitDecision(id: number, deadline: number): Promise<PluginDecision> {
    return this.wait(id, deadline).then(
      (answer) => {
        this.calls.end();
        return this.decisionOf(answer);
      },
      (error: unknown) => {
        this.calls.end();
        throw error;
      },
    );
  }

  /**
   * Runs several Authorize calls inline in one crossing into the isolate: the fixed cost of a
   * crossing (the isolate's lock, the CPU-limit timer, entering its context, parsing one JSON
   * text) is paid once for the batch. Answers one result per request, in order: a decision, a
   * promise of one (a call that awaits fetch or a timer), the {@link PluginCallError} of that
   * call alone, or {@link RETRY} for a call the batch could not run to an answer through no
   * fault of its own. Only for an {@link idle} instance, like {@link authorizeInline}.
   *
   * The batch runs under twice the CPU limit. When it is stopped, the calls that had finished
   * keep their answers, the one running is the culprit (a TIMEOUT of its own) if it had run for
   * the whole CPU limit, and every other call is answered {@link RETRY}; so each call still gets
   * its own CPU limit and no call is denied for another's loop. {@link lastInlineMs} is the
   * batch's CPU time per call (all of it when the batch failed).
   */
  authorizeBatchInline(requestJsons: string[]): BatchResult[] {
    this.assertAlive();
    const count = requestJsons.length;
    const deadline = performance.now() + this.wallTimeoutMs;
    const started = process.threadCpuUsage();
    const wallStarted = performance.now();
    this.inlineCalls += count;
    for (let i = 0; i < count; i++) this.calls.begin();
    const results: BatchResult[] = new Array<BatchResult>(count);
    let outcomes: unknown[];
    try {
      outcomes = this.batchOutcomes(this.refs.authorizeBatch.applySync(undefined, [`[${requestJsons.join(',')}]`], { timeout: 2 * this.limits.cpuTimeoutMs }), count);
    } catch (error) {
      // The instant the batch stopped, read before anything else: the machine may hold this
      // thread again at any point after it, and that must count as nobody's running time.
      const stoppedAt = Date.now();
      const cpuMs = cpuMsSince(started, process.threadCpuUsage());
      // Wall time the batch spent without CPU (descheduled): none of it is any call's running time.
      const descheduledMs = Math.max(0, performance.now() - wallStarted - cpuMs);
      this.lastInlineMs = this.isolate.isDisposed ? 2 * this.limits.cpuTimeoutMs : cpuMs;
      const failure = error instanceof PluginCallError ? error : this.callError(error, false);
      this.stoppedBatch(failure, results, descheduledMs, stoppedAt);
      for (let i = 0; i < count; i++) this.calls.end();
      return results;
    }
    const pending: number[] = [];
    for (let i = 0; i < count; i++) {
      const outcome = this.outcomeFrom(outcomes[i]);
      if (outcome instanceof PluginCallError) results[i] = outcome;
      else if ('pending' in outcome) pending.push(i, outcome.pending);
      else results[i] = this.decisionOrError(outcome);
    }
    if (pending.length > 0) {
      // Most promises settle within their own call's microtasks: one more crossing fetches them all.
      const ids: number[] = [];
      for (let i = 1; i < pending.length; i += 2) ids.push(pending[i]!);
      let settled: unknown[];
      try {
        settled = this.batchOutcomes(this.refs.settleBatch.applySync(undefined, [JSON.stringify(ids)], { timeout: this.limits.cpuTimeoutMs }), ids.length);
      } catch (error) {
        settled = ids.map(() => error instanceof PluginCallError ? error : this.callError(error, false));
      }
      for (let k = 0; k < ids.length; k++) {
        const index = pending[2 * k]!;
        const outcome = settled[k] instanceof PluginCallError ? (settled[k] as PluginCallError) : this.outcomeFrom(settled[k]);
        if (outcome instanceof PluginCallError) results[index] = outcome;
        else if ('pending' in outcome) {
          results[index] = this.awaitDecision(outcome.pending, deadline);
        } else results[index] = this.decisionOrError(outcome);
      }
    }
    this.lastInlineMs = cpuMsSince(started, process.threadCpuUsage()) / count;
    for (let i = 0; i < count; i++) if (!(results[i] instanceof Promise)) this.calls.end();
    return results;
  }

  /** A batch the CPU limit (or a failure) stopped: answers what finished, blames the culprit, retries the rest. */
  private stoppedBatch(failure: PluginCallError, results: BatchResult[], descheduledMs: number, stoppedAt: number): void {
    let progress: { done?: unknown; running?: unknown; runningSince?: unknown } | undefined;
    if (failure.code === PluginCodes.TIMEOUT && !this.isolate.isDisposed) {
      try {
        progress = JSON.parse(this.refs.batchProgress.applySync(undefined, [], { timeout: this.limits.cpuTimeoutMs })) as typeof progress;
      } catch {
        progress = undefined;
      }
    }
    // The plugin was stopped mid-call: its state may be half-updated. The calls run again go
    // to a fresh isolate (the step rebuilds it when the culprit's failure reaches it).
    if (failure.code === PluginCodes.TIMEOUT || failure.code === PluginCodes.OUT_OF_MEMORY) this.dispose(`a batch of calls was stopped (${failure.code})`);
    const done = Array.isArray(progress?.done) ? (progress.done as unknown[]) : [];
    const running = typeof progress?.running === 'number' ? progress.running : -1;
    // `runningMs` is the running call's wall time up to the stop (both ends `Date.now()`, measured
    // at the same instant as `descheduledMs`: read later, a hold of this thread in between would
    // count as the call's running time). The call is blamed only if it ran the whole limit and,
    // counting every descheduled moment of the batch against it, still used a CPU share; what it
    // used is its `cpuMs`.
    const runningMs = typeof progress?.runningSince === 'number' ? stoppedAt - progress.runningSince : -1;
    const usedMs = runningMs - descheduledMs;
    const blamed = running >= 0 && runningMs >= this.limits.cpuTimeoutMs && usedMs >= DESCHEDULED_SHARE * this.limits.cpuTimeoutMs;
    if (blamed) failure.cpuMs = Math.round(usedMs * 10) / 10;
    for (let i = 0; i < results.length; i++) {
      if (i < done.length && i < running) {
        const outcome = this.outcomeFrom(done[i]);
        // A call that finished but left a promise behind: its continuation died with the batch.
        results[i] = outcome instanceof PluginCallError ? outcome : 'pending' in outcome ? RETRY : this.decisionOrError(outcome);
      } else if (i === running && blamed) {
        results[i] = failure;
      } else {
        results[i] = RETRY;
      }
    }
    // Without progress nobody can be blamed: every call runs again alone, and the culprit fails alone.
  }

  private batchOutcomes(json: unknown, count: number): unknown[] {
    if (typeof json !== 'string' || json.length > MAX_RESPONSE_CHARS * count) {
      throw new PluginCallError(PluginCodes.BAD_RESPONSE, 'the sandbox answered a batch with something other than a JSON array');
    }
    let value: unknown;
    try {
      value = JSON.parse(json);
    } catch {
      throw new PluginCallError(PluginCodes.BAD_RESPONSE, 'the sandbox answered a batch with unreadable JSON');
    }
    if (!Array.isArray(value) || value.length !== count) throw new PluginCallError(PluginCodes.BAD_RESPONSE, 'the sandbox answered a batch with the wrong number of outcomes');
    return value;
  }

  /** An {@link Outcome} from one parsed element of a batch answer, or the error it amounts to. */
  private outcomeFrom(value: unknown): Outcome | PluginCallError {
    const outcome = outcomeOfValue(value);
    return outcome ?? new PluginCallError(PluginCodes.BAD_RESPONSE, 'the sandbox answered with unreadable JSON');
  }

  private decisionOrError(outcome: Exclude<Outcome, { pending: number }>): PluginDecision | PluginCallError {
    try {
      return this.decisionOf(outcome);
    } catch (error) {
      return error instanceof PluginCallError ? error : new PluginCallError(PluginCodes.BAD_RESPONSE, describeError(error));
    }
  }

  /** The answer of pending call `id` (through `done`), or a TIMEOUT at `deadline`. */
  private wait(id: number, deadline: number): Promise<Exclude<Outcome, { pending: number }>> {
    if (id > this.registered) this.registered = id;
    const early = this.early.get(id);
    if (early !== undefined) {
      this.early.delete(id);
      return Promise.resolve(this.settledOf(early));
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(id);
        const error = new PluginCallError(PluginCodes.TIMEOUT, `Authorize did not answer within the ${this.wallTimeoutMs} ms wall deadline`);
        // Waiting on a slow service is no fault of the isolate; a loop is, and checkBusy finds it.
        error.keepsIsolate = true;
        reject(error);
        this.checkBusy();
        this.quiesce();
      }, Math.max(1, deadline - performance.now()));
      this.waiters.set(id, {
        resolve: (json) => {
          clearTimeout(timer);
          try {
            resolve(this.settledOf(json));
          } catch (error) {
            reject(error as PluginCallError);
          }
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
    });
  }

  /**
   * After a missed deadline: code that runs after an await (a continuation) has no CPU limit
   * of its own, so the isolate is pinged through its queue; a ping that does not come back
   * within what the calls queued ahead of it may take (each at most the CPU limit) means a
   * loop holds the isolate: it is dropped (and rebuilt by the step).
   */
  private checkBusy(): void {
    if (!this.alive || !this.api) return;
    const budgetMs = PROBE_MS + (this.queued + 1) * this.limits.cpuTimeoutMs;
    let back = false;
    this.api.ping.apply(undefined, [], { timeout: this.limits.cpuTimeoutMs }).then(
      () => (back = true),
      () => (back = true),
    );
    setTimeout(() => {
      if (back || !this.alive) return;
      this.logger.error({ ...this.where, code: PluginCodes.TIMEOUT, cause: `a ping found the isolate busy for over ${budgetMs} ms after a missed deadline` }, 'plugin isolate dropped: it kept running past a call deadline (a loop after an await)');
      this.dispose('it kept running past a call deadline (a loop after an await)');
    }, budgetMs).unref();
  }

  private assertAlive(): void {
    if (!this.alive) throw new PluginCallError(PluginCodes.UNAVAILABLE, `the isolate is gone (${this.deadReason ?? 'disposed'})`);
  }

  /** A synchronous call into the isolate, bounded by the CPU limit. */
  private callSync<A extends unknown[]>(ref: ivm.Reference<(...args: A) => string>, args: A): unknown {
    const cpuStarted = process.threadCpuUsage();
    try {
      return ref.applySync(undefined, args as never, { timeout: this.limits.cpuTimeoutMs });
    } catch (error) {
      throw this.judged(this.callError(error, false), cpuMsSince(cpuStarted, process.threadCpuUsage()));
    }
  }

  /**
   * isolated-vm's `timeout` counts wall time while the isolate runs (and so does its `cpuTime`,
   * measured: 5,074 ms of it in 5,076 ms wall while the process had 1,095 ms of CPU). A call it
   * stopped after less than {@link DESCHEDULED_SHARE} of the CPU limit of real CPU (`usedMs`) was
   * descheduled (a container's CPU quota, a busy core), not slow: marked {@link PluginCallError.descheduled}.
   */
  private judged(failure: PluginCallError, usedMs: number): PluginCallError {
    if (failure.code !== PluginCodes.TIMEOUT || this.isolate.isDisposed) return failure;
    failure.cpuMs = Math.round(usedMs * 10) / 10;
    if (usedMs < DESCHEDULED_SHARE * this.limits.cpuTimeoutMs) failure.descheduled = true;
    return failure;
  }

  /**
   * An asynchronous call into the isolate, bounded by the CPU limit. The wall-clock timer is a
   * safety net only: calls wait in the isolate's queue (at most the step's queue limit, each at
   * most the CPU limit), and no call can wait on anything else.
   */
  private async callAsync<A extends unknown[]>(ref: ivm.Reference<(...args: A) => string>, args: A): Promise<unknown> {
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      this.dispose('a call did not return in time');
    }, this.limits.callTimeoutMs);
    // The isolate's thread is not this one: the whole process's CPU since the call began running
    // (other threads included) bounds the call's own, erring towards blaming the plugin. It began
    // after it was queued and after the isolate's thread last finished a call (one at a time, in
    // order): without the second bound, the CPU of every call queued ahead of it counted as its own.
    const queuedCpu = process.cpuUsage();
    try {
      return await ref.apply(undefined, args as never, { timeout: this.limits.cpuTimeoutMs });
    } catch (error) {
      const now = process.cpuUsage();
      const finished = this.asyncFinishedCpu;
      const since = finished && totalCpu(finished) > totalCpu(queuedCpu) ? finished : queuedCpu;
      throw this.judged(this.callError(error, expired), cpuMsSince(since, now));
    } finally {
      clearTimeout(timer);
      this.asyncFinishedCpu = process.cpuUsage();
    }
  }

  /** Names why a call into the isolate failed. */
  private callError(error: unknown, expired: boolean): PluginCallError {
    const { cpuTimeoutMs, callTimeoutMs, memoryLimitMb } = this.limits;
    const message = describeError(error);
    if (expired) return new PluginCallError(PluginCodes.TIMEOUT, `Authorize did not return within ${callTimeoutMs} ms`, { cause: error });
    const failure = isolateFailure(message);
    if (failure === 'memory') return new PluginCallError(PluginCodes.OUT_OF_MEMORY, `Authorize ran out of the ${memoryLimitMb} MB memory limit`, { cause: error });
    if (failure === 'cpu') return new PluginCallError(PluginCodes.TIMEOUT, `Authorize ran longer than the ${cpuTimeoutMs} ms CPU limit`, { cause: error });
    if (this.isolate.isDisposed) return this.lostCall(new PluginCallError(PluginCodes.UNAVAILABLE, `the isolate was replaced while the call waited (${this.deadReason ?? 'disposed'})`, { cause: error }));
    return new PluginCallError(PluginCodes.THREW, `Authorize failed: ${message}`, { cause: error });
  }

  /** The answer of a pending call: an outcome, never another pending call. */
  private settledOf(json: unknown): Exclude<Outcome, { pending: number }> {
    const outcome = this.outcomeOf(json);
    if ('pending' in outcome) throw new PluginCallError(PluginCodes.BAD_RESPONSE, 'the sandbox answered with a pending call where an answer was due');
    return outcome;
  }

  private outcomeOf(json: unknown): Outcome {
    if (typeof json !== 'string' || json.length > MAX_RESPONSE_CHARS) {
      throw new PluginCallError(PluginCodes.BAD_RESPONSE, 'the sandbox answered with something other than a JSON string of at most 1 MB');
    }
    const outcome = parseOutcome(json);
    if (!outcome) throw new PluginCallError(PluginCodes.BAD_RESPONSE, 'the sandbox answered with unreadable JSON');
    return outcome;
  }

  private decisionOf(outcome: Exclude<Outcome, { pending: number }>): PluginDecision {
    if (!outcome.ok) {
      const error =
        outcome.stage === 'authorize'
          ? new PluginCallError(outcome.storeUnavailable ? PluginCodes.STORE_UNAVAILABLE : PluginCodes.THREW, `Authorize threw: ${outcome.error}`)
          : new PluginCallError(PluginCodes.BAD_RESPONSE, `bad response: ${outcome.error}`);
      if (outcome.stack) error.pluginStack = this.mapStack(outcome.stack);
      throw error;
    }
    try {
      return toDecision(outcome.response);
    } catch (error) {
      if (error instanceof BadResponseError) throw new PluginCallError(PluginCodes.BAD_RESPONSE, `bad response: ${error.message}`);
      throw error;
    }
  }

  /**
   * Starts an asymmetric verify on Node's thread pool (the host crypto's `defer`): the event
   * loop spends a few µs instead of the whole verify (an ES256 verify is ~65 µs). Answers the
   * job id, or undefined (verify synchronously) on the plugin thread, while the plugin starts,
   * or when too many run.
   */
  private defer(work: (finish: (valid: boolean) => void) => void): number | undefined {
    if (!OFF_LOOP_VERIFIES || !this.api || !this.alive || this.jobs.running >= MAX_JOBS) return undefined;
    const id = ++this.jobSeq;
    const job = this.jobs.start();
    work((valid) => (this.alive ? job.finish(id, valid ? 1 : 0) : job.finish()));
    return id;
  }

  /**
   * Hands finished verifies, store operations or host operations (fetch, timers, crypto.subtle)
   * to the isolate; the continuations they wake run in that crossing, and the calls they finish
   * answer through `done`. The crossing is bounded like calls: twice the CPU limit for verifies
   * and store answers (as a batch of calls), and for host answers the CPU limit per answer plus
   * one, at least twice it and at most the wall deadline (a turn may bring many fetch answers).
   * A crossing that fails (a continuation that loops) drops the isolate: its pending calls are
   * denied and the step builds a new one.
   */
  private cross(entry: 'resolveJobs' | 'resolveStore', json: string, what: string): void;
  private cross(entry: 'resolveHost', results: unknown[], what: string): void;
  private cross(entry: 'resolveJobs' | 'resolveStore' | 'resolveHost', payload: string | unknown[], what: string): void {
    if (!this.alive || !this.entries) return;
    const cpu = this.limits.cpuTimeoutMs;
    // While the plugin starts, the continuation is Start's own: it has what is left of the start timeout.
    const timeout =
      this.startingUntil !== undefined
        ? Math.max(1, Math.floor(this.startingUntil - performance.now()))
        : typeof payload === 'string'
          ? 2 * cpu
          : Math.max(2 * cpu, Math.min(this.wallTimeoutMs, (payload.length / 2 + 1) * cpu));
    const options = typeof payload === 'string' ? { timeout } : { timeout, arguments: { copy: true as const } };
    const failed = (error: unknown) => {
      // Crossings queued behind the one that dropped the isolate fail with it: reported once.
      // (An isolate V8 disposed itself, at its memory limit, is still reported and disposed here.)
      if (this.deadReason !== undefined) return;
      const failure = this.callError(error, false);
      this.logger.error({ ...this.where, code: failure.code, cause: failure.message }, `plugin isolate dropped: the code after ${what} failed`);
      this.dispose(`the code after ${what} failed (${failure.code})`);
    };
    const ref = this.entries[entry] as ivm.Reference<(payload: string | unknown[]) => string>;
    // Nothing of the plugin's runs on the isolate's thread: cross here, synchronously. Never while
    // the plugin starts: Start runs there as an asynchronous call, and an answer handed in while it
    // waits in a host callback would overtake the registration of the operation it answers.
    if (this.idle && this.startingUntil === undefined) {
      try {
        ref.applySync(undefined, [payload] as never, options);
      } catch (error) {
        failed(error);
      }
      return;
    }
    this.crossLater(ref, payload, options, failed);
  }

  /** Hands `payload` in on the isolate's own thread, after what runs there now; counted in {@link idle} until it returns. */
  private crossLater(ref: ivm.Reference<(payload: string | unknown[]) => string>, payload: string | unknown[], options: { timeout: number; arguments?: { copy: true } }, failed: (error: unknown) => void): void {
    this.crossings++;
    ref.apply(undefined, [payload] as never, options).then(
      () => void this.crossings--,
      (error: unknown) => {
        this.crossings--;
        failed(error);
      },
    );
  }

  /**
   * The runtime's `callJob`: starts a fetch, timer or crypto.subtle operation on the host
   * ({@link HostCalls.dispatch}, which never rejects) and answers its job id; the answer is handed
   * in by {@link cross} (`resolveHost`) in the turn it arrives.
   */
  private hostJob(op: unknown, args: unknown): { job: number } {
    const id = ++this.hostSeq;
    const pending = this.hostOps.start();
    void this.calls.dispatch(op, args).then((answer) => (this.alive ? pending.finish(id, answer) : pending.finish()));
    return { job: id };
  }

  /**
   * The isolate's `ctx.store` callback: a store in this process answers at once (`{v}`); one
   * elsewhere answers `{job}` and its result goes in later through `resolveStore`, batched per
   * turn of the event loop like finished verifies. Bad arguments throw the plugin's TypeError/RangeError.
   */
  private storeCall(store: StepStore, op: unknown, key: unknown, arg: unknown, ttl: unknown): { v: StoreResult } | { job: number } {
    // Checked before the operation starts: a refused one must not run anyway.
    if (this.storeOps.running >= MAX_STORE_JOBS) throw new RangeError(`ctx.store: at most ${MAX_STORE_JOBS} operations may wait at once per plugin isolate`);
    let answer: StoreResult | PromiseLike<StoreResult>;
    try {
      answer = store.dispatch(op, key, arg, ttl);
    } catch (error) {
      const message = (error as Error).message;
      throw (error as Error).name === 'RangeError' ? new RangeError(message) : new TypeError(message);
    }
    // A thenable, not `instanceof Promise`: a route from another module realm answers with its own promises.
    if (typeof (answer as { then?: unknown } | null)?.then !== 'function') return { v: answer as StoreResult };
    const id = ++this.storeSeq;
    const pending = this.storeOps.start();
    Promise.resolve(answer).then(
      (value) => (this.alive ? pending.finish([id, 1, value]) : pending.finish()),
      (error: unknown) => (this.alive ? pending.finish([id, 0, { name: (error as Error).name, message: (error as Error).message }]) : pending.finish()),
    );
    return { job: id };
  }

  /** Set by {@link dispose} with `callsRunAgain`. */
  private callsRunAgain = false;

  /** A call lost with the isolate: one that may run again when the isolate went for a descheduled call. */
  private lostCall(failure: PluginCallError): PluginCallError {
    failure.descheduled = this.callsRunAgain;
    return failure;
  }

  /** Frees the isolate; pending calls on it fail (and are denied, unless `callsRunAgain`: see {@link PluginCallError.descheduled}). */
  dispose(reason = 'disposed', options: { callsRunAgain?: boolean } = {}): void {
    this.deadReason ??= reason;
    // Dropped for a descheduled call (not a fault of the plugin's): the calls waiting on it may run again too.
    if (options.callsRunAgain && this.deadReason === reason) this.callsRunAgain = true;
    this.calls.cancelAll(true);
    for (const [id, waiter] of this.waiters) {
      this.waiters.delete(id);
      waiter.reject(this.lostCall(new PluginCallError(PluginCodes.UNAVAILABLE, `the isolate was dropped while the call waited (${this.deadReason})`)));
    }
    if (!this.isolate.isDisposed) {
      try {
        this.isolate.dispose();
      } catch {
        // Already being torn down by isolated-vm (memory limit).
      }
    }
  }
}

/** A start failure's message with where the plugin failed (its own file:line) and its stack. */
function withStack(message: string, stack: string | undefined, file: PluginFile): string {
  const mapped = stack === undefined ? undefined : file.mapStack(stack);
  return mapped === undefined ? message : `${withLocation(message, mapped)}\n${mapped}`;
}

/** A `process.cpuUsage()` reading's total, in µs. */
function totalCpu(usage: NodeJS.CpuUsage): number {
  return usage.user + usage.system;
}

/** CPU ms between two `process.cpuUsage()` / `process.threadCpuUsage()` readings. */
function cpuMsSince(before: NodeJS.CpuUsage, after: NodeJS.CpuUsage): number {
  return (after.user - before.user + after.system - before.system) / 1000;
}
