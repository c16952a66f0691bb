import { SANDBOX_DEFAULTS } from '@gatehouse/plugin-sdk/runtime';
import type { PluginMetadata } from '@gatehouse/plugin-sdk/build';
import type { PluginAuthSpec } from '../../config/schema/auth-config.ts';
import { ErrorCodes, GatehouseError } from '../../errors.ts';
import { forbidden, type AuthDecision, type AuthStep, type CheckRequest, type StepContext } from '../step.ts';
import { checkJson } from './check-json.ts';
import { PluginCodes } from './codes.ts';
import { assertIsolateFlags } from './node-flags.ts';
import { loadPluginFile } from './plugin-file.ts';
import { Egress, upstreamOrigin, type EgressRule } from './egress.ts';
import { PluginInstance } from './isolate/plugin-instance.ts';
import { PluginCallError, RETRY, type BatchResult } from './isolate/plugin-call-error.ts';
import type { PluginGrants, PluginHostLogger, SandboxLimits } from './isolate/sandbox-limits.ts';
import type { UpstreamSpec } from '../../config/schema/upstream.ts';
import { loadRedisDriver } from '../../redis/client.ts';
import { createStepStore, type StepStore, type StepStoreLimits, type StoreSettings } from './store/step-store.ts';
import type { MemoryRoute } from './store/store-hub.ts';

export interface PluginStepOptions {
  /** Where compiled plugins live (`--plugin-dir`, default `/auth-plugins`). */
  pluginDir: string;
  /** Isolate memory limit, default 64 (SPEC 5.2); at least 8. */
  memoryLimitMb?: number;
  /** Per-call CPU time limit for Authorize, default 50 (SPEC 5.2). */
  cpuTimeoutMs?: number;
  /**
   * Calls allowed to wait for the isolate's thread; more are denied at once (overload).
   * Default 64. Inline calls never wait.
   */
  queueLimit?: number;
  /**
   * Safety net: a call on the isolate's thread that has not returned after this long counts as
   * hung and the isolate is rebuilt. Default queueLimit × cpuTimeoutMs + 1000 (the longest a
   * sound call can wait: the sandbox has no I/O and a promise must settle within its call).
   */
  callTimeoutMs?: number;
  /** Wall time for script load + NewConfigInstance + GetAuthService + Start; default 1000. */
  startTimeoutMs?: number;
  /** Per-call wall deadline, waiting for fetch and timers included (SPEC 5.2); default 1000. */
  wallTimeoutMs?: number;
  /** Fetches in flight at once per isolate; default 16 (SPEC 5.3). */
  maxFetches?: number;
  /** Largest response body a plugin's fetch may receive; default 1 MiB (SPEC 5.3). */
  maxFetchResponseBytes?: number;
  /** Resolves an `egress` entry's `upstreamRef` (the config snapshot's Upstreams). */
  resolveUpstream?: (ref: { name: string; namespace: string }) => UpstreamSpec | undefined;
  /** The AuthConfig's namespace: references without one point there (SPEC 2.3). */
  namespace?: string;
  /** Resolves a `secretRefs` entry to the Secret's value (the config snapshot's Secrets). */
  resolveSecret?: (ref: { name: string; namespace: string; key: string }) => string | undefined;
  /** Bounds of the step's `ctx.store`. */
  storeLimits?: Partial<StepStoreLimits>;
  /**
   * Where the step's `ctx.store` lives (`pluginAuth.store`, or the auth server's default), with
   * the step's identity. Default: a memory store of this step alone.
   */
  store?: StoreSettings;
  /** How the memory backend reaches its hub; default the process's (./store/store-hub.ts). The test kit passes its own (a fake clock). */
  memoryRoute?: MemoryRoute;
  /**
   * Default true: call the plugin synchronously on the event loop while its calls stay cheap,
   * moving the step to the isolate's own thread for good once one blocks too long. False: always
   * call on the isolate's thread.
   */
  inline?: boolean;
  /** The auth server's logger (pino). Plugin log lines and failures go here. */
  logger: PluginHostLogger;
}

