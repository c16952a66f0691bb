import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { makeConfigDir, requiredHeaderAppFiles, type ConfigDir } from '../support/config-dir.ts';
import { eventually, send } from '../support/http.ts';
import { freePortBelowEphemeral } from '../support/ports.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { cleanEnv, runCli } from '../oci/helpers/cli.ts';
import { buildImage, imageSize, missingImageTools, podman, podmanRunArgs, removeDanglingImages, withFlag } from './images.ts';

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
 * Issue 13 item 4: the images built from images/*.Dockerfile, run as real containers on the host
 * network the way the pods of `gatehouse install render` run them (podmanRunArgs: securityContext,
 * env, volumes, args; only the ports and bind address changed to free 127.0.0.1 ones). The RequiredHeader
 * plugin image (built with `--base` the init image) is the extauth pod's init container and fills
 * the shared emptyDir; extauth loads the plugin from it; the gateway pod asks extauth and proxies to
 * an upstream on 127.0.0.1.
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
    await podman(['run', '--detach', '--name', full, ...args]);
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

  it('runs the extauth and gateway pods of install render: the RequiredHeader plugin image as init container, then extauth and gateway enforcing it', async () => {
    const env = cleanEnv();
    // 1. The plugin image, on top of the init image (exported as an OCI layout for --base), under
    //    the name the values below give it.
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
    await podman(['tag', plugin, `localhost/plugins/required-header:${VERSION}`]);
    const labels = JSON.parse((await podman(['image', 'inspect', '--format', '{{json .Labels}}', plugin])).stdout) as Record<string, string>;
    expect(labels['dev.gatehouse.plugins']).toBe('RequiredHeader');

    // 2. The pods, as `gatehouse install render` writes them for these values.
    const values = join(work, 'values.yaml');
    await writeFile(values, stringify({
      image: { registry: 'localhost', repository: 'gatehouse' },
      // Containers without a cluster: the ConfigMap source (the default is kube since issue 27).
      config: { source: 'configMap' },
      global: { extensions: { extAuth: { plugins: { RequiredHeader: { image: { registry: 'localhost', repository: 'plugins/required-header' } } } } } },
    }));
    const render = await runCli('gatehouse', ['install', 'render', '--values', values], { env });
    expect(render.code, render.stderr).toBe(0);
    const deployments = parseAllDocuments(render.stdout).map((d) => d.toJS() as IDeployment).filter((d) => d?.kind === 'Deployment');
    const podOf = (name: string): IPodSpec => {
      const spec = deployments.find((d) => d.metadata?.name === name)?.spec?.template.spec;
      if (!spec) throw new Error(`install render wrote no Deployment ${name}`);
      return spec;
    };
    const extauthPod = podOf('extauth');
    const gatewayPod = podOf('gateway');
    expect(extauthPod.initContainers?.map((c) => c.image)).toEqual([`localhost/plugins/required-header:${VERSION}`]);
    expect([extauthPod.containers[0]!.image, gatewayPod.containers[0]!.image]).toEqual([gatewayImage, gatewayImage]);

    // Host directories for the volumes: emptyDirs world-writable as the kubelet makes them, the
    // ConfigMap a config directory readable by uid 10001 (mounted read-only).
    const emptyDir = async (name: string): Promise<string> => {
      const dir = join(work, name);
      await mkdir(dir);
      await chmod(dir, 0o777);
      return dir;
    };
    config = await makeConfigDir(requiredHeaderAppFiles(echo.port));
    await chmod(config.path, 0o755);
    // The caller token Secret both pods mount (issue 24 finding 9): its file, readable by their group as the kubelet's defaultMode 0440 makes it.
    const tokenSecret = parseAllDocuments(render.stdout)
      .map((d) => d.toJS() as { kind?: string; metadata?: { name?: string }; data?: Record<string, string> })
      .find((o) => o?.kind === 'Secret' && o.data?.token !== undefined);
    expect(tokenSecret, 'install render writes the caller token Secret by default').toBeDefined();
    const callerToken = join(work, 'caller-token');
    await mkdir(callerToken);
    await writeFile(join(callerToken, 'token'), Buffer.from(tokenSecret!.data!.token!, 'base64'));
    await chmod(join(callerToken, 'token'), 0o444);
    await chmod(callerToken, 0o755);
    const extauthVolumes = { 'auth-plugins': await emptyDir('extauth-auth-plugins'), tmp: await emptyDir('extauth-tmp'), config: config.path, 'caller-token': callerToken };
    const gatewayVolumes = { tmp: await emptyDir('gateway-tmp'), config: config.path, 'caller-token': callerToken };

    // 3. The init container: a tag other than the gateway version is refused and writes nothing;
    //    as rendered, it exits 0 and leaves the plugin in the shared volume, written as uid 10001.
    const initContainer = extauthPod.initContainers![0]!;
    const wrongTag = { ...initContainer, args: withFlag(initContainer.args!, '--tag', '0.0.0-wrong') };
    const refused = await podman(['run', '--rm', '--name', `gh-pod-${run}-init-wrong`, ...podmanRunArgs(extauthPod, wrongTag, extauthVolumes)], { check: false });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('GH_INIT_TAG_MISMATCH');
    expect(await readdir(extauthVolumes['auth-plugins'])).toEqual([]);
    const init = await timed('init container', () => podman(['run', '--rm', '--name', `gh-pod-${run}-init`, ...podmanRunArgs(extauthPod, initContainer, extauthVolumes)], { check: false }));
    expect(init.code, init.stderr).toBe(0);
    const pluginDir = extauthVolumes['auth-plugins'];
    expect((await readdir(pluginDir)).sort()).toEqual(['RequiredHeader.js', 'RequiredHeader.js.map']);
    expect(await readFile(join(pluginDir, 'RequiredHeader.js'), 'utf8')).toBe(await readFile(join(compiled, 'RequiredHeader.js'), 'utf8'));
    expect((await stat(join(pluginDir, 'RequiredHeader.js'))).uid).toBe(RUN_AS);

    // 4. extauth and gateway, read-only roots and all, on free 127.0.0.1 ports instead of the pod's own.
    // Below the ephemeral range: the gateway binds its ports seconds after they are chosen.
    const ports = new Set<number>();
    while (ports.size < 5) ports.add(await freePortBelowEphemeral());
    const [extauthPort, port, httpsPort, adminPort, extauthAdminPort] = [...ports] as [number, number, number, number, number];
    const local = (args: string[], ports: Record<string, number | string>): string[] =>
      Object.entries({ '--host': '127.0.0.1', ...ports }).reduce((a, [flag, value]) => withFlag(a, flag, String(value)), args);
    const extauthContainer = extauthPod.containers[0]!;
    const extauth = await timed('extauth start', async () => {
      const name = await startContainer('extauth', podmanRunArgs(extauthPod, { ...extauthContainer, args: local(extauthContainer.args!, { '--port': extauthPort, '--admin-port': extauthAdminPort, '--admin-host': '127.0.0.1' }) }, extauthVolumes));
      await waitForLog(name, (l) => l.msg === 'received new auth configuration' && Array.isArray(l.ids) && (l.ids as string[]).includes('default.required-header'), 'extauth loading the plugin');
      return name;
    });
    const gatewayContainer = gatewayPod.containers[0]!;
    const readiness = gatewayContainer.readinessProbe?.httpGet?.path;
    expect(readiness).toBe('/readyz');
    const gateway = await timed('gateway start', async () => {
      // --extauth-timeout: the first check after start (gRPC connect, first plugin call) took 140-240 ms
      // here on a busy 2-core machine, against the 200 ms default; this test is about enforcement.
      const args = local(gatewayContainer.args!, { '--port': port, '--https-port': httpsPort, '--admin-port': adminPort, '--admin-host': '127.0.0.1', '--extauth-address': `127.0.0.1:${extauthPort}`, '--extauth-timeout': '2s' });
      const name = await startContainer('gateway', podmanRunArgs(gatewayPod, { ...gatewayContainer, args }, gatewayVolumes));
      await waitForLog(name, (l) => l.msg === 'listening', 'the gateway listening');
      // The rendered readiness probe, against the admin port.
      await eventually(async () => (await send(`http://127.0.0.1:${adminPort}`, { path: readiness })).status === 200, 30_000, 100);
      return name;
    });
    for (const container of [extauth, gateway]) {
      expect((await podman(['exec', container, 'id', '-u'])).stdout.trim()).toBe(String(RUN_AS));
      // readOnlyRootFilesystem holds: the root is not writable, the tmp emptyDir is.
      expect((await podman(['exec', container, 'touch', '/app/x'], { check: false })).stderr).toContain('Read-only file system');
      expect((await podman(['exec', container, 'touch', '/tmp/x'], { check: false })).code).toBe(0);
    }

    // 5. Traffic: only to 127.0.0.1.
    const url = `http://127.0.0.1:${port}`;
    const allowed = await timed('first request', () => send(url, { path: '/hello', headers: { host: 'app.test', 'x-team': 'blue' } }));
    expect(allowed.status, `${allowed.body}\nextauth:\n${await logsOf(extauth)}\ngateway:\n${await logsOf(gateway)}`).toBe(200);
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
