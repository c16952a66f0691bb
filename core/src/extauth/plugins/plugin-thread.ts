import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { PluginMetadata } from '@gatehouse/plugin-sdk/build';
import type { PluginAuthSpec } from '../../config/schema/auth-config.ts';
import type { UpstreamSpec } from '../../config/schema/upstream.ts';
import { GatehouseError } from '../../errors.ts';
import { killAfterCatastrophe, onWatchdogStarted } from '../../server/process-guards.ts';
import { forbidden, type AuthDecision, type CheckRequest, type StepContext } from '../step.ts';
import { checkJson } from './check-json.ts';
import { PluginCodes } from './codes.ts';
import type { PluginHostLogger } from './plugin-instance.ts';
import type { PluginStep, PluginStepOptions } from './plugin-step.ts';

/**
 * Plugin steps whose isolates run on a thread of their own (`--plugin-thread`, the default of
 * `gatehouse run` and `gatehouse extauth`). The event loop that serves traffic only hands each
 * turn's checks over as JSON texts in one message and takes the decisions back in one; the
 * plugin thread runs the same steps as the event loop would (./plugin-step.ts, inline calls,
 * batches, rebuilds), with its caches warm, and a plugin that loops stalls that thread, not
 * the traffic. Measured with `test/bench/cpu-probe.ts` on the 2-core dev machine (4 rounds
 * each, ratio of a plugin route's requests per second to the same process's open route):
 * RequiredHeader 0.64× on the event loop, 0.72× on the thread; JWT RS256 0.34× and 0.38×.
 * With cores to spare the event loop's gain is larger: it no longer runs plugin code at all.
 *
 * What cannot cross a thread is resolved here first: the Upstreams of `egress` and the values
 * of `secretRefs`. Log lines come back to the step's logger.
 */

/** Messages to the plugin thread. */
export type ToThread =
  | { t: 'create'; sid: number; spec: PluginAuthSpec; options: ThreadStepOptions; upstreams: Record<string, UpstreamSpec>; secrets: Record<string, string> }
  | { t: 'calls'; calls: (number | string)[] }
  | { t: 'close'; sid: number }
  | { t: 'watchdog'; stallMs: number };

/** Messages from the plugin thread. */
export type FromThread =
  | { t: 'created'; sid: number; ok: true; name: string; file: string; metadata: PluginMetadata; mode: PluginStep['mode'] }
  | { t: 'created'; sid: number; ok: false; code: string; message: string }
  /** `answers`: call id, decision ({@link ALLOW} for a plain allow), …; `modes`: step id, mode, … for steps whose mode changed. */
  | { t: 'answers'; answers: unknown[]; modes?: (number | string)[] }
  | { t: 'closed'; sid: number }
  | { t: 'log'; sid: number; level: 'debug' | 'info' | 'warn' | 'error'; fields: object; message: string };

/** A plain allow (no headers, no State) in an answers message. */
export const ALLOW = 1;

/** The step options that cross: everything but the logger and the resolvers. */
export type ThreadStepOptions = Omit<PluginStepOptions, 'logger' | 'resolveUpstream' | 'resolveSecret'>;

/** How resolved Upstreams and Secrets are keyed in a `create` message. */
export const upstreamKey = (ref: { name: string; namespace: string }) => `${ref.namespace}/${ref.name}`;
export const secretKey = (ref: { name: string; namespace: string; key: string }) => `${ref.namespace}/${ref.name}/${ref.key}`;

/** The process's plugin thread, started with the first step that needs it. */
class PluginThread {
  private readonly worker: Worker;
  private nextStep = 0;
  private nextCall = 0;
  private readonly loggers = new Map<number, PluginHostLogger>();
  private readonly created = new Map<number, { resolve: (message: Extract<FromThread, { t: 'created' }>) => void }>();
  private readonly closing = new Map<number, () => void>();
  private readonly steps = new Map<number, ThreadedPluginStep>();
  private readonly waiting = new Map<number, (decision: AuthDecision) => void>();
  /** The checks of this turn of the event loop, flat: step id, call id, JSON text, … */
  private outgoing: (number | string)[] = [];

  constructor() {
    // Compiled (dist/) or run from the sources: the entry has this file's extension.
    const entry = new URL(`./plugin-thread-main${extname(fileURLToPath(import.meta.url))}`, import.meta.url);
    // The thread's loop is watched as the main one is (--watchdog): a plugin stuck there
    // (under an operator-raised CPU limit) stops every plugin step, and gets the process restarted.
    this.worker = new Worker(entry, { name: 'gatehouse-plugins' });
    onWatchdogStarted((stallMs) => this.post({ t: 'watchdog', stallMs }));
    // Only steps keep the process alive, never the thread.
    this.worker.unref();
    this.worker.on('message', (message: FromThread) => this.received(message));
    // A process that exits takes the thread with it: that is no failure.
    let exiting = false;
    process.once('exit', () => (exiting = true));
    const lost = (cause: string) => {
      if (exiting) return;
      // Plugin calls and rebuilds all live there: a process without it cannot authorize
      // anything, and is restarted as after a catastrophic isolate failure. Until then
      // nothing waits for it: checks are denied, builds fail, closes are done.
      killAfterCatastrophe({ plugin: '(all)', file: '(plugin thread)', cause });
      for (const [id, resolve] of this.waiting) {
        this.waiting.delete(id);
        resolve(forbidden());
      }
      for (const [sid, pending] of this.created) {
        this.created.delete(sid);
        pending.resolve({ t: 'created', sid, ok: false, code: PluginCodes.UNAVAILABLE, message: cause });
      }
      for (const [sid, resolve] of this.closing) {
        this.closing.delete(sid);
        resolve();
      }
    };
    this.worker.on('error', (error) => lost(`the plugin thread failed: ${error.message}`));
    this.worker.on('exit', (code) => lost(`the plugin thread exited (${code})`));
  }

