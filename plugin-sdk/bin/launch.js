// Starts a Gatehouse CLI: the compiled JavaScript under dist/ when it is current, the
// TypeScript sources otherwise (development; Node strips the types). Plain JavaScript so
// it runs before anything is built. Shared by every package's bin.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * Node flags every Gatehouse process runs with: isolated-vm (auth plugins) needs
 * `--no-node-snapshot` on Node 20+; a 16 MB young generation (scavenges 195-384 → 40-48 per
 * 5 s of proxy load, CPU per request 73-79 → 58-63 µs, measured); `--expose-gc` lets the proxy
 * ask for a scavenge every few MB of streamed body (core/src/proxy/chunk-collector.ts).
 * `--no-maglev`: with V8's mid tier on, about half of the `gatehouse run` processes started
 * (4 of 8, 3 of 8 in two runs) served the proxy route at 20-30% more CPU per request for their
 * whole life: their optimized `process.nextTick` built its tick object through the runtime
 * (Runtime_DefineKeyedOwnPropertyInLiteral and map migrations in `perf`), and about one in
 * eight ran with 110 MB more RSS; without it none of 16 did (docs/development.md "Node flags").
 */
export const NODE_FLAGS = ['--no-node-snapshot', '--max-semi-space-size=16', '--expose-gc', '--no-maglev'];

/**
 * Environment defaults (an operator's own value wins). One glibc malloc arena: body
 * chunks are allocated and freed across Node's threads, and with an arena per thread the
 * freed memory stays scattered; measured on 50 MB up + 50 MB down through `gatehouse run`,
 * peak RSS 136–163 MB → 119–134 MB, with no throughput change in the proxy bench.
 */
export const NODE_ENV_DEFAULTS = { MALLOC_ARENA_MAX: '1' };

/** The runtime source trees compiled into dist/ (see core/tsconfig.build.json). */
const SOURCE_DIRS = ['core/src', 'plugin-sdk/src', 'init-container/src'];

/**
 * Runs `main(argv)` of `<package>/src/<entry>.ts` (or its compiled twin) for the bin file at `binUrl`.
 * Missing Node flags and environment defaults are added by re-executing in place (same
 * pid, no wrapper process): glibc reads its variables only at process start.
 */
export async function launch(binUrl, entry) {
  assertNodeVersion();
  const missing = NODE_FLAGS.filter((flag) => !process.execArgv.includes(flag));
  const unsetEnv = Object.keys(NODE_ENV_DEFAULTS).filter((name) => process.env[name] === undefined);
  if ((missing.length > 0 || unsetEnv.length > 0) && typeof process.execve === 'function') {
    process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, process.argv[1], ...process.argv.slice(2)], { ...NODE_ENV_DEFAULTS, ...process.env });
  }
  // Every CLI module exports `main(argv)`: a number is the exit code; a negative one (or
  // none) means the command keeps running (a server).
  const { main } = await import(pathToFileURL(resolveEntry(binUrl, entry)).href);
  const code = await main(process.argv.slice(2));
  if (typeof code === 'number' && code >= 0) {
    process.exitCode = code;
    // A one-shot command is done: whatever still holds the event loop (a stalled download
    // after gatehouse-init's deadline, say) must not keep the process alive.
    setTimeout(() => process.exit(code), 2_000).unref();
  }
}

/** Oldest Node.js major Gatehouse runs on (package.json engines). */
export const MIN_NODE_MAJOR = 24;

/**
 * Exits with a clear message on an older Node.js: there, failures come later and blame the
 * wrong thing (issue 11: "Cannot read properties of undefined (reading 'bind')" on Node 20).
 */
export function assertNodeVersion(version = process.versions.node) {
  if (Number(version.split('.')[0]) >= MIN_NODE_MAJOR) return;
  process.stderr.write(`Gatehouse needs Node.js ${MIN_NODE_MAJOR} or newer, but this is Node.js ${version} (${process.execPath}); install Node.js ${MIN_NODE_MAJOR}+ (e.g. "nvm install ${MIN_NODE_MAJOR}") and run again [GH_PLUGIN_NODE_VERSION]\n`);
  process.exit(1);
}

/** The file to run: dist/<pkg>/src/<entry>.js when built from the current sources, else the .ts source. */
export function resolveEntry(binUrl, entry) {
  const packageDir = dirname(dirname(fileURLToPath(binUrl)));
  const root = findRoot(packageDir);
  const source = join(packageDir, 'src', `${entry}.ts`);
  const compiled = join(root, 'dist', relative(root, packageDir), 'src', `${entry}.js`);
  if (process.env.GATEHOUSE_FROM_SOURCE === '1' && existsSync(source)) return source;
  if (!existsSync(compiled)) return source;
  if (!existsSync(source)) return compiled; // an image: only dist/ was copied
  return isBuildCurrent(root) ? compiled : source;
}

/** The repository root: the nearest directory whose package.json declares workspaces. */
function findRoot(from) {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && JSON.parse(readFileSync(manifest, 'utf8')).workspaces) return dir;
    if (dirname(dir) === dir) return dirname(from);
  }
}

/** Whether dist/ under `root` was built after the newest runtime source file (`npm run build -- --if-stale` skips then). */
export function isBuildCurrent(root) {
  const stamp = statSync(join(root, 'dist', '.build-stamp'), { throwIfNoEntry: false });
  return stamp !== undefined && stamp.mtimeMs >= newestSource(root);
}

/** mtime of the newest runtime source file (a few ms for the whole tree). */
function newestSource(root) {
  let newest = 0;
  for (const dir of SOURCE_DIRS) {
    const base = join(root, dir);
    if (!existsSync(base)) continue;
    for (const entry of readdirSync(base, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
      newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
    }
  }
  return newest;
}
