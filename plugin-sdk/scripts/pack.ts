// `node plugin-sdk/scripts/pack.ts OUT_DIR`: npm tarballs of what a plugin project outside
// this repository installs: `@gatehouse/plugin-sdk` (contract, test kit, compiler, CLI, the
// sandbox types) and `@gatehouse/core` (the plugin host the test kit's sandbox mode runs).
// Compiled JavaScript with declarations: Node does not strip types under node_modules.
// Publishable later as they are; for now `gatehouse-plugin init --sdk file:… --host file:…`.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SDK = join(ROOT, 'plugin-sdk');

type Manifest = Record<string, unknown> & { name: string; version: string; exports?: Record<string, string | Record<string, string>>; dependencies?: Record<string, string> };

/** `./src/x.ts` exports → `{ types, default }` on the compiled files; others (conditions, `.js`, `.d.ts`) as they are. */
function compiledExports(exports: Record<string, string | Record<string, string>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, target] of Object.entries(exports)) {
    if (typeof target === 'string' && target.endsWith('.ts')) out[key] = { types: target.replace(/\.ts$/, '.d.ts'), default: target.replace(/\.ts$/, '.js') };
    else out[key] = target;
  }
  return out;
}

/** Every file under `dir`, recursively. */
async function files(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

function npm(args: string[], cwd: string): string {
  return execFileSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** Packs both packages into `out`; answers the tarball paths. */
export async function packPluginKit(out: string): Promise<{ sdk: string; core: string }> {
  const target = resolve(out);
  await mkdir(target, { recursive: true });
  const work = await mkdtemp(join(tmpdir(), 'gatehouse-pack-'));
  try {
    // The sources as JavaScript, as `npm run build` emits them (core/tsconfig.build.json). Type
    // errors elsewhere in the repository do not stop the packing (tsc emits regardless), but are shown.
    const dist = join(work, 'dist');
    try {
      execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'core/tsconfig.build.json'), '--outDir', dist], { stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      if (!existsSync(join(dist, 'plugin-sdk/src/index.js'))) throw error;
      process.stderr.write(`pack: tsc reported type errors; packing the emitted JavaScript:\n${String((error as { stdout?: unknown }).stdout ?? '').slice(0, 4000)}\n`);
    }
    const { bundleRuntimeScript, PREBUILT_RUNTIME_FILE } = await import('../src/runtime/runtime-script.ts');
    await writeFile(join(dist, 'plugin-sdk/src/runtime', PREBUILT_RUNTIME_FILE), await bundleRuntimeScript());
    const root = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as Manifest;
    // Both read the gateway version from the repository's package.json: a constant in a package.
    const versionModule = `/** The gateway version this package was packed for (SPEC 1). */\nexport const GATEWAY_VERSION = ${JSON.stringify(root.version)};\n`;

    // @gatehouse/plugin-sdk
    const sdk = join(work, 'sdk');
    await cp(join(dist, 'plugin-sdk/src'), join(sdk, 'src'), { recursive: true });
    execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(SDK, 'tsconfig.types.json'), '--outDir', join(sdk, 'src')], { stdio: 'inherit' });
    for (const file of await files(join(sdk, 'src'))) {
      if (!file.endsWith('.d.ts')) continue;
      // Declarations keep the sources' `.ts` specifiers; the package ships `.js` + `.d.ts`.
      const text = await readFile(file, 'utf8');
      await writeFile(file, text.replace(/(from\s+|import\()(['"])(\.{1,2}\/[^'"]+)\.ts\2/g, '$1$2$3.js$2'));
    }
    await writeFile(join(sdk, 'src/version.js'), versionModule);
    await cp(join(SDK, 'types'), join(sdk, 'types'), { recursive: true });
    await cp(join(SDK, 'README.md'), join(sdk, 'README.md'));
    await mkdir(join(sdk, 'bin'));
    await cp(join(SDK, 'bin/launch.js'), join(sdk, 'bin/launch.js'));
    await cp(join(SDK, 'bin/launch.d.ts'), join(sdk, 'bin/launch.d.ts'));
    await writeFile(
      join(sdk, 'bin/gatehouse-plugin.js'),
      `#!/usr/bin/env node
// The packed CLI: the compiled sources next to this file.
import { assertNodeVersion } from './launch.js';

assertNodeVersion();
const { main } = await import('../src/cli/main.js');
process.exitCode = await main(process.argv.slice(2));
`,
      { mode: 0o755 },
    );
    const sdkManifest = JSON.parse(await readFile(join(SDK, 'package.json'), 'utf8')) as Manifest;
    delete sdkManifest.private;
    // `./sandbox` (types only) is in the SDK's own package.json, so it resolves in the repository too.
    sdkManifest.exports = compiledExports(sdkManifest.exports ?? {}) as never;
    await writeFile(join(sdk, 'package.json'), `${JSON.stringify({ ...sdkManifest, license: root.license }, null, 2)}\n`);

    // @gatehouse/core: the plugin host (and the rest of the gateway, as one package).
    const core = join(work, 'core');
    await cp(join(dist, 'core/src'), join(core, 'src'), { recursive: true });
    await writeFile(join(core, 'src/version.js'), versionModule);
    const coreManifest = JSON.parse(await readFile(join(ROOT, 'core/package.json'), 'utf8')) as Manifest;
    delete coreManifest.private;
    delete coreManifest.devDependencies;
    // The `gatehouse` command (issue 30 item 7): a plugin project runs `npx gatehouse run` (and
    // `gatehouse-plugin dev` finds it) from the tarball, with no checkout. The repository's bin
    // resolves sources or dist/ of a checkout; the packed one runs the compiled files beside it.
    coreManifest.bin = { gatehouse: 'bin/gatehouse.js' };
    await mkdir(join(core, 'bin'));
    await writeFile(
      join(core, 'bin/gatehouse.js'),
      `#!/usr/bin/env node
// The packed gateway CLI: the compiled sources next to this file, with the Node flags and
// environment every Gatehouse process runs with (added by re-executing in place).
import { assertNodeVersion, NODE_ENV_DEFAULTS, NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';

assertNodeVersion();
const missing = NODE_FLAGS.filter((flag) => !process.execArgv.includes(flag));
const unsetEnv = Object.keys(NODE_ENV_DEFAULTS).filter((name) => process.env[name] === undefined);
if ((missing.length > 0 || unsetEnv.length > 0) && typeof process.execve === 'function') {
  process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, process.argv[1], ...process.argv.slice(2)], { ...NODE_ENV_DEFAULTS, ...process.env });
}
const { main } = await import('../src/cli/main.js');
const code = await main(process.argv.slice(2));
if (typeof code === 'number' && code >= 0) {
  process.exitCode = code;
  setTimeout(() => process.exit(code), 2_000).unref();
}
`,
      { mode: 0o755 },
    );
    coreManifest.exports = { '.': './src/index.js', './*.ts': './src/*.js', './*': './src/*' } as never;
    await writeFile(join(core, 'package.json'), `${JSON.stringify({ ...coreManifest, license: root.license }, null, 2)}\n`);
    await writeFile(join(core, 'README.md'), '# @gatehouse/core\n\nThe Gatehouse gateway and auth server; here for the plugin host the plugin test kit runs sandboxed plugins in.\n');

    const sdkTarball = npm(['pack', '--pack-destination', target, '--silent'], sdk).trim().split('\n').pop()!;
    const coreTarball = npm(['pack', '--pack-destination', target, '--silent'], core).trim().split('\n').pop()!;
    return { sdk: join(target, sdkTarball), core: join(target, coreTarball) };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const out = process.argv[2];
  if (!out) {
    process.stderr.write('usage: node plugin-sdk/scripts/pack.ts OUT_DIR\n');
    process.exit(2);
  }
  const { sdk, core } = await packPluginKit(out);
  process.stdout.write(`${sdk}\n${core}\n`);
}
