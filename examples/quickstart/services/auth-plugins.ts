import { fileURLToPath } from 'node:url';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';

/**
 * Not an upstream: compiles the quickstart's auth plugins into examples/quickstart/plugins/
 * (the --plugin-dir start.ts passes), as `gatehouse-plugin build` would, so that
 * plugin-required-header.yaml works out of the box. Runs before the gateway starts.
 */
export default async function start() {
  const dir = fileURLToPath(new URL('../plugins/', import.meta.url));
  const entry = fileURLToPath(new URL('../../../plugins/required-header/src/index.ts', import.meta.url));
  const { file } = await buildPlugin({ entry, name: 'RequiredHeader', outDir: dir });
  return { name: 'auth-plugins', url: `file://${file}`, close: async () => {} };
}
