import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = fileURLToPath(new URL('..', import.meta.url));

// Two tiers (`npm test` runs both, unit first): `unit` holds the tests beside the code (logic, and
// in-process servers at most), `e2e` the folders under test/ that start real Gatehouse processes
// and real peers. `npm run test:unit` is the quick loop while developing.
const shared = {
  // graphql ships both index.mjs ("module") and index.js ("main"); Node loads index.js for every
  // package, so the sources under test must too, or graphql-js sees two realms ("another module").
  resolve: { alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }] },
};
const testDefaults = {
  root,
  exclude: ['**/node_modules/**'],
  // Forks, not threads: isolated-vm needs --no-node-snapshot and e2e tests spawn processes.
  pool: 'forks' as const,
  execArgv: ['--no-node-snapshot'],
  testTimeout: 30_000,
  hookTimeout: 30_000,
};

export default defineConfig({
  ...shared,
  test: {
    ...testDefaults,
    maxWorkers: 2,
    projects: [
      {
        ...shared,
        test: { ...testDefaults, name: 'unit', include: ['core/src/**/*.test.ts', 'plugin-sdk/src/**/*.test.ts', 'plugins/*/src/**/*.test.ts', 'init-container/src/**/*.test.ts', 'images/**/*.test.ts'] },
      },
      {
        ...shared,
        test: { ...testDefaults, name: 'e2e', include: ['test/**/*.test.ts'] },
      },
    ],
  },
});
