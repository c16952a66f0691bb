/** The quickstart's plugin-protected host: manifests accepted, the plugin built, allow/deny/chain as documented. */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigLoader } from '../../core/src/config/loader.ts';
import { extAuthChecks } from '../../core/src/extauth/checks.ts';
import { AuthEngine } from '../../core/src/extauth/engine.ts';
import startAuthPlugins from '../../examples/quickstart/services/auth-plugins.ts';
import makeQuickstartCertificate from '../../examples/quickstart/services/tls-certificate.ts';
import { basic, captureLogger, checkRequest } from '../extauth/support.ts';

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
