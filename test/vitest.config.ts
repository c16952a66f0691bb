import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // graphql ships both index.mjs ("module") and index.js ("main"); Node loads index.js for every
  // package, so the sources under test must too, or graphql-js sees two realms ("another module").
  resolve: { alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }] },
  test: {
    root: fileURLToPath(new URL('..', import.meta.url)),
    include: ['core/src/**/*.test.ts', 'plugin-sdk/src/**/*.test.ts', 'plugins/*/src/**/*.test.ts', 'init-container/src/**/*.test.ts', 'images/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: ['**/node_modules/**'],
    // Forks, not threads: isolated-vm needs --no-node-snapshot and e2e tests spawn processes.
    pool: 'forks',
    execArgv: ['--no-node-snapshot'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    maxWorkers: 2,
  },
});
