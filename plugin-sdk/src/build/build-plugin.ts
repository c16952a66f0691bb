import { existsSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { builtinModules, SourceMap, type SourceMapPayload } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import * as esbuild from 'esbuild';
import { GATEWAY_VERSION } from '../version.ts';
import { BuildCodes, PluginBuildError } from './errors.ts';
import { formatPluginFile, PLUGIN_GLOBAL, type PluginMetadata } from './metadata.ts';
import { SDK_VERSION } from './sdk-version.ts';
import { originalPosition } from './source-map.ts';

export interface BuildPluginOptions {
  /** The plugin's entry module (TypeScript or JavaScript). */
  entry: string;
  /** Plugin name: the output is `<outDir>/<name>.js` and the default `exportedSymbolName`. */
  name: string;
  /** Default `compiled-auth-plugins` (relative to the working directory). */
  outDir?: string;
  /** Default: this gateway's version. Only for building for another gateway release. */
  gatewayVersion?: string;
  /** Minify the script; the source map (`<name>.js.map`) still points at the sources. */
  minify?: boolean;
  /** Prefer npm packages' browser builds (`--browser`): see {@link BundleOptions.browser}. */
  browser?: boolean;
}

export interface BuildPluginResult {
  /** Absolute path of the written file. */
  file: string;
  /** Absolute path of its source map (`<file>.map`): the host maps plugin stacks through it. */
  sourceMap: string;
  metadata: PluginMetadata;
  /** Things worth telling the user that do not stop the build. */
  warnings: string[];
}

/** The plugin file name `--name` produces; also usable as an AuthConfig `name`. */
const NAME = /^[A-Za-z0-9_$][A-Za-z0-9_$.-]*$/;
const SKIP = Symbol('gatehouse-resolving');
const BARE_BUILTIN = new RegExp(`^(${builtinModules.map((m) => m.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('|')})(/.*)?$`);

function nodeOnly(path: string, importer: string): esbuild.OnResolveResult {
  // A dependency's Node build: its browser build (--browser) may run on the sandbox's Web APIs.
  const hint = /(^|[\\/])node_modules[\\/]/.test(importer) ? ' (a dependency imports it: if the package has a browser build, build with --browser)' : ', remove this import';
  return { errors: [{ text: `"${path}" is a Node.js module; auth plugins run in a sandbox without Node.js APIs (no fs, network or process)${hint}` }] };
}

/** Node.js modules do not exist in the sandbox: fail the build naming the import, not at load. */
const noNodeBuiltins: esbuild.Plugin = {
  name: 'gatehouse-no-node-builtins',
  setup(build) {
    build.onResolve({ filter: /^node:/ }, (args) => nodeOnly(args.path, args.importer));
    build.onResolve({ filter: BARE_BUILTIN }, async (args) => {
      if (args.pluginData === SKIP) return undefined;
      // An installed npm package of that name (a polyfill such as "buffer") is fine.
      const found = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: SKIP });
      return found.errors.length === 0 ? found : nodeOnly(args.path, args.importer);
    });
  },
};

/** A plugin bundled into one classic script, in memory (what `buildPlugin` writes, and what the test kit runs). */
export interface BundledPlugin {
  /** The classic script: assigns the module's exports to `PLUGIN_GLOBAL`. No sourceMappingURL comment. */
  code: string;
  /** Its source map (JSON), sources relative to the plugin's project directory. */
  map: string;
  /** The entry module's export names, sorted. */
  exports: string[];
  warnings: string[];
}

export interface BundleOptions {
  /** Used in messages only. */
  name?: string;
  /** Minify the script (the source map still points at the sources). */
  minify?: boolean;
  /**
   * Prefer npm packages' browser builds: the `browser` export condition and `browser` main
   * field before `module` and `main`. For packages whose Node build needs Node.js modules
   * (jsonpath-plus's main needs "vm") and whose browser build runs on Web APIs only.
   */
  browser?: boolean;
}

/**
 * Node.js globals that do not exist in the sandbox, with what to use instead. A plugin's own
 * code using one fails the build (it would fail at run time, in the sandbox only); a
 * dependency's use is a warning (libraries often probe for them and fall back).
 */
