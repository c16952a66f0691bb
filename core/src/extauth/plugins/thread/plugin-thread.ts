import { fork } from 'node:child_process';
import type { Socket } from 'node:net';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { PluginMetadata } from '@gatehouse/plugin-sdk/build';
import type { PluginAuthSpec } from '../../../config/schema/auth-config.ts';
import type { UpstreamSpec } from '../../../config/schema/upstream.ts';
import { GatehouseError } from '../../../errors.ts';
import { metrics } from '../../../admin/metrics.ts';
import { createLogger, type Logger } from '../../../log/logger.ts';
import { killAfterCatastrophe, onWatchdogStarted } from '../../../server/process-guards.ts';
import { forbidden, type AuthDecision, type CheckRequest, type StepContext } from '../../step.ts';
import { allow } from '../../decision.ts';
import { checkJson } from '../check-json.ts';
import { PluginCodes } from '../codes.ts';
import { pluginHostOptions } from '../plugin-host-options.ts';
import type { PluginHostLogger } from '../isolate/sandbox-limits.ts';
import type { PluginStep, PluginStepOptions } from '../plugin-step.ts';
import { memoryRoute, memoryStoreViaParent, serveStoreRequests, type StoreReply, type StoreRequest } from '../store/store-hub.ts';
import { CALL_PIPE_FD, readFrames, writeCalls, writeFrame } from './call-pipe.ts';

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
  | { t: 'create'; sid: number; spec: PluginAuthSpec; options: ThreadStepOptions; upstreams: Record<string, UpstreamSpec>; secrets: Record<string, string>; /** The memory store's hub is reached through this process (./store-hub.ts). */ memoryViaParent?: boolean }
  | { t: 'calls'; calls: (number | string)[] }
  /** Answers to `store` requests. */
  | { t: 'stored'; replies: StoreReply[] }
  | { t: 'close'; sid: number }
  | { t: 'watchdog'; stallMs: number }
  | { t: 'ping' };

/** Messages from the plugin thread. */
export type FromThread =
  | { t: 'created'; sid: number; ok: true; name: string; file: string; metadata: PluginMetadata; mode: PluginStep['mode'] }
  | { t: 'created'; sid: number; ok: false; code: string; message: string }
  /** `answers`: call id, decision ({@link ALLOW} for a plain allow), …; `modes`: step id, mode, … for steps whose mode changed. */
  | { t: 'answers'; answers: unknown[]; modes?: (number | string)[] }
  | { t: 'closed'; sid: number }
  /** Memory-store operations for the hub this process reaches (`memoryViaParent`). */
  | { t: 'store'; requests: StoreRequest[] }
  | { t: 'log'; sid: number; level: 'debug' | 'info' | 'warn' | 'error'; fields: object; message: string }
  | { t: 'pong' };

/** The environment variable that tells ./plugin-thread-main.ts it runs as the plugin process, with its watchdog's bounds (JSON). */
export const PLUGIN_PROCESS_ENV = 'GATEHOUSE_PLUGIN_PROCESS';

/** A plain allow (no headers, no State) in an answers message. */
export const ALLOW = 1;

/** The step options that cross: everything but the logger and the resolvers. */
export type ThreadStepOptions = Omit<PluginStepOptions, 'logger' | 'resolveUpstream' | 'resolveSecret' | 'memoryRoute'>;

/** How resolved Upstreams and Secrets are keyed in a `create` message. */
export const upstreamKey = (ref: { name: string; namespace: string }) => `${ref.namespace}/${ref.name}`;
export const secretKey = (ref: { name: string; namespace: string; key: string }) => `${ref.namespace}/${ref.name}/${ref.key}`;

/** A running plugin host, a worker thread or a child process, behind one interface. */
interface Channel {
  post(message: ToThread): void;
  /** Checks and step closes, in order, by the plugin process's call pipe (see {@link CALL_PIPE_FD}); absent for a thread. */
  postCall?(message: Extract<ToThread, { t: 'calls' } | { t: 'close' }>): void;
  /** Ends it at once (the process: SIGKILL). */
  kill(): void;
  /** The plugin process's pid (none for a thread). */
  readonly pid?: number;
}

