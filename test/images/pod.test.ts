import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { eventually, send } from '../support/http.ts';
import { freePort } from '../support/ports.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { cleanEnv, runCli } from '../oci/helpers/cli.ts';
import { buildImage, imageSize, missingImageTools, podman, removeDanglingImages } from './images.ts';

const VERSION = (JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const ENTRY = new URL('../../plugins/required-header/src/index.ts', import.meta.url).pathname;
/** The uid:gid the Dockerfiles run as (USER 10001:10001). */
const RUN_AS = 10001;

const missing = missingImageTools();
if (missing) {
  if (process.env.CI === 'true') throw new Error(`test/images/pod.test.ts: ${missing}`);
  console.warn(`SKIPPED: test/images/pod.test.ts: ${missing}`);
}

/**
 * Issue 13 item 4: the images built from images/*.Dockerfile, run the way the extauth pod of
 * `gatehouse install render` runs them, as real containers on the host network. The RequiredHeader
 * plugin image (built with `--base` the init image) is the init container and fills a shared
 * volume; extauth loads the plugin from it; a gateway container asks extauth and proxies to an
 * upstream on 127.0.0.1.
 */
describe.skipIf(missing !== undefined)('the images as a pod', () => {
  const run = randomBytes(4).toString('hex');
  const gatewayImage = `localhost/gatehouse:${VERSION}`;
  const initImage = `localhost/gatehouse-init:${VERSION}`;
  /** The plugin image's id, once pulled from its OCI layout. */
  let pluginImage: string | undefined;
  const containers: string[] = [];
  let work: string;
  let echo: TestServer;
  let config: ConfigDir | undefined;
  const timings: Record<string, number> = {};

  const timed = async <T>(name: string, step: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    try {
      return await step();
    } finally {
      timings[name] = Date.now() - started;
    }
  };

  /** Starts a detached container on the host network, named for this run (removed in afterAll). */
  const startContainer = async (name: string, args: string[]): Promise<string> => {
    const full = `gh-pod-${run}-${name}`;
    containers.push(full);
    await podman(['run', '--detach', '--name', full, '--network', 'host', ...args]);
    return full;
  };
  const logsOf = async (container: string): Promise<string> => {
    const { stdout, stderr } = await podman(['logs', container], { check: false });
    return stdout + stderr;
  };
  /** Waits until the container's log has a JSON line satisfying `predicate`; fails early when it exits. */
  const waitForLog = (container: string, predicate: (line: Record<string, unknown>) => boolean, what: string) =>
    eventually(
      async () => {
        const text = await logsOf(container);
        const found = text.split('\n').some((line) => {
          try {
            return predicate(JSON.parse(line) as Record<string, unknown>);
          } catch {
            return false;
          }
        });
        if (found) return true;
        const state = (await podman(['inspect', '--format', '{{.State.Status}} {{.State.ExitCode}}', container])).stdout.trim();
        if (!state.startsWith('running')) throw new Error(`${container} is ${state} before ${what}:\n${text}`);
        return false;
      },
      60_000,
      200,
    ).catch(async (error: Error) => {
      throw new Error(`${what}: ${error.message}\n${await logsOf(container)}`);
    });

  beforeAll(async () => {
    // Lower case: podman names an image pulled from `oci:DIR` after DIR, and names are lower case.
    work = join(tmpdir(), `gh-pod-${run}`);
    await mkdir(work);
    echo = await startEcho('echo');
  });
  afterAll(async () => {
    if (containers.length) await podman(['rm', '--force', '--time', '2', ...containers], { check: false });
    if (pluginImage) await podman(['rmi', '--force', pluginImage], { check: false });
    // The build-stage layers of earlier runs; the current images and their cache stay.
    await removeDanglingImages();
    await config?.cleanup();
    await echo?.close();
    if (work) await rm(work, { recursive: true, force: true });
    console.info(`pod test timings (ms): ${JSON.stringify(timings)}`);
  });

  it('builds the gateway and init images from images/*.Dockerfile on the local Node base, running as non-root', async () => {
    await timed('build gateway image', () => buildImage('gateway.Dockerfile', gatewayImage));
    await timed('build init image', () => buildImage('init-container.Dockerfile', initImage));
    for (const image of [gatewayImage, initImage]) {
      const user = (await podman(['image', 'inspect', '--format', '{{.Config.User}}', image])).stdout.trim();
      expect(user).toBe(`${RUN_AS}:${RUN_AS}`);
    }
    const version = await podman(['run', '--rm', '--network', 'host', gatewayImage, 'version']);
    expect(version.stdout.trim()).toBe(VERSION);
    const sizes = { gateway: await imageSize(gatewayImage), init: await imageSize(initImage) };
    console.info(`image sizes (MB): gateway ${(sizes.gateway / 1e6).toFixed(0)}, init ${(sizes.init / 1e6).toFixed(0)}`);
  }, 900_000);

  it('runs the RequiredHeader plugin image as the init container, then extauth and gateway containers that enforce it', async () => {
    const env = cleanEnv();
    // 1. The plugin image, on top of the init image (exported as an OCI layout for --base).
    const compiled = join(work, 'compiled-auth-plugins');
    const build = await runCli('gatehouse-plugin', ['build', ENTRY, '--name', 'RequiredHeader', '--out', compiled], { env });
    expect(build.code, build.stderr).toBe(0);
    const initLayout = join(work, 'init-layout');
    await podman(['push', initImage, `oci:${initLayout}:${VERSION}`]);
    const pluginLayout = join(work, 'plugin-layout');
    const image = await runCli('gatehouse-plugin', ['image', 'build', '--from', compiled, '--tag', VERSION, '--output', pluginLayout, '--base', `oci:${initLayout}:${VERSION}`], { env });
    expect(image.code, image.stderr).toBe(0);
    const plugin = (await podman(['pull', '--quiet', `oci:${pluginLayout}:${VERSION}`])).stdout.trim();
    pluginImage = plugin;
    const labels = JSON.parse((await podman(['image', 'inspect', '--format', '{{json .Labels}}', plugin])).stdout) as Record<string, string>;
    expect(labels['dev.gatehouse.plugins']).toBe('RequiredHeader');

    // 2. The pod's emptyDir: a host directory, world-writable like the kubelet makes it.
    const volume = join(work, 'auth-plugins');
    await mkdir(volume);
    await chmod(volume, 0o777);
    const init = await timed('init container', () => podman(['run', '--rm', '--network', 'host', '--name', `gh-pod-${run}-init`, '--volume', `${volume}:/auth-plugins`, plugin], { check: false }));
    expect(init.code, init.stderr).toBe(0);
    expect((await readdir(volume)).sort()).toEqual(['RequiredHeader.js', 'RequiredHeader.js.map']);
    expect(await readFile(join(volume, 'RequiredHeader.js'), 'utf8')).toBe(await readFile(join(compiled, 'RequiredHeader.js'), 'utf8'));
    // Written by the image's user, not root.
    expect((await stat(join(volume, 'RequiredHeader.js'))).uid).toBe(RUN_AS);

    // 3. extauth and gateway from the gateway image, config mounted read-only (readable by uid 10001).
    config = await makeConfigDir({
      'upstream.yaml': manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
      'auth.yaml': manifests.authConfig('required-header', [{ pluginAuth: { name: 'RequiredHeader', config: { RequiredHeader: 'x-team', AllowedValues: ['blue', 'green'] } } }]),
      'vs.yaml': manifests.virtualService('app', {
        domains: ['app.test'],
        options: { extauth: { configRef: { name: 'required-header' } } },
        routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }],
      }),
    });
    await chmod(config.path, 0o755);
    const mountConfig = ['--volume', `${config.path}:/etc/gatehouse/config:ro`];
    const [extauthPort, port, httpsPort, adminPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const extauth = await timed('extauth start', async () => {
      const name = await startContainer('extauth', [...mountConfig, '--volume', `${volume}:/auth-plugins:ro`, gatewayImage, 'extauth', '--config-dir', '/etc/gatehouse/config', '--plugin-dir', '/auth-plugins', '--host', '127.0.0.1', '--port', String(extauthPort)]);
      await waitForLog(name, (l) => l.msg === 'received new auth configuration' && Array.isArray(l.ids) && (l.ids as string[]).includes('default.required-header'), 'extauth loading the plugin');
      return name;
    });
    const gateway = await timed('gateway start', async () => {
      const name = await startContainer('gateway', [...mountConfig, gatewayImage, 'gateway', '--config-dir', '/etc/gatehouse/config', '--extauth-address', `127.0.0.1:${extauthPort}`, '--host', '127.0.0.1', '--port', String(port), '--https-port', String(httpsPort), '--admin-port', String(adminPort)]);
      await waitForLog(name, (l) => l.msg === 'listening', 'the gateway listening');
      return name;
    });
    for (const container of [extauth, gateway]) {
      const user = (await podman(['exec', container, 'id', '-u'])).stdout.trim();
      expect(user).toBe(String(RUN_AS));
    }

    // 4. Traffic: only to 127.0.0.1.
    const url = `http://127.0.0.1:${port}`;
    const allowed = await send(url, { path: '/hello', headers: { host: 'app.test', 'x-team': 'blue' } });
    expect(allowed.status, allowed.body).toBe(200);
    const seen = JSON.parse(allowed.body) as Echo;
    expect(seen.url).toBe('/hello');
    expect(seen.headers['x-team']).toBe('blue');
    expect(seen.headers['matched-allowed-headers']).toBe('true');
    const missingHeader = await send(url, { path: '/hello', headers: { host: 'app.test' } });
    expect(missingHeader.status).toBe(403);
    expect(missingHeader.body).toBe('');
    const wrongValue = await send(url, { path: '/hello', headers: { host: 'app.test', 'x-team': 'red' } });
    expect(wrongValue.status).toBe(403);
  }, 300_000);
});