/** A built `pluginAuth` step. Beyond {@link AuthStep}: what was loaded, for reload checks. */
export interface PluginStep extends AuthStep {
  /** {@link AuthStep.authorize} of a request already in JSON (`{CheckRequest, State}`). */
  authorizeJson(json: string): Promise<AuthDecision>;
  /**
   * Runs the inline calls queued for the next crossing now instead of at the end of this turn
   * of the event loop: for the plugin thread, whose calls all arrive in one message.
   */
  runQueued?(): void;
  readonly type: 'pluginAuth';
  /** Absolute path of the loaded file. */
  readonly file: string;
  /** The loaded file's metadata; `metadata.contentHash` identifies the build. */
  readonly metadata: PluginMetadata;
  /** Where calls run now: `inline` (on the event loop) or `isolate-thread`. */
  readonly mode: 'inline' | 'isolate-thread';
  /** Waits (at most 2 s) for in-flight calls, then frees the isolate. */
  close(): Promise<void>;
}

/** Steps built without store settings (tests, library use): each gets a memory store of its own. */
let anonymousSteps = 0;

/** Longest wait before a broken plugin's isolate is rebuilt again. */
const MAX_BACKOFF_MS = 5000;
/** close() waits this long for in-flight calls before disposing the isolate. */
const DRAIN_MS = 2000;
/**
 * Inline calls that spend more CPU than this move the step to the isolate's thread for good:
 * at once when the call failed (a loop, a huge allocation), on the third within
 * {@link INLINE_SLOW_WINDOW} calls otherwise (a lone one is usually the isolate's GC).
 */
const INLINE_MAX_MS = 5;
const INLINE_SLOW_CALLS = 3;
// Ten calls, not a thousand: a steadily slow plugin is slow call after call, while the
// isolate's garbage collector makes a heavier plugin (a JWT verify) slow now and then, and
// moving that one to the isolate thread costs it far more (every crypto call crosses threads).
const INLINE_SLOW_WINDOW = 10;
/**
 * Most inline calls one crossing into the isolate carries. Bounds the event loop's wait for a
 * batch of sound calls (each is cheap, or the step would not be inline) and the JSON texts.
 */
const MAX_BATCH = 32;
/** Times one check runs again after the wall-clock limit stopped it on a descheduled isolate (PluginCallError.descheduled). */
const MAX_DESCHEDULED_RETRIES = 2;
/** Same, for the moving average of inline calls (a steadily heavy plugin). */
const INLINE_AVERAGE_MS = 0.5;
/** The first calls of an isolate compile the plugin lazily: only a failing one is judged. */
const INLINE_WARMUP_CALLS = 20;

function limitsOf(options: PluginStepOptions): SandboxLimits & { queueLimit: number } {
  const { memoryLimitMb = SANDBOX_DEFAULTS.memoryLimitMb, cpuTimeoutMs = SANDBOX_DEFAULTS.cpuTimeoutMs, startTimeoutMs = 1000, queueLimit = 64, wallTimeoutMs = SANDBOX_DEFAULTS.wallTimeoutMs, maxFetches = SANDBOX_DEFAULTS.maxFetches } = options;
  const callTimeoutMs = options.callTimeoutMs ?? queueLimit * cpuTimeoutMs + 1000;
  const check = (name: string, value: number, min: number) => {
    if (!Number.isFinite(value) || value < min) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `plugin host: ${name} must be a number ≥ ${min}, got ${value}`);
  };
  check('memoryLimitMb', memoryLimitMb, 8);
  check('cpuTimeoutMs', cpuTimeoutMs, 1);
  check('callTimeoutMs', callTimeoutMs, 1);
  check('startTimeoutMs', startTimeoutMs, 1);
  check('queueLimit', queueLimit, 1);
  check('wallTimeoutMs', wallTimeoutMs, 1);
  check('maxFetches', maxFetches, 1);
  return { memoryLimitMb, cpuTimeoutMs, callTimeoutMs, startTimeoutMs, queueLimit, wallTimeoutMs, maxFetches };
}

/**
 * Builds a `pluginAuth` step (SPEC 5.2): loads `<pluginDir>/<pluginFileName>`, checks its
 * metadata, and starts the plugin in its own isolate. Resolves once Start has finished, so a
 * caller swapping configurations can keep the old step serving until then. Rejects with a
 * GH_PLUGIN_* GatehouseError naming the cause (missing file, version mismatch, bad config…).
 *
 * Per request: Authorize runs in the isolate; a throw, a timeout, running out of memory or a
 * malformed answer denies (403), is logged with its code, and the isolate is rebuilt.
 */