/** The first restart of a dead plugin process waits this long; each death in a row doubles it, up to {@link MAX_BACKOFF_MS}. */
const FIRST_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5_000;
/** A plugin process that lived this long resets the backoff. */
const STABLE_MS = 30_000;
/** How often the parent asks the plugin process whether its loop turns (the backstop of its own watchdog). */
const PING_MS = 1_000;
/** How long a new plugin process may take to answer its first ping (loading Node and isolated-vm on a busy machine). */
const STARTUP_GRACE_MS = 30_000;
/** A step that fails to build again in a restarted plugin process is retried after this, doubling up to {@link REBUILD_MAX_MS}. */
const REBUILD_FIRST_MS = 1_000;
const REBUILD_MAX_MS = 30_000;

/** The process's plugin host, started with the first step that needs it. */
class PluginThread {
  private channel!: Channel;
  private readonly useProcess: boolean;
  /** The plugin process is dead and not started again yet: checks are denied at once. */
  private down = false;
  private startedAt = 0;
  private backoffMs = FIRST_BACKOFF_MS;
  /** When the plugin process last sent anything (0: nothing yet, since it started). */
  private lastPong = 0;
  private logger: Logger | undefined;
  private nextStep = 0;
  private nextCall = 0;
  private readonly loggers = new Map<number, PluginHostLogger>();
  private readonly created = new Map<number, { resolve: (message: Extract<FromThread, { t: 'created' }>) => void }>();
  /** The `create` message of every step alive or being built: sent again to a restarted plugin process. */
  private readonly creates = new Map<number, Extract<ToThread, { t: 'create' }>>();
  private readonly closing = new Map<number, () => void>();
  private readonly steps = new Map<number, ThreadedPluginStep>();
  private readonly waiting = new Map<number, (decision: AuthDecision) => void>();
  /** The checks of this turn of the event loop, flat: step id, call id, JSON text, … */
  private outgoing: (number | string)[] = [];
  private exiting = false;
  private stallMs = 0;
  /** Steps whose rebuild in a restarted plugin process failed: the wait before the next try. */
  private readonly rebuildDelays = new Map<number, number>();

  constructor() {
    const options = pluginHostOptions();
    this.useProcess = options.process;
    // A process that exits takes the thread (and the plugin process's IPC) with it: no failure.
    process.once('exit', () => {
      this.exiting = true;
      this.channel?.kill();
    });
    this.start();
    if (this.useProcess) {
      // The backstop of the plugin process's own watchdog: a process that stops answering pings
      // for twice its stall period is killed from here (and restarted like any death).
      const ping = setInterval(() => {
        if (this.down) return;
        const silentMs = performance.now() - (this.lastPong || this.startedAt);
        if (silentMs > (this.lastPong ? 2 * options.stallMs + PING_MS : STARTUP_GRACE_MS)) {
          this.log().error({ code: PluginCodes.PROCESS_EXITED, silentMs: Math.round(silentMs) }, `the plugin process has not answered pings for ${Math.round(silentMs)} ms: killing it`);
          this.channel.kill();
          return;
        }
        this.post({ t: 'ping' });
      }, PING_MS);
      ping.unref();
    } else {
      // The thread's loop is watched as the main one is (--watchdog): a plugin stuck there
      // (under an operator-raised CPU limit) stops every plugin step, and gets the process restarted.
      onWatchdogStarted((stallMs) => {
        this.stallMs = stallMs;
        this.post({ t: 'watchdog', stallMs });
      });
    }
  }

  private log(): Logger {
    this.logger ??= createLogger('plugin-host');
    return this.logger;
  }

  /** Starts the thread or the plugin process, and sends it every step it must hold. */
  private start(): void {
    this.down = false;
    this.startedAt = performance.now();
    this.lastPong = 0;
    let lostOnce = false;
    const lost = (cause: string) => {
      if (lostOnce) return;
      lostOnce = true;
      this.lost(cause);
    };
    this.channel = this.useProcess ? this.startProcess(lost) : this.startThread(lost);
    if (this.useProcess) this.log().info({ pid: this.channel.pid }, 'plugin process started');
    if (this.stallMs > 0) this.post({ t: 'watchdog', stallMs: this.stallMs });
    for (const message of this.creates.values()) this.post(message);
  }

  private startThread(lost: (cause: string) => void): Channel {
    // Compiled (dist/) or run from the sources: the entry has this file's extension.
    const entry = new URL(`./plugin-thread-main${extname(fileURLToPath(import.meta.url))}`, import.meta.url);
    const worker = new Worker(entry, { name: 'gatehouse-plugins' });
    // Only steps keep the process alive, never the thread.
    worker.unref();
    worker.on('message', (message: FromThread) => this.received(message));
    worker.on('error', (error) => lost(`the plugin thread failed: ${error.message}`));
    worker.on('exit', (code) => lost(`the plugin thread exited (${code})`));
    return { post: (message) => worker.postMessage(message), kill: () => void worker.terminate() };
  }

