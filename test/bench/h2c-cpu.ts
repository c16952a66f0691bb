// CPU time per request of one `gatehouse run` serving the proxy route over HTTP/1.1 (wrk, 32
// connections) and over h2c (h2load, 4 connections x 8 streams: the bench's protocol rows), the
// same process alternating, from /proc (README.md "Finding where time goes").
// Usage: node test/bench/h2c-cpu.ts
//   MODES (default h1,h2), ROUNDS (3), SECS (5); PROF_DIR=dir adds --cpu-prof to the gateway.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { benchManifests, startGatehouseLogged, startNginx } from './tools.ts';
const run = promisify(execFile);
const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const work = await mkdtemp(join(tmpdir(), 'h2prof-'));
const up = await startNginx(work, 'up', (port) => `server { listen 127.0.0.1:${port}; location / { return 200 "hello world\\n"; } }`);
const prof = process.env.PROF_DIR;
const gh = await startGatehouseLogged(work, { cli: CLI, command: 'run', files: { 'plain.yaml': benchManifests(up.port) }, args: ['--access-log', 'false'], nodeFlags: prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : [] });
const cpu = async () => { const f = (await readFile(`/proc/${gh.child.pid}/stat`, 'utf8')).split(') ')[1]!.split(' '); return (Number(f[11]) + Number(f[12])) * 10_000; };
const secs = Number(process.env.SECS ?? 5);
const modes = (process.env.MODES ?? 'h1,h2').split(',');
for (let round = 0; round < Number(process.env.ROUNDS ?? 3); round++) {
  for (const mode of modes) {
    const before = await cpu();
    let reqs = 0;
    if (mode === 'h2') {
      const { stdout } = await run('h2load', ['-t', '1', '-c', '4', '-m', '8', '-D', `${secs}s`, `http://127.0.0.1:${gh.port}/`], { maxBuffer: 1 << 22 });
      reqs = Number(/requests: \d+ total, \d+ started, (\d+) done/.exec(stdout)![1]);
    } else {
      const { stdout } = await run('wrk', ['-t', '1', '-c', '32', '-d', `${secs}s`, `http://127.0.0.1:${gh.port}/`]);
      reqs = Number(/(\d+) requests in/.exec(stdout)![1]);
    }
    const us = (await cpu()) - before;
    console.log(JSON.stringify({ round, mode, rps: Math.round(reqs / secs), usPerReq: +(us / reqs).toFixed(1) }));
  }
}
await gh.stop(); await up.stop();
