import { fileURLToPath } from 'node:url';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';

/** The reference plugins the quickstart's config uses: source folder under plugins/ → plugin name. */
const PLUGINS: [folder: string, name: string][] = [
  ['required-header', 'RequiredHeader'],
  ['jwt', 'Jwt'],
  ['api-key', 'ApiKey'],
];

/**
 * Not an upstream: compiles the quickstart's auth plugins into examples/quickstart/plugins/
 * (the --plugin-dir start.ts passes), as `gatehouse-plugin build` would, so that the
 * plugin-*.yaml configs work out of the box. Runs before the gateway starts.
 */
export default async function start() {
  const dir = fileURLToPath(new URL('../plugins/', import.meta.url));
  const files: string[] = [];
  for (const [folder, name] of PLUGINS) {
    const entry = fileURLToPath(new URL(`../../../plugins/${folder}/src/index.ts`, import.meta.url));
    files.push((await buildPlugin({ entry, name, outDir: dir })).file);
  }
  // The url names the first file (RequiredHeader.js); the others sit beside it.
  return { name: 'auth-plugins', url: `file://${files[0]}`, close: async () => {} };
}
