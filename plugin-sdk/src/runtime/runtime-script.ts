import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

export { RUNTIME_INSTALL_GLOBAL } from './runtime-globals.ts';

let script: Promise<string> | undefined;

/**
 * ./sandbox-entry.ts (the runtime of ./sandbox-runtime.ts) as one classic script, built once per process (esbuild, ~tens of ms):
 * the isolate runs plain JavaScript without a module loader.
 */
export function sandboxRuntimeScript(): Promise<string> {
  script ??= esbuild
    .build({
      entryPoints: [fileURLToPath(new URL('./sandbox-entry.ts', import.meta.url))],
      bundle: true,
      format: 'iife',
      platform: 'neutral',
      target: 'es2023',
      write: false,
      logLevel: 'silent',
    })
    .then(
      (result) => result.outputFiles[0]!.text,
      (error: unknown) => {
        script = undefined;
        throw error;
      },
    );
  return script;
}
