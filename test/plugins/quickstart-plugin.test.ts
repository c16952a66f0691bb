/**
 * The quickstart's plugin-protected hosts: manifests accepted, the plugins built, allow/deny/chain
 * as documented; the JWT and API-key hosts through a real `gatehouse run` on the quickstart's
 * config with its own services, by running the try-lines themselves (curl).
 */
import { execFile, execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigLoader } from '../../core/src/config/loader.ts';
import { extAuthChecks } from '../../core/src/extauth/checks.ts';
import { AuthEngine } from '../../core/src/extauth/engine.ts';
import startAuthPlugins from '../../examples/quickstart/services/auth-plugins.ts';
import makeQuickstartCertificate from '../../examples/quickstart/services/tls-certificate.ts';
import startEcho from '../../examples/quickstart/services/echo.ts';
import startKeyService from '../../examples/quickstart/services/key-service.ts';
import startTokenIssuer from '../../examples/quickstart/services/token-issuer.ts';
import { basic, captureLogger, checkRequest } from '../extauth/support.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';

const CONFIG = fileURLToPath(new URL('../../examples/quickstart/config', import.meta.url));

describe('quickstart plugin auth', () => {
  it('builds RequiredHeader into the quickstart plugin dir, and plugin.localhost allows, denies and chains', async () => {
    // As `npm start` does first: the HTTPS host's certificate (otherwise that VirtualService is rightly rejected).
    await makeQuickstartCertificate();
    const service = await startAuthPlugins();
    expect(service.url).toMatch(/\/examples\/quickstart\/plugins\/RequiredHeader\.js$/);
    const pluginDir = fileURLToPath(new URL('./', service.url));

    const { logger, lines } = captureLogger();
    const loader = new ConfigLoader({ dir: CONFIG, apiGroupDomain: 'gatehouse.dev', checks: extAuthChecks, logger, watch: false });
    const snapshot = await loader.start();
    const statuses = snapshot.statuses.filter((s) => s.file?.endsWith('plugin-required-header.yaml'));
    expect(statuses.map((s) => [s.kind, s.name, s.state])).toEqual([
      ['AuthConfig', 'required-header', 'Accepted'],
      ['AuthConfig', 'basic-then-required-header', 'Accepted'],
      ['VirtualService', 'plugin-demo', 'Accepted'],
    ]);

    const engine = new AuthEngine({ logger, pluginDir });
    try {
      await engine.update(snapshot);
      expect(lines.filter((l) => l.code)).toEqual([]);
      const allowed = await engine.check(checkRequest('default.required-header', { 'x-api-key': 'opensesame' }));
      expect(allowed).toMatchObject({ allowed: true, headersToSet: [{ key: 'matched-allowed-headers', value: 'true' }] });
      expect(await engine.check(checkRequest('default.required-header'))).toEqual({ allowed: false, status: 403, headers: [], body: '' });
      expect(await engine.check(checkRequest('default.basic-then-required-header', { 'x-api-key': 'opensesame' }))).toMatchObject({ allowed: false, status: 401 });
      expect(await engine.check(checkRequest('default.basic-then-required-header', { authorization: basic('alice', 'wonderland'), 'x-api-key': 'letmein' }))).toMatchObject({ allowed: false, status: 403 });
      expect(await engine.check(checkRequest('default.basic-then-required-header', { authorization: basic('alice', 'wonderland'), 'x-api-key': 'opensesame' }))).toMatchObject({ allowed: true });
    } finally {
      await engine.close();
      await loader.close();
      await service.close();
    }
  });
});

