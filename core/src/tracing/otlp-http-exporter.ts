import { Worker } from 'node:worker_threads';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { SendReply, SendRequest } from './otlp-http-sender.ts';

/**
 * OTLP/HTTP (protobuf) span export: batches are encoded here with the SDK's own serializer and
 * POSTed by a worker thread over undici (./otlp-http-sender.ts), in place of
 * `@opentelemetry/exporter-trace-otlp-proto`'s `node:http` transport. Neither client may run on
 * the gateway's event loop: a `node:http` client shares OutgoingMessage and stream code with every
 * response the gateway writes (V8 deoptimised it: "wrong map" 138 times in 12 s with 1% of
 * requests sampled against 40 with none), and an undici request shares the proxy's own request
 * code; either cost a young process several per cent of its throughput (docs/tracing.md "Cost").
 * The worker starts with the exporter (when the configuration names a collector, before traffic).
 * One POST per batch, bounded by `timeoutMs`; a failed batch is dropped (spans, never requests,
 * are what an unreachable collector costs), not retried.
 */
export class OtlpHttpExporter implements SpanExporter {
  readonly #url: string;
  readonly #timeoutMs: number;
  #worker: Worker | undefined;
  #nextId = 0;
  /** Batches sent to the worker and not answered yet, by id. */
  readonly #waiting = new Map<number, (error: string | undefined) => void>();
  readonly #pending = new Set<Promise<void>>();
  #closed = false;

  constructor(url: string, timeoutMs: number) {
    this.#url = url;
    this.#timeoutMs = timeoutMs;
    this.#sender();
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    if (this.#closed) return done({ code: ExportResultCode.FAILED, error: new Error('the exporter is shut down') });
    let body: Uint8Array | undefined;
    try {
      body = ProtobufTraceSerializer.serializeRequest(spans);
    } catch (error) {
      return done({ code: ExportResultCode.FAILED, error: error as Error });
    }
    if (!body) return done({ code: ExportResultCode.FAILED, error: new Error('the spans could not be encoded') });
    const sent = this.#send(body).then((error) => done(error === undefined ? { code: ExportResultCode.SUCCESS } : { code: ExportResultCode.FAILED, error: new Error(error) }));
    this.#pending.add(sent);
    void sent.finally(() => this.#pending.delete(sent));
  }

  /** Waits for the exports in flight. */
  async forceFlush(): Promise<void> {
    await Promise.all(this.#pending);
  }

  async shutdown(): Promise<void> {
    this.#closed = true;
    await this.forceFlush();
    const worker = this.#worker;
    this.#worker = undefined;
    if (!worker) return;
    // The worker closes its connections and exits; terminated if it does not within the timeout.
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage('close');
    const timer = setTimeout(() => void worker.terminate(), this.#timeoutMs);
    await exited;
    clearTimeout(timer);
  }

  /** The batch's POST on the worker; resolves with why it failed, or undefined. */
  #send(body: Uint8Array): Promise<string | undefined> {
    const worker = this.#sender();
    const id = ++this.#nextId;
    // Held while a batch is in flight, as a request of its own would hold the process.
    if (this.#waiting.size === 0) worker.ref();
    return new Promise((resolve) => {
      this.#waiting.set(id, resolve);
      // Copied, not transferred: the serializer's bytes may be a view into a shared pool.
      worker.postMessage({ id, url: this.#url, body, timeoutMs: this.#timeoutMs } satisfies SendRequest);
    });
  }

  /** The sending worker, started again if it died (its batches in flight failed). */
  #sender(): Worker {
    if (this.#worker) return this.#worker;
    // The sources run as .ts (development, tests), the build as .js next to this file.
    const extension = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
    const worker = new Worker(new URL(`./otlp-http-sender${extension}`, import.meta.url), { name: 'gatehouse-otlp' });
    worker.unref();
    worker.on('message', (reply: SendReply) => this.#answer(reply.id, reply.error));
    const failed = (why: string) => {
      if (this.#worker === worker) this.#worker = undefined;
      for (const id of [...this.#waiting.keys()]) this.#answer(id, why);
    };
    worker.on('error', (error) => failed(`the OTLP sender failed: ${error.message}`));
    worker.on('exit', (code) => failed(`the OTLP sender exited (${code})`));
    this.#worker = worker;
    return worker;
  }

  #answer(id: number, error: string | undefined): void {
    const resolve = this.#waiting.get(id);
    if (!resolve) return;
    this.#waiting.delete(id);
    if (this.#waiting.size === 0) this.#worker?.unref();
    resolve(error);
  }
}