export async function createPluginStep(spec: PluginAuthSpec, options: PluginStepOptions): Promise<PluginStep> {
  const limits = limitsOf(options);
  assertIsolateFlags();
  const file = await loadPluginFile(spec, options.pluginDir);
  const secrets = resolveSecrets(spec, options);
  // One store per step, kept by the step: it outlives every isolate rebuild; its memory data
  // lives in the hub under the step's identity, so it outlives reloads and rebuilds too.
  const settings = options.store ?? { kind: 'memory', identity: `anonymous/${++anonymousSteps}/${spec.name}` };
  if (settings.kind === 'redis') await loadRedisDriver();
  const store = createStepStore(settings, { limits: options.storeLimits, wallTimeoutMs: limits.wallTimeoutMs ?? SANDBOX_DEFAULTS.wallTimeoutMs, route: options.memoryRoute });
  const grants: PluginGrants = {
    ...(spec.egress?.length ? { egress: buildEgress(spec, options, limits.wallTimeoutMs ?? SANDBOX_DEFAULTS.wallTimeoutMs) } : {}),
    secrets,
    store,
  };
  let first: PluginInstance;
  try {
    first = await PluginInstance.create(file, spec.config ?? {}, limits, options.logger, grants);
  } catch (error) {
    await store.close();
    throw error;
  }
  return new SandboxedPluginStep(spec, file, first, limits, options.logger, options.inline ?? true, grants, settings.kind === 'redis' && settings.failOpen);
}

class SandboxedPluginStep implements PluginStep {
  readonly type = 'pluginAuth' as const;
  readonly name: string;
  readonly file: string;
  readonly metadata: PluginMetadata;

  private readonly create: () => Promise<PluginInstance>;
  private readonly logger: PluginHostLogger;
  private readonly where: { plugin: string; file: string };
  private instance: PluginInstance | undefined;
  private building: Promise<PluginInstance> | undefined;
  /** Failures since the last good answer; drives the rebuild backoff. */
  private failures = 0;
  private retryAt = 0;
  private lastFailure: GatehouseError | undefined;
  private inFlight = 0;
  private closed = false;
  private drained: (() => void) | undefined;
  private inline: boolean;
  /** Moving average of the CPU time of inline calls, in ms. */
  private inlineAverageMs = 0;
  private inlineCalls = 0;
  /** `inlineCalls` at each recent slow call. */
  private slowCalls: number[] = [];

  private readonly queueLimit: number;
  /** Overload denials not logged yet (logged at most once a second). */
  private overloaded = 0;
  private overloadLoggedAt = -Infinity;

  /** `store.redis.failOpen`: a call that failed on an unreachable store allows instead of denying. */
  private readonly failOpen: boolean;
  private readonly store: StepStore | undefined;

  constructor(spec: PluginAuthSpec, file: Awaited<ReturnType<typeof loadPluginFile>>, first: PluginInstance, limits: SandboxLimits & { queueLimit: number }, logger: PluginHostLogger, inline: boolean, grants: PluginGrants, failOpen = false) {
    this.inline = inline;
    this.failOpen = failOpen;
    this.store = grants.store;
    this.queueLimit = limits.queueLimit;
    this.name = spec.name;
    this.file = file.path;
    this.metadata = file.metadata;
    this.logger = logger;
    this.where = { plugin: spec.name, file: file.path };
    this.instance = first;
    this.create = () => PluginInstance.create(file, spec.config ?? {}, limits, logger, grants);
  }

  get mode(): 'inline' | 'isolate-thread' {
    return this.inline ? 'inline' : 'isolate-thread';
  }

  authorize(request: CheckRequest, context?: StepContext): Promise<AuthDecision> {
    return this.authorizeJson(checkJson(request, context));
  }

