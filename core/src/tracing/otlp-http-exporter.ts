import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { Agent, request } from 'undici';

/**
 * OTLP/HTTP (protobuf) span export over undici, the client the gateway already uses, in place of
 * `@opentelemetry/exporter-trace-otlp-proto`'s `node:http` transport: a `node:http` client in the
 * process shares OutgoingMessage and stream code with every response the gateway writes, and its
 * requests made V8 deoptimise that shared code ("wrong map": 138 times in 12 s with 1% of
 * requests sampled against 40 with none; docs/tracing.md "Cost"). The OTLP encoding is the SDK's
 * own serializer. One POST per batch, bounded by `timeoutMs`; a failed batch is dropped (spans,
 * never requests, are what an unreachable collector costs), not retried.
 */
export class OtlpHttpExporter implements SpanExporter {
  readonly #url: string;
  readonly #timeoutMs: number;
  readonly #agent = new Agent({ connections: 2, keepAliveTimeout: 30_000 });
  readonly #pending = new Set<Promise<void>>();
  #closed = false;

  constructor(url: string, timeoutMs: number) {
    this.#url = url;
    this.#timeoutMs = timeoutMs;
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
    const sent = request(this.#url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf' },
      body,
      dispatcher: this.#agent,
      headersTimeout: this.#timeoutMs,
      bodyTimeout: this.#timeoutMs,
      signal: AbortSignal.timeout(this.#timeoutMs),
    }).then(
      async (response) => {
        // The collector's answer body (an ExportTraceServiceResponse) is not needed.
        await response.body.dump().catch(() => undefined);
        done(response.statusCode >= 200 && response.statusCode < 300 ? { code: ExportResultCode.SUCCESS } : { code: ExportResultCode.FAILED, error: new Error(`the collector answered ${response.statusCode}`) });
      },
      (error: unknown) => done({ code: ExportResultCode.FAILED, error: error as Error }),
    );
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
    await this.#agent.close().catch(() => undefined);
  }
}
