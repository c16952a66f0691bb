// Per-call cost of the reference Jwt plugin in the real plugin host (its own isolate, inline
// calls, crypto.subtle.verify), 32 calls in flight, against RequiredHeader for scale: calls/s,
// the wall time per call, and the CPU time per call of the whole process and of this thread
// (on the main thread, asymmetric verifies run on Node's thread pool).
//   node --no-node-snapshot --expose-gc test/bench/jwt-call-cost.ts [RS256|ES256|RequiredHeader]
import { fileURLToPath } from 'node:url';
import { checkRequest, runInSandbox } from '@gatehouse/plugin-sdk/testkit';
import { callRate } from './call-rate.ts';
import { BENCH_JWKS, benchJwt } from './bench-jwt.ts';

const which = (process.argv[2] ?? 'RS256') as 'RS256' | 'ES256' | 'RequiredHeader';
const plugin = (name: string) => fileURLToPath(new URL(`../../plugins/${name}/src/index.ts`, import.meta.url));
const harness = await runInSandbox(
  which === 'RequiredHeader'
    ? { entry: plugin('required-header'), name: 'RequiredHeader', config: { RequiredHeader: 'x-api-key', AllowedValues: ['bench'] } }
    : { entry: plugin('jwt'), name: 'Jwt', config: { Jwks: BENCH_JWKS, Algorithms: [which] } },
);
const request = checkRequest({
  path: '/api/items?page=2',
  headers: { 'x-api-key': 'bench', authorization: `Bearer ${which === 'RequiredHeader' ? 'none' : benchJwt(which)}`, 'user-agent': 'wrk', accept: '*/*', 'x-forwarded-proto': 'http' },
});
if (!(await harness.authorize(request)).allowed) throw new Error('the bench request was denied');
const MS = Number(process.env.BENCH_CALL_MS ?? 2000);
for (let round = 0; round < 3; round++) {
  const cpu = process.cpuUsage();
  const thread = process.threadCpuUsage();
  const { perSec } = await callRate(() => harness.authorize(request), 32, MS);
  // CPU is read around callRate's 500 ms warm-up too: count its calls at the measured rate.
  const calls = (perSec * (MS + 500)) / 1000;
  const used = process.cpuUsage(cpu);
  const own = process.threadCpuUsage(thread);
  console.log(`${which}: ${perSec.toFixed(0)} calls/s, ${(1e6 / perSec).toFixed(1)} µs wall, ${((used.user + used.system) / calls).toFixed(1)} µs CPU (process), ${((own.user + own.system) / calls).toFixed(1)} µs CPU (this thread) per call`);
}
await harness.close();
