import { MemoryStore, type StoreCall, type StoreLimits, type StoreResult } from '@gatehouse/plugin-sdk/runtime';
import { StoreOpError } from './store-error.ts';

/**
 * Where the `memory` backend of `ctx.store` keeps its data (SPEC 5.3, docs/plugins.md "Store").
 *
 * Plugin steps run in a plugin process (the default), a plugin thread, or inline on the event
 * loop, in each traffic process: the single process of `gatehouse run` / `gatehouse extauth`, or
 * every worker of `gatehouse run --workers N` plus the primary (which serves the extauth gRPC
 * port). The memory stores live in ONE hub that all of them reach:
 *
 * - one traffic process (`--workers 1`): the hub is in the process that runs the isolates (the
 *   plugin process), so an operation is a Map lookup answered within the plugin's own call;
 * - `--workers N`: the hub is in the cluster primary, which outlives every worker and plugin
 *   process; isolates reach it through their parent (IPC), batched per turn of the event loop.
 *
 * The hub keys stores by step identity (namespace/AuthConfig/step index/plugin), so a reload, a
 * plugin rebuild or an isolate rebuild finds its counters again. A hub entry unused for an hour
 * whose entries have all expired is dropped.
 */

/** One operation sent to the hub from another process or thread. */
export interface StoreRequest {
  id: number;
  identity: string;
  limits: StoreLimits;
  call: StoreCall;
  /** Epoch ms: the answer is useless after this. */
  deadline: number;
}

/** The hub's answer to one {@link StoreRequest}. */
export type StoreReply = { id: number; ok: true; value: StoreResult } | { id: number; ok: false; name: string; message: string };

/** How this process reaches the memory hub. */
export interface MemoryRoute {
  run(identity: string, limits: StoreLimits, call: StoreCall, deadline: number): StoreResult | Promise<StoreResult>;
}

const IDLE_MS = 60 * 60 * 1000;

/** The memory stores of every step, by identity. Synchronous: each operation is atomic. */
export class MemoryHub implements MemoryRoute {
  private readonly stores = new Map<string, { store: MemoryStore; usedAt: number; lastExpiry: number }>();
  private readonly now: () => number;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(now: () => number = Date.now) {
    this.now = now;
  }

  /** Stores held now. */
  get size(): number {
    return this.stores.size;
  }

  run(identity: string, limits: StoreLimits, call: StoreCall): StoreResult {
    let entry = this.stores.get(identity);
    if (!entry) {
      entry = { store: new MemoryStore(limits, this.now), usedAt: 0, lastExpiry: 0 };
      this.stores.set(identity, entry);
      this.sweeper ??= setInterval(() => this.sweep(), 10 * 60 * 1000).unref();
    }
    const now = this.now();
    entry.usedAt = now;
    if (call.op !== 'get' && call.op !== 'delete') entry.lastExpiry = call.ttlMs === undefined ? Infinity : Math.max(entry.lastExpiry, now + call.ttlMs);
    try {
      return entry.store.run(call);
    } catch (error) {
      const name = (error as Error).name === 'RangeError' ? 'RangeError' : 'TypeError';
      throw new StoreOpError(name, (error as Error).message);
    }
  }

  /** Drops stores nobody used for an hour and whose entries have all expired. */
  sweep(): void {
    const now = this.now();
    for (const [identity, entry] of this.stores) if (now - entry.usedAt >= IDLE_MS && entry.lastExpiry <= now) this.stores.delete(identity);
  }
}

/**
 * A route to a hub in another process or thread: requests of one turn of the event loop go in one
 * message; each answer settles its promise, and a missed deadline rejects with StoreUnavailableError.
 */
export class RemoteMemoryRoute implements MemoryRoute {
  private nextId = 0;
  private outgoing: StoreRequest[] = [];
  private readonly waiting = new Map<number, { resolve: (value: StoreResult) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }>();
  private readonly send: (requests: StoreRequest[]) => void;
  /** Requests waiting at most; beyond, operations fail at once (a hub that stopped answering). */
  private readonly maxWaiting: number;

