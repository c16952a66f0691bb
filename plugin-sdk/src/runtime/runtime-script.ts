import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

export { RUNTIME_INSTALL_GLOBAL } from './runtime-globals.ts';

/** The prebuilt runtime, written next to the compiled module by `npm run build`. */
export const PREBUILT_RUNTIME_FILE = 'sandbox-runtime.iife.js';

let script: Promise<string> | undefined;

/**
 * The sandbox runtime (./sandbox-entry, i.e. ./sandbox-runtime) as one classic script: the
 * isolate runs plain JavaScript without a module loader. Read from the prebuilt file in a
 * build; bundled once per process when running from the sources.
 */
export function sandboxRuntimeScript(): Promise<string> {
  script ??= readFile(new URL(`./${PREBUILT_RUNTIME_FILE}`, import.meta.url), 'utf8').catch(() => bundleRuntimeScript());
  script.catch(() => (script = undefined));
  return script;
}

/** Bundles the runtime script with esbuild (~tens of ms; esbuild is loaded only for this). */
export async function bundleRuntimeScript(): Promise<string> {
  const esbuild = await import('esbuild');
  // The sibling entry: .ts when running from the sources, .js in a build.
  const extension = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  const result = await esbuild.build({
    entryPoints: [fileURLToPath(new URL(`./sandbox-entry.${extension}`, import.meta.url))],
    bundle: true,
    format: 'iife',
    platform: 'neutral',
    target: 'es2023',
    write: false,
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.text;
}