const NODE_GLOBALS: Record<string, string> = {
  process: 'configuration comes from the step\'s config (NewConfigInstance), secrets from ctx.secrets',
  Buffer: 'use Uint8Array, TextEncoder/TextDecoder and atob/btoa',
  require: 'use import; Node.js modules do not exist in the sandbox',
  __dirname: 'there is no file system in the sandbox',
  __filename: 'there is no file system in the sandbox',
  global: 'use globalThis',
  setImmediate: 'use setTimeout(fn, 0) or await Promise.resolve()',
  clearImmediate: 'use setTimeout/clearTimeout',
};
const MARK = '__gatehouseNodeGlobal_';
const MARKED = new RegExp(`(typeof\\s+)?${MARK}([A-Za-z_$][\\w$]*)`, 'g');

/** The directory the plugin's sources are named relative to: the nearest one with a package.json. */
function projectDir(entry: string): string {
  for (let dir = dirname(entry); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) return dirname(entry);
  }
}

/**
 * A source file holding this comment may use Node.js globals (a warning, not an error): for
 * code that probes for them on purpose, such as the host's hostile-plugin test fixtures.
 */
export const ALLOW_NODE_GLOBALS = 'gatehouse-plugin allow-node-globals';

/** Uses of Node.js globals in the bundle (other than `typeof X` probes), at their source positions. */
function nodeGlobalUses(code: string, map: string): { own: string[]; dependencies: string[] } {
  const own: string[] = [];
  const dependencies: string[] = [];
  const payload = JSON.parse(map) as SourceMapPayload;
  const allowed = new Set(payload.sources.filter((_, i) => payload.sourcesContent?.[i]?.includes(ALLOW_NODE_GLOBALS)));
  const sourceMap = new SourceMap(payload);
  const lines = code.split('\n');
  for (let i = 0; i < lines.length; i++) {
    for (const match of lines[i]!.matchAll(MARKED)) {
      if (match[1]) continue;
      const name = match[2]!;
      const at = originalPosition(sourceMap, i + 1, match.index + 1);
      const where = at ? `${at.source}:${at.line}:${at.column}` : `(bundle line ${i + 1})`;
      const text = `${where}: ${name} is a Node.js global, and auth plugins run in a sandbox without Node.js: ${NODE_GLOBALS[name] ?? 'remove it'}`;
      if (at && allowed.has(at.source)) dependencies.push(`${text} (allowed by "${ALLOW_NODE_GLOBALS}")`);
      else (at && /(^|\/)node_modules\//.test(at.source) ? dependencies : own).push(text);
    }
  }
  return { own, dependencies };
}

function buildFailed(entry: string, error: unknown): PluginBuildError {
  const failure = error as esbuild.BuildFailure;
  const details = (failure.errors ?? []).map((m) => (m.location ? `${m.location.file}:${m.location.line}:${m.location.column}: ${m.text}` : m.text));
  return new PluginBuildError(BuildCodes.BUILD_FAILED, `building ${entry} failed:\n  ${details.join('\n  ') || failure.message}`, { cause: error });
}

/** Bundles `entry` into one classic script with a source map (esbuild); throws PluginBuildError with file:line on errors. */
export async function bundlePlugin(entryPath: string, options: BundleOptions = {}): Promise<BundledPlugin> {
  const entry = resolve(entryPath);
  if (!existsSync(entry)) throw new PluginBuildError(BuildCodes.ENTRY_NOT_FOUND, `entry file ${entry} does not exist`);
  const root = projectDir(entry);
  const common: esbuild.BuildOptions = {
    entryPoints: [entry],
    bundle: true,
    // Neutral: nothing platform-specific; the sandbox is bare V8 (no Node, no DOM).
    platform: 'neutral',
    mainFields: options.browser ? ['browser', 'module', 'main'] : ['module', 'main'],
    ...(options.browser ? { conditions: ['browser'] } : {}),
    target: 'es2023',
    write: false,
    // Sources in the map are relative to the project: "src/index.ts", whatever the working directory.
    absWorkingDir: root,
    outfile: join(root, 'plugin.js'),
    sourcemap: 'external',
    sourcesContent: true,
    logLevel: 'silent',
    charset: 'utf8',
    plugins: [noNodeBuiltins],
  };

  // First pass: the export names (esbuild reports them for ESM output) and Node.js globals,
  // each replaced by a marker that only free (global) references get.
  let check: esbuild.BuildResult<{ write: false; metafile: true }>;
  try {
    check = await esbuild.build({ ...common, format: 'esm', metafile: true, define: Object.fromEntries(Object.keys(NODE_GLOBALS).map((name) => [name, `${MARK}${name}`])) } as esbuild.BuildOptions & { write: false; metafile: true });
  } catch (error) {
    throw buildFailed(entry, error);
  }
  const exports = Object.values(check.metafile.outputs).find((output) => output.entryPoint !== undefined)?.exports ?? [];
  const checkCode = check.outputFiles.find((file) => file.path.endsWith('.js'))?.text ?? '';
  const checkMap = check.outputFiles.find((file) => file.path.endsWith('.map'))?.text ?? '{}';
  if (exports.length === 0) {
    throw new PluginBuildError(BuildCodes.NO_EXPORTS, `${entry} exports nothing; export the plugin object, e.g. "export const ${options.name ?? 'Plugin'}: ExtAuthPlugin = { ... }"`);
  }
  const uses = nodeGlobalUses(checkCode, checkMap);
  if (uses.own.length > 0) throw new PluginBuildError(BuildCodes.NODE_GLOBAL, `building ${entry} failed:\n  ${uses.own.join('\n  ')}`);

  // The script: a classic script (the isolate runs scripts, without a module loader).
  let built: esbuild.BuildResult<{ write: false }>;
  try {
    built = await esbuild.build({ ...common, format: 'iife', globalName: PLUGIN_GLOBAL, minify: options.minify === true } as esbuild.BuildOptions & { write: false });
  } catch (error) {
    throw buildFailed(entry, error);
  }
  let code = built.outputFiles.find((file) => file.path.endsWith('.js'))!.text;
  let map = built.outputFiles.find((file) => file.path.endsWith('.map'))!.text;
  // esbuild starts an IIFE of an ES module with "use strict": the script stays the sloppy
  // classic script `transform` gave before (the module's code inside is strict either way).
  // The line carries no mappings; dropping it drops its (empty) line of the map.
  const STRICT = '"use strict";\n';
  const payload = JSON.parse(map) as { mappings: string };
  if (code.startsWith(STRICT) && payload.mappings.startsWith(';')) {
    code = code.slice(STRICT.length);
    payload.mappings = payload.mappings.slice(1);
    map = JSON.stringify(payload);
  }
  const warnings = [...check.warnings, ...built.warnings].map((m) => m.text);
  // esbuild bundles a dependency's require("…") calls it can resolve (CommonJS): those run fine. Only
  // a require it left to run time goes through its shim, which throws "Dynamic require of … is not supported".
  const unresolvedRequire = code.includes('Dynamic require of');
  for (const use of uses.dependencies) {
    if (!unresolvedRequire && / require is a Node\.js global/.test(use)) continue;
    warnings.push(use.endsWith('")') ? use : `${use} (in a dependency: it fails if that code runs)`);
  }
  return { code, map, exports: [...exports].sort(), warnings };
}

/**
 * Compiles a plugin into one self-contained script with embedded metadata
 * (`gatehouse-plugin build`). The file is written atomically.
 */
export async function buildPlugin(options: BuildPluginOptions): Promise<BuildPluginResult> {
  const { name } = options;
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new PluginBuildError(BuildCodes.BAD_NAME, `plugin name ${JSON.stringify(name)} is not usable: use letters, digits, _, $, ., - (it becomes <name>.js and the default exportedSymbolName)`);
  }
  const entry = resolve(options.entry);
  const gatewayVersion = options.gatewayVersion ?? GATEWAY_VERSION;
  const { code, map, exports, warnings } = await bundlePlugin(entry, { name, minify: options.minify === true, browser: options.browser === true });
  if (!exports.includes(name)) {
    warnings.push(`${entry} does not export "${name}" (it exports ${exports.join(', ')}); AuthConfigs must set exportedSymbolName to one of those`);
  }

  const { text, metadata } = formatPluginFile(`${code}//# sourceMappingURL=${name}.js.map\n`, { name, exports, gatewayVersion, sdkVersion: SDK_VERSION });
  const outDir = resolve(options.outDir ?? 'compiled-auth-plugins');
  await mkdir(outDir, { recursive: true });
  const file = join(outDir, `${name}.js`);
  const sourceMap = `${file}.map`;
  // The map first: a host that sees the new script finds its map.
  for (const [path, content] of [[sourceMap, map], [file, text]] as const) {
    const temporary = `${path}.${process.pid}.tmp`;
    await writeFile(temporary, content);
    await rename(temporary, path);
  }
  return { file, sourceMap, metadata, warnings };
}
