import { subscribe, unsubscribe } from 'node:diagnostics_channel';

/** Body bytes streamed between two young-generation collections. */
export const COLLECT_EVERY_BYTES = 4 * 1024 * 1024;

/** V8's `gc` function (exposed by `--expose-gc`, which the launcher passes). */
export type CollectGarbage = (options: { type: 'minor'; execution: 'async' }) => void;

export interface ChunkCollectorOptions {
  everyBytes?: number;
  /** Defaults to `globalThis.gc`. */
  collect?: CollectGarbage;
}

/** Undici's per-chunk channels: request bodies sent upstream, response bodies received. */
const CHANNELS = ['undici:request:bodyChunkSent', 'undici:request:bodyChunkReceived'];

/**
 * Bounds the memory held by body chunks that were already forwarded.
 *
 * Every chunk read from a socket is a fresh 64 KB buffer that is garbage once written on.
 * Streaming allocates almost no JS objects, so the young generation never fills and V8
 * frees these buffers only when their external bytes trigger a full mark-compact: tens of
 * MB later, and later still on a busy CPU. Counting the body bytes undici moves (both
 * directions; proxy and GraphQL upstreams alike) and asking for a scavenge every
 * {@link COLLECT_EVERY_BYTES} frees them while still young. Measured over 200 MB down +
 * 200 MB up: peak RSS 159–165 → 116–121 MB and 35% less CPU (scavenges are cheaper than
 * the mark-compacts they replace); a publish costs ~11 ns per chunk.
 *
 * Returns a function that stops it, or undefined when there is no `gc` to call.
 */
export function startChunkCollector(options: ChunkCollectorOptions = {}): (() => void) | undefined {
  const collect = options.collect ?? (globalThis as { gc?: CollectGarbage }).gc;
  if (typeof collect !== 'function') return undefined;
  const everyBytes = options.everyBytes ?? COLLECT_EVERY_BYTES;
  let pending = 0;
  const count = (message: unknown) => {
    pending += (message as { chunk: { length: number } }).chunk.length;
    if (pending < everyBytes) return;
    pending %= everyBytes;
    // Async: the scavenge runs as its own task, not inside undici's I/O callback.
    collect({ type: 'minor', execution: 'async' });
  };
  for (const name of CHANNELS) subscribe(name, count);
  return () => {
    for (const name of CHANNELS) unsubscribe(name, count);
  };
}
