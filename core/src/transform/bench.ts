/**
 * Micro-benchmark of the transformation engine (not part of `npm test`):
 * `node core/src/transform/bench.ts [iterations]` prints the per-request cost of applying no
 * transformation, a header template, and a header + body template (with JSON body parsing) to
 * a request with a 1 KB JSON body, measured in this process (no sockets). The end-to-end goal
 * (issue 31: a route with a header+body transformation at ≥ 0.7× the same route without it)
 * belongs to `npm run bench` once the filter is wired; this shows what the engine adds.
 */
import { applyRequestStages } from './apply.ts';
import { compileStages, type CompiledStages, type TransformRequest } from './compile.ts';

const iterations = Number(process.argv[2] ?? 200_000);

const body = JSON.stringify({ user: { id: 42, name: 'Ada', roles: ['admin', 'dev'] }, items: Array.from({ length: 20 }, (_, i) => ({ sku: `sku-${i}`, qty: i })), note: 'x'.repeat(300) });
const request: TransformRequest = {
  method: 'POST',
  path: '/orders?tenant=acme',
  headers: { host: 'api.test', 'content-type': 'application/json', 'x-request-id': 'abc', 'user-agent': 'bench', 'content-length': String(body.length) },
  body,
};

const cases: [string, CompiledStages][] = [
  ['none (empty stages)', compileStages({}, 'o')],
  [
    'header template',
    compileStages({ transformations: { requestTransformation: { transformationTemplate: { headers: { 'x-tenant': { text: '{{ header("x-request-id") }}-{{ header(":path") }}' } } } } } }, 'o'),
  ],
  [
    'header + body template',
    compileStages(
      {
        transformations: {
          requestTransformation: {
            transformationTemplate: {
              headers: { 'x-user': { text: '{{ user.name }}' } },
              body: { text: '{"id": {{ user.id }}, "count": {{ length(items) }}, "first": "{{ first(items).sku }}"}' },
            },
          },
        },
      },
      'o',
    ),
  ],
];

function run(stages: CompiledStages, n: number): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const out = applyRequestStages(stages, request);
    if (!out.ok) throw new Error(out.message);
  }
  return Number(process.hrtime.bigint() - start) / n;
}

for (const [, stages] of cases) run(stages, Math.min(20_000, iterations));
const results = cases.map(([name, stages]) => [name, Math.min(run(stages, iterations), run(stages, iterations))] as const);
const base = results[0]![1];
for (const [name, ns] of results) console.log(`${name.padEnd(26)} ${(ns / 1000).toFixed(2).padStart(8)} µs/request  (+${((ns - base) / 1000).toFixed(2)} µs over none)`);
