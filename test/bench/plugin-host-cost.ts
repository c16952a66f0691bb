// CPU per check of the plugin host's round trip alone, without HTTP: one RequiredHeader step on
// the plugin process (or `--thread`: the plugin thread), 32 checks in flight, for `seconds`.
// Prints checks/s and the CPU per check of this process (the event loop's side) and of its child
// processes (the plugin process). `core` names the tree whose plugin host runs (default this
// checkout's; another checkout's `core/` for an A/B, e.g. from `git archive REV core | tar -x -C DIR`
// with DIR/core/node_modules linked to this checkout's node_modules).
//   node --no-node-snapshot test/bench/plugin-host-cost.ts [seconds] [core] [--thread]
// Alternate A and B a few times: on the shared 2-core machine one run moves by ±15%.
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const seconds = Number(args[0] ?? 4);
const core = resolve(args[1] ?? fileURLToPath(new URL('../../core', import.meta.url)));
const onThread = process.argv.includes('--thread');

const { configurePluginHost } = (await import(join(core, 'src/extauth/plugins/plugin-host-options.ts'))) as typeof import('../../core/src/extauth/plugins/plugin-host-options.ts');
const { createThreadedPluginStep } = (await import(join(core, 'src/extauth/plugins/thread/plugin-thread.ts'))) as typeof import('../../core/src/extauth/plugins/thread/plugin-thread.ts');

const dir = await mkdtemp(join(tmpdir(), 'plugin-host-cost-'));
await buildPlugin({ entry: fileURLToPath(new URL('../../plugins/required-header/src/index.ts', import.meta.url)), name: 'RequiredHeader', outDir: dir });
configurePluginHost({ process: !onThread });
// The plugin process and its pipe do not hold the loop open (a gateway's listeners do).
const keepAlive = setInterval(() => {}, 1000);
const logger = { debug() {}, info() {}, warn() {}, error: (fields: object, message: string) => console.error(message, fields) };
const step = await createThreadedPluginStep({ name: 'RequiredHeader', config: { RequiredHeader: 'x-api-key', AllowedValues: ['bench'] } }, { pluginDir: dir, logger });
// What wrk's requests look like to a check (docs/plugins.md "Cost").
const request = {
  attributes: {
    source: { address: { socket_address: { address: '127.0.0.1', port_value: 40000 } } },
    request: { http: { id: 'bench', method: 'GET', path: '/', host: 'auth', scheme: 'http', protocol: 'HTTP/1.1', headers: { host: 'auth', 'x-api-key': 'bench', 'x-request-id': '0f8b7a52-2a4b-4f3e-9d51-6a1f2b7c9e10' } } },
  },
};

const cpuOf = async (pid: string) => {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000; // clock ticks (100/s) → µs
};
const children = async () => {
  const pids: string[] = [];
  for (const tid of await readdir('/proc/self/task')) pids.push(...(await readFile(`/proc/self/task/${tid}/children`, 'utf8').catch(() => '')).split(' ').filter(Boolean));
  return pids;
};
const childCpu = async (pids: string[]) => {
  let total = 0;
  for (const pid of pids) total += await cpuOf(pid).catch(() => 0);
  return total;
};

let done = 0;
let stopped = false;
const loop = (): void => {
  if (stopped) return;
  void step.authorize(request as never).then((decision) => {
    if (!decision.allowed) throw new Error('the bench check was denied');
    done++;
    loop();
  });
};
for (let i = 0; i < 32; i++) loop();
await new Promise((r) => setTimeout(r, 1000));
const pids = await children();
const [cpu0, child0, done0, t0] = [process.cpuUsage(), await childCpu(pids), done, performance.now()];
await new Promise((r) => setTimeout(r, seconds * 1000));
const [cpu1, child1, done1, t1] = [process.cpuUsage(), await childCpu(pids), done, performance.now()];
stopped = true;
const checks = done1 - done0;
console.log(
  JSON.stringify({
    core,
    host: onThread ? 'thread' : 'process',
    checksPerSecond: Math.round(checks / ((t1 - t0) / 1000)),
    thisProcessUsPerCheck: Math.round(((cpu1.user + cpu1.system - cpu0.user - cpu0.system) / checks) * 100) / 100,
    childProcessesUsPerCheck: Math.round(((child1 - child0) / checks) * 100) / 100,
  }),
);
await step.close();
clearInterval(keepAlive);
await rm(dir, { recursive: true, force: true });
process.exit(0);