  /** {@link authorize} of a request already in JSON (`{CheckRequest, State}`), as the plugin thread receives it. */
  async authorizeJson(json: string): Promise<AuthDecision> {
    this.inFlight++;
    try {
      // A call its batch could not finish through no fault of its own runs again, alone.
      let descheduled = 0;
      for (let attempt = 0; ; attempt++) {
        const instance = this.instance?.alive ? this.instance : await this.acquire();
        if (!(this.inline && instance.idle) && instance.queued >= this.queueLimit) return this.overload();
        try {
          let decision: AuthDecision;
          // Inline only while nothing of the plugin's runs in the background (an await on fetch
          // or a timer): its continuation would hold the isolate and this thread would wait.
          // A call run again after a descheduled one goes to the isolate's thread: were it a loop after
          // all, it could not stall this loop a second time.
          if (this.inline && instance.idle && descheduled === 0) {
            const result = await this.inBatch(instance, json, attempt > 0);
            if (result === RETRY) continue;
            if (result instanceof PluginCallError) throw result;
            decision = result instanceof Promise ? await result : result;
          } else {
            decision = await instance.authorize(json);
          }
          this.failures = 0;
          return decision;
        } catch (error) {
          if (error instanceof PluginCallError && error.descheduled && descheduled < MAX_DESCHEDULED_RETRIES) {
            descheduled++;
            this.replaceDescheduled(instance, error);
            continue;
          }
          this.failed(instance, error);
          // The operator's fail mode for an unreachable store (`store.redis.failOpen`).
          if (this.failOpen && (error as { code?: unknown }).code === PluginCodes.STORE_UNAVAILABLE) return { allowed: true, headersToSet: [], headersToRemove: [] };
          return forbidden();
        }
      }
    } catch (error) {
      const code = error instanceof GatehouseError ? error.code : PluginCodes.UNAVAILABLE;
      this.logger.error({ ...this.where, code, cause: (error as Error).message }, 'plugin auth denied the request: the plugin is unavailable');
      return forbidden();
    } finally {
      this.inFlight--;
      if (this.inFlight === 0) this.drained?.();
    }
  }

  /** Inline calls waiting for the batch that runs them (after this event-loop turn's I/O). */
  private batch: { instance: PluginInstance; jsons: string[]; answers: ((result: BatchResult) => void)[] } | undefined;

  /**
   * Runs an inline call in a batch: the calls that arrive in one turn of the event loop (the
   * requests of every connection that had data) cross into the isolate together, at the next
   * check phase (setImmediate), so the fixed cost of a crossing is paid once for them all.
   * A call run again (`alone`) after its batch failed goes by itself, at once.
   */
  private inBatch(instance: PluginInstance, json: string, alone: boolean): Promise<BatchResult> | BatchResult {
    if (alone) return this.runBatch(instance, [json])[0]!;
    let batch = this.batch;
    if (batch?.instance !== instance) {
      if (batch) this.flush();
      batch = this.batch = { instance, jsons: [], answers: [] };
      setImmediate(() => this.flush());
    }
    const { jsons, answers } = batch;
    jsons.push(json);
    const answer = new Promise<BatchResult>((resolve) => answers.push(resolve));
    if (jsons.length >= MAX_BATCH) this.flush();
    return answer;
  }

  runQueued(): void {
    this.flush();
  }

  private flush(): void {
    const batch = this.batch;
    if (!batch) return;
    this.batch = undefined;
    const { instance, jsons, answers } = batch;
    // The instance may have become busy (a fetch started) or died since the calls were queued.
    const results = instance.alive && instance.idle ? this.runBatch(instance, jsons) : jsons.map((): BatchResult => RETRY);
    for (let i = 0; i < answers.length; i++) answers[i]!(results[i]!);
  }

  /** Runs `jsons` inline, one crossing (a single call keeps the plain path); never throws. */
  private runBatch(instance: PluginInstance, jsons: string[]): BatchResult[] {
    let results: BatchResult[];
    if (jsons.length === 1) {
      try {
        results = [instance.authorizeInline(jsons[0]!)];
      } catch (error) {
        results = [error instanceof PluginCallError ? error : new PluginCallError(PluginCodes.THREW, String(error))];
      }
    } else {
      results = instance.authorizeBatchInline(jsons);
    }
    // A failed call that burnt CPU (a loop, a huge allocation) moves off the loop even while warming up.
    if (results.some((result) => result instanceof PluginCallError || result === RETRY)) {
      if (instance.lastInlineMs > INLINE_MAX_MS) this.moveOffLoop(instance.lastInlineMs);
    } else {
      this.observeInline(instance);
    }
    return results;
  }

  /** Denies a call that would wait behind `queueLimit` others; logs at most once a second. */
  private overload(): AuthDecision {
    this.overloaded++;
    const now = performance.now();
    if (now - this.overloadLoggedAt >= 1000) {
      this.logger.error(
        { ...this.where, code: PluginCodes.UNAVAILABLE, cause: `overloaded: ${this.queueLimit} calls already wait for the plugin`, denied: this.overloaded },
        'plugin auth denied requests: the plugin is overloaded',
      );
      this.overloadLoggedAt = now;
      this.overloaded = 0;
    }
    return forbidden();
  }

