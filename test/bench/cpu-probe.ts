// CPU time per request of `gatehouse run` on two routes of one process (no auth, and a plugin
// route), from /proc/PID/stat around wrk runs: the method of test/bench/README.md "Finding where
// time goes". Usage: node test/bench/cpu-probe.ts [plugin: required-header|rate-limit-memory|jwt-rs256|jwt-es256|route-options] [seconds]
// (`route-options`: no auth, the second route carries the routing bench's header manipulation + CORS.)
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { startNginx } from './tools.ts';
import { parseWrk } from './wrk.ts';
import { BENCH_JWKS, benchJwt } from './bench-jwt.ts';
// The routing bench's `routing: route 1 + headers + CORS` options, for the route-options probe.
import { ROUTE_OPTIONS } from './scenarios/routing.ts';

const which = process.argv[2] ?? 'required-header';
const seconds = Number(process.argv[3] ?? 5);
const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const work = await mkdtemp(join(tmpdir(), 'cpu-probe-'));
const upstream = await startNginx(work, 'up', (port) => `server { listen 127.0.0.1:${port}; location / { return 200 'hello world'; } }`);

const plugins: { entry: string; name: string; config: object; headers: Record<string, string> } = {
  'required-header': { entry: 'required-header', name: 'RequiredHeader', config: { RequiredHeader: 'x-api-key', AllowedValues: ['bench'] }, headers: { 'x-api-key': 'bench' } },
  'jwt-rs256': { entry: 'jwt', name: 'Jwt', config: { Jwks: BENCH_JWKS, Algorithms: ['RS256'] }, headers: { authorization: `Bearer ${benchJwt('RS256')}` } },
  // The bench's memory-store row: RateLimit with one ctx.store.increment and three client response headers per request.
  'rate-limit-memory': { entry: 'rate-limit', name: 'RateLimit', config: { RequestsPerUnit: 1_000_000_000_000, Unit: 'day', Key: { Header: 'x-api-key' } }, headers: { 'x-api-key': 'bench' } },
  'jwt-es256': { entry: 'jwt', name: 'Jwt', config: { Jwks: BENCH_JWKS, Algorithms: ['ES256'] }, headers: { authorization: `Bearer ${benchJwt('ES256')}` } },
  'route-options': { entry: 'required-header', name: 'RequiredHeader', config: { RequiredHeader: 'x-api-key', AllowedValues: ['bench'] }, headers: { origin: 'https://app.example', cookie: 'a=1' } },
}[which]!;
const authOptions = which === 'route-options' ? {} : { options: { extauth: { configRef: { name: 'plugin' } } } };
const routeOptions = which === 'route-options' ? { options: ROUTE_OPTIONS } : {};
const pluginDir = await mkdtemp(join(work, 'plugins-'));
await buildPlugin({ entry: fileURLToPath(new URL(`../../plugins/${plugins.entry}/src/index.ts`, import.meta.url)), name: plugins.name, outDir: pluginDir });
const configDir = await mkdtemp(join(work, 'config-'));
const docs = [
  { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'fast' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: upstream.port }] } } },
  { apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name: 'plugin' }, spec: { configs: [{ pluginAuth: { name: plugins.name, config: plugins.config } }] } },
  ...['open', 'auth'].map((name) => ({
    apiVersion: 'gateway.gatehouse.dev/v1',
    kind: 'VirtualService',
    metadata: { name },
    spec: { virtualHost: { domains: [name], ...(name === 'auth' ? authOptions : {}), routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'fast' } } }, ...(name === 'auth' ? routeOptions : {}) }] } },
  })),
];
await writeFile(join(configDir, 'bench.yaml'), docs.map((d) => stringify(d)).join('---\n'));
const extra = (process.env.PROBE_NODE_FLAGS ?? '').split(' ').filter(Boolean);
const child = spawn(process.execPath, [...NODE_FLAGS, ...extra, CLI, 'run', '--config-dir', configDir, '--port', '0', '--https-port', '0', '--admin-port', '0', '--extauth-port', '0', '--host', '127.0.0.1', '--access-log', 'false', '--plugin-dir', pluginDir, ...(process.env.PROBE_ARGS ?? '').split(' ').filter(Boolean)], { stdio: ['ignore', 'pipe', 'inherit'] });
const port = await new Promise<number>((resolve) => {
  let buffered = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const line = buffered.split('\n').find((l) => l.includes('"msg":"listening"'));
    if (line) resolve((JSON.parse(line) as { port: number }).port);
  });
});
child.stdout!.resume();
console.log("port", port);
const cpuOf = async (pid: number | string) => {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => ') ')).split(') ')[1]!.split(' ');
  return (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) * 10_000; // clock ticks (100/s) → µs
};
/** The process's CPU and its child processes' (the plugin process, docs/plugins.md "Plugin process"). */
const cpu = async () => {
  let total = await cpuOf(child.pid!);
  for (const tid of await readdir(`/proc/${child.pid}/task`)) {
    const children = (await readFile(`/proc/${child.pid}/task/${tid}/children`, 'utf8').catch(() => '')).split(' ').filter(Boolean);
    for (const pid of children) total += await cpuOf(pid);
  }
  return total;
};
/** CPU µs by thread name (main, plugin thread, GC helpers, libuv pool), from /proc/PID/task. */
const threadCpu = async () => {
  const byName: Record<string, number> = {};
  for (const tid of await readdir(`/proc/${child.pid}/task`)) {
    const stat = await readFile(`/proc/${child.pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (name) byName[name] = (byName[name] ?? 0) + (Number(fields[11]) + Number(fields[12])) * 10_000;
  }
  return byName;
};
async function measure(host: string, headers: Record<string, string>) {
  const url = `http://127.0.0.1:${port}/`;
  const script = join(work, `${host}.lua`);
  await writeFile(script, Object.entries({ Host: host, ...headers }).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`).join('\n'));
  const wrk = (s: number) => promisify(execFile)('wrk', ['-t1', '-c32', `-d${s}s`, '--latency', '-s', script, url], { maxBuffer: 1 << 20 });
  await wrk(1);
  const before = await cpu();
  const threadsBefore = await threadCpu();
  const result = parseWrk((await wrk(seconds)).stdout);
  const used = (await cpu()) - before;
  const threads: Record<string, number> = {};
  for (const [name, us] of Object.entries(await threadCpu())) {
    const per = Math.round(((us - (threadsBefore[name] ?? 0)) / result.requests) * 10) / 10;
    if (per > 0) threads[name] = per;
  }
  return { rps: Math.round(result.requestsPerSec), cpuUsPerRequest: Math.round((used / result.requests) * 10) / 10, threads, errors: result.errors };
}
for (let round = 0; round < Number(process.env.PROBE_ROUNDS ?? 2); round++) {
  const only = process.env.PROBE_ONLY;
  const open = only === 'auth' ? { rps: NaN, cpuUsPerRequest: NaN } : await measure('open', {});
  const auth = only === 'open' ? { rps: NaN, cpuUsPerRequest: NaN } : await measure('auth', plugins.headers);
  console.log(JSON.stringify({ round, open, auth, ratio: Math.round((auth.rps / open.rps) * 100) / 100, extraCpuUs: Math.round((auth.cpuUsPerRequest - open.cpuUsPerRequest) * 10) / 10 }));
}
if (process.env.PROBE_HOLD) await new Promise((r) => setTimeout(r, 600_000));
child.kill();
await upstream.stop();
