// CPU time per Check of the two ext_authz servers of the Envoy bench rows (scenarios/envoy.ts):
// `gatehouse extauth` on the Basic-Auth route and the minimal grpc-js Check server, each behind
// its own Envoy (the doc's bootstrap, one worker), loaded in turn with the same wrk load, CPU
// from /proc/PID/stat around each run (test/bench/README.md "Finding where time goes").
// Usage: node test/bench/envoy-extauth-probe.ts [seconds] (PROBE_ROUNDS, default 4;
// PROBE_NODE_FLAGS="--cpu-prof --cpu-prof-dir=DIR" adds flags to both servers;
// PROBE_ONLY=gatehouse|minimal loads one server only; PROBE_FRESH=1 new processes per measurement,
// as the bench starts its rows; PROBE_SLICES=N one-second slices (the warm-up curve);
// PROBE_GH_FLAGS: Node flags for gatehouse only; PROBE_VARIANT=SCRIPT a third server;
// PROBE_STDOUT=DIR keeps the servers' stdout, --trace-gc lines say).
import { execFile, execFileSync } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { NODE_ENV_DEFAULTS, NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { docBootstrap, ensureEnvoy, startEnvoy, withAddresses } from '../envoy/envoy.ts';
import { startListening, startNginx, type Started } from './tools.ts';
import { parseWrk } from './wrk.ts';

const seconds = Number(process.argv[2] ?? 5);
const rounds = Number(process.env.PROBE_ROUNDS ?? 4);
const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const ALLOW_SERVER = process.env.PROBE_MINIMAL_SCRIPT ?? fileURLToPath(new URL('./grpc-allow-server.ts', import.meta.url));
const REQUIRED_HEADER = fileURLToPath(new URL('../../plugins/required-header/src/index.ts', import.meta.url));

const work = await mkdtemp(join(tmpdir(), 'envoy-extauth-probe-'));
const upstream = await startNginx(work, 'up', (port) => `server { listen 127.0.0.1:${port}; location / { return 200 'hello world'; } }`);

// The bench's `gatehouse extauth`: default.basic (APR1 Basic Auth) and default.partners (a plugin).
const line = execFileSync('htpasswd', ['-nbm', 'alice', 'wonderland'], { encoding: 'utf8' }).trim();
const [, salt, hashedPassword] = /\$apr1\$([^$]+)\$(.+)$/.exec(line)!;
const pluginDir = join(work, 'plugins');
await buildPlugin({ entry: REQUIRED_HEADER, name: 'RequiredHeader', outDir: pluginDir });
const configDir = await mkdtemp(join(work, 'config-'));
const authConfig = (name: string, configs: object[]) => ({ apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name, namespace: 'default' }, spec: { configs } });
await writeFile(
  join(configDir, 'auth.yaml'),
  [
    authConfig('basic', [{ basicAuth: { realm: 'bench', apr: { users: { alice: { salt, hashedPassword } } } } }]),
    authConfig('partners', [{ pluginAuth: { name: 'RequiredHeader', config: { RequiredHeader: 'x-api-key', AllowedValues: ['bench'] } } }]),
  ]
    .map((d) => stringify(d))
    .join('---\n'),
);
const extra = (process.env.PROBE_NODE_FLAGS ?? '').split(' ').filter(Boolean);
const ghExtra = (process.env.PROBE_GH_FLAGS ?? '').split(' ').filter(Boolean);
const starters: Record<string, () => Promise<Started>> = {
  gatehouse: () => startListening(process.execPath, [...NODE_FLAGS, ...extra, ...ghExtra, CLI, 'extauth', '--config-dir', configDir, '--plugin-dir', pluginDir, '--port', '0', '--admin-port', '0', '--host', '127.0.0.1']),
  minimal: () => startListening(process.execPath, [...NODE_FLAGS, ...extra, ALLOW_SERVER], NODE_ENV_DEFAULTS),
};
// PROBE_VARIANT=SCRIPT: a third server (a variant of the minimal one) loaded the same way.
if (process.env.PROBE_VARIANT) starters.variant = () => startListening(process.execPath, [...NODE_FLAGS, ...extra, process.env.PROBE_VARIANT!], NODE_ENV_DEFAULTS);
const envoyBinary = ensureEnvoy();
const bootstrap = await docBootstrap();
type Pair = { server: Started; envoy: Awaited<ReturnType<typeof startEnvoy>> };
async function startPair(name: string): Promise<Pair> {
  const server = await starters[name]!();
  // PROBE_STDOUT=DIR: each server's stdout (--trace-gc lines, say) to DIR/<name>-<pid>.log.
  if (process.env.PROBE_STDOUT) {
    const out = createWriteStream(join(process.env.PROBE_STDOUT, `${name}-${server.child.pid}.log`));
    server.child.stdout!.on('data', (chunk: Buffer) => out.write(chunk));
  }
  const addresses = {
    '127.0.0.1:9901': { address: '127.0.0.1', port: 0 },
    '0.0.0.0:10000': { address: '127.0.0.1', port: 0 },
    'app.default.svc.cluster.local:8080': { address: '127.0.0.1', port: upstream.port },
    'extauth.gatehouse-system.svc.cluster.local:8083': { address: '127.0.0.1', port: server.port },
  };
  const envoy = await startEnvoy(envoyBinary, withAddresses(bootstrap, addresses), { logLevel: 'error' });
  // As the bench's expectAllowed: the first 200 through Envoy and the auth server.
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(envoy.url + '/', { headers: { authorization: `Basic ${Buffer.from('alice:wonderland').toString('base64')}`, 'x-api-key': 'bench' } });
    await response.arrayBuffer();
    if (response.status === 200) break;
    if (attempt > 50) throw new Error(`${name}: envoy answered ${response.status}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { server, envoy };
}
/** PROBE_FRESH=1: new servers and Envoys for every measurement, as the bench starts each row (its numbers include warm-up). */
const fresh = process.env.PROBE_FRESH === '1';
const pairs: Record<string, Pair> = {};
if (!fresh) for (const name of Object.keys(starters)) pairs[name] = await startPair(name);

const script = join(work, 'request.lua');
await writeFile(script, `wrk.headers["authorization"] = ${JSON.stringify(`Basic ${Buffer.from('alice:wonderland').toString('base64')}`)}\nwrk.headers["x-api-key"] = "bench"\n`);

/** utime + stime of a process (all its threads), in µs. */
async function cpuOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}
/** CPU µs by thread name. */
async function threadCpu(pid: number): Promise<Record<string, number>> {
  const byName: Record<string, number> = {};
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    byName[name] = (byName[name] ?? 0) + (Number(fields[11]) + Number(fields[12])) * 10_000;
  }
  return byName;
}

const wrk = (url: string, s: number) => promisify(execFile)('wrk', ['-t1', '-c32', `-d${s}s`, '-s', script, url], { maxBuffer: 1 << 20 });
async function measure(name: string) {
  const pair = fresh ? await startPair(name) : pairs[name]!;
  const { server, envoy } = pair;
  const pid = server.child.pid!;
  // PROBE_SLICES=N: N one-second loads instead, CPU per check of each (how the cost falls as the process warms up).
  const slices = Number(process.env.PROBE_SLICES ?? 0);
  if (slices > 0) {
    const perSlice: number[] = [];
    for (let i = 0; i < slices; i++) {
      const cpuBefore = await cpuOf(pid);
      const r = parseWrk((await wrk(envoy.url + '/', 1)).stdout);
      perSlice.push(Math.round((((await cpuOf(pid)) - cpuBefore) / r.requests) * 10) / 10);
    }
    if (fresh) {
      await envoy.stop();
      await server.stop();
    }
    return { rps: NaN, errors: 0, authUsPerCheck: perSlice.reduce((a, b) => a + b, 0) / slices, slices: perSlice };
  }
  await wrk(envoy.url + '/', 1);
  const [before, envoyBefore, threadsBefore] = [await cpuOf(pid), await cpuOf(envoy.child.pid!), await threadCpu(pid)];
  const result = parseWrk((await wrk(envoy.url + '/', seconds)).stdout);
  const [after, envoyAfter, threadsAfter] = [await cpuOf(pid), await cpuOf(envoy.child.pid!), await threadCpu(pid)];
  const per = (us: number) => Math.round((us / result.requests) * 10) / 10;
  const threads = Object.fromEntries(Object.entries(threadsAfter).map(([t, us]) => [t, per(us - (threadsBefore[t] ?? 0))]).filter(([, us]) => (us as number) > 0));
  // Why requests failed, when some did: Envoy's ext_authz counters (denied, error: timeouts and gRPC failures).
  const failures = result.errors ? { denied: await envoy.stat('http.ingress.ext_authz.denied'), error: await envoy.stat('http.ingress.ext_authz.error'), timeout: await envoy.stat('cluster.gatehouse-extauth.upstream_rq_timeout') } : undefined;
  if (fresh) {
    await envoy.stop();
    await server.stop();
  }
  return { rps: Math.round(result.requestsPerSec), errors: result.errors, ...(failures ? { failures } : {}), authUsPerCheck: per(after - before), envoyUsPerRequest: per(envoyAfter - envoyBefore), threads };
}

const results: Record<string, { rps: number; authUsPerCheck: number }[]> = Object.fromEntries(Object.keys(starters).map((name) => [name, []]));
const only = process.env.PROBE_ONLY;
for (let round = 0; round < rounds; round++) {
  // Alternate which goes first: the machine's load drifts.
  const names = Object.keys(starters);
  const order = round % 2 === 0 ? names : [...names].reverse();
  for (const name of order) {
    if (only && only !== name) continue;
    const r = await measure(name);
    results[name]!.push(r);
    console.log(JSON.stringify({ round, server: name, ...r }));
  }
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;
const summary = Object.fromEntries(Object.entries(results).map(([name, rs]) => [name, { rps: median(rs.map((r) => r.rps)), authUsPerCheck: median(rs.map((r) => r.authUsPerCheck)) }]));
console.log(JSON.stringify({ summary, cpuRatio: Math.round((summary.gatehouse!.authUsPerCheck / summary.minimal!.authUsPerCheck) * 100) / 100, rpsRatio: Math.round((summary.gatehouse!.rps / summary.minimal!.rps) * 100) / 100 }));
for (const { envoy, server } of Object.values(pairs)) {
  await envoy.stop();
  await server.stop();
}
await upstream.stop();