  /** Moves the step off the event loop when its inline calls cost too much CPU. */
  private observeInline(instance: PluginInstance): void {
    if (instance.inlineCalls <= INLINE_WARMUP_CALLS) return;
    const cpuMs = instance.lastInlineMs;
    this.inlineCalls++;
    // About a 100-call window: one spike barely moves it.
    this.inlineAverageMs = 0.99 * this.inlineAverageMs + 0.01 * cpuMs;
    if (cpuMs > INLINE_MAX_MS) {
      this.slowCalls = [...this.slowCalls.filter((at) => this.inlineCalls - at < INLINE_SLOW_WINDOW), this.inlineCalls];
      if (this.slowCalls.length >= INLINE_SLOW_CALLS) this.moveOffLoop(cpuMs);
    }
    if (this.inlineAverageMs > INLINE_AVERAGE_MS) this.moveOffLoop(cpuMs);
  }

  private moveOffLoop(cpuMs: number): void {
    if (!this.inline) return;
    this.inline = false;
    this.logger.warn(
      { ...this.where, callCpuMs: Math.round(cpuMs * 100) / 100, averageCpuMs: Math.round(this.inlineAverageMs * 100) / 100 },
      'plugin calls block the event loop too long: moved to the isolate thread',
    );
  }

  /** Stops taking work: waits (bounded) for in-flight calls, then frees the isolate. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.inFlight > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, DRAIN_MS);
        this.drained = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    this.instance?.dispose('the step was closed');
    this.instance = undefined;
    const building = this.building;
    if (building) (await building.catch(() => undefined))?.dispose('the step was closed');
    await this.store?.close();
  }

  /** The healthy instance, one being rebuilt, or a fresh build; throws while backing off. */
  private acquire(): Promise<PluginInstance> {
    if (this.closed) return Promise.reject(new GatehouseError(PluginCodes.UNAVAILABLE, 'the step is closed (its AuthConfig was replaced)'));
    if (this.instance?.alive) return Promise.resolve(this.instance);
    if (this.building) return this.building;
    if (performance.now() < this.retryAt) {
      const cause = this.lastFailure ? `${this.lastFailure.code}: ${this.lastFailure.message}` : 'it failed';
      return Promise.reject(new GatehouseError(PluginCodes.UNAVAILABLE, `the isolate is being rebuilt after repeated failures (last: ${cause})`));
    }
    return this.rebuild();
  }

  private rebuild(): Promise<PluginInstance> {
    const building = this.create().then(
      (instance) => {
        this.building = undefined;
        if (this.closed) {
          instance.dispose('the step was closed');
          throw new GatehouseError(PluginCodes.UNAVAILABLE, 'the step is closed (its AuthConfig was replaced)');
        }
        this.instance = instance;
        this.logger.info({ ...this.where }, 'plugin isolate rebuilt');
        return instance;
      },
      (error: unknown) => {
        this.building = undefined;
        this.noteFailure(error instanceof GatehouseError ? error : new GatehouseError(PluginCodes.UNAVAILABLE, String(error)));
        this.logger.error({ ...this.where, code: (error as GatehouseError).code, cause: (error as Error).message }, 'plugin isolate could not be rebuilt');
        throw error;
      },
    );
    this.building = building;
    return building;
  }

  /** A call failed: deny (caller), log, drop the isolate and rebuild it, eagerly unless failing repeatedly. */
  private failed(instance: PluginInstance, error: unknown): void {
    const failure = error instanceof PluginCallError || error instanceof GatehouseError ? error : new GatehouseError(PluginCodes.THREW, String(error));
    const stack = failure instanceof PluginCallError && failure.pluginStack ? { stack: failure.pluginStack } : {};
    const allowed = this.failOpen && failure.code === PluginCodes.STORE_UNAVAILABLE;
    const cpu = failure instanceof PluginCallError && failure.cpuMs !== undefined ? { cpuMs: failure.cpuMs } : {};
    this.logger.error({ ...this.where, code: failure.code, cause: failure.message, ...cpu, ...stack }, allowed ? 'plugin auth allowed the request (store failOpen): the plugin failed on its store' : 'plugin auth denied the request: the plugin failed');
    // A throw or a malformed answer leaves the isolate healthy. Rebuilding it (with backoff)
    // would let any client that makes the plugin throw deny everyone else on the step.
    if (instance.alive && (failure.code === PluginCodes.THREW || failure.code === PluginCodes.STORE_UNAVAILABLE || failure.code === PluginCodes.BAD_RESPONSE || (failure instanceof PluginCallError && failure.keepsIsolate))) return;
    if (this.instance !== instance) return; // Another failure already replaced it.
    this.instance = undefined;
    instance.dispose(failure.code);
    this.noteFailure(failure);
    if (!this.closed && this.retryAt <= performance.now() && !this.building) this.rebuild().catch(() => undefined);
  }

