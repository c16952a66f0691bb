import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parsePluginFile, PluginFileError, stackMapper, type PluginMetadata } from '@gatehouse/plugin-sdk/build';
import type { PluginAuthSpec } from '../../config/schema/auth-config.ts';
import { GatehouseError } from '../../errors.ts';
import { GATEWAY_VERSION } from '../../version.ts';
import { PluginCodes } from './codes.ts';

/** A compiled plugin read from disk and checked against this gateway. */
export interface PluginFile {
  /** Absolute path. */
  readonly path: string;
  /** `pluginFileName`, or `<name>.js`. */
  readonly fileName: string;
  readonly metadata: PluginMetadata;
  /** The script, without the metadata line. */
  readonly body: string;
  /** The symbol the host will use (`exportedSymbolName`, or `name`). */
  readonly symbol: string;
  /** Maps positions in this script to the plugin's sources (its `<file>.map`, when present). */
  readonly mapStack: (text: string) => string;
}

/** The file a `pluginAuth` step loads: `pluginFileName`, default `<name>.js` (SPEC 3.4). */
export function pluginFileName(spec: Pick<PluginAuthSpec, 'name' | 'pluginFileName'>): string {
  return spec.pluginFileName ?? `${spec.name}.js`;
}

/**
 * Reads `<pluginDir>/<pluginFileName>` and checks its metadata: content hash, gateway version
 * equal to this gateway's, `exportedSymbolName` exported. Runs no plugin code.
 */
export async function loadPluginFile(spec: PluginAuthSpec, pluginDir: string, gatewayVersion = GATEWAY_VERSION): Promise<PluginFile> {
  const fileName = pluginFileName(spec);
  if (fileName.includes('/') || fileName.includes('\\') || fileName === '..' || fileName === '.') {
    throw new GatehouseError(PluginCodes.NOT_FOUND, `pluginAuth ${spec.name}: pluginFileName ${JSON.stringify(fileName)} must be a file name inside the plugin directory, without "/"`);
  }
  const path = resolve(join(pluginDir, fileName));
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : `cannot be read (${(error as Error).message})`;
    throw new GatehouseError(
      PluginCodes.NOT_FOUND,
      `pluginAuth ${spec.name}: plugin file ${path} ${reason}; build it with "gatehouse-plugin build ENTRY --name ${spec.name}" into the plugin directory (--plugin-dir), or fix pluginFileName`,
      { cause: error },
    );
  }
  let parsed: ReturnType<typeof parsePluginFile>;
  try {
    parsed = parsePluginFile(text);
  } catch (error) {
    if (!(error instanceof PluginFileError)) throw error;
    throw new GatehouseError(PluginCodes.BAD_FILE, `pluginAuth ${spec.name}: ${path} is not a usable compiled plugin: ${error.message}`);
  }
  const { metadata, body } = parsed;
  if (metadata.gatewayVersion !== gatewayVersion) {
    throw new GatehouseError(
      PluginCodes.VERSION_MISMATCH,
      `pluginAuth ${spec.name}: ${path} was built for gateway version ${metadata.gatewayVersion}, but this gateway is version ${gatewayVersion}; rebuild the plugin with gatehouse-plugin ${gatewayVersion}`,
    );
  }
  const symbol = spec.exportedSymbolName ?? spec.name;
  if (!metadata.exports.includes(symbol)) {
    throw new GatehouseError(
      PluginCodes.SYMBOL_NOT_EXPORTED,
      `pluginAuth ${spec.name}: ${path} does not export "${symbol}" (it exports ${metadata.exports.join(', ') || 'nothing'}); set exportedSymbolName to one of those`,
    );
  }
  // The source map `gatehouse-plugin build` writes beside the script: plugin stacks name the plugin's own file:line.
  const map = await readFile(`${path}.map`, 'utf8').catch(() => undefined);
  const mapStack = map === undefined ? (text: string) => text : stackMapper(map, `file://${path}`);
  return { path, fileName, metadata, body, symbol, mapStack };
}
