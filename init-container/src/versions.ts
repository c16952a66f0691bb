import { parsePluginFile, PluginFileError } from '@gatehouse/plugin-sdk/plugin-file';
import { InitCodes, InitError } from './errors.ts';
import type { PulledPlugins } from './pull.ts';

/** The first line of every compiled plugin file (plugin-sdk build/metadata.ts). */
const HEADER = '// @gatehouse-plugin ';

/**
 * The version check that a tag cannot fool (issue 27 item 2): every compiled plugin file carries
 * the gateway version it was built for in its metadata line, and the auth server loads only an
 * equal version. A plugin image re-tagged for another version passes the tag check (under the
 * chart both come from one value) but not this one. Files that are not compiled plugins (source
 * maps, data) are not checked.
 */
export function checkPluginVersions(sources: readonly PulledPlugins[], gatewayVersion: string): void {
  for (const source of sources) {
    for (const [path, data] of source.files) {
      if (!data.subarray(0, HEADER.length).equals(Buffer.from(HEADER))) continue;
      let built: string;
      try {
        built = parsePluginFile(data.toString('utf8')).metadata.gatewayVersion;
      } catch (error) {
        if (!(error instanceof PluginFileError)) throw error;
        throw new InitError(InitCodes.TAG_MISMATCH, `${source.source}: ${path} is not a readable compiled plugin: ${error.message}`);
      }
      if (built !== gatewayVersion) {
        throw new InitError(
          InitCodes.TAG_MISMATCH,
          `${source.source}: ${path} was built for gateway version ${built}, not ${gatewayVersion} (the image was re-tagged); rebuild the plugin for ${gatewayVersion} and push it tagged ${gatewayVersion}`,
        );
      }
    }
  }
}