  private startProcess(lost: (cause: string) => void): Channel {
    const { stallMs, maxRssMb } = pluginHostOptions();
    const entry = fileURLToPath(new URL(`./plugin-thread-main${extname(fileURLToPath(import.meta.url))}`, import.meta.url));
    // The same Node flags as this process (the launcher's --no-node-snapshot for isolated-vm);
    // the structured clone over IPC carries the same messages as the thread's port.
    const child = fork(entry, [], {
      execArgv: process.execArgv.filter((flag) => !flag.startsWith('--inspect')),
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc', 'pipe'],
      env: { ...process.env, [PLUGIN_PROCESS_ENV]: JSON.stringify({ stallMs, maxRssMb, callPipe: CALL_PIPE_FD }) },
    });
    child.unref();
    (child.channel as { unref?: () => void } | undefined)?.unref?.();
    const calls = child.stdio[CALL_PIPE_FD] as Socket | null;
    // Its failures are the process's: a dead child is seen by 'exit' (and what waits is denied).
    calls?.on('error', () => {});
    calls?.unref();
    // What the plugin process sends is data from a process that runs untrusted code: a message the
    // gateway cannot use ends that process (restarted as after a crash), never this loop.
    const receive = (message: FromThread) => {
      try {
        this.received(message);
      } catch (error) {
        child.kill('SIGKILL');
        lost(`the plugin process sent a message the gateway could not use (${error instanceof Error ? error.message : String(error)})`);
      }
    };
    // Answers come back on the same pipe, framed the same way (see {@link CALL_PIPE_FD}).
    if (calls) {
      readFrames(
        calls,
        (message) => receive(message as FromThread),
        (why) => {
          child.kill('SIGKILL');
          lost(`the plugin process sent ${why} on its call pipe`);
        },
      );
    }
    child.on('message', receive);
    child.on('error', (error) => {
      child.kill('SIGKILL');
      lost(`the plugin process failed: ${error.message}`);
    });
    child.on('exit', (code, signal) => lost(`the plugin process exited (${signal ?? `code ${code}`})`));
    return {
      post: (message) => {
        if (!child.connected) return;
        // A send that fails is a process on its way out: its exit does the rest.
        child.send(message, (error) => void error);
      },
      kill: () => void child.kill('SIGKILL'),
      ...(calls
        ? {
            postCall: (message: Extract<ToThread, { t: 'calls' } | { t: 'close' }>) => {
              if (calls.destroyed || !calls.writable) return;
              if (message.t === 'calls') writeCalls(calls, message.calls);
              else writeFrame(calls, message);
            },
          }
        : {}),
      ...(child.pid !== undefined ? { pid: child.pid } : {}),
    };
  }

  /** The thread or process is gone: deny what waits for it; restart a process, kill this one for a thread. */
  private lost(cause: string): void {
    if (this.exiting) return;
    if (!this.useProcess) {
      // Plugin calls and rebuilds all live there: a process without it cannot authorize
      // anything, and is restarted as after a catastrophic isolate failure.
      killAfterCatastrophe({ plugin: '(all)', file: '(plugin thread)', cause });
    }
    this.down = true;
    // Nothing waits for a dead host: checks are denied (fail closed), builds in flight fail
    // (the one that killed it must not be sent again and again), closes are done.
    for (const [id, resolve] of this.waiting) {
      this.waiting.delete(id);
      resolve(forbidden());
    }
    for (const [sid, pending] of this.created) {
      this.created.delete(sid);
      this.creates.delete(sid);
      pending.resolve({ t: 'created', sid, ok: false, code: PluginCodes.UNAVAILABLE, message: cause });
    }
    for (const [sid, resolve] of this.closing) {
      this.closing.delete(sid);
      resolve();
    }
    this.outgoing = [];
    if (!this.useProcess) return;
    const lived = performance.now() - this.startedAt;
    if (lived >= STABLE_MS) this.backoffMs = FIRST_BACKOFF_MS;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(MAX_BACKOFF_MS, this.backoffMs * 2);
    metrics.pluginProcessRestarts.inc();
    this.log().error({ code: PluginCodes.PROCESS_EXITED, cause, livedMs: Math.round(lived), restartInMs: delay, steps: this.creates.size }, `${cause}: plugin checks are denied until it is restarted`);
    setTimeout(() => {
      if (!this.exiting) this.start();
    }, delay).unref();
  }

