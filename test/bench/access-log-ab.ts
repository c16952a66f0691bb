// A/B inside one process (test/bench/README.md "Finding where time goes") of the access log's
// writers: `gatehouse run` in this process, loaded by wrk, while the gateway's access log switches
// every PHASE_MS between variants: `none` (no access log), `default` (the JSON line of
// createAccessLog), `format` (createFormattedAccessLog with the bench row's Envoy format string,
// test/bench/scenarios/proxy.ts FORMAT_GATEWAY), and with BASE=path/to/core also `base-format`
// (that checkout's core/src/log, e.g. an older commit extracted with git archive). CPU per request
// of each variant is process.cpuUsage() summed over its phases. Lines go to this process's stdout,
// as the bench's do: run it with stdout to a file (results go to stderr).
// Usage: node --no-node-snapshot --max-semi-space-size=2 test/bench/access-log-ab.ts [seconds] > /tmp/lines
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { benchManifests, freePort, startNginx } from './tools.ts';
import { parseWrk } from './wrk.ts';
import { FORMAT_GATEWAY } from './scenarios/proxy.ts';
import { Gateway } from '../../core/src/proxy/gateway.ts';
import { compileStringFormat } from '../../core/src/log/access-format.ts';
import { createAccessLog, createFormattedAccessLog, type AccessLog } from '../../core/src/log/access-log.ts';

const seconds = Number(process.argv[2] ?? 20);
const PHASE_MS = Number(process.env.PHASE_MS ?? 100);
const FORMAT = FORMAT_GATEWAY.spec.options.accessLoggingService.accessLog[0]!.fileSink.stringFormat;
const work = await mkdtemp(join(tmpdir(), 'access-log-ab-'));
const upstream = await startNginx(work, 'up', (port) => `server { listen 127.0.0.1:${port}; location / { return 200 "hello world\\n"; } }`);
const dir = await mkdtemp(join(work, 'config-'));
await writeFile(join(dir, 'bench.yaml'), benchManifests(upstream.port).map((d) => stringify(d)).join('---\n'));

interface Variant {
  log: AccessLog | undefined;
  /** The gateway's `logMessages`: entries carry the request and response. */
  messages: boolean;
}
const variants: Record<string, Variant> = {
  none: { log: undefined, messages: false },
  default: { log: createAccessLog('gateway'), messages: false },
  format: { log: createFormattedAccessLog([{ path: '/dev/stdout', format: compileStringFormat(FORMAT) }]), messages: true },
};
if (process.env.BASE) {
  const format = (await import(join(process.env.BASE, 'src/log/access-format.ts'))) as typeof import('../../core/src/log/access-format.ts');
  const log = (await import(join(process.env.BASE, 'src/log/access-log.ts'))) as typeof import('../../core/src/log/access-log.ts');
  variants['base-format'] = { log: log.createFormattedAccessLog([{ path: '/dev/stdout', format: format.compileStringFormat(FORMAT) }]), messages: true };
}
const names = Object.keys(variants);
let current = 0;
let requests = 0;
const totals = Object.fromEntries(names.map((n) => [n, { us: 0, requests: 0 }]));
// The gateway reads its access log (a private field) when a response closes: set per request.
const proto = Gateway.prototype as unknown as { finish(this: { accessLogger: unknown; logMessages: boolean }, ...args: unknown[]): void };
const finish = proto.finish;
proto.finish = function (...args) {
  requests++;
  const v = variants[names[current]!]!;
  this.accessLogger = v.log;
  this.logMessages = v.messages;
  return finish.apply(this, args);
};

const port = await freePort();
const { main } = await import('../../core/src/cli/main.ts');
const log = (line: string) => process.stderr.write(`${line}\n`);
await main(['run', '--config-dir', dir, '--port', String(port), '--https-port', '0', '--admin-port', '0', '--extauth-port', '0', '--plugin-dir', join(dir, 'plugins'), '--host', '127.0.0.1']);
await new Promise((r) => setTimeout(r, 1000));

const wrk = (s: number) => promisify(execFile)('wrk', ['-t1', '-c32', `-d${s}s`, `http://127.0.0.1:${port}/`], { maxBuffer: 1 << 20 });
// Warm-up: every variant's code is compiled before measuring.
const warm = setInterval(() => (current = (current + 1) % names.length), PHASE_MS);
await wrk(3);
clearInterval(warm);
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
const none = totals.none!.us / totals.none!.requests;
log(JSON.stringify({ phaseMs: PHASE_MS, rps: Math.round(result.requestsPerSec), errors: result.errors }));
for (const n of names) {
  const per = totals[n]!.us / totals[n]!.requests;
  log(`${n.padEnd(11)} ${per.toFixed(2)} µs/request (${totals[n]!.requests} requests), +${(per - none).toFixed(2)} µs over none`);
}
await upstream.stop();
process.exit(0);
