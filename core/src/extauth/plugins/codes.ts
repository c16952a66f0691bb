/** Stable error codes of the plugin host (SPEC 5.2). Callers match on these, never on messages. */
export const PluginCodes = {
  /** Node was started without `--no-node-snapshot`, which isolated-vm needs on Node 20+. */
  NODE_FLAGS: 'GH_PLUGIN_NODE_FLAGS',
  /** `<plugin-dir>/<pluginFileName>` does not exist or cannot be read. */
  NOT_FOUND: 'GH_PLUGIN_NOT_FOUND',
  /** The file is not a compiled plugin (no metadata line, bad JSON, hash mismatch). */
  BAD_FILE: 'GH_PLUGIN_BAD_FILE',
  /** The plugin was built for another gateway version. */
  VERSION_MISMATCH: 'GH_PLUGIN_VERSION_MISMATCH',
  /** `exportedSymbolName` is not among the plugin's exports. */
  SYMBOL_NOT_EXPORTED: 'GH_PLUGIN_SYMBOL_NOT_EXPORTED',
  /** The exported symbol is not an ExtAuthPlugin (no NewConfigInstance / GetAuthService). */
  BAD_EXPORT: 'GH_PLUGIN_BAD_EXPORT',
  /** The step's `config` does not decode onto the plugin's config object. */
  BAD_CONFIG: 'GH_PLUGIN_BAD_CONFIG',
  /** The script, NewConfigInstance or GetAuthService threw. */
  INIT_FAILED: 'GH_PLUGIN_INIT_FAILED',
  /** Start threw or rejected. */
  START_FAILED: 'GH_PLUGIN_START_FAILED',
  /** Loading, initializing or starting took longer than the start timeout. */
  START_TIMEOUT: 'GH_PLUGIN_START_TIMEOUT',
  /** Authorize threw or rejected. */
  THREW: 'GH_PLUGIN_THREW',
  /** Authorize ran past the per-call CPU limit, or its promise did not settle in time. */
  TIMEOUT: 'GH_PLUGIN_TIMEOUT',
  /**
   * The wall-clock limit stopped a call that had used under a quarter of its CPU limit (the
   * machine held it back: a CPU quota, a busy core): a warning; the call runs again on a fresh
   * isolate, on the isolate's thread (at most twice), instead of being denied.
   */
  DESCHEDULED: 'GH_PLUGIN_DESCHEDULED',
  /** The isolate ran out of its memory limit. */
  OUT_OF_MEMORY: 'GH_PLUGIN_OUT_OF_MEMORY',
  /** Authorize returned something that is not a valid AuthorizationResponse. */
  BAD_RESPONSE: 'GH_PLUGIN_BAD_RESPONSE',
  /** No healthy isolate right now (being rebuilt after failures, or the step is closed). */
  UNAVAILABLE: 'GH_PLUGIN_UNAVAILABLE',
  /** Authorize failed on a `ctx.store` it could not reach (Redis down or slow): the step's `failOpen` decides. */
  STORE_UNAVAILABLE: 'GH_PLUGIN_STORE_UNAVAILABLE',
  /** The plugin process died (a crash, its memory bound, a stall): it is restarted, checks are denied meanwhile. */
  PROCESS_EXITED: 'GH_PLUGIN_PROCESS_EXITED',
} as const;

export type PluginCode = (typeof PluginCodes)[keyof typeof PluginCodes];
