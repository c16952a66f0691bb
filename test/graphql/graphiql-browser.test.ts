/**
 * GraphiQL works offline (issue 25 item 11): a real headless Chromium (Debian's
 * chromium-headless-shell, test/graphql/install-chromium.sh) loads the page from a `gatehouse
 * run` with every other host unresolvable; the page renders GraphiQL only if every script and the
 * stylesheet came from the gateway and matched their integrity hashes (Chromium blocks a
 * mismatch), and GraphiQL's own introspection query reached the API.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';

function findChromium(): string | Error | undefined {
  const candidates = [process.env.GATEHOUSE_CHROMIUM, '/usr/bin/chromium-headless-shell', '/usr/bin/chromium'].filter((c): c is string => !!c);
  const found = candidates.find((c) => existsSync(c));
  if (found) return found;
  const message = 'chromium-headless-shell not found: run test/graphql/install-chromium.sh (or set GATEHOUSE_CHROMIUM)';
  if (process.env.CI === 'true') return new Error(message);
  console.warn(`\n*** SKIPPED test/graphql/graphiql-browser.test.ts: ${message} ***\n`);
  return undefined;
}

const chromium = findChromium();

if (chromium instanceof Error) {
  describe('GraphiQL in a browser', () => {
    it('needs chromium-headless-shell on CI', () => {
      throw chromium;
    });
  });
} else {
  describe.skipIf(!chromium)('GraphiQL in a browser, offline', () => {
    let dir: ConfigDir;
    let gateway: GatehouseProcess;

    beforeAll(async () => {
      dir = await makeConfigDir({
        'config.yaml': [
          manifests.graphqlApi('open', {
            schemaDefinition: 'type Query { greeting: String @resolve(name: "greet") shelf: Shelf } type Shelf { books: [String] }',
            executor: { local: { enableIntrospection: true, resolutions: { greet: { mockResolver: { syncResponse: 'hello' } } } } },
          }),
          manifests.virtualService('graphql', { domains: ['*'], routes: [{ matchers: [{ prefix: '/graphql' }], graphqlApiRef: { name: 'open' } }] }),
        ],
      });
      gateway = await startGatehouse('run', ['--config-dir', dir.path]);
    });
    afterAll(async () => {
      await gateway?.stop();
      await dir?.cleanup();
    });

    it('renders GraphiQL from the gateway alone and introspects the API', { timeout: 120_000 }, async () => {
      const dom = await new Promise<string>((resolve, reject) =>
        execFile(
          chromium as string,
          [
            '--no-sandbox',
            '--disable-gpu',
            '--no-first-run',
            // Offline: no host but the gateway's resolves.
            '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
            '--virtual-time-budget=20000',
            '--dump-dom',
            `${gateway.url}/graphql`,
          ],
          { timeout: 90_000, maxBuffer: 64 * 1024 * 1024 },
          (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout)),
        ),
      );
      // GraphiQL's React tree is in the page: its scripts ran (same origin, integrity matched).
      expect(dom).toContain('graphiql-container');
      expect(dom).toContain('graphiql-editors');
      // GraphiQL's introspection query reached the API (it needs the schema for its editor).
      const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
      expect(metrics).toMatch(/gatehouse_graphql_operation_duration_seconds_count\{api="default\/open",operation="query",operation_name="IntrospectionQuery",result="ok"\} [1-9]/);
    });
  });
}