  constructor(send: (requests: StoreRequest[]) => void, maxWaiting = 10_000) {
    this.send = send;
    this.maxWaiting = maxWaiting;
  }

  run(identity: string, limits: StoreLimits, call: StoreCall, deadline: number): Promise<StoreResult> {
    if (this.waiting.size >= this.maxWaiting) return Promise.reject(new StoreOpError('StoreUnavailableError', `the memory store did not answer ${this.waiting.size} operations`));
    const id = ++this.nextId;
    if (this.outgoing.length === 0) setImmediate(() => this.flush());
    this.outgoing.push({ id, identity, limits, call, deadline });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new StoreOpError('StoreUnavailableError', 'the memory store did not answer within the call\'s deadline'));
      }, Math.max(1, deadline - Date.now()));
      this.waiting.set(id, { resolve, reject, timer });
    });
  }

  private flush(): void {
    const out = this.outgoing;
    this.outgoing = [];
    if (out.length > 0) this.send(out);
  }

  /** Answers from the hub. */
  answered(replies: readonly StoreReply[]): void {
    for (const reply of replies) {
      const waiter = this.waiting.get(reply.id);
      if (!waiter) continue;
      this.waiting.delete(reply.id);
      clearTimeout(waiter.timer);
      if (reply.ok) waiter.resolve(reply.value);
      else waiter.reject(new StoreOpError(reply.name === 'RangeError' || reply.name === 'TypeError' ? reply.name : 'StoreUnavailableError', reply.message));
    }
  }

  /** The hub is gone (a dead parent): everything waiting fails now. */
  failAll(reason: string): void {
    for (const [id, waiter] of this.waiting) {
      this.waiting.delete(id);
      clearTimeout(waiter.timer);
      waiter.reject(new StoreOpError('StoreUnavailableError', reason));
    }
    this.outgoing = [];
  }
}

/**
 * Runs requests from another process or thread on `route` (this process's hub, or its route
 * onward) and answers them together once all have settled.
 */
export function serveStoreRequests(requests: unknown, route: MemoryRoute, answer: (replies: StoreReply[]) => void): void {
  if (!Array.isArray(requests)) return;
  const replies: StoreReply[] = [];
  const later: Promise<void>[] = [];
  for (const request of requests as StoreRequest[]) {
    const id = request?.id;
    if (typeof id !== 'number') continue;
    const failed = (error: unknown) => replies.push({ id, ok: false, name: (error as Error).name, message: (error as Error).message });
    try {
      const value = route.run(request.identity, request.limits, request.call, request.deadline);
      if (typeof (value as { then?: unknown } | null)?.then === 'function') {
        later.push(
          Promise.resolve(value).then(
            (v) => {
              replies.push({ id, ok: true, value: v });
            },
            (error: unknown) => {
              failed(error);
            },
          ),
        );
      }
      else replies.push({ id, ok: true, value: value as StoreResult });
    } catch (error) {
      failed(error);
    }
  }
  if (later.length === 0) answer(replies);
  else void Promise.all(later).then(() => answer(replies));
}

/** This process's hub (used when the route is local). */
export const processHub = new MemoryHub();

let route: MemoryRoute = processHub;
/** Whether plugin hosts started by this process send memory operations to it rather than keeping their own hub. */
let viaParent = false;

/** How this process reaches the memory hub (its own, unless configured otherwise). */
export function memoryRoute(): MemoryRoute {
  return route;
}

/**
 * Where the hub is for this process (called once at startup): `local` (default: the process
 * running the isolates keeps it), `here` (this process's main thread, reached by its plugin
 * hosts: the cluster primary), or a remote route (a cluster worker: the primary's hub).
 */
export function configureMemoryStore(where: 'local' | 'here' | MemoryRoute): void {
  if (where === 'local') {
    route = processHub;
    viaParent = false;
  } else if (where === 'here') {
    route = processHub;
    viaParent = true;
  } else {
    route = where;
    viaParent = true;
  }
}

/** Whether this process's plugin thread or process must reach the hub through this process. */
export function memoryStoreViaParent(): boolean {
  return viaParent;
}
