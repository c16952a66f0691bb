// Per-call cost of the plugin sandbox (issue 5: "measure the per-call cost"): the same
// RequiredHeader plugin called in-process (test kit: config decoding, JSON round trip and
// response validation, no isolate) and through the real host (its own isolate, JSON in and
// out, CPU timeout armed). Prints numbers only:
//   node --no-node-snapshot test/bench/plugin-call-cost.ts
import { fileURLToPath } from 'node:url';
import { runInProcess, runInSandbox, type PluginHarness } from '@gatehouse/plugin-sdk/testkit';
import { checkRequest } from '@gatehouse/plugin-sdk/testkit';
import { RequiredHeader } from '../../plugins/required-header/src/index.ts';

const DURATION_MS = Number(process.env.BENCH_CALL_MS ?? 3_000);
const CONCURRENCY = [1, 32];
const config = { RequiredHeader: 'x-api-key', AllowedValues: ['bench'] };
// A request as the gateway sends it, with a realistic handful of headers.
const request = checkRequest({
  path: '/api/items?page=2',
  headers: { 'x-api-key': 'bench', 'user-agent': 'wrk', accept: '*/*', 'x-request-id': '3f0c9a1e-5d2b-4c1a-9e7f-0a1b2c3d4e5f', 'x-forwarded-for': '127.0.0.1', 'x-forwarded-proto': 'http' },
});

async function measure(harness: PluginHarness, concurrency: number): Promise<{ perSec: number; meanUs: number }> {
  if (!(await harness.authorize(request)).allowed) throw new Error('bench request was denied');
  const run = async (ms: number) => {
    let done = 0;
    const until = performance.now() + ms;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < until) {
          await harness.authorize(request);
          done++;
        }
      }),
    );
    return done;
  };
  await run(500);
  const started = performance.now();
  const done = await run(DURATION_MS);
  const elapsed = performance.now() - started;
  return { perSec: (done / elapsed) * 1000, meanUs: (elapsed * 1000 * concurrency) / done };
}

const shapes: [string, PluginHarness][] = [
  ['in-process (same plugin, no isolate)', await runInProcess(RequiredHeader, config)],
  ['sandboxed (isolated-vm host)', await runInSandbox({ entry: fileURLToPath(new URL('../../plugins/required-header/src/index.ts', import.meta.url)), name: 'RequiredHeader', config })],
];
console.log(`RequiredHeader Authorize round trip, ${DURATION_MS} ms per row\n`);
console.log(`${'shape'.padEnd(38)} ${'in flight'.padStart(9)} ${'calls/s'.padStart(10)} ${'µs/call'.padStart(9)}`);
const results: Record<string, { perSec: number; meanUs: number }> = {};
for (const concurrency of CONCURRENCY) {
  for (const [name, harness] of shapes) {
    const result = await measure(harness, concurrency);
    results[`${name}@${concurrency}`] = result;
    console.log(`${name.padEnd(38)} ${String(concurrency).padStart(9)} ${result.perSec.toFixed(0).padStart(10)} ${result.meanUs.toFixed(1).padStart(9)}`);
  }
}
for (const concurrency of CONCURRENCY) {
  const inProcess = results[`${shapes[0]![0]}@${concurrency}`]!;
  const sandboxed = results[`${shapes[1]![0]}@${concurrency}`]!;
  console.log(
    `${concurrency} in flight: sandboxed/in-process calls/s = ${(sandboxed.perSec / inProcess.perSec).toFixed(3)}×; isolate overhead ≈ ${(1e6 / sandboxed.perSec - 1e6 / inProcess.perSec).toFixed(1)} µs of throughput per call`,
  );
}
for (const [, harness] of shapes) await harness.close();
