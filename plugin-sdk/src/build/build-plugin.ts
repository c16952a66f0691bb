import { existsSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { join, resolve } from 'node:path';
import * as esbuild from 'esbuild';
import { GATEWAY_VERSION } from '../version.ts';
import { BuildCodes, PluginBuildError } from './errors.ts';
import { formatPluginFile, PLUGIN_GLOBAL, type PluginMetadata } from './metadata.ts';
import { SDK_VERSION } from './sdk-version.ts';

export interface BuildPluginOptions {
  /** The plugin's entry module (TypeScript or JavaScript). */
  entry: string;
  /** Plugin name: the output is `<outDir>/<name>.js` and the default `exportedSymbolName`. */
  name: string;
  /** Default `compiled-auth-plugins` (relative to the working directory). */
  outDir?: string;
  /** Default: this gateway's version. Only for building for another gateway release. */
  gatewayVersion?: string;
}

export interface BuildPluginResult {
  /** Absolute path of the written file. */
  file: string;
  metadata: PluginMetadata;
  /** Things worth telling the user that do not stop the build. */
  warnings: string[];
}

/** The plugin file name `--name` produces; also usable as an AuthConfig `name`. */
const NAME = /^[A-Za-z0-9_$][A-Za-z0-9_$.-]*$/;
const SKIP = Symbol('gatehouse-resolving');
const BARE_BUILTIN = new RegExp(`^(${builtinModules.map((m) => m.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('|')})(/.*)?$`);

function nodeOnly(path: string): esbuild.OnResolveResult {
  return { errors: [{ text: `"${path}" is a Node.js module; auth plugins run in a sandbox without Node.js APIs (no fs, network or process), remove this import` }] };
}

/** Node.js modules do not exist in the sandbox: fail the build naming the import, not at load. */
const noNodeBuiltins: esbuild.Plugin = {
  name: 'gatehouse-no-node-builtins',
  setup(build) {
    build.onResolve({ filter: /^node:/ }, (args) => nodeOnly(args.path));
    build.onResolve({ filter: BARE_BUILTIN }, async (args) => {
      if (args.pluginData === SKIP) return undefined;
      // An installed npm package of that name (a polyfill such as "buffer") is fine.
      const found = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: SKIP });
      return found.errors.length === 0 ? found : nodeOnly(args.path);
    });
  },
};

/** A plugin bundled into one classic script, in memory (what `buildPlugin` writes, and what the test kit runs). */
export interface BundledPlugin {
  /** The classic script: assigns the module's exports to `PLUGIN_GLOBAL`. */
  code: string;
  /** The entry module's export names, sorted. */
  exports: string[];
  warnings: string[];
}

/** Bundles `entry` into one classic script (esbuild); throws PluginBuildError with file:line on errors. */
export async function bundlePlugin(entryPath: string, name = 'Plugin'): Promise<BundledPlugin> {
  const entry = resolve(entryPath);
  if (!existsSync(entry)) throw new PluginBuildError(BuildCodes.ENTRY_NOT_FOUND, `entry file ${entry} does not exist`);
  let bundled: esbuild.BuildResult<{ write: false; metafile: true }>;
  try {
    bundled = await esbuild.build({
      entryPoints: [entry],
      bundle: true,
      format: 'esm',
      // Neutral: nothing platform-specific; the sandbox is bare V8 (no Node, no DOM).
      platform: 'neutral',
      mainFields: ['module', 'main'],
      target: 'es2023',
      write: false,
      outfile: 'plugin.js',
      metafile: true,
      logLevel: 'silent',
      charset: 'utf8',
      plugins: [noNodeBuiltins],
    });
  } catch (error) {
    const failure = error as esbuild.BuildFailure;
    const details = (failure.errors ?? []).map((m) => (m.location ? `${m.location.file}:${m.location.line}:${m.location.column}: ${m.text}` : m.text));
    throw new PluginBuildError(BuildCodes.BUILD_FAILED, `building ${entry} failed:\n  ${details.join('\n  ') || failure.message}`, { cause: error });
  }

  const output = bundled.outputFiles[0];
  const exports = Object.values(bundled.metafile.outputs)[0]?.exports ?? [];
  if (!output || exports.length === 0) {
    throw new PluginBuildError(BuildCodes.NO_EXPORTS, `${entry} exports nothing; export the plugin object, e.g. "export const ${name}: ExtAuthPlugin = { ... }"`);
  }
  // ESM → a classic script: the isolate runs scripts, and a script needs no module loader.
  const script = await esbuild.transform(output.text, { format: 'iife', globalName: PLUGIN_GLOBAL, target: 'es2023', charset: 'utf8' });
  const warnings = [...bundled.warnings, ...script.warnings].map((m) => m.text);
  return { code: script.code, exports: [...exports].sort(), warnings };
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
  const { code, exports, warnings } = await bundlePlugin(entry, name);
  if (!exports.includes(name)) {
    warnings.push(`${entry} does not export "${name}" (it exports ${exports.join(', ')}); AuthConfigs must set exportedSymbolName to one of those`);
  }

  const { text, metadata } = formatPluginFile(code, { name, exports, gatewayVersion, sdkVersion: SDK_VERSION });
  const outDir = resolve(options.outDir ?? 'compiled-auth-plugins');
  await mkdir(outDir, { recursive: true });
  const file = join(outDir, `${name}.js`);
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, text);
  await rename(temporary, file);
  return { file, metadata, warnings };
}
