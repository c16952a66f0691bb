export { buildPlugin, bundlePlugin, type BuildPluginOptions, type BuildPluginResult, type BundledPlugin, type BundleOptions } from './build-plugin.ts';
export { BuildCodes, PluginBuildError } from './errors.ts';
export { contentHash, formatPluginFile, parsePluginFile, PluginFileError, PLUGIN_GLOBAL, type PluginMetadata } from './metadata.ts';
export { SDK_VERSION } from './sdk-version.ts';
export { firstFrame, originalPosition, stackMapper, withLocation, type SourcePosition } from './source-map.ts';
