// The plugin thread or plugin process (./plugin-thread.ts): builds and runs plugin steps as the
// event loop would, for the main thread's checks. One message in per turn of the main loop, one
// out per turn here. The same code serves both: a worker port, or the IPC channel of a child.
import { Socket } from 'node:net';
import { parentPort } from 'node:worker_threads';
import { startWatchdog } from '../../../server/process-guards.ts';
import type { UpstreamSpec } from '../../../config/schema/upstream.ts';
import { forbidden, type AuthDecision } from '../../step.ts';
import { createPluginStep, type PluginStep } from '../plugin-step.ts';
import { RemoteMemoryRoute } from '../store/store-hub.ts';
import { readFrames, writeFrame } from './call-pipe.ts';
import { ALLOW, failureOf, PLUGIN_PROCESS_ENV, secretKey, upstreamKey, type FromThread, type ToThread } from './plugin-thread.ts';

/** The channel to the gateway: the thread's port, or the plugin process's IPC. */
const port: { postMessage(message: FromThread): void; on(event: 'message', listener: (message: ToThread) => void): void } = parentPort ?? {
  postMessage: (message) => void process.send?.(message, (error: Error | null) => void error),
  on: (event, listener) => void process.on(event, listener as (message: unknown) => void),
};
const processOptions = parentPort ? undefined : (JSON.parse(process.env[PLUGIN_PROCESS_ENV] ?? '{}') as { stallMs?: number; maxRssMb?: number; callPipe?: number });
if (processOptions) {
  // The plugin process: it ends with its gateway (the IPC channel closes when the gateway dies,
  // however it dies), and its own watchdog kills it when its loop stalls or its memory passes
  // the bound, for the gateway to start it again (docs/plugins.md "Plugin process").
  process.on('disconnect', () => process.exit(0));
  startWatchdog({ stallMs: processOptions.stallMs ?? 5_000, loop: 'plugin process event loop', maxRssBytes: (processOptions.maxRssMb ?? 0) * 1024 * 1024 });
}
const steps = new Map<number, PluginStep>();
/** Each step's mode as the main thread last heard it. */
const reported = new Map<number, PluginStep['mode']>();
let answers: unknown[] = [];
/** Steps whose mode changed since the last answers message: step id, mode, … */
let changed: (number | string)[] = [];

function post(message: FromThread): void {
  port.postMessage(message);
}

/** The memory hub through the parent, for steps created with `memoryViaParent` (created on first use). */
let parentHub: RemoteMemoryRoute | undefined;
function hubViaParent(): RemoteMemoryRoute {
  parentHub ??= new RemoteMemoryRoute((requests) => post({ t: 'store', requests }));
  return parentHub;
}

/** A logger whose lines go to the step's logger on the main thread. */
function loggerFor(sid: number) {
  const line = (level: 'debug' | 'info' | 'warn' | 'error') => (fields: object, message: string) => {
    try {
      post({ t: 'log', sid, level, fields, message });
    } catch {
      // Something in the fields cannot be cloned: its JSON text instead.
      post({ t: 'log', sid, level, fields: JSON.parse(JSON.stringify(fields, (_key, value: unknown) => (typeof value === 'bigint' || typeof value === 'function' ? String(value) : value)) ?? '{}') as object, message });
    }
  };
  return { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };
}

/**
 * Answers go back in one message per message of calls, with the steps whose mode changed: the
 * decisions of a batch settle in one run of the microtask queue, and a nextTick scheduled from
 * it runs once that queue is empty.
 */
function answer(id: number, sid: number, decision: AuthDecision): void {
  if (answers.length === 0) process.nextTick(flush);
  // The common answer, a plain allow, crosses as a number: no object to copy.
  answers.push(id, decision.allowed && decision.headersToSet.length === 0 && decision.headersToRemove.length === 0 && decision.state === undefined && decision.responseHeaders === undefined ? ALLOW : decision);
  const mode = steps.get(sid)?.mode;
  if (mode !== undefined && reported.get(sid) !== mode) {
    reported.set(sid, mode);
    changed.push(sid, mode);
  }
}

function flush(): void {
  const out = answers;
  const modes = changed;
  answers = [];
  changed = [];
  const message: FromThread = { t: 'answers', answers: out, ...(modes.length ? { modes } : {}) };
  // The plugin process answers on its call pipe: a structured clone over the IPC channel cost
  // this loop about four times the CPU of the JSON frame (as `child.send` did the gateway's).
  if (callPipe) writeFrame(callPipe, message);
  else post(message);
}

port.on('message', (message: ToThread) => onMessage(message));
/** The plugin process's call pipe: checks and closes in, answers out (./plugin-thread.ts CALL_PIPE_FD). */
const callPipe = processOptions?.callPipe !== undefined ? openCallPipe(processOptions.callPipe) : undefined;

function openCallPipe(fd: number): Socket {
  const pipe = new Socket({ fd, readable: true, writable: true });
  // The gateway went away: 'disconnect' of the IPC channel ends this process.
  pipe.on('error', () => {});
  readFrames(
    pipe,
    (message) => onMessage(message as ToThread),
    (why) => {
      // Only the gateway writes here: a broken frame is a broken gateway side. Start afresh.
      process.stderr.write(`plugin process: the gateway sent ${why}; exiting\n`);
      process.exit(1);
    },
  );
  return pipe;
}

function onMessage(message: ToThread): void {
  switch (message.t) {
    case 'calls': {
      const calls = message.calls;
      const touched = new Set<PluginStep>();
      for (let i = 0; i + 2 < calls.length; i += 3) {
        const sid = calls[i] as number;
        const id = calls[i + 1] as number;
        const step = steps.get(sid);
        if (!step) {
          answer(id, sid, forbidden());
          continue;
        }
        step.authorizeJson(calls[i + 2] as string).then(
          (decision) => answer(id, sid, decision),
          () => answer(id, sid, forbidden()),
        );
        touched.add(step);
      }
      // The whole message is one batch per step: cross now, not a turn later.
      for (const step of touched) step.runQueued?.();
      return;
    }
    case 'create': {
      const { sid, spec, options, upstreams, secrets } = message;
      createPluginStep(spec, {
        ...options,
        ...(message.memoryViaParent ? { memoryRoute: hubViaParent() } : {}),
        logger: loggerFor(sid),
        resolveUpstream: (ref): UpstreamSpec | undefined => upstreams[upstreamKey(ref)],
        resolveSecret: (ref) => secrets[secretKey(ref)],
      }).then(
        (step) => {
          steps.set(sid, step);
          reported.set(sid, step.mode);
          post({ t: 'created', sid, ok: true, name: step.name, file: step.file, metadata: step.metadata, mode: step.mode });
        },
        (error: unknown) => post({ t: 'created', sid, ok: false, ...failureOf(error) }),
      );
      return;
    }
    case 'watchdog':
      // The plugin process has its own (above).
      if (!processOptions) startWatchdog({ stallMs: message.stallMs, loop: 'plugin thread event loop' });
      return;
    case 'ping':
      post({ t: 'pong' });
      return;
    case 'stored':
      parentHub?.answered(message.replies);
      return;
    case 'close': {
      const step = steps.get(message.sid);
      steps.delete(message.sid);
      reported.delete(message.sid);
      void (step?.close() ?? Promise.resolve()).finally(() => post({ t: 'closed', sid: message.sid }));
      return;
    }
  }
}
