// Tracing's cost (core/src/tracing, issue 31): the same GET through a route with tracing off,
// on with 1% of requests sampled (goal ≥ 0.95× of off: every request still gets a trace
// context), and on with every request sampled (reported). Spans go over OTLP/HTTP to a sink in
// the bench process that answers 200 and drops them (a collector's receiving side, without its
// processing, which would run on the same two cores).
import { createServer, type Server } from 'node:http';
import type { BenchContext, BenchModule, BenchScenario, RunningTarget } from '../scenario.ts';
import { inTurns } from '../turns.ts';

const GROUP = 'tracing';
const OFF = 'tracing: off (GET)';
const ONE = 'tracing: on, 1% sampled (GET)';
const ALL = 'tracing: on, 100% sampled (GET)';

function config(ctx: BenchContext, percent?: number) {
  return {
    'tracing.yaml': [
      { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'fast' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: ctx.upstreamPort }] } } },
      {
        apiVersion: 'gateway.gatehouse.dev/v1',
        kind: 'VirtualService',
        metadata: { name: 'bench' },
        spec: { virtualHost: { domains: ['*'], routes: [{ name: 'hit', matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'fast' } } }, ...(percent !== undefined ? { options: { tracing: { tracePercentages: { randomSamplePercentage: percent } } } } : {}) }] } },
      },
    ],
  };
}

/** An OTLP/HTTP endpoint that takes every export and keeps nothing. */
async function startSink(): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

/** Gatehouse with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a sink (the child takes the environment at spawn). */
async function traced(ctx: BenchContext, percent: number): Promise<RunningTarget> {
  const sink = await startSink();
  const saved = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${sink.port}`;
  let target: RunningTarget;
  try {
    target = await ctx.gatehouse(config(ctx, percent), ['--access-log', 'false']);
  } finally {
    if (saved === undefined) delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    else process.env.OTEL_EXPORTER_OTLP_ENDPOINT = saved;
  }
  return {
    url: target.url,
    stop: async () => {
      await target.stop();
      sink.server.closeAllConnections();
      await new Promise((r) => sink.server.close(r));
    },
  };
}

export const scenarios: BenchScenario[] = [
  // The goal pair is measured in turns (../turns.ts): its 5% is within one pass's noise on this
  // machine. The 100% row stays out: its export backlog would spill into the next turn.
  ...inTurns([
    { group: GROUP, name: OFF, start: (ctx) => ctx.gatehouse(config(ctx), ['--access-log', 'false']) },
    { group: GROUP, name: ONE, start: (ctx) => traced(ctx, 1) },
  ]),
  { group: GROUP, name: ALL, start: (ctx) => traced(ctx, 100) },
];

export const goals: BenchModule['goals'] = [
  { row: ONE, against: OFF, minThroughputRatio: 0.95 },
  { row: ALL, against: OFF },
];
