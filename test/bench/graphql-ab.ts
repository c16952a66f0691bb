// In-process A/B of core/src/graphql: this checkout's against a git revision's, in ONE gateway
// process that switches every 100 ms between the two (the method of README.md "Finding where time
// goes": both see the same machine load, so a few % shows through the noise of a shared machine).
// Usage: node test/bench/graphql-ab.ts [remote|rest|rest-off] [seconds] [revision (default main)]
// It copies the checkout's sources to a temporary tree, puts the revision's core/src/graphql beside
// them as core/src/graphql_base (its relative imports reach the same shared modules), and replaces
// execute/lazy-endpoints.ts there with one that builds both endpoint sets and alternates between
// them, adding up CPU time (process.cpuUsage) and requests per phase. Only core/src/graphql differs.
import { execFile, execFileSync, } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startGatehouseLogged, startNginx } from './tools.ts';
import { parseWrk } from './wrk.ts';
import { booksResult, graphqlUpstreamBlock, REMOTE_REQUEST, remoteManifests, REST_REQUEST, restManifests, restUpstreamBlock } from './scenarios/graphql.ts';

const row = process.argv[2] ?? 'remote';
const seconds = Number(process.argv[3] ?? 20);
const revision = process.argv[4] ?? 'main';
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const work = await mkdtemp(join(tmpdir(), 'graphql-ab-'));

// The tree: the checkout's tracked files as they are now, node_modules linked, the revision's graphql/ beside.
const tree = join(work, 'tree');
const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', 'core', 'plugin-sdk', 'package.json'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
for (const file of files) await cp(join(ROOT, file), join(tree, file), { force: true }).catch(() => undefined);
for (const dir of ['', 'core/', 'plugin-sdk/']) await symlink(join(ROOT, dir, 'node_modules'), join(tree, dir, 'node_modules')).catch(() => undefined);
const base = join(tree, 'core/src/graphql_base');
await mkdir(base, { recursive: true });
execFileSync('sh', ['-c', `git archive ${revision} core/src/graphql | tar -x --strip-components=3 -C ${base}`], { cwd: ROOT });
await writeFile(
  join(tree, 'core/src/graphql/execute/lazy-endpoints.ts'),
  `import { createGraphQLEndpoints as createA } from './endpoints.ts';
import { createGraphQLEndpoints as createB } from '../../graphql_base/execute/endpoints.ts';
export function lazyGraphQLEndpoints(deps: any): any {
  const a = createA(deps);
  const b = createB(deps);
  let useB = false;
  const stats = { a: { us: 0, requests: 0 }, b: { us: 0, requests: 0 } };
  let last = process.cpuUsage();
  setInterval(() => {
    const now = process.cpuUsage();
    (useB ? stats.b : stats.a).us += now.user + now.system - last.user - last.system;
    last = now;
    useB = !useB;
  }, 100).unref();
  setInterval(() => process.stderr.write('AB ' + JSON.stringify(stats) + '\\n'), 1000).unref();
  return {
    update(snapshot: any) { a.update(snapshot); b.update(snapshot); },
    handle(key: string, req: any, res: any, ctx: any) {
      const target = useB ? b : a;
      (useB ? stats.b : stats.a).requests++;
      return target.handle(key, req, res, ctx);
    },
    upgrade(...args: any[]) { (a as any).upgrade(...args); },
    clusters: () => new Set([...a.clusters(), ...b.clusters()]),
    close: async () => { await a.close(); await b.close(); },
  };
}
`,
);

const remote = row === 'remote';
const upstream = remote ? await startNginx(work, 'graphql', graphqlUpstreamBlock(await booksResult())) : await startNginx(work, 'rest', restUpstreamBlock);
const request = remote ? REMOTE_REQUEST : REST_REQUEST;
const gatehouse = await startGatehouseLogged(work, {
  cli: join(tree, 'core/bin/gatehouse.js'),
  command: 'gateway',
  files: { 'bench.yaml': remote ? remoteManifests(upstream.port) : restManifests(upstream.port) },
  env: { GATEHOUSE_FROM_SOURCE: '1', ...(row === 'rest-off' ? { GATEHOUSE_GRAPHQL_LIMITS: 'off' } : {}) },
});
const { port, logFile } = gatehouse;
try {
  const script = join(work, 'request.lua');
  await writeFile(script, [`wrk.method = ${JSON.stringify(request.method)}`, `wrk.body = ${JSON.stringify(request.body)}`, ...Object.entries(request.headers).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`)].join('\n'));
  const wrk = (s: number) => promisify(execFile)('wrk', ['-t1', '-c32', `-d${s}s`, '-s', script, `http://127.0.0.1:${port}${request.path}`]);
  await wrk(3);
  const stats = async () => JSON.parse((await readFile(logFile, 'utf8')).split('\n').filter((l) => l.startsWith('AB ')).at(-1)!.slice(3)) as Record<'a' | 'b', { us: number; requests: number }>;
  // A second between the warm-up and the measurement: the stats line of the warm-up is written.
  await new Promise((r) => setTimeout(r, 1100));
  const before = await stats();
  const r = parseWrk((await wrk(seconds)).stdout);
  await new Promise((resolve) => setTimeout(resolve, 1100));
  const after = await stats();
  const per = (k: 'a' | 'b') => (after[k].us - before[k].us) / (after[k].requests - before[k].requests);
  console.log(JSON.stringify({ row, revision, rps: Math.round(r.requestsPerSec), errors: r.errors, checkoutUsPerRequest: Math.round(per('a') * 10) / 10, baseUsPerRequest: Math.round(per('b') * 10) / 10, ratio: Math.round((per('a') / per('b')) * 1000) / 1000 }));
  if (r.errors > 0) console.log(`wrk saw ${r.errors} errors: see ${logFile}`);
} finally {
  await gatehouse.stop();
  await upstream.stop();
}
