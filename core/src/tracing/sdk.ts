import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Attributes, type Context, type Span, type TextMapGetter, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor, ParentBasedSampler, RandomIdGenerator, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Collector, SpanHandle, SpanKindName, TracingRuntime } from './tracing.ts';

/**
 * The OpenTelemetry SDK side of tracing, loaded only when a collector is configured
 * (`import()` from ./tracing.ts): a process that does not trace never holds the SDK. Spans go
 * through a batch span processor with a bounded queue (spans beyond it are dropped) to an OTLP
 * exporter; an exporter that fails, hangs or answers garbage costs spans, never requests.
 */

/** Spans waiting for export; more are dropped (the SDK's default is 2048). */
const MAX_QUEUE = 4096;
const propagator = new W3CTraceContextPropagator();
const ids = new RandomIdGenerator();

const getter: TextMapGetter<Record<string, string | string[] | undefined>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};

const KINDS: Record<SpanKindName, SpanKind> = { server: SpanKind.SERVER, client: SpanKind.CLIENT, internal: SpanKind.INTERNAL };

/** A runtime for one collector: its own provider, processor and exporter. */
export async function createRuntime(collector: Collector): Promise<TracingRuntime> {
  const exporter: SpanExporter = collector.protocol === 'grpc'
    ? new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter({ url: collector.url, timeoutMillis: 10_000 })
    : new (await import('./otlp-http-exporter.ts')).OtlpHttpExporter(collector.url, 10_000);
  const processor = new BatchSpanProcessor(exporter, { maxQueueSize: MAX_QUEUE, maxExportBatchSize: 512, scheduledDelayMillis: collector.flushMs ?? 1000, exportTimeoutMillis: 10_000 });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': collector.serviceName }),
    // The root's decision is the gateway's (percentages, ./tracing.ts); below it, the parent's.
    sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }),
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer('gatehouse');
  return {
    collector,
    start(name, kind, attributes, carrier, sampled) {
      const parent = carrier ? propagator.extract(ROOT_CONTEXT, carrier, getter) : ROOT_CONTEXT;
      const remote = trace.getSpanContext(parent);
      if (!remote && sampled === false) {
        // Not sampled and no caller's decision: a span that records nothing, whose ids still propagate.
        return new Handle(tracer, trace.wrapSpanContext({ traceId: ids.generateTraceId(), spanId: ids.generateSpanId(), traceFlags: TraceFlags.NONE }));
      }
      return startHandle(tracer, name, KINDS[kind], attributes, parent);
    },
    async shutdown() {
      await provider.shutdown().catch(() => {});
    },
    async flush() {
      await provider.forceFlush().catch(() => {});
    },
  };
}

function startHandle(tracer: Tracer, name: string, kind: SpanKind, attributes: Attributes | undefined, parent: Context): Handle {
  const span = tracer.startSpan(name, attributes ? { kind, attributes } : { kind }, parent);
  return new Handle(tracer, span);
}

class Handle implements SpanHandle {
  readonly recording: boolean;
  private readonly tracer: Tracer;
  private readonly span: Span;
  private headers: Record<string, string> | undefined;
  private ended = false;

  constructor(tracer: Tracer, span: Span) {
    this.tracer = tracer;
    this.span = span;
    this.recording = span.isRecording();
  }

  /** What W3CTraceContextPropagator.inject writes for this span, formatted directly (no context objects: this runs for every sampled request). */
  get traceHeaders(): Record<string, string> {
    if (this.headers) return this.headers;
    const context = this.span.spanContext();
    const out: Record<string, string> = { traceparent: `00-${context.traceId}-${context.spanId}-${context.traceFlags & TraceFlags.SAMPLED ? '01' : '00'}` };
    const state = context.traceState?.serialize();
    if (state) out.tracestate = state;
    return (this.headers = out);
  }

  get traceparent(): string {
    return this.traceHeaders.traceparent!;
  }

  get traceId(): string {
    return this.span.spanContext().traceId;
  }

  setAttribute(name: string, value: string | number | boolean): void {
    if (this.recording) this.span.setAttribute(name, value);
  }

  event(name: string): void {
    if (this.recording) this.span.addEvent(name);
  }

  child(name: string, kind: SpanKindName, attributes?: Record<string, string | number | boolean>): SpanHandle {
    return startHandle(this.tracer, name, KINDS[kind], attributes, trace.setSpan(ROOT_CONTEXT, this.span));
  }

  end(error?: string): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.recording) return;
    if (error !== undefined) this.span.setStatus({ code: SpanStatusCode.ERROR, message: error });
    this.span.end();
  }
}
