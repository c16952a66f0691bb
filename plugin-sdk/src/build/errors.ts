import { CodedError } from '../errors.ts';

/** Errors of the plugin compiler. Callers match on `code` (stable, `GH_PLUGIN_*`). */
export class PluginBuildError extends CodedError {
  override name = 'PluginBuildError';
}

export const BuildCodes = {
  /** `--name` is missing or not usable as a file name. */
  BAD_NAME: 'GH_PLUGIN_BAD_NAME',
  /** The entry file does not exist. */
  ENTRY_NOT_FOUND: 'GH_PLUGIN_ENTRY_NOT_FOUND',
  /** esbuild reported errors (syntax, unresolved or Node.js-only imports). */
  BUILD_FAILED: 'GH_PLUGIN_BUILD_FAILED',
  /** The plugin's own code uses a Node.js global (process, Buffer, require, __dirname, global, setImmediate…). */
  NODE_GLOBAL: 'GH_PLUGIN_NODE_GLOBAL',
  /** The entry module exports nothing, so no AuthConfig could name a symbol. */
  NO_EXPORTS: 'GH_PLUGIN_NO_EXPORTS',
} as const;
