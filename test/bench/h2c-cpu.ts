// CPU time per request of one `gatehouse run` serving the proxy route over HTTP/1.1 (wrk, 32
// connections) and over h2c (h2load, 4 connections x 8 streams), with the bench's settings for
// its protocol rows: one warm-up of both loads, then the same process alternates between them,
// CPU from /proc (README.md "Finding where time goes").
// Usage: node test/bench/h2c-cpu.ts
//   MODES (default h1,h2), ROUNDS (3), SECS (5); PROF_DIR=dir adds --cpu-prof to the gateway.
import { execFile } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { H2LOAD_SETTINGS } from './h2load.ts';
import { cpuOf } from './proc-cpu.ts';
import { benchManifests, startGatehouseLogged, startNginx } from './tools.ts';
import { WRK_SETTINGS } from './wrk.ts';
const run = promisify(execFile);
const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const work = await mkdtemp(join(tmpdir(), 'h2prof-'));
const up = await startNginx(work, 'up', (port) => `server { listen 127.0.0.1:${port}; location / { return 200 "hello world\\n"; } }`);
const prof = process.env.PROF_DIR;
const gh = await startGatehouseLogged(work, { cli: CLI, command: 'run', files: { 'plain.yaml': benchManifests(up.port) }, args: ['--access-log', 'false'], nodeFlags: prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : [] });
const cpu = () => cpuOf(gh.child.pid!);
const secs = Number(process.env.SECS ?? 5);
const modes = (process.env.MODES ?? 'h1,h2').split(',');
// Warm-up: each load once (the first round would otherwise pay the young process's JIT alone).
await run('wrk', ['-t', '1', '-c', String(WRK_SETTINGS.connections), '-d', `${WRK_SETTINGS.warmupS}s`, `http://127.0.0.1:${gh.port}/`]);
await run('h2load', ['-t', '1', '-c', String(H2LOAD_SETTINGS.connections), '-m', String(H2LOAD_SETTINGS.streamsPerConnection), '-D', `${WRK_SETTINGS.warmupS}s`, `http://127.0.0.1:${gh.port}/`], { maxBuffer: 1 << 22 });
for (let round = 0; round < Number(process.env.ROUNDS ?? 3); round++) {
  for (const mode of modes) {
    const before = await cpu();
    let reqs = 0;
    if (mode === 'h2') {
      const { stdout } = await run('h2load', ['-t', '1', '-c', String(H2LOAD_SETTINGS.connections), '-m', String(H2LOAD_SETTINGS.streamsPerConnection), '-D', `${secs}s`, `http://127.0.0.1:${gh.port}/`], { maxBuffer: 1 << 22 });
      reqs = Number(/requests: \d+ total, \d+ started, (\d+) done/.exec(stdout)![1]);
    } else {
      const { stdout } = await run('wrk', ['-t', String(WRK_SETTINGS.threads), '-c', String(WRK_SETTINGS.connections), '-d', `${secs}s`, `http://127.0.0.1:${gh.port}/`]);
      reqs = Number(/(\d+) requests in/.exec(stdout)![1]);
    }
    const us = (await cpu()) - before;
    console.log(JSON.stringify({ round, mode, rps: Math.round(reqs / secs), usPerReq: +(us / reqs).toFixed(1) }));
  }
}
await gh.stop(); await up.stop();
