/**
 * WebSocket conformance (SPEC 3.2.1): the Autobahn testsuite's fuzzing client (PyPI
 * `autobahntestsuite`, Python 2.7, installed by install-autobahn.sh) against a `ws` echo server,
 * once directly and once through the gateway, in one wstest run. Through the gateway every case
 * must end exactly as it does directly (`behavior` and `behaviorClose` of wstest's JSON report):
 * the gateway tunnels the upgraded connection and must neither change nor lose a frame, a close
 * code or a timing-dependent failure (fragmentation, UTF-8 validation, ping/pong, close handling).
 *
 * The subset: cases 1–10 (301 cases, about 40 s per agent here). Cases 12 and 13 (216 cases) test
 * permessage-deflate: with the echo server's compression off they only record UNIMPLEMENTED for
 * both agents, and with it on they take over 5 minutes per agent on a 2-core machine while
 * exercising the echo server's zlib, not the gateway (which forwards Sec-WebSocket-Extensions and
 * the frames as bytes). Case 9 (large messages and many frames, 16 s directly) is kept: it is the
 * one that catches buffering and back-pressure faults in the tunnel.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { WebSocketServer } from 'ws';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { catchAllVirtualService, describeWithTools, staticUpstream } from './support.ts';

const run = promisify(execFile);

const WSTEST = { name: 'wstest', env: 'GATEHOUSE_WSTEST', installed: 'autobahn/wstest', script: 'test/conformance/install-autobahn.sh' };

/** The cases run (wstest's patterns), and those left out (see the file comment). */
const CASES = ['*'];
const EXCLUDED = ['12.*', '13.*'];

/** One case's result in wstest's index.json. */
interface CaseReport {
  behavior: string;
  behaviorClose: string;
  remoteCloseCode: number | null;
}

describeWithTools('Autobahn: WebSocket through the gateway ends every case as a direct connection does', [WSTEST], (tools) => {
  let work: string;
  let echo: WebSocketServer;
  let echoPort: number;
  let dir: ConfigDir;
  let gatehouse: GatehouseProcess;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'gatehouse-autobahn-'));
    // The echo peer the cases expect: every message back as received (text or binary), no
    // compression, messages up to the 16 MB of case 9.
    echo = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
    echo.on('connection', (ws) => ws.on('error', () => {}).on('message', (data, isBinary) => ws.send(data, { binary: isBinary })));
    await new Promise<void>((resolve) => echo.once('listening', () => resolve()));
    echoPort = (echo.address() as AddressInfo).port;
    dir = await makeConfigDir({ 'upstream.yaml': staticUpstream('echo', echoPort), 'vs.yaml': catchAllVirtualService('ws', 'echo') });
    gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
  });

  afterAll(async () => {
    await gatehouse?.stop();
    for (const client of echo?.clients ?? []) client.terminate();
    await new Promise<void>((resolve) => (echo ? echo.close(() => resolve()) : resolve()));
    await dir?.cleanup();
    if (work) await rm(work, { recursive: true, force: true });
  }, 60_000);

  it('cases 1–10: same behavior and close behavior through the gateway as directly', { timeout: 240_000 }, async () => {
    const outdir = join(work, 'reports');
    const spec = join(work, 'fuzzingclient.json');
    await writeFile(
      spec,
      JSON.stringify({
        outdir,
        servers: [
          { agent: 'direct', url: `ws://127.0.0.1:${echoPort}` },
          { agent: 'gateway', url: `ws://127.0.0.1:${gatehouse.port}` },
        ],
        cases: CASES,
        'exclude-cases': EXCLUDED,
        'exclude-agent-cases': {},
      }),
    );
    const started = Date.now();
    // wstest writes its progress to stdout; it is only wanted when something goes wrong.
    await run(tools.wstest!, ['-m', 'fuzzingclient', '-s', spec], { cwd: work, maxBuffer: 64 * 1024 * 1024, timeout: 220_000 });
    const index = JSON.parse(await readFile(join(outdir, 'index.json'), 'utf8')) as Record<string, Record<string, CaseReport>>;
    const direct = index.direct ?? {};
    const gateway = index.gateway ?? {};
    const ids = Object.keys(direct).sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
    const count = (reports: Record<string, CaseReport>) => Object.values(reports).reduce<Record<string, number>>((acc, r) => ((acc[r.behavior] = (acc[r.behavior] ?? 0) + 1), acc), {});
    console.log(`autobahn: ${ids.length} cases in ${((Date.now() - started) / 1000).toFixed(1)} s; direct ${JSON.stringify(count(direct))}; gateway ${JSON.stringify(count(gateway))}`);
    // A run that connected nowhere reports no cases: not a pass.
    expect(ids.length).toBeGreaterThan(290);
    const differ = ids
      .filter((id) => gateway[id]?.behavior !== direct[id]!.behavior || gateway[id]?.behaviorClose !== direct[id]!.behaviorClose)
      .map((id) => `${id}: direct ${direct[id]!.behavior}/${direct[id]!.behaviorClose}, gateway ${gateway[id]?.behavior ?? 'missing'}/${gateway[id]?.behaviorClose ?? 'missing'}`);
    expect(differ).toEqual([]);
    expect(Object.keys(gateway).sort()).toEqual(Object.keys(direct).sort());
  });
});
