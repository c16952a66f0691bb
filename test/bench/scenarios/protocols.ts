// Protocol rows (issue 12): HTTP/2 downstream (h2load) against HTTP/1.1 (wrk) on the same route;
// gRPC unary calls through the gateway against the same calls made directly; WebSocket echo
// messages through the gateway against direct. Same run, same machine; ratios, not absolutes.
import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkEchoCall, ECHO_PATH, echoRequestFrame } from '../grpc-echo.ts';
import { runH2load } from '../h2load.ts';
import type { BenchContext, BenchModule, BenchScenario, RunningTarget } from '../scenario.ts';
import { benchManifests, startListening, startNginx, type Started } from '../tools.ts';
import { runWsLoad } from '../ws-load.ts';

const ECHO_SERVERS = fileURLToPath(new URL('../echo-servers.ts', import.meta.url));

function echoServer(kind: 'ws' | 'grpc'): Promise<Started> {
  return startListening(process.execPath, [ECHO_SERVERS, kind]);
}

/** A Gatehouse target in front of an echo server (stopped with it). */
async function through(ctx: BenchContext, server: Started, upstreamSpec: object): Promise<RunningTarget> {
  const [, vs] = benchManifests(ctx.upstreamPort) as [object, object];
  const upstream = { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'fast' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: server.port }] }, ...upstreamSpec } };
  const target = await ctx.gatehouse({ 'echo.yaml': [upstream, vs] }, ['--access-log', 'false']);
  return { ...target, stop: async () => (await target.stop(), await server.stop()) };
}

async function grpcFrameFile(ctx: BenchContext): Promise<string> {
  const file = join(ctx.workDir, 'grpc-echo.bin');
  await writeFile(file, echoRequestFrame());
  return file;
}

const GRPC_HEADERS = { 'content-type': 'application/grpc', te: 'trailers' };

async function tlsCertificate(ctx: BenchContext): Promise<{ cert: string; key: string }> {
  const dir = join(ctx.workDir, 'h2-tls');
  await mkdir(dir, { recursive: true });
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-subj', '/CN=bench.test', '-days', '1'], { stdio: 'ignore' });
  const { readFile } = await import('node:fs/promises');
  return { cert: await readFile(join(dir, 'cert.pem'), 'utf8'), key: await readFile(join(dir, 'key.pem'), 'utf8') };
}

export const scenarios: BenchScenario[] = [
  { group: 'protocols', name: 'gatehouse run, HTTP/1.1 (wrk)', start: (ctx) => ctx.gatehouse({ 'plain.yaml': benchManifests(ctx.upstreamPort) }, ['--access-log', 'false']) },
  {
    group: 'protocols',
    name: 'gatehouse run, h2c (h2load)',
    start: (ctx) => ctx.gatehouse({ 'plain.yaml': benchManifests(ctx.upstreamPort) }, ['--access-log', 'false']),
    measure: (target, ctx) => runH2load(`${target.url}/`, ctx.workDir),
  },
  {
    group: 'protocols',
    name: 'gatehouse run, h2 over TLS (h2load)',
    start: async (ctx) => {
      const pem = await tlsCertificate(ctx);
      const [upstream, vs] = benchManifests(ctx.upstreamPort) as [object, { spec: object }];
      const secret = { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name: 'bench-tls' }, stringData: { 'tls.crt': pem.cert, 'tls.key': pem.key } };
      const target = await ctx.gatehouse({ 'tls.yaml': [upstream, secret, { ...vs, spec: { ...vs.spec, sslConfig: { secretRef: { name: 'bench-tls' } } } }] }, ['--access-log', 'false']);
      if (!target.httpsUrl) throw new Error('gatehouse did not report an HTTPS port');
      return { url: target.httpsUrl, stop: target.stop };
    },
    measure: (target, ctx) => runH2load(`${target.url}/`, ctx.workDir),
  },
  {
    group: 'protocols',
    name: 'gRPC unary, direct (h2load)',
    start: async () => {
      const server = await echoServer('grpc');
      return { url: `http://127.0.0.1:${server.port}`, stop: server.stop };
    },
    measure: async (target, ctx) => {
      await checkEchoCall(target.url, 'bench.test');
      return runH2load(`${target.url}${ECHO_PATH}`, ctx.workDir, { headers: GRPC_HEADERS, dataFile: await grpcFrameFile(ctx) });
    },
  },
  {
    group: 'protocols',
    name: 'gRPC unary, via gatehouse run (h2load)',
    start: async (ctx) => through(ctx, await echoServer('grpc'), { useHttp2: true }),
    measure: async (target, ctx) => {
      await checkEchoCall(target.url, 'bench.test');
      return runH2load(`${target.url}${ECHO_PATH}`, ctx.workDir, { headers: GRPC_HEADERS, dataFile: await grpcFrameFile(ctx) });
    },
  },
  {
    group: 'protocols',
    name: 'WebSocket echo, direct (msgs/s)',
    start: async () => {
      const server = await echoServer('ws');
      return { url: `http://127.0.0.1:${server.port}`, stop: server.stop };
    },
    measure: (target) => runWsLoad(`${target.url.replace('http', 'ws')}/echo`),
  },
  {
    group: 'protocols',
    name: 'WebSocket echo, via gatehouse run (msgs/s)',
    start: async (ctx) => through(ctx, await echoServer('ws'), {}),
    measure: (target) => runWsLoad(`${target.url.replace('http', 'ws')}/echo`),
  },
  {
    group: 'protocols',
    name: 'WebSocket echo, via nginx (1 worker, msgs/s)',
    start: async (ctx) => {
      const server = await echoServer('ws');
      const proxy = await startNginx(ctx.workDir, 'ws-proxy', (port) => `server { listen 127.0.0.1:${port};
    location / { proxy_pass http://127.0.0.1:${server.port}; proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection "upgrade"; } }`);
      return { url: `http://127.0.0.1:${proxy.port}`, stop: async () => (await proxy.stop(), await server.stop()) };
    },
    measure: (target) => runWsLoad(`${target.url.replace('http', 'ws')}/echo`),
  },
];

export const goals: BenchModule['goals'] = [
  { row: 'gatehouse run, h2c (h2load)', against: 'gatehouse run, HTTP/1.1 (wrk)', minThroughputRatio: 0.7 },
  { row: 'gatehouse run, h2 over TLS (h2load)', against: 'gatehouse run, HTTP/1.1 (wrk)' },
  { row: 'gRPC unary, via gatehouse run (h2load)', against: 'gRPC unary, direct (h2load)' },
  { row: 'WebSocket echo, via gatehouse run (msgs/s)', against: 'WebSocket echo, direct (msgs/s)', minThroughputRatio: 0.8 },
  { row: 'WebSocket echo, via nginx (1 worker, msgs/s)', against: 'WebSocket echo, direct (msgs/s)' },
];
