// Per-check cost of the two embedded auth shapes (issue 4: "measure in-process vs
// gRPC-over-loopback and pick with numbers"): the gateway calling the AuthEngine directly,
// or calling the embedded ext_authz gRPC server on 127.0.0.1 in the same process (what
// `gatehouse run` would do if it went through gRPC). Same Basic-Auth config, same requests.
// Prints numbers only: `node --no-node-snapshot test/bench/extauth-check-cost.ts`.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { GrpcAuthorizer, InProcessAuthorizer } from '../../core/src/extauth/authorizers.ts';
import { startExtAuthServer } from '../../core/src/extauth/server.ts';
import type { Authorizer } from '../../core/src/extauth/authorizer.ts';
import { authConfig, basic, captureLogger, checkRequest, htpasswdApr1 } from '../extauth/support.ts';
import { callRate } from './call-rate.ts';

const DURATION_MS = Number(process.env.BENCH_CHECK_MS ?? 3_000);
const CONCURRENCY = [1, 32];

async function measure(authorizer: Authorizer, concurrency: number): Promise<{ perSec: number; meanUs: number }> {
  const request = checkRequest('bench.basic', { authorization: basic('alice', 'wonderland') });
  const first = await authorizer.check(request);
  if (!first.allowed) throw new Error('bench request was denied');
  return callRate(() => authorizer.check(request), concurrency, DURATION_MS);
}

const dir = await mkdtemp(join(tmpdir(), 'extauth-bench-'));
const alice = htpasswdApr1('alice', 'wonderland');
await writeFile(join(dir, 'auth.yaml'), stringify(authConfig('basic', [{ basicAuth: { realm: 'bench', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } } }], 'bench')));
const { logger } = captureLogger();
const server = await startExtAuthServer({ configDir: dir, port: 0, host: '127.0.0.1', logger, watch: false });
const shapes: [string, Authorizer][] = [
  ['in-process (AuthEngine)', new InProcessAuthorizer(server.engine, { logger })],
  ['gRPC over loopback (same process)', new GrpcAuthorizer(`127.0.0.1:${server.port}`, { logger })],
];
console.log(`Basic Auth check (APR1, cached), ${DURATION_MS} ms per row\n`);
console.log(`${'shape'.padEnd(36)} ${'in flight'.padStart(9)} ${'checks/s'.padStart(10)} ${'µs/check'.padStart(9)}`);
const results: Record<string, number> = {};
for (const concurrency of CONCURRENCY) {
  for (const [name, authorizer] of shapes) {
    const { perSec, meanUs } = await measure(authorizer, concurrency);
    results[`${name}@${concurrency}`] = perSec;
    console.log(`${name.padEnd(36)} ${String(concurrency).padStart(9)} ${perSec.toFixed(0).padStart(10)} ${meanUs.toFixed(1).padStart(9)}`);
  }
}
for (const concurrency of CONCURRENCY) {
  const ratio = results[`${shapes[0]![0]}@${concurrency}`]! / results[`${shapes[1]![0]}@${concurrency}`]!;
  console.log(`in-process / gRPC checks/s, ${concurrency} in flight: ${ratio.toFixed(1)}×`);
}
for (const [, authorizer] of shapes) await authorizer.close();
await server.close();
await rm(dir, { recursive: true, force: true });
