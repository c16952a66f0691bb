import { fstatSync, openSync, writeSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FormatValue, LineFormatter } from './access-format.ts';
import { bytes, ClockBytes, LineEncoder } from './line-encoder.ts';

/** One access log entry (SPEC 8): what was asked, what was answered, by whom. */
export interface AccessEntry {
  reqId: string | undefined;
  method: string | undefined;
  path: string | undefined;
  /** `HTTP/1.1`, `HTTP/2`… (Envoy's `%PROTOCOL%`); omitted when unknown. */
  protocol?: string | undefined;
  status: number;
  durationMs: number;
  virtualHost: string | undefined;
  route: string | undefined;
  upstream: string | undefined;
  /** The Upstream cluster that served it (`namespace/name`, `%UPSTREAM_CLUSTER%`), when the destination has one. */
  cluster?: string | undefined;
  /** The path and query sent upstream after rewrites: Envoy's `:path` at log time (`x-envoy-original-path` is then the client's). */
  upstreamPath?: string | undefined;
  /** The request and response, for format strings that read headers or addresses (./access-format.ts). */
  req?: IncomingMessage | undefined;
  res?: ServerResponse | undefined;
  /** Response body bytes, when the listener counted them (`%BYTES_SENT%`). */
  bytesSent?: number | undefined;
  /** Request body bytes, when the listener counted them (`%BYTES_RECEIVED%`). */
  bytesReceived?: number | undefined;
}

/** Writes one access line per request. */
export interface AccessLog {
  write(entry: AccessEntry): void;
  /** Encodes the entries still queued and hands them to the destination. */
  flush(): void;
  /**
   * False: lines never read an entry's `req` and `res`, so writers leave them out. Entries wait
   * in a queue until they are encoded; one holding its request and response kept both alive
   * through a young-generation collection, copied and promoted (the default JSON line does not
   * read them). Undefined counts as true.
   */
  readonly readsMessages?: boolean;
}

/** Where encoded access lines go: each call gets one whole line, valid only during the call. */
export interface LineSink {
  write(line: Uint8Array): void;
}

/**
 * JSON access lines in the same shape as the pino logs (`level`, `time`, `pid`, `name`, …,
 * `msg: "access"`), with a fixed field order. Entries are queued as they come and encoded
 * in runs of `batchEntries` (and at least every `flushEveryMs`), straight into a reused
 * byte buffer: no string is built per line. Measured in the proxy, A/B in one process:
 * encoding each line inside its request cost ~4 µs, several times what the same code
 * costs in a tight loop, because every request starts with cold caches; encoding a run of
 * lines together keeps the encoder and its buffers hot. Values that repeat (virtual host,
 * route, upstream, method) are encoded once and copied; per-request strings are copied
 * byte by byte when they are printable ASCII, the common case, and go through
 * `JSON.stringify` otherwise.
 */
export function createAccessLog(
  name: string,
  options: { level?: string; destination?: LineSink & { flush?(): void }; now?: () => number; batchEntries?: number; flushEveryMs?: number } = {},
): AccessLog {
  const level = options.level ?? process.env.GATEHOUSE_LOG_LEVEL ?? 'info';
  // Access lines are `info`: a quieter level turns them off, as it would for pino.
  if (!['trace', 'debug', 'info'].includes(level)) return { write() {}, flush() {}, readsMessages: false };
  const { now = Date.now, batchEntries = 64, flushEveryMs = 250 } = options;
  const destination = options.destination ?? batchedWriter();
  const encode = lineEncoder(name);
  const entries: AccessEntry[] = [];
  const times: number[] = [];
  const encodeQueued = () => {
    for (let i = 0; i < entries.length; i++) destination.write(encode(entries[i]!, times[i]!));
    entries.length = 0;
    times.length = 0;
  };
  const flush = () => {
    encodeQueued();
    destination.flush?.();
  };
  setInterval(flush, flushEveryMs).unref();
  process.once('exit', flush);
  return {
    write(entry) {
      entries.push(entry);
      times.push(now());
      if (entries.length >= batchEntries) encodeQueued();
    },
    flush,
    readsMessages: false,
  };
}

