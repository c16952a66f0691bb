import { fileURLToPath } from 'node:url';
import type { BenchContext, BenchModule, BenchScenario } from '../scenario.ts';
import { benchManifests, startListening, startNginx } from '../tools.ts';
import { inTurns } from '../turns.ts';
import { NODE_ENV_DEFAULTS, NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';

const script = (name: string) => fileURLToPath(new URL(`../${name}`, import.meta.url));

/** The routing config every proxy row uses: one virtual host, one prefix route. */
function proxyConfig(ctx: BenchContext) {
  return { 'proxy.yaml': benchManifests(ctx.upstreamPort) };
}

/**
 * Comparison proxies run with Gatehouse's own Node flags and environment (NODE_FLAGS: a
 * 2 MB young generation for memory; NODE_ENV_DEFAULTS: one malloc arena), so a ratio
 * compares code paths, not runtime settings; one extra row shows the bare proxy with Node's defaults.
 */
const node = (file: string, ...args: string[]) => startListening(process.execPath, [...NODE_FLAGS, script(file), ...args], NODE_ENV_DEFAULTS);

/** A Gateway on port 0 with Envoy's usual fields as a custom format (the default JSON line has about as many). */
export const FORMAT_GATEWAY = {
  apiVersion: 'gateway.solo.io/v1',
  kind: 'Gateway',
  metadata: { name: 'bench' },
  spec: {
    bindAddress: '127.0.0.1',
    bindPort: 0,
    options: {
      accessLoggingService: {
        accessLog: [{ fileSink: { path: '/dev/stdout', stringFormat: '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %BYTES_SENT% %DURATION% "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %ROUTE_NAME%\n' } }],
      },
    },
  },
};

// The goal pairs (Gatehouse against bare undici on one and two workers; the Gateway's access log
// format against the default log) are measured in turns (../turns.ts): their margins are within
// one pass's noise on this machine.
const [bare1, gatehouse1, gatehouseFormat] = inTurns([
  {
    group: 'proxy',
    name: 'bare undici proxy (1 worker)',
    start: async (ctx) => {
      const p = await node('bare-undici-proxy.ts', ctx.upstreamUrl, '1');
      return { url: `http://127.0.0.1:${p.port}`, stop: p.stop };
    },
  },
  { group: 'proxy', name: 'gatehouse (1 worker)', start: (ctx) => ctx.gatehouse(proxyConfig(ctx)) },
  // The listener from a Gloo Gateway whose access log is an Envoy format string (docs/gateway.md), written where the default log goes.
  { group: 'proxy', name: 'gatehouse (1 worker, Gateway access log format)', start: (ctx) => ctx.gatehouse({ ...proxyConfig(ctx), 'gateway.yaml': [FORMAT_GATEWAY] }) },
]) as [BenchScenario, BenchScenario, BenchScenario];
const [bare2, gatehouse2] = inTurns([
  {
    group: 'proxy',
    name: 'bare undici proxy (2 workers)',
    start: async (ctx) => {
      const p = await node('bare-undici-proxy.ts', ctx.upstreamUrl, '2');
      return { url: `http://127.0.0.1:${p.port}`, stop: p.stop };
    },
  },
  { group: 'proxy', name: 'gatehouse (2 workers)', start: (ctx) => ctx.gatehouse(proxyConfig(ctx), ['--workers', '2']) },
]) as [BenchScenario, BenchScenario];

export const scenarios: BenchScenario[] = [
  { group: 'proxy', name: 'direct to upstream', start: async (ctx) => ({ url: ctx.upstreamUrl, stop: async () => {} }) },
  {
    group: 'proxy',
    name: 'nginx proxy (1 worker)',
    start: async (ctx) => {
      const n = await startNginx(ctx.workDir, 'proxy', (port) => `upstream up { server 127.0.0.1:${ctx.upstreamPort}; keepalive 64; }
  server { listen 127.0.0.1:${port}; location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; } }`);
      return { url: `http://127.0.0.1:${n.port}`, stop: n.stop };
    },
  },
  bare1,
  {
    group: 'proxy',
    name: 'bare undici proxy (1 worker, default Node flags)',
    start: async (ctx) => {
      const p = await startListening(process.execPath, [script('bare-undici-proxy.ts'), ctx.upstreamUrl, '1']);
      return { url: `http://127.0.0.1:${p.port}`, stop: p.stop };
    },
  },
  {
    group: 'proxy',
    name: 'hono request path proxy (1 worker)',
    start: async (ctx) => {
      const p = await node('hono-proxy.ts', ctx.upstreamUrl);
      return { url: `http://127.0.0.1:${p.port}`, stop: p.stop };
    },
  },
  gatehouse1,
  { group: 'proxy', name: 'gatehouse (1 worker, no access log)', start: (ctx) => ctx.gatehouse(proxyConfig(ctx), ['--access-log', 'false']) },
  gatehouseFormat,
  bare2,
  {
    group: 'proxy',
    name: 'bare undici proxy (2 workers, reusePort)',
    start: async (ctx) => {
      const p = await node('bare-undici-proxy.ts', ctx.upstreamUrl, '2', 'reuseport');
      return { url: `http://127.0.0.1:${p.port}`, stop: p.stop };
    },
  },
  gatehouse2,
];

export const goals: BenchModule['goals'] = [
  { row: 'gatehouse (1 worker)', against: 'bare undici proxy (1 worker)', minThroughputRatio: 0.9, maxP99Ratio: 1.5 },
  { row: 'gatehouse (2 workers)', against: 'bare undici proxy (2 workers)', minThroughputRatio: 0.9, maxP99Ratio: 1.5 },
  // What Hono's Request/Response path costs a proxy (why the proxy path is raw node:http).
  { row: 'hono request path proxy (1 worker)', against: 'bare undici proxy (1 worker)' },
  { row: 'gatehouse (1 worker, no access log)', against: 'bare undici proxy (1 worker)' },
  // issue 31: an access log with a custom format string costs no more than the default log.
  { row: 'gatehouse (1 worker, Gateway access log format)', against: 'gatehouse (1 worker)', minThroughputRatio: 0.95 },
  { row: 'bare undici proxy (1 worker)', against: 'bare undici proxy (1 worker, default Node flags)' },
  // Each worker on its own SO_REUSEPORT socket (Gatehouse's design) against one shared accept socket.
  { row: 'bare undici proxy (2 workers, reusePort)', against: 'bare undici proxy (2 workers)' },
];
