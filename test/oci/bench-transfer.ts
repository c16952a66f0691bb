/**
 * Side-by-side transfer timings against a real docker-registry on 127.0.0.1, for one plugin
 * image with a 15 MB plugin file (8.6 MB gzip layer):
 * - push: gatehouse-plugin image push vs skopeo copy oci: → docker://
 * - pull: gatehouse-init (from sources, and the esbuild bundle the init image ships) vs
 *   skopeo copy docker:// → oci: (blobs only) and skopeo copy + umoci unpack (files on disk, like gatehouse-init).
 * Not part of `npm test`:
 *
 *   node test/oci/bench-transfer.ts [runs=3]
 *
 * Each push goes to a fresh registry so that no blob is already there (skopeo would otherwise
 * mount it from another repository), and every number is the median of `runs`, wall clock,
 * process start included.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GATEWAY_VERSION } from '@gatehouse/plugin-sdk/version';
import { cleanEnv, runCli, runTool, type RunResult } from './helpers/cli.ts';
import { buildImageContent } from '../../images/build.ts';
import { startRegistry } from './helpers/registry.ts';

const runs = Number(process.argv[2] ?? 3);

async function timed(run: () => Promise<RunResult>): Promise<number> {
  const start = performance.now();
  const result = await run();
  if (result.code !== 0) throw new Error(`failed (${result.code}): ${result.stderr}`);
  return performance.now() - start;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const work = await mkdtemp(join(tmpdir(), 'gh-bench-oci-'));
try {
  const plugins = join(work, 'plugins');
  await mkdir(plugins);
  await writeFile(join(plugins, 'big.js'), `var big = "${randomBytes(7_500_000).toString('hex')}";\n`);
  const layout = join(work, 'layout');
  const built = await runCli('gatehouse-plugin', ['image', 'build', '--from', plugins, '--tag', GATEWAY_VERSION, '--output', layout], { env: cleanEnv() });
  if (built.code !== 0) throw new Error(built.stderr);

  const bundle = join(work, 'init-bundle');
  await buildImageContent('init-container', bundle);
  const t = {
    'push gatehouse-plugin': [] as number[],
    'push skopeo': [] as number[],
    'pull gatehouse-init (sources)': [] as number[],
    'pull gatehouse-init (bundle)': [] as number[],
    'pull skopeo copy': [] as number[],
    'pull skopeo copy + umoci unpack': [] as number[],
  };
  for (let i = 0; i < runs; i++) {
    for (const tool of ['gatehouse', 'skopeo'] as const) {
      const registry = await startRegistry();
      try {
        const ref = `${registry.host}/bench/big:${GATEWAY_VERSION}`;
        if (tool === 'gatehouse') {
          t['push gatehouse-plugin'].push(await timed(() => runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure'], { env: cleanEnv() })));
          t['pull gatehouse-init (sources)'].push(await timed(() => runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', join(work, `src-${i}`)], { env: cleanEnv() })));
          t['pull gatehouse-init (bundle)'].push(await timed(() => runTool(process.execPath, [join(bundle, 'gatehouse-init.mjs'), '--image', ref, '--insecure', '--dest', join(work, `bundle-${i}`)], { env: cleanEnv() })));
        } else {
          t['push skopeo'].push(await timed(() => runTool('skopeo', ['copy', '--dest-tls-verify=false', `oci:${layout}:${GATEWAY_VERSION}`, `docker://${ref}`])));
          t['pull skopeo copy'].push(await timed(() => runTool('skopeo', ['copy', '--src-tls-verify=false', `docker://${ref}`, `oci:${join(work, `sk-${i}`)}:${GATEWAY_VERSION}`])));
          t['pull skopeo copy + umoci unpack'].push(
            await timed(async () => {
              const copied = await runTool('skopeo', ['copy', '--src-tls-verify=false', `docker://${ref}`, `oci:${join(work, `sku-${i}`)}:${GATEWAY_VERSION}`]);
              if (copied.code !== 0) return copied;
              return runTool('umoci', ['unpack', '--rootless', '--image', `${join(work, `sku-${i}`)}:${GATEWAY_VERSION}`, join(work, `bundle-sku-${i}`)]);
            }),
          );
        }
      } finally {
        await registry.close();
      }
    }
  }
  const base = { push: median(t['push skopeo']), pull: median(t['pull skopeo copy + umoci unpack']) };
  const lines = Object.entries(t).map(([name, values]) => {
    const m = median(values);
    const ref = name.startsWith('push') ? base.push : base.pull;
    return `${name.padEnd(34)} ${m.toFixed(0).padStart(5)} ms   x${(m / ref).toFixed(2)} vs ${name.startsWith('push') ? 'skopeo' : 'skopeo copy + umoci unpack'}`;
  });
  process.stdout.write(`15 MB plugin file, median of ${runs}, wall clock including process start\n${lines.join('\n')}\n`);
} finally {
  await rm(work, { recursive: true, force: true });
}