  async create(spec: PluginAuthSpec, options: PluginStepOptions): Promise<PluginStep> {
    const { logger, resolveUpstream, resolveSecret, ...rest } = options;
    // Resolved here: functions and the snapshot stay on this thread. A missing one is left out,
    // and the step's own build reports it with its field path, as on the event loop.
    const upstreams: Record<string, UpstreamSpec> = {};
    for (const entry of spec.egress ?? []) {
      if (!entry.upstreamRef) continue;
      const ref = { name: entry.upstreamRef.name, namespace: entry.upstreamRef.namespace ?? options.namespace ?? 'default' };
      const upstream = resolveUpstream?.(ref);
      if (upstream) upstreams[upstreamKey(ref)] = upstream;
    }
    const secrets: Record<string, string> = {};
    for (const ref of Object.values(spec.secretRefs ?? {})) {
      const full = { name: ref.name, namespace: ref.namespace ?? options.namespace ?? 'default', key: ref.key };
      const value = resolveSecret?.(full);
      if (value !== undefined) secrets[secretKey(full)] = value;
    }
    const sid = ++this.nextStep;
    this.loggers.set(sid, logger);
    const reply = await new Promise<Extract<FromThread, { t: 'created' }>>((resolve) => {
      this.created.set(sid, { resolve });
      this.post({ t: 'create', sid, spec, options: rest, upstreams, secrets });
    });
    if (!reply.ok) {
      this.loggers.delete(sid);
      throw new GatehouseError(reply.code, reply.message);
    }
    const step = new ThreadedPluginStep(this, sid, reply);
    this.steps.set(sid, step);
    return step;
  }

  /** Queues one check; the turn's checks go to the thread in one message. */
  call(sid: number, json: string): Promise<AuthDecision> {
    const id = ++this.nextCall;
    if (this.outgoing.length === 0) setImmediate(() => this.flush());
    this.outgoing.push(sid, id, json);
    return new Promise((resolve) => this.waiting.set(id, resolve));
  }

  close(sid: number): Promise<void> {
    return new Promise((resolve) => {
      this.closing.set(sid, resolve);
      this.post({ t: 'close', sid });
    });
  }

  private flush(): void {
    const calls = this.outgoing;
    this.outgoing = [];
    if (calls.length > 0) this.post({ t: 'calls', calls });
  }

  private post(message: ToThread): void {
    this.worker.postMessage(message);
  }

  private received(message: FromThread): void {
    switch (message.t) {
      case 'answers': {
        const { answers, modes } = message;
        if (modes) for (let i = 0; i + 1 < modes.length; i += 2) this.steps.get(modes[i] as number)?.moved(modes[i + 1] as PluginStep['mode']);
        for (let i = 0; i + 1 < answers.length; i += 2) {
          const id = answers[i] as number;
          const resolve = this.waiting.get(id);
          if (!resolve) continue;
          this.waiting.delete(id);
          const answer = answers[i + 1];
          resolve(answer === ALLOW ? { allowed: true, headersToSet: [], headersToRemove: [] } : (answer as AuthDecision));
        }
        return;
      }
      case 'log': {
        const logger = this.loggers.get(message.sid);
        logger?.[message.level](message.fields, message.message);
        return;
      }
      case 'created': {
        const pending = this.created.get(message.sid);
        this.created.delete(message.sid);
        pending?.resolve(message);
        return;
      }
      case 'closed': {
        this.loggers.delete(message.sid);
        this.steps.delete(message.sid);
        const resolve = this.closing.get(message.sid);
        this.closing.delete(message.sid);
        resolve?.();
        return;
      }
    }
  }
}

let thread: PluginThread | undefined;

/**
 * {@link createPluginStep} on the process's plugin thread: the same build (and the same
 * GH_PLUGIN_* errors), the same calls, with the isolate off the event loop.
 */
export function createThreadedPluginStep(spec: PluginAuthSpec, options: PluginStepOptions): Promise<PluginStep> {
  thread ??= new PluginThread();
  return thread.create(spec, options);
}

/** A step whose plugin runs on the plugin thread. */
class ThreadedPluginStep implements PluginStep {
  readonly type = 'pluginAuth' as const;
  readonly name: string;
  readonly file: string;
  readonly metadata: PluginMetadata;
  private currentMode: PluginStep['mode'];
  private readonly thread: PluginThread;
  private readonly sid: number;
  private closed = false;

  constructor(thread: PluginThread, sid: number, created: Extract<FromThread, { t: 'created'; ok: true }>) {
    this.thread = thread;
    this.sid = sid;
    this.name = created.name;
    this.file = created.file;
    this.metadata = created.metadata;
    this.currentMode = created.mode;
  }

  get mode(): PluginStep['mode'] {
    return this.currentMode;
  }

  /** Where the thread's step runs its calls now (sent with its answers when it changes). */
  moved(mode: PluginStep['mode']): void {
    this.currentMode = mode;
  }

  authorize(request: CheckRequest, context?: StepContext): Promise<AuthDecision> {
    return this.authorizeJson(checkJson(request, context));
  }

  authorizeJson(json: string): Promise<AuthDecision> {
    if (this.closed) return Promise.resolve(forbidden());
    return this.thread.call(this.sid, json);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.thread.close(this.sid);
  }
}

/** The code a plugin step's build failure carries (for the thread's reply). */
export function failureOf(error: unknown): { code: string; message: string } {
  const code = (error as { code?: unknown }).code;
  return { code: typeof code === 'string' && code.startsWith('GH_') ? code : PluginCodes.INIT_FAILED, message: error instanceof Error ? error.message : String(error) };
}
