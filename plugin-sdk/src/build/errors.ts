/**
 * Errors of the plugin compiler. Callers match on `code` (stable, `GH_PLUGIN_*`). The SDK
 * does not depend on core, so this mirrors core's GatehouseError shape.
 */
export class PluginBuildError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PluginBuildError';
    this.code = code;
  }
}

export const BuildCodes = {
  /** `--name` is missing or not usable as a file name. */
  BAD_NAME: 'GH_PLUGIN_BAD_NAME',
  /** The entry file does not exist. */
  ENTRY_NOT_FOUND: 'GH_PLUGIN_ENTRY_NOT_FOUND',
  /** esbuild reported errors (syntax, unresolved or Node.js-only imports). */
  BUILD_FAILED: 'GH_PLUGIN_BUILD_FAILED',
  /** The entry module exports nothing, so no AuthConfig could name a symbol. */
  NO_EXPORTS: 'GH_PLUGIN_NO_EXPORTS',
} as const;
