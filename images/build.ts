#!/usr/bin/env node
/**
 * Build steps of the container images, kept out of the Dockerfiles so they can be tested
 * without a Docker engine. Run from an installed checkout (after `npm ci`):
 *
 *   node images/build.ts gateway OUT_DIR          the compiled JavaScript of core + plugin-sdk (dist/,
 *                                                 built first), their launchers and production
 *                                                 node_modules; run with node OUT_DIR/core/bin/gatehouse.js
 *   node images/build.ts init-container OUT_DIR   one bundled file, OUT_DIR/gatehouse-init.mjs
 *
 * Only what runs is written: no tests, no dev dependencies, no build tools.
 */
import { cp, lstat, mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const exec = promisify(execFile);

interface LockEntry {
  version?: string;
  link?: boolean;
  resolved?: string;
  dev?: boolean;
  optional?: boolean;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

/**
 * The package-lock locations (`node_modules/x`, `node_modules/a/node_modules/b`) that the
 * given workspaces need at run time: their dependencies, optional and peer dependencies,
 * resolved the way Node does (nearest node_modules first), transitively. Workspaces they
 * depend on are followed too and returned separately.
 */
export function productionClosure(lock: { packages: Record<string, LockEntry> }, workspaces: readonly string[]): { packages: string[]; workspaces: string[] } {
  const packages = new Set<string>();
  const seenWorkspaces = new Set<string>();
  const queue = [...workspaces];
  // Node's lookup: <dir>/node_modules/<name> for the package's own directory and each parent.
  const resolveFrom = (from: string, name: string): string | undefined => {
    const parts = from ? from.split('/') : [];
    for (let i = parts.length; i >= 0; i--) {
      const dir = parts.slice(0, i).join('/');
      if (dir.endsWith('node_modules')) continue;
      const candidate = dir ? `${dir}/node_modules/${name}` : `node_modules/${name}`;
      if (lock.packages[candidate]) return candidate;
    }
    return undefined;
  };
  while (queue.length > 0) {
    const location = queue.shift()!;
    const entry = lock.packages[location];
    if (!entry) throw new Error(`package-lock.json has no entry "${location}"; run npm install`);
    const isWorkspace = !location.includes('node_modules/');
    if (isWorkspace) {
      if (seenWorkspaces.has(location)) continue;
      seenWorkspaces.add(location);
    } else {
      if (packages.has(location)) continue;
      packages.add(location);
    }
    const wanted: [string, boolean][] = [
      ...Object.keys(entry.dependencies ?? {}).map((n): [string, boolean] => [n, true]),
      ...Object.keys(entry.optionalDependencies ?? {}).map((n): [string, boolean] => [n, false]),
      ...Object.keys(entry.peerDependencies ?? {}).map((n): [string, boolean] => [n, entry.peerDependenciesMeta?.[n]?.optional !== true]),
    ];
    for (const [name, required] of wanted) {
      const found = resolveFrom(location, name);
      if (!found) {
        // Optional dependencies for other platforms are in the lock but not installed here.
        if (required) throw new Error(`${location || 'root'} needs ${name}, which package-lock.json does not resolve; run npm install`);
        continue;
      }
      const target = lock.packages[found]!;
      queue.push(target.link && target.resolved ? target.resolved : found);
    }
  }
  return { packages: [...packages].sort(), workspaces: [...seenWorkspaces].sort() };
}

/** Files in node_modules that nothing loads at run time: type declarations, source maps, docs, packed copies. */
const UNUSED_FILE = /(\.d\.[cm]?ts|\.[cm]?js\.map|\.d\.ts\.map|\.tgz)$/;
/** Markdown, except the licence and notice texts that must travel with the code. */
const DOC_FILE = /^(?!licen[cs]e|notice|copying).*\.(md|markdown)$/i;

/**
 * Removes from every node_modules under `dir` what never runs: {@link UNUSED_FILE}, {@link DOC_FILE},
 * and native prebuilds for other platforms (`prebuilds/<platform>-<arch>/`, node-gyp-build's
 * layout: isolated-vm ships darwin, win32 and arm64 builds too). Returns the bytes removed.
 */
export async function pruneNodeModules(dir: string, platform = `${process.platform}-${process.arch}`): Promise<number> {
  // Real directories only: links (dist/node_modules/@gatehouse/* -> our own tree) are not followed.
  const walk = async (path: string, inModules: boolean, remove: (name: string) => boolean): Promise<number> => {
    let bytes = 0;
    for (const entry of await readdir(path, { withFileTypes: true })) {
      const child = join(path, entry.name);
      if (entry.isDirectory()) {
        const otherPlatform = inModules && entry.name !== platform && path.endsWith('/prebuilds');
        bytes += await walk(child, inModules || entry.name === 'node_modules', otherPlatform ? () => true : remove);
        if (otherPlatform) await rm(child, { recursive: true });
      } else if (inModules && entry.isFile() && remove(entry.name)) {
        bytes += (await lstat(child)).size;
        await rm(child);
      }
    }
    return bytes;
  };
  return walk(dir, false, (name) => UNUSED_FILE.test(name) || DOC_FILE.test(name));
}

/** Copies a workspace's package.json, its launchers (bin/) and its compiled JavaScript (dist/<workspace>). */
async function copyWorkspace(workspace: string, out: string): Promise<void> {
  await mkdir(join(out, workspace), { recursive: true });
  await cp(join(ROOT, workspace, 'package.json'), join(out, workspace, 'package.json'));
  await cp(join(ROOT, workspace, 'bin'), join(out, workspace, 'bin'), { recursive: true });
}

async function buildGateway(out: string): Promise<void> {
  const lock = JSON.parse(await readFile(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  const closure = productionClosure(lock, ['core']);
  // The image runs compiled JavaScript (Node's type stripping would cost ~30 MB per process),
  // compiled straight into the image tree: the repository's own dist/ is left alone.
  await exec(process.execPath, [join(ROOT, 'core/scripts/build.ts'), join(out, 'dist')]);
  const root = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string };
  // The version is read from here at run time (core/src/version.ts).
  await writeFile(join(out, 'package.json'), `${JSON.stringify({ name: root.name, version: root.version, private: true, type: 'module' }, null, 2)}\n`);
  for (const workspace of closure.workspaces) await copyWorkspace(workspace, out);
  for (const location of closure.packages) {
    const source = join(ROOT, location);
    const info = await lstat(source).catch(() => undefined);
    // Optional packages for other platforms (esbuild's binaries) are locked but not installed.
    if (!info && lock.packages[location]!.optional) continue;
    if (!info) throw new Error(`${location} is in package-lock.json but not installed; run npm ci first`);
    const target = join(out, location);
    if (info.isSymbolicLink()) continue;
    await mkdir(dirname(target), { recursive: true });
    // `cp -a` (coreutils, in every build image) is far faster than fs.cp for thousands of files.
    // Nested node_modules are removed and come back as their own closure entries, if needed.
    // Sorted locations put a package before its nested ones, so they are copied back after this.
    await exec('cp', ['-a', source, target]);
    await rm(join(target, 'node_modules'), { recursive: true, force: true });
  }
  await pruneNodeModules(out);
  // Workspace links, as npm makes them: node_modules/@gatehouse/core -> ../../core.
  for (const [location, entry] of Object.entries(lock.packages)) {
    if (!entry.link || !entry.resolved || !closure.workspaces.includes(entry.resolved)) continue;
    const link = join(out, location);
    await mkdir(dirname(link), { recursive: true });
    await symlink(relative(dirname(link), join(out, entry.resolved)), link);
  }
}

async function buildInitContainer(out: string): Promise<void> {
  const { build } = await import('esbuild');
  await build({
    entryPoints: [join(ROOT, 'init-container/src/cli/main.ts')],
    outfile: join(out, 'gatehouse-init.mjs'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    minify: false,
    legalComments: 'eof',
    // CommonJS dependencies (undici) call require(); give the ESM bundle one.
    banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
    logLevel: 'warning',
  });
}

const TARGETS: Record<string, (out: string) => Promise<void>> = { gateway: buildGateway, 'init-container': buildInitContainer };

/** Builds `target` into `out` (emptied first). */
export async function buildImageContent(target: string, out: string): Promise<void> {
  const run = TARGETS[target];
  if (!run) throw new Error(`unknown target ${JSON.stringify(target)}; expected ${Object.keys(TARGETS).join(' or ')}`);
  const dir = resolve(out);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await run(dir);
}

if (import.meta.main) {
  const [target, out] = process.argv.slice(2);
  if (!target || !out) {
    process.stderr.write('usage: node images/build.ts gateway|init-container OUT_DIR\n');
    process.exit(2);
  }
  try {
    await buildImageContent(target, out);
    const files = (await readdir(out, { recursive: true })).length;
    process.stdout.write(`built ${target} into ${out} (${files} entries)\n`);
  } catch (error) {
    process.stderr.write(`images/build.ts: ${(error as Error).message}\n`);
    process.exit(1);
  }
}