/** The `# try:` lines of a quickstart config file, as `npm start` prints them. */
async function tryLines(file: string): Promise<string[]> {
  return (await readFile(join(CONFIG, file), 'utf8')).split('\n').flatMap((line) => /^#\s*try:\s*(.+)$/.exec(line)?.[1] ?? []);
}

const haveCurl = (() => {
  try {
    execFileSync('curl', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
if (!haveCurl && process.env.CI !== 'true') console.warn('SKIPPED: curl not found — the quickstart JWT and API-key try-lines were not run');

describe.skipIf(!haveCurl && process.env.CI !== 'true')('quickstart JWT and API-key hosts answer as their try-lines say (gatehouse run, curl)', () => {
  const services: { close(): Promise<void> }[] = [];
  let gatehouse: GatehouseProcess;
  let startedAt: number;
  /** Runs a try-line with bash against this gateway's port (the line says :8080); its stdout. Async: the services answer from this process. */
  let run: (line: string) => Promise<string>;

  beforeAll(async () => {
    // As `npm start` does: certificate, plugins, the services on their fixed ports, then the gateway.
    await makeQuickstartCertificate();
    const plugins = await startAuthPlugins();
    for (const start of [startEcho, startKeyService, startTokenIssuer]) services.push(await start());
    gatehouse = await startGatehouse('run', ['--config-dir', CONFIG, '--plugin-dir', fileURLToPath(new URL('./', plugins.url)), '--extauth-timeout', '3s']);
    await gatehouse.waitForLog((line) => line.msg === 'received new auth configuration', 20_000);
    startedAt = Date.now();
    run = async (line) => (await promisify(execFile)('bash', ['-c', line.replaceAll(':8080/', `:${gatehouse.port}/`)], { encoding: 'utf8', timeout: 10_000 })).stdout;
  }, 60_000);
  afterAll(async () => {
    await gatehouse?.stop();
    for (const service of services) await service.close();
  });

  it('jwt.localhost: 401 Bearer without a token; a token from the issuer passes with its claims as headers; garbage is invalid_token; after /rotate the new kid passes', async () => {
    const [noToken, withToken, garbage, rotate] = await tryLines('plugin-jwt.yaml');
    expect(await run(noToken!)).toMatch(/^HTTP\/1\.1 401[^]*\r\nwww-authenticate: Bearer\r\n/i);
    const echoed = async () => JSON.parse(await run(withToken!)) as { path: string; headers: Record<string, string> };
    expect(await echoed()).toMatchObject({ path: '/hello', headers: { 'x-user-id': 'quickstart-cli', 'x-client-id': 'quickstart-cli', 'x-scope': 'echo:read', 'x-org': 'Acme Corp' } });
    expect(await run(garbage!)).toMatch(/^HTTP\/1\.1 401[^]*www-authenticate: Bearer error="invalid_token", error_description="malformed token"/i);
    // The plugin refetches at most once per JwksMinRefreshSeconds (5) after its Start fetch.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, startedAt + 5_200 - Date.now())));
    const rotated = JSON.parse(await run(rotate!)) as { signing: string; published: string[] };
    expect(rotated.published).toHaveLength(2);
    expect(await echoed()).toMatchObject({ path: '/hello', headers: { 'x-user-id': 'quickstart-cli' } });
    await gatehouse.waitForLog((line) => line.msg === 'JWKS fetched' && JSON.stringify(line).includes(rotated.signing));
  });

  it('apikey.localhost: 401 without a key; a known key passes with x-user-id and x-customer-id; a wrong key is 401; answers are cached', async () => {
    const [noKey, goodKey, wrongKey, stats] = await tryLines('plugin-api-key.yaml');
    expect(await run(noKey!)).toMatch(/^HTTP\/1\.1 401[^]*\r\nwww-authenticate: ApiKey\r\n/i);
    for (let i = 0; i < 3; i++) expect(JSON.parse(await run(goodKey!))).toMatchObject({ path: '/hello', headers: { 'x-user-id': 'alice', 'x-customer-id': 'acme' } });
    for (let i = 0; i < 3; i++) expect(await run(wrongKey!)).toMatch(/^HTTP\/1\.1 401/);
    // One lookup per key: qs-key-acme and wrong-key.
    expect(JSON.parse(await run(stats!))).toEqual({ lookups: 2 });
  });
});
