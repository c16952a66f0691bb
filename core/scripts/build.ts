// `npm run build [OUT_DIR] [--if-stale]`: emits the runtime sources as JavaScript into dist/ (or OUT_DIR)
// per core/tsconfig.build.json, and makes the tree resolvable on its own: each workspace's
// package.json (with .ts → .js in its exports), `node_modules/@gatehouse/*` links, and links
// to any workspace-local node_modules. The launchers (`<package>/bin/*.js`) run dist/ when
// its stamp is newer than the sources. The new tree replaces the old one in one rename, so
// processes running from dist/ never see it half-written.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WORKSPACES = ['core', 'plugin-sdk', 'init-container'];

/** Builds into `out` (default `<repo>/dist`). */
export async function build(out: string = join(ROOT, 'dist')): Promise<void> {
  const target = resolve(out);
  const staging = `${target}.tmp-${process.pid}`;
  await rm(staging, { recursive: true, force: true });
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'core/tsconfig.build.json'), '--outDir', staging], { stdio: 'inherit' });

  await writeFile(join(staging, 'package.json'), await readFile(join(ROOT, 'package.json')));
  await mkdir(join(staging, 'node_modules/@gatehouse'), { recursive: true });
  for (const ws of WORKSPACES) {
    const pkg = JSON.parse(await readFile(join(ROOT, ws, 'package.json'), 'utf8')) as { name: string; exports?: unknown };
    if (pkg.exports) pkg.exports = JSON.parse(JSON.stringify(pkg.exports).replace(/\.ts"/g, '.js"'));
    await writeFile(join(staging, ws, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
    await symlink(join('..', '..', ws), join(staging, 'node_modules', pkg.name));
    // A dependency installed inside the workspace (a version conflict) must be found first.
    // Relative, so it holds wherever dist/ sits next to the workspaces (the repo, an image).
    if (existsSync(join(ROOT, ws, 'node_modules'))) await symlink(join('..', '..', ws, 'node_modules'), join(staging, ws, 'node_modules'));
  }
  // The plugin sandbox's runtime, bundled once here instead of by every auth server at startup.
  const { bundleRuntimeScript, PREBUILT_RUNTIME_FILE } = await import('../../plugin-sdk/src/runtime/runtime-script.ts');
  await writeFile(join(staging, 'plugin-sdk/src/runtime', PREBUILT_RUNTIME_FILE), await bundleRuntimeScript());
  // The launchers compare this stamp with the sources' mtimes.
  await writeFile(join(staging, '.build-stamp'), `${new Date().toISOString()}\n`);

  const retired = `${target}.old-${process.pid}`;
  if (existsSync(target)) await rename(target, retired);
  await rename(staging, target);
  await rm(retired, { recursive: true, force: true });
}

if (import.meta.main) {
  // `--if-stale`: nothing to do when dist/ is newer than every runtime source (npm ci's
  // `prepare` has just built it, and `npm test` would build the same tree a second time).
  const args = process.argv.slice(2);
  const ifStale = args.includes('--if-stale');
  const out = args.find((arg) => !arg.startsWith('--'));
  const { isBuildCurrent } = await import('../../plugin-sdk/bin/launch.js');
  if (ifStale && out === undefined && isBuildCurrent(ROOT)) console.log('dist/ is current: build skipped');
  else await build(out);
}
