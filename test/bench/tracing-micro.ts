// CPU per call of RequestTracer.start on the unsampled and the sampled path (in process, real
// SDK, spans to an OTLP/HTTP sink that drops them). Usage: node test/bench/tracing-micro.ts [calls]
import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { loadRuntime, RequestTracer, type ListenerTracing } from '../../core/src/tracing/tracing.ts';
import type { RequestContext } from '../../core/src/proxy/context.ts';

const calls = Number(process.argv[2] ?? 50_000);
const sink = createServer((req, res) => req.resume().on('end', () => res.writeHead(200).end()));
await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
const collector = { protocol: 'http' as const, url: `http://127.0.0.1:${(sink.address() as { port: number }).port}/v1/traces`, serviceName: 'micro' };
const runtime = (await loadRuntime(collector))!;
const logger = { error() {}, info() {}, warn() {}, debug() {}, child() { return logger; } } as never;
const settings = (random: number): ListenerTracing => ({ collector, percentages: { client: 100, random, overall: 100 }, verbose: false, headerTags: [], staticTags: {} });
const route = { name: 'hit', destination: { kind: 'upstream', cluster: { name: 'fast' } } };
const socket = new Socket();

function once(tracer: RequestTracer, incoming?: string): void {
  const req = new IncomingMessage(socket);
  req.method = 'GET';
  req.url = '/';
  req.headers = { host: 'localhost', 'user-agent': 'wrk', accept: '*/*', ...(incoming ? { traceparent: incoming } : {}) };
  const res = new ServerResponse(req);
  const ctx: RequestContext = { requestId: 'f3c1d6a8-5b9e-4c2a-9e1f-0a1b2c3d4e5f', start: 0, virtualHost: 'default/bench', route: 'hit', headers: req.headers, logger, upstream: 'http://127.0.0.1:1', responseHeaders: undefined };
  tracer.start(req, res, ctx, route);
  res.emit('close');
}

async function measure(label: string, tracer: RequestTracer | undefined, incoming?: string) {
  const base = new RequestTracer(settings(0), logger);
  const rounds = Number(process.env.MICRO_ROUNDS ?? 5);
  const per: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const t0 = process.cpuUsage();
    for (let i = 0; i < calls; i++) once(tracer ?? base, incoming);
    // Sampled spans: their export counts too (the sink runs in this process: its share is small).
    if (tracer?.settings.percentages.random) await runtime.flush();
    const t = process.cpuUsage(t0);
    per.push((t.user + t.system) / calls);
    await new Promise((r) => setTimeout(r, 50));
  }
  const sorted = per.slice(1).sort((a, b) => a - b); // round 0 warms up
  console.log(label, `min ${sorted[0]!.toFixed(2)} median ${sorted[sorted.length >> 1]!.toFixed(2)} µs/call over ${rounds - 1} rounds`);
}
const mode = process.argv[3] ?? 'all';
if (mode === 'all' || mode === 'none') {
  // The baseline: making the request objects and emitting close, with a tracer that returns at once.
  const noop = new RequestTracer(settings(0), logger);
  noop.start = () => {};
  await measure('no tracer', noop);
}
if (mode === 'all' || mode === 'unsampled') await measure('unsampled (0%)', new RequestTracer(settings(0), logger));
if (mode === 'all' || mode === 'unsampled-parent') await measure('unsampled parent', new RequestTracer(settings(100), logger), '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00');
if (mode === 'all' || mode === 'sampled') await measure('sampled (100%, exported)', new RequestTracer(settings(100), logger));
sink.close();
process.exit(0);