  /**
   * A call the wall-clock limit stopped while the isolate had used little CPU (a CPU quota, a busy
   * machine): not the plugin's failure, so no backoff and no denial; but the plugin was stopped
   * mid-call and its state may be half-updated, so the call runs again on a fresh isolate.
   */
  private replaceDescheduled(instance: PluginInstance, failure: PluginCallError): void {
    // Calls lost with an isolate already dropped for this just run again.
    if (this.instance !== instance || !instance.alive) return;
    this.logger.warn(
      { ...this.where, code: PluginCodes.DESCHEDULED, descheduled: true, cpuMs: failure.cpuMs, cause: failure.message },
      'plugin call stopped by the wall-clock limit after little CPU (the machine held it back): it runs again on a fresh isolate',
    );
    this.instance = undefined;
    instance.dispose('a call was stopped while descheduled', { callsRunAgain: true });
    if (!this.closed && !this.building) this.rebuild().catch(() => undefined);
  }

  private noteFailure(failure: GatehouseError): void {
    this.failures++;
    this.lastFailure = failure;
    // First failure: rebuild at once. Repeated ones: back off, so a plugin that always fails
    // costs a rebuild per backoff period instead of one per request.
    const backoff = this.failures <= 1 ? 0 : Math.min(MAX_BACKOFF_MS, 50 * 2 ** (this.failures - 2));
    this.retryAt = performance.now() + backoff;
  }
}

/**
 * The step's {@link Egress} from `pluginAuth.egress`: URL entries by origin, Upstream entries
 * under their virtual origin. Throws GH_EXTAUTH_STEP_BUILD-worthy errors for entries that
 * cannot be honoured (load-time checks catch them first).
 */
function buildEgress(spec: PluginAuthSpec, options: PluginStepOptions, timeoutMs: number): Egress {
  const rules: EgressRule[] = (spec.egress ?? []).map((entry, index) => {
    if (entry.url !== undefined) {
      const url = URL.parse(entry.url);
      if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
        throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `pluginAuth.egress[${index}].url: ${JSON.stringify(entry.url)} is not an absolute http(s) URL`);
      }
      return { origin: url.origin.toLowerCase() };
    }
    const ref = entry.upstreamRef!;
    const namespace = ref.namespace ?? options.namespace ?? 'default';
    const upstream = options.resolveUpstream?.({ name: ref.name, namespace });
    if (!upstream) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `pluginAuth.egress[${index}].upstreamRef: Upstream ${namespace}/${ref.name} is not served`);
    if (!upstream.static) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `pluginAuth.egress[${index}].upstreamRef: Upstream ${namespace}/${ref.name} is a kube Upstream; plugin egress needs static hosts`);
    return { origin: upstreamOrigin(ref.name, namespace), upstream: { hosts: upstream.static.hosts, useTls: upstream.static.useTls === true } };
  });
  return new Egress(rules, { timeoutMs, ...(options.maxFetchResponseBytes ? { maxResponseBytes: options.maxFetchResponseBytes } : {}) });
}

/** `ctx.secrets` from `pluginAuth.secretRefs`; a missing Secret or key fails the build (load-time checks catch it first). */
function resolveSecrets(spec: PluginAuthSpec, options: PluginStepOptions): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, ref] of Object.entries(spec.secretRefs ?? {})) {
    const namespace = ref.namespace ?? options.namespace ?? 'default';
    const value = options.resolveSecret?.({ name: ref.name, namespace, key: ref.key });
    if (value === undefined) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `pluginAuth.secretRefs.${name}: Secret ${namespace}/${ref.name} key "${ref.key}" is not served`);
    out[name] = value;
  }
  return out;
}
