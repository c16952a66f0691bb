// Bytes allocated per request, by function: loaded into a server with `--import`, V8's sampling
// heap profiler starts on SIGUSR2 (proxy-cpu.ts sends it after the warm-up with PROBE_SIGNAL=1)
// and counts objects the young and old collectors freed too (bytes allocated, not bytes kept);
// on SIGTERM the profile goes to $ALLOC_DIR/alloc-PID.json and the process exits.
// Summary: node test/bench/alloc-sampler.ts PROFILE REQUESTS [top] (bytes per request by function).
import { Session } from 'node:inspector/promises';
import { readFileSync, writeFileSync } from 'node:fs';

interface Node {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: Node[];
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const [file, requests, top = '40'] = process.argv.slice(2);
  const profile = JSON.parse(readFileSync(file!, 'utf8')) as { head: Node };
  const bytes = new Map<string, number>();
  let total = 0;
  const walk = (n: Node) => {
    const name = `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber + 1}`;
    bytes.set(name, (bytes.get(name) ?? 0) + n.selfSize);
    total += n.selfSize;
    for (const c of n.children) walk(c);
  };
  walk(profile.head);
  console.log(`${Math.round(total / Number(requests))} bytes per request`);
  for (const [name, b] of [...bytes].sort((x, y) => y[1] - x[1]).slice(0, Number(top))) console.log(`${String(Math.round(b / Number(requests))).padStart(7)}  ${name}`);
} else {
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  let started = false;
  process.on('SIGUSR2', () => {
    if (started) return;
    started = true;
    void session.post('HeapProfiler.startSampling', { samplingInterval: 512, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  });
  process.prependListener('SIGTERM', async () => {
    if (started) {
      const { profile } = await session.post('HeapProfiler.stopSampling');
      writeFileSync(`${process.env.ALLOC_DIR ?? '.'}/alloc-${process.pid}.json`, JSON.stringify(profile));
    }
    process.exit(0);
  });
}
