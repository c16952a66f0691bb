// Per-call cost of the plugin sandbox (issue 5: "measure the per-call cost"): the same
// RequiredHeader plugin called in-process (test kit: config decoding, JSON round trip and
// response validation, no isolate) and through the real host (its own isolate, JSON in and
// out, CPU timeout armed), inline and on the isolate thread. Prints numbers only:
//   node --no-node-snapshot test/bench/plugin-call-cost.ts
import { fileURLToPath } from 'node:url';
import { runInProcess, runInSandbox, type PluginDecision, type PluginHarness } from '@gatehouse/plugin-sdk/testkit';
import { checkRequest } from '@gatehouse/plugin-sdk/testkit';
import { RequiredHeader } from '../../plugins/required-header/src/index.ts';
import { callRate } from './call-rate.ts';

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
  return callRate(() => harness.authorize(request), concurrency, DURATION_MS);
}

/** The plugin's own Authorize called directly: no copies, no validation (the floor). */
async function direct(): Promise<PluginHarness> {
  const ctx = { logger: { debug() {}, info() {}, warn() {}, error() {} }, secrets: {} };
  const service = await RequiredHeader.GetAuthService(ctx, { ...config });
  return {
    mode: 'in-process',
    logs: [],
    failures: [],
    authorize: async (): Promise<PluginDecision> => {
      const response = await service.Authorize(ctx, { CheckRequest: request, State: {} });
      return response.CheckResponse.status.code === 0 ? { allowed: true, headersToSet: [], headersToRemove: [] } : { allowed: false, status: 403, headers: [], body: '' };
    },
    close: async () => {},
  };
}

const entry = fileURLToPath(new URL('../../plugins/required-header/src/index.ts', import.meta.url));
const shapes: [string, PluginHarness][] = [
  ['direct call (no copies, no checks)', await direct()],
  ['in-process (same plugin, no isolate)', await runInProcess(RequiredHeader, config)],
  ['sandboxed, inline (default)', await runInSandbox({ entry, name: 'RequiredHeader', config })],
  ['sandboxed, on the isolate thread', await runInSandbox({ entry, name: 'RequiredHeader', config, inline: false })],
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
  for (const base of [shapes[0]![0], shapes[1]![0]]) {
    const against = results[`${base}@${concurrency}`]!;
    for (const [name] of shapes.slice(2)) {
      const sandboxed = results[`${name}@${concurrency}`]!;
      console.log(`${concurrency} in flight, ${name} vs ${base}: +${(1e6 / sandboxed.perSec - 1e6 / against.perSec).toFixed(1)} µs per call`);
    }
  }
}
for (const [name, harness] of shapes) {
  const moved = 'hostLogs' in harness && (harness.hostLogs as { message: string }[]).some((line) => line.message.includes('moved to the isolate thread'));
  if (moved) console.log(`note: ${name} was moved to the isolate thread during the run`);
}
for (const [, harness] of shapes) await harness.close();
