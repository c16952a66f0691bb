import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, describe, expect, test } from 'vitest';
import { OtlpHttpExporter } from './otlp-http-exporter.ts';

/** Finished spans to export, made by the SDK. */
function spans(count: number): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
  const tracer = provider.getTracer('test');
  for (let i = 0; i < count; i++) tracer.startSpan(`span-${i}`, { attributes: { i } }).end();
  return memory.getFinishedSpans();
}

const exported = (exporter: OtlpHttpExporter, batch: ReadableSpan[]) => new Promise<ExportResult>((resolve) => exporter.export(batch, resolve));

/** A collector's OTLP/HTTP endpoint answering `status`, keeping what it received. */
async function collector(status: number) {
  const received: { headers: IncomingHttpHeaders; bytes: number; path: string }[] = [];
  const server = createServer((req, res) => {
    let bytes = 0;
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => {
      received.push({ headers: req.headers, bytes, path: req.url ?? '' });
      res.writeHead(status, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, received, close: () => new Promise((r) => server.close(r)) };
}

describe('OtlpHttpExporter (batches POSTed from a worker thread)', () => {
  const closers: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const close of closers) await close();
  });

  test('a batch is one protobuf POST; a 2xx is success, anything else a failure; shut down, it exports nothing and its thread exits', async () => {
    const ok = await collector(200);
    const refusing = await collector(503);
    closers.push(ok.close, refusing.close);
    const exporter = new OtlpHttpExporter(ok.url, 5000);
    expect((await exported(exporter, spans(3))).code).toBe(ExportResultCode.SUCCESS);
    expect(ok.received).toHaveLength(1);
    expect(ok.received[0]).toMatchObject({ path: '/v1/traces', headers: { 'content-type': 'application/x-protobuf' } });
    expect(ok.received[0]!.bytes).toBeGreaterThan(50);

    const failing = new OtlpHttpExporter(refusing.url, 5000);
    const refused = await exported(failing, spans(1));
    expect(refused.code).toBe(ExportResultCode.FAILED);
    expect(refused.error?.message).toMatch(/503/);

    await Promise.all([exporter.shutdown(), failing.shutdown()]);
    expect((await exported(exporter, spans(1))).code).toBe(ExportResultCode.FAILED);
    expect(ok.received).toHaveLength(1);
  });

  test('a collector that is down or never answers fails each batch in flight within the timeout', async () => {
    const down = new OtlpHttpExporter('http://127.0.0.1:1/v1/traces', 5000);
    expect((await exported(down, spans(1))).code).toBe(ExportResultCode.FAILED);
    await down.shutdown();

    const silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    closers.push(async () => {
      silent.closeAllConnections();
      await new Promise((r) => silent.close(r));
    });
    const hanging = new OtlpHttpExporter(`http://127.0.0.1:${(silent.address() as AddressInfo).port}/v1/traces`, 300);
    const [first, second] = await Promise.all([exported(hanging, spans(1)), exported(hanging, spans(1))]);
    expect(first.code).toBe(ExportResultCode.FAILED);
    expect(second.code).toBe(ExportResultCode.FAILED);
    await hanging.shutdown();
  });
});