/** Encodes one entry, stamped `time`, as a JSON line; the bytes are valid until the next call. */
function lineEncoder(name: string): (e: AccessEntry, time: number) => Buffer {
  const out = new LineEncoder();
  const head = bytes('{"level":"info","time":"');
  const afterTime = bytes(`","pid":${process.pid},"name":${JSON.stringify(name)}`);
  const reqIdKey = bytes(',"reqId":');
  const methodKey = bytes(',"method":');
  const pathKey = bytes(',"path":');
  const protocolKey = bytes(',"protocol":');
  const statusKey = bytes(',"status":');
  const durationKey = bytes(',"durationMs":');
  const virtualHostKey = bytes(',"virtualHost":');
  const routeKey = bytes(',"route":');
  const upstreamKey = bytes(',"upstream":');
  const tail = bytes(',"msg":"access"}\n');
  const clock = new ClockBytes();
  return (e, time) => {
    out.reset().copy(head);
    clock.encode(out, time);
    out.copy(afterTime);
    if (e.reqId !== undefined) out.copy(reqIdKey).string(e.reqId);
    out.copy(methodKey).cached(e.method ?? '');
    out.copy(pathKey).string(e.path ?? '');
    if (e.protocol !== undefined) out.copy(protocolKey).cached(e.protocol);
    out.copy(statusKey).integer(e.status);
    out.copy(durationKey).millis(e.durationMs);
    if (e.virtualHost !== undefined) out.copy(virtualHostKey).cached(e.virtualHost);
    if (e.route !== undefined) out.copy(routeKey).cached(e.route);
    if (e.upstream !== undefined) out.copy(upstreamKey).cached(e.upstream);
    return out.copy(tail).line();
  };
}

/**
 * Lines copied into one preallocated buffer as they come and written to stdout with one
 * `writeSync` per full batch, and the rest on `flush()` (the access log calls it every
 * 250 ms and at exit): far cheaper than an asynchronous stream per line (~0.3 µs against
 * ~3.5 µs through pino's destination, measured). A batch holds whole lines; on a pipe or
 * socket at most 4096 bytes (PIPE_BUF, see defaultBatchBytes), so that with `--workers`
 * every write to a shared stdout pipe is atomic and lines from different workers never
 * interleave.
 */
export function batchedWriter(fd = 1, options: { batchBytes?: number; maxBufferedBytes?: number } = {}): LineSink & { flush(): void; writeText(line: string): void } {
  const { batchBytes = defaultBatchBytes(fd), maxBufferedBytes = 4 * 1024 * 1024 } = options;
  /** Full batches waiting (only while stdout refuses writes). */
  const pending: Buffer[] = [];
  const batch = Buffer.allocUnsafe(batchBytes);
  let used = 0;
  let buffered = 0;
  let dropped = 0;
  const writeOut = (bytes: Buffer): boolean => {
    try {
      // A short write only happens on regular files, never splitting a pipe write.
      let written = 0;
      while (written < bytes.length) written += writeSync(fd, bytes, written);
      return true;
    } catch (error) {
      // A non-blocking stdout that is full: keep the bytes and try again later.
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      return false;
    }
  };
  const drain = (): boolean => {
    while (pending.length > 0) {
      if (!writeOut(pending[0]!)) return false;
      buffered -= pending.shift()!.length;
    }
    return true;
  };
  /** Sends the current batch (or queues a copy of it behind earlier ones) and starts a new one. */
  const seal = () => {
    if (used === 0) return;
    const bytes = batch.subarray(0, used);
    if (!drain() || !writeOut(bytes)) {
      pending.push(Buffer.from(bytes));
      buffered += used;
    }
    used = 0;
  };
  const flush = () => {
    seal();
    if (dropped > 0 && drain()) {
      if (writeOut(Buffer.from(`{"level":"warn","time":"${new Date().toISOString()}","pid":${process.pid},"dropped":${dropped},"msg":"access log lines dropped: stdout is not being read"}\n`))) dropped = 0;
    }
    drain();
  };
  const write = (line: Uint8Array): void => {
      if (buffered > maxBufferedBytes) {
        dropped++;
        return;
      }
      const length = line.length;
      if (used + length > batchBytes) seal();
      if (length > batchBytes) {
        // Longer than a batch (a huge path): written on its own.
        pending.push(Buffer.from(line));
        buffered += length;
        drain();
        return;
      }
      batch.set(line, used);
      used += length;
  };
  return {
    write,
    /** A line as text, encoded straight into the batch when it fits (no buffer per line). */
    writeText(line) {
      // UTF-8 takes at most 3 bytes per UTF-16 unit: a line this short surely fits.
      if (buffered <= maxBufferedBytes && line.length * 3 <= batchBytes) {
        if (used + line.length * 3 > batchBytes) seal();
        used += batch.write(line, used, 'utf8');
        return;
      }
      write(Buffer.from(line, 'utf8'));
    },
    flush,
  };
}

