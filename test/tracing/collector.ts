/**
 * A real OpenTelemetry Collector for the tracing tests (test/tracing/install-otelcol.sh builds
 * it): its OTLP receiver takes the spans Gatehouse exports (gRPC and HTTP), and its OTLP/HTTP
 * exporter (`encoding: json`) hands them to a small HTTP sink in the test, where they are read.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:net';
import { describe, it } from 'vitest';
import { freePort } from '../support/ports.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

/** `GATEHOUSE_OTELCOL_PATH`, else install-otelcol.sh's link under the tools dir. */
export const OTELCOL = process.env.GATEHOUSE_OTELCOL_PATH ?? join(process.env.GATEHOUSE_TOOLS_DIR ?? join(homedir(), '.cache', 'gatehouse-tools'), 'otelcol', 'bin', 'otelcol');

/** A suite that needs the collector: fails under CI=true without it, skipped loudly elsewhere. */
export function describeWithCollector(title: string, testFile: string, body: () => void): void {
  if (existsSync(OTELCOL)) return void describe(title, body);
  const message = `otelcol not found at ${OTELCOL}: run test/tracing/install-otelcol.sh (or set GATEHOUSE_OTELCOL_PATH)`;
  if (process.env.CI === 'true') {
    describe(title, () => {
      it('needs the OpenTelemetry Collector on CI', () => {
        throw new Error(message);
      });
    });
    return;
  }
  console.warn(`\n*** SKIPPED ${testFile}: ${message} ***\n`);
  describe.skip(title, body);
}

/** One span as the collector forwarded it (OTLP/JSON: ids in hex). */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  /** 1 internal, 2 server, 3 client. */
  readonly kind: number;
  readonly attributes: Record<string, string | number | boolean>;
  readonly status: { code?: number; message?: string };
  readonly service: string;
}

export interface Collector {
  /** OTLP/gRPC receiver port. */
  readonly grpcPort: number;
  /** OTLP/HTTP receiver port. */
  readonly httpPort: number;
  /** Every span received so far. */
  readonly spans: ReceivedSpan[];
  /** Resolves when spans satisfying `predicate` arrived (polls; rejects after `timeoutMs`). */
  waitFor(predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  stop(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };

function valueOf(v: AnyValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  return v.doubleValue ?? '';
}

/** Starts the sink and the collector, and waits until the collector's receivers accept connections. */
export async function startCollector(): Promise<Collector> {
  const spans: ReceivedSpan[] = [];
  const sink: TestServer = await startServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans?: { resource?: { attributes?: { key: string; value: AnyValue }[] }; scopeSpans?: { spans?: Record<string, unknown>[] }[] }[] };
        for (const rs of body.resourceSpans ?? []) {
          const service = String(valueOf(rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value ?? {}));
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              const attributes: Record<string, string | number | boolean> = {};
              for (const a of (s.attributes as { key: string; value: AnyValue }[] | undefined) ?? []) attributes[a.key] = valueOf(a.value);
              spans.push({ traceId: String(s.traceId), spanId: String(s.spanId), parentSpanId: String(s.parentSpanId ?? ''), name: String(s.name), kind: Number(s.kind ?? 0), attributes, status: (s.status as ReceivedSpan['status']) ?? {}, service });
            }
          }
        }
      } catch {
        // Not JSON: nothing to record.
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const grpcPort = await freePort();
  const httpPort = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'otelcol-'));
  const config = join(dir, 'config.yaml');
  await writeFile(
    config,
    `receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${grpcPort}
      http:
        endpoint: 127.0.0.1:${httpPort}
exporters:
  otlphttp:
    endpoint: ${sink.url}
    encoding: json
    compression: none
    sending_queue:
      enabled: false
    retry_on_failure:
      enabled: false
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlphttp]
`,
  );
  const child: ChildProcess = spawn(OTELCOL, ['--config', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (output += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (output += c));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  let gone = false;
  void exited.then(() => (gone = true));
  const accepts = (port: number) =>
    new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
  for (let i = 0; ; i++) {
    if (gone) throw new Error(`otelcol exited before listening:\n${output}`);
    if ((await accepts(grpcPort)) && (await accepts(httpPort))) break;
    if (i > 600) throw new Error(`otelcol did not listen within 60 s:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    grpcPort,
    httpPort,
    spans,
    async waitFor(predicate, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(spans)) {
        if (Date.now() > deadline) throw new Error(`spans not received within ${timeoutMs} ms; got:\n${spans.map((s) => JSON.stringify(s)).join('\n')}\ncollector output:\n${output}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      return spans;
    },
    async stop() {
      if (!gone) {
        child.kill('SIGTERM');
        await exited;
      }
      await sink.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