  async create(spec: PluginAuthSpec, options: PluginStepOptions): Promise<PluginStep> {
    const { logger, resolveUpstream, resolveSecret, memoryRoute: _route, ...rest } = options;
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
    const sid = (this.nextStep = (this.nextStep + 1) % 0x1_0000_0000);
    this.loggers.set(sid, logger);
    const message: Extract<ToThread, { t: 'create' }> = { t: 'create', sid, spec, options: rest, upstreams, secrets, ...(memoryStoreViaParent() ? { memoryViaParent: true } : {}) };
    const reply = await new Promise<Extract<FromThread, { t: 'created' }>>((resolve) => {
      this.created.set(sid, { resolve });
      // While a dead plugin process restarts, the build waits for it (sent by start()).
      this.creates.set(sid, message);
      if (!this.down) this.post(message);
    });
    if (!reply.ok) {
      this.loggers.delete(sid);
      this.creates.delete(sid);
      throw new GatehouseError(reply.code, reply.message);
    }
    const step = new ThreadedPluginStep(this, sid, reply);
    this.steps.set(sid, step);
    return step;
  }

  /** Queues one check; the turn's checks go to the thread in one message. */
  call(sid: number, json: string): Promise<AuthDecision> {
    // Fail closed while the plugin process restarts: nothing queues behind a dead process.
    if (this.down) return Promise.resolve(forbidden());
    // The call pipe carries ids as 32-bit numbers: wrapped (a gateway at 20,000 checks a second
    // passes 2^32 in two and a half days), never near an id still waiting.
    const id = (this.nextCall = (this.nextCall + 1) % 0x1_0000_0000);
    if (this.outgoing.length === 0) setImmediate(() => this.flush());
    this.outgoing.push(sid, id, json);
    return new Promise((resolve) => this.waiting.set(id, resolve));
  }

  close(sid: number): Promise<void> {
    this.creates.delete(sid);
    this.rebuildDelays.delete(sid);
    if (this.down) {
      this.loggers.delete(sid);
      this.steps.delete(sid);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.closing.set(sid, resolve);
      // After the checks already sent for it, on the same pipe.
      if (this.channel.postCall) this.channel.postCall({ t: 'close', sid });
      else this.post({ t: 'close', sid });
    });
  }

  private flush(): void {
    const calls = this.outgoing;
    this.outgoing = [];
    if (calls.length === 0) return;
    if (this.channel.postCall) this.channel.postCall({ t: 'calls', calls });
    else this.post({ t: 'calls', calls });
  }

  private post(message: ToThread): void {
    this.channel.post(message);
  }

  private received(message: FromThread): void {
    // Any message shows the plugin process's loop turns, a pong or not.
    this.lastPong = performance.now();
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
          // A plain allow shares decision.ts's frozen empty lists: no three objects per check.
          resolve(answer === ALLOW ? allow() : (answer as AuthDecision));
        }
        return;
      }
      case 'store':
        serveStoreRequests(message.requests, memoryRoute(), (replies) => this.post({ t: 'stored', replies }));
        return;
      case 'log': {
        const logger = this.loggers.get(message.sid);
        logger?.[message.level](message.fields, message.message);
        return;
      }
      case 'created': {
        const pending = this.created.get(message.sid);
        if (pending) {
          this.created.delete(message.sid);
          pending.resolve(message);
          return;
        }
        // A step built again in a restarted plugin process. One that fails (a Start that times out
        // on a busy machine, say) is tried again with backoff while it lives; its checks are denied meanwhile.
        if (message.ok) {
          this.rebuildDelays.delete(message.sid);
          this.steps.get(message.sid)?.moved(message.mode);
          return;
        }
        const delay = this.rebuildDelays.get(message.sid) ?? REBUILD_FIRST_MS;
        this.rebuildDelays.set(message.sid, Math.min(REBUILD_MAX_MS, delay * 2));
        this.loggers.get(message.sid)?.error({ code: message.code, retryInMs: delay }, `the step could not be built again after the plugin process restarted: ${message.message}`);
        setTimeout(() => {
          const create = this.creates.get(message.sid);
          if (create && !this.down && !this.exiting) this.post(create);
        }, delay).unref();
        return;
      }
      case 'pong':
        return;
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
