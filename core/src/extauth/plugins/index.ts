/** The plugin host (SPEC 5.2): sandboxed `pluginAuth` steps and plugin directory watching. */
export { PluginCodes, type PluginCode } from './codes.ts';
export { assertIsolateFlags, hasNoNodeSnapshot } from './node-flags.ts';
export { loadPluginFile, pluginFileName, type PluginFile } from './plugin-file.ts';
export type { PluginHostLogger, SandboxLimits } from './isolate/sandbox-limits.ts';
export { createPluginStep, type PluginStep, type PluginStepOptions } from './plugin-step.ts';
export { watchPluginDir, type PluginDirWatcher, type WatchPluginDirOptions } from './watch-plugin-dir.ts';
export { MemoryHub } from './store/store-hub.ts';
