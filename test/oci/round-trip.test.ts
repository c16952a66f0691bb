import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, requiredHeaderAppFiles, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { cleanEnv, runCli } from './helpers/cli.ts';
import { startRegistry, type TestRegistry } from './helpers/registry.ts';

const VERSION = (JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const ENTRY = new URL('../../plugins/required-header/src/index.ts', import.meta.url).pathname;

/**
 * The acceptance round trip (issue 6), every step a real process: gatehouse-plugin build →
 * image build → image push to a real docker-registry → gatehouse-init pulls and extracts →
 * gatehouse extauth loads the plugin → requests allowed and denied through gatehouse gateway.
 */
describe('plugin round trip through a registry', () => {
  let work: string;
  let registry: TestRegistry;
  let echo: TestServer;
  let config: ConfigDir;
  let extauth: GatehouseProcess | undefined;
  let gateway: GatehouseProcess | undefined;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'gh-round-trip-'));
    registry = await startRegistry();
    echo = await startEcho('echo');
  });
  afterAll(async () => {
    await gateway?.stop();
    await extauth?.stop();
    await config?.cleanup();
    await echo?.close();
    await registry?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('builds, pushes, pulls, loads and enforces the RequiredHeader plugin', async () => {
    const env = cleanEnv();
    const compiled = join(work, 'compiled-auth-plugins');
    const build = await runCli('gatehouse-plugin', ['build', ENTRY, '--name', 'RequiredHeader', '--out', compiled], { env });
    expect(build.code, build.stderr).toBe(0);
    expect((await readdir(compiled)).sort()).toEqual(['RequiredHeader.js', 'RequiredHeader.js.map']);

    const layout = join(work, 'layout');
    const image = await runCli('gatehouse-plugin', ['image', 'build', '--from', compiled, '--tag', VERSION, '--output', layout], { env });
    expect(image.code, image.stderr).toBe(0);
    expect(image.stdout).toContain('plugins: RequiredHeader');

    const ref = `${registry.host}/plugins/required-header:${VERSION}`;
    const push = await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure'], { env });
    expect(push.code, push.stderr).toBe(0);

    const pluginDir = join(work, 'auth-plugins');
    const init = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', pluginDir], { env });
    expect(init.code, init.stderr).toBe(0);
    expect(await readFile(join(pluginDir, 'RequiredHeader.js'), 'utf8')).toBe(await readFile(join(compiled, 'RequiredHeader.js'), 'utf8'));

    config = await makeConfigDir(requiredHeaderAppFiles(echo.port));
    // The Kubernetes shape: extauth reads the plugin directory gatehouse-init filled.
    extauth = await startGatehouse('extauth', ['--config-dir', config.path, '--plugin-dir', pluginDir]);
    await extauth.waitForLog((l) => l.msg === 'received new auth configuration' && Array.isArray(l.ids) && (l.ids as string[]).includes('default.required-header'));
    gateway = await startGatehouse('gateway', ['--config-dir', config.path, '--extauth-address', `127.0.0.1:${extauth.port}`]);

    const allowed = await send(gateway.url, { path: '/hello', headers: { host: 'app.test', 'x-team': 'blue' } });
    expect(allowed.status).toBe(200);
    const seen = JSON.parse(allowed.body) as Echo;
    expect(seen.url).toBe('/hello');
    expect(seen.headers['matched-allowed-headers']).toBe('true');

    const wrongValue = await send(gateway.url, { path: '/hello', headers: { host: 'app.test', 'x-team': 'red' } });
    expect(wrongValue.status).toBe(403);
    expect(wrongValue.body).toBe('');
    const missing = await send(gateway.url, { path: '/hello', headers: { host: 'app.test' } });
    expect(missing.status).toBe(403);
  });
});
