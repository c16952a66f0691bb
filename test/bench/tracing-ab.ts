// A/B inside one process (test/bench/README.md "Finding where time goes"): `gatehouse run` in
// this process with tracing on at PERCENT (spans over OTLP/HTTP to a sink in a child process),
// loaded by wrk, while RequestTracer.start switches every PHASE_MS between variants: `off` (the
// tracer does nothing: no context, no span), `new` (this checkout's), and with BASE=path/to/core
// also `base` (that checkout's core/src/tracing/tracing.ts, e.g. an older commit extracted with
// git archive). CPU per request of each variant is process.cpuUsage() summed over its phases.
// Export and GC of sampled spans spill into whichever phase follows, so they are spread over all
// variants: this measures the request path; compare whole processes for the rest.
// Usage: node --no-node-snapshot --max-semi-space-size=16 --expose-gc test/bench/tracing-ab.ts [seconds] [percent]
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { freePort, startNginx } from './tools.ts';
import { parseWrk } from './wrk.ts';
import { RequestTracer } from '../../core/src/tracing/tracing.ts';

const seconds = Number(process.argv[2] ?? 20);
const percent = Number(process.argv[3] ?? 1);
const PHASE_MS = Number(process.env.PHASE_MS ?? 100);
const work = await mkdtemp(join(tmpdir(), 'tracing-ab-'));
const upstream = await startNginx(work, 'up', (port) => `server { listen 127.0.0.1:${port}; location / { return 200 'hello world'; } }`);
const sinkPort = await freePort();
const sink = spawn(process.execPath, ['-e', `require('node:http').createServer((q, s) => q.resume().on('end', () => s.writeHead(200).end())).listen(${sinkPort}, '127.0.0.1')`], { stdio: 'inherit' });
process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${sinkPort}`;

const dir = await mkdtemp(join(work, 'config-'));
const docs = [
  { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'fast' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: upstream.port }] } } },
  { apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name: 'bench' }, spec: { virtualHost: { domains: ['*'], routes: [{ name: 'hit', matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'fast' } } }, options: { tracing: { tracePercentages: { randomSamplePercentage: percent } } } }] } } },
];
await writeFile(join(dir, 'bench.yaml'), docs.map((d) => stringify(d)).join('---\n'));

type Start = RequestTracer['start'];
const newStart = RequestTracer.prototype.start;
const variants: Record<string, Start> = { off: () => {}, new: newStart };
if (process.env.SPLIT) {
  // The parts of `new`: only a fixed traceparent header (what propagation costs the proxy), and the tracer with nothing sampled.
  variants.header = (_req, _res, ctx) => void (ctx.headers.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00');
  const none = { tracePercentages: { randomSamplePercentage: 0 } };
  const quiet = new WeakMap<object, Parameters<Start>[3]>();
  variants.unsampled = function (this: RequestTracer, req, res, ctx, route) {
    let r = quiet.get(route);
    if (!r) quiet.set(route, (r = { ...route, tracing: none }));
    return newStart.call(this, req, res, ctx, r);
  };
}
if (process.env.BASE) {
  const base = (await import(join(process.env.BASE, 'src/tracing/tracing.ts'))) as typeof import('../../core/src/tracing/tracing.ts');
  const twins = new WeakMap<RequestTracer, RequestTracer>();
  variants.base = function (this: RequestTracer, ...args) {
    let twin = twins.get(this);
    if (!twin) twins.set(this, (twin = new base.RequestTracer(this.settings, { error: () => {} } as never) as unknown as RequestTracer));
    return twin.start(...args);
  };
}
const names = Object.keys(variants);
let current = 0;
let requests = 0;
const totals = Object.fromEntries(names.map((n) => [n, { us: 0, requests: 0 }]));
RequestTracer.prototype.start = function (this: RequestTracer, ...args) {
  requests++;
  return variants[names[current]!]!.apply(this, args);
};

const port = await freePort();
const { main } = await import('../../core/src/cli/main.ts');
const originalWrite = process.stdout.write.bind(process.stdout);
process.stdout.write = (() => true) as typeof process.stdout.write; // the gateway's logs
await main(['run', '--config-dir', dir, '--port', String(port), '--https-port', '0', '--admin-port', '0', '--extauth-port', '0', '--plugin-dir', join(dir, 'plugins'), '--host', '127.0.0.1', '--access-log', 'false']);
await new Promise((r) => setTimeout(r, 1000));
const log = (line: string) => originalWrite(`${line}\n`);

const wrk = (s: number) => promisify(execFile)('wrk', ['-t1', '-c32', `-d${s}s`, `http://127.0.0.1:${port}/`], { maxBuffer: 1 << 20 });
await wrk(3); // warm-up: JIT, and the SDK's import
let mark = process.cpuUsage();
let markRequests = requests;
const timer = setInterval(() => {
  const used = process.cpuUsage(mark);
  mark = process.cpuUsage();
  const t = totals[names[current]!]!;
  t.us += used.user + used.system;
  t.requests += requests - markRequests;
  markRequests = requests;
  // A random order: a phase also finishes the previous phase's requests in flight (32 connections).
  current = Math.floor(Math.random() * names.length);
}, PHASE_MS);
const result = parseWrk((await wrk(seconds)).stdout);
clearInterval(timer);
const off = totals.off!.us / totals.off!.requests;
log(JSON.stringify({ percent, phaseMs: PHASE_MS, rps: Math.round(result.requestsPerSec), errors: result.errors }));
for (const n of names) {
  const per = totals[n]!.us / totals[n]!.requests;
  log(`${n.padEnd(5)} ${per.toFixed(2)} µs/request (${totals[n]!.requests} requests), +${(per - off).toFixed(2)} µs over off`);
}
sink.kill();
await upstream.stop();
process.exit(0);