/**
 * PIPE_BUF (4096) for pipes and sockets, where only writes up to that size are atomic;
 * 64 KiB otherwise (files, /dev/null), where Linux serializes writers on the shared file
 * offset. A write syscall costs the proxy ~50 µs under load (measured): bigger batches
 * make it rarer.
 */
function defaultBatchBytes(fd: number): number {
  try {
    const stat = fstatSync(fd);
    return stat.isFIFO() || stat.isSocket() ? 4096 : 64 * 1024;
  } catch {
    return 4096;
  }
}

/** One Gloo `fileSink`: where its lines go, and its compiled format. */
export interface FormattedSink {
  /** `/dev/stdout`, `/dev/stderr`, or a file appended to. */
  readonly path: string;
  readonly format: LineFormatter;
  /** The access log entry's `filter` (./access-filter.ts): only entries it passes are written. */
  readonly filter?: ((entry: AccessEntry) => boolean) | undefined;
}

/**
 * Access lines in Envoy format strings (Gloo's `accessLoggingService`, docs/gateway.md), one
 * per sink and request. When a response ends, each sink's filter runs and its compiled format
 * reads the values the line needs into a flat queue (the entry, request and response are not
 * kept); like {@link createAccessLog}, lines are encoded in runs straight into bytes, so a
 * request pays for the reads and a few pushes. `/dev/stdout` shares the batched writer's
 * atomic-write rule with the default log.
 */
export function createFormattedAccessLog(sinks: readonly FormattedSink[], options: { now?: () => number; batchEntries?: number; flushEveryMs?: number; open?: (path: string) => number } = {}): AccessLog & { close(): void } {
  const { now = Date.now, batchEntries = 64, flushEveryMs = 250 } = options;
  const open = options.open ?? openSink;
  const writers = sinks.map((sink) => ({ line: sink.format.compiled, filter: sink.filter, out: batchedWriter(open(sink.path)), values: [] as FormatValue[], lines: 0 }));
  const needsTime = writers.some((w) => w.line.needsTime);
  const encoder = new LineEncoder();
  let queued = 0;
  const encodeQueued = () => {
    for (const w of writers) {
      const { line, values, out } = w;
      const width = line.width;
      for (let i = 0, at = 0; i < w.lines; i++, at += width) {
        line.encode(values, at, encoder.reset());
        out.write(encoder.line());
      }
      values.length = 0;
      w.lines = 0;
    }
    queued = 0;
  };
  const flush = () => {
    encodeQueued();
    for (const w of writers) w.out.flush();
  };
  const timer = setInterval(flush, flushEveryMs).unref();
  process.once('exit', flush);
  return {
    write(entry) {
      const endMs = needsTime ? now() : 0;
      for (const w of writers) {
        if (w.filter && !w.filter(entry)) continue;
        w.line.capture(entry, endMs, w.values);
        w.lines++;
      }
      if (++queued >= batchEntries) encodeQueued();
    },
    flush,
    close() {
      flush();
      clearInterval(timer);
      process.off('exit', flush);
    },
  };
}

/** The fd of a sink path; files stay open for the process's life (one per distinct path). */
const SINK_FDS = new Map<string, number>();
function openSink(path: string): number {
  if (path === '/dev/stdout') return 1;
  if (path === '/dev/stderr') return 2;
  let fd = SINK_FDS.get(path);
  if (fd === undefined) SINK_FDS.set(path, (fd = openSync(path, 'a')));
  return fd;
}
