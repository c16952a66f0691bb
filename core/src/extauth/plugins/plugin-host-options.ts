/**
 * Where a process runs its plugin steps when they leave the event loop (`--plugin-thread true`,
 * the default): a supervised plugin PROCESS (`--plugin-process true`, the default), or a thread
 * of the same process. Set once by the CLI before the first step is built; read by
 * ./thread/plugin-thread.ts when it starts. Defaults and the design: docs/plugins.md "Plugin process".
 */
export interface PluginHostOptions {
  /** Run plugin isolates in a child process whose death costs one restart, not the gateway. */
  process: boolean;
  /** The plugin process is killed (and restarted) when its resident memory passes this, in MB; 0 turns the bound off. */
  maxRssMb: number;
  /** The plugin process is killed (and restarted) when its event loop has not turned for this long, in ms. */
  stallMs: number;
}

/** Defaults of the CLI flags; a process that never calls {@link configurePluginHost} (library use, unit tests) uses a thread. */
export const DEFAULT_PLUGIN_HOST: PluginHostOptions = { process: true, maxRssMb: 512, stallMs: 5_000 };

let current: PluginHostOptions = { ...DEFAULT_PLUGIN_HOST, process: false };

/** Sets where plugin steps run, for the steps built from now on. */
export function configurePluginHost(options: Partial<PluginHostOptions>): void {
  current = { ...current, ...options };
}

/** Where plugin steps run (see {@link configurePluginHost}). */
export function pluginHostOptions(): PluginHostOptions {
  return current;
}
