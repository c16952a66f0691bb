// `npm run build`: emits the runtime sources as JavaScript into dist/ (tsconfig.build.json)
// and makes dist/ resolvable on its own: each workspace's package.json (with .ts → .js in
// its exports), `dist/node_modules/@gatehouse/*` links, and links to any workspace-local
// node_modules. The launchers (`<package>/bin/*.js`) run dist/ when this stamp is current.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIST = join(ROOT, 'dist');
const WORKSPACES = ['core', 'plugin-sdk', 'init-container'];

await rm(DIST, { recursive: true, force: true });
execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });

await writeFile(join(DIST, 'package.json'), await readFile(join(ROOT, 'package.json')));
await mkdir(join(DIST, 'node_modules/@gatehouse'), { recursive: true });
for (const ws of WORKSPACES) {
  const pkg = JSON.parse(await readFile(join(ROOT, ws, 'package.json'), 'utf8')) as { name: string; exports?: unknown };
  if (pkg.exports) pkg.exports = JSON.parse(JSON.stringify(pkg.exports).replace(/\.ts"/g, '.js"'));
  await writeFile(join(DIST, ws, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  await symlink(join('..', '..', ws), join(DIST, 'node_modules', pkg.name));
  // A dependency installed inside the workspace (a version conflict) must be found first.
  if (existsSync(join(ROOT, ws, 'node_modules'))) await symlink(join('..', '..', ws, 'node_modules'), join(DIST, ws, 'node_modules'));
}
// The plugin sandbox's runtime, bundled once here instead of by every auth server at startup.
const { bundleRuntimeScript, PREBUILT_RUNTIME_FILE } = await import('../../plugin-sdk/src/runtime/runtime-script.ts');
await writeFile(join(DIST, 'plugin-sdk/src/runtime', PREBUILT_RUNTIME_FILE), await bundleRuntimeScript());
// The launchers compare this stamp with the sources' mtimes.
await writeFile(join(DIST, '.build-stamp'), `${new Date().toISOString()}\n`);
