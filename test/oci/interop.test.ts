import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, pluginDir, printedDigest, runCli, runTool } from './helpers/cli.ts';
import { startRegistry, type TestRegistry } from './helpers/registry.ts';

const VERSION = (JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * Interop with real tools, both ways, through a real docker-registry:
 * gatehouse-plugin → registry → skopeo / umoci, and umoci → skopeo → registry → gatehouse-init.
 */
describe('plugin images interoperate with skopeo and umoci', () => {
  let registry: TestRegistry;
  let work: string;
  const env = cleanEnv();

  beforeAll(async () => {
    registry = await startRegistry();
    work = await mkdtemp(join(tmpdir(), 'gh-interop-'));
  });
  afterAll(async () => {
    await registry?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('an image built and pushed by gatehouse-plugin passes skopeo inspect, skopeo copy and umoci unpack', async () => {
    const plugins = await pluginDir(work, { 'alpha.js': 'var alpha = "a";\n', 'beta.js': 'var beta = "b";\n' });
    const layout = join(work, 'built');
    const build = await runCli('gatehouse-plugin', ['image', 'build', '--from', plugins, '--tag', VERSION, '--output', layout], { env });
    expect(build.stderr).toBe('');
    expect(build.code).toBe(0);
    const digest = printedDigest(build.stdout);
    const ref = `${registry.host}/plugins/interop:${VERSION}`;
    // A tiny chunk size makes the layer go up in several PATCH requests.
    const push = await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure', '--chunk-size', '64'], { env });
    expect(push.stderr).toBe('');
    expect(push.code).toBe(0);
    expect(push.stdout).toContain(`@${digest}`);
    expect(push.stdout).toContain('2 blob(s) uploaded, 0 already present');

    const again = await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure'], { env });
    expect(again.stdout).toContain('0 blob(s) uploaded, 2 already present');

    const inspect = await runTool('skopeo', ['inspect', '--tls-verify=false', `docker://${ref}`]);
    expect(inspect.code).toBe(0);
    const info = JSON.parse(inspect.stdout) as { Digest: string; Labels: Record<string, string>; Layers: string[] };
    expect(info.Digest).toBe(digest);
    expect(info.Labels['dev.gatehouse.plugins']).toBe('alpha,beta');
    expect(info.Labels['dev.gatehouse.gateway-version']).toBe(VERSION);
    expect(info.Layers).toHaveLength(1);

    const copied = join(work, 'skopeo-copy');
    const copy = await runTool('skopeo', ['copy', '--src-tls-verify=false', `docker://${ref}`, `oci:${copied}:${VERSION}`]);
    expect(copy.stderr).toBe('');
    expect(copy.code).toBe(0);
    const bundle = join(work, 'bundle');
    const unpack = await runTool('umoci', ['unpack', '--rootless', '--image', `${copied}:${VERSION}`, bundle]);
    expect(unpack.code).toBe(0);
    expect(await readdir(join(bundle, 'rootfs/compiled-auth-plugins'))).toEqual(['alpha.js', 'beta.js']);
    expect(await readFile(join(bundle, 'rootfs/compiled-auth-plugins/beta.js'), 'utf8')).toBe('var beta = "b";\n');
  });

  it('a layout tarball (.tar output) is read by skopeo as oci-archive, pushed from, and extracted by gatehouse-init', async () => {
    const plugins = await pluginDir(work, { 'tarred.js': 'var tarred = 1;\n' });
    const archive = join(work, 'plugin.tar');
    const build = await runCli('gatehouse-plugin', ['image', 'build', '--from', plugins, '--tag', VERSION, '--output', archive], { env });
    expect(build.code, build.stderr).toBe(0);
    const digest = printedDigest(build.stdout);
    const inspect = await runTool('skopeo', ['inspect', `oci-archive:${archive}`]);
    expect(inspect.code, inspect.stderr).toBe(0);
    expect((JSON.parse(inspect.stdout) as { Digest: string }).Digest).toBe(digest);
    const ref = `${registry.host}/plugins/tarred:${VERSION}`;
    const push = await runCli('gatehouse-plugin', ['image', 'push', '--from', archive, ref, '--insecure'], { env });
    expect(push.code, push.stderr).toBe(0);
    expect(push.stdout).toContain(`@${digest}`);
    const dest = join(work, 'dest-tarred');
    const init = await runCli('gatehouse-init', ['--layout', archive, '--dest', dest], { env });
    expect(init.stderr).toBe('');
    expect(await readdir(dest)).toEqual(['tarred.js']);
  });

  it('an image made by umoci and pushed by skopeo is extracted by gatehouse-init', async () => {
    const src = join(work, 'umoci-src');
    await mkdir(join(src, 'compiled-auth-plugins'), { recursive: true });
    await writeFile(join(src, 'compiled-auth-plugins/from-umoci.js'), 'var fromUmoci = true;\n');
    await mkdir(join(src, 'etc'));
    await writeFile(join(src, 'etc/motd'), 'not a plugin');
    const image = join(work, 'umoci-image');
    for (const args of [
      ['init', '--layout', image],
      ['new', '--image', `${image}:${VERSION}`],
      ['insert', '--rootless', '--image', `${image}:${VERSION}`, join(src, 'etc'), '/etc'],
      ['insert', '--rootless', '--image', `${image}:${VERSION}`, join(src, 'compiled-auth-plugins'), '/compiled-auth-plugins'],
    ]) {
      const result = await runTool('umoci', args);
      expect(result.code, result.stderr).toBe(0);
    }
    const ref = `${registry.host}/umoci/plugin:${VERSION}`;
    const push = await runTool('skopeo', ['copy', '--dest-tls-verify=false', `oci:${image}:${VERSION}`, `docker://${ref}`]);
    expect(push.code, push.stderr).toBe(0);

    const dest = join(work, 'dest-umoci');
    const init = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', dest, '--gateway-version', VERSION], { env });
    expect(init.stderr).toBe('');
    expect(init.code).toBe(0);
    expect(await readdir(dest)).toEqual(['from-umoci.js']);
    expect(await readFile(join(dest, 'from-umoci.js'), 'utf8')).toBe('var fromUmoci = true;\n');
  });

  it('gatehouse-init refuses a umoci-made image with a symlink among the plugins, writing nothing', async () => {
    const src = join(work, 'umoci-evil');
    await mkdir(join(src, 'compiled-auth-plugins'), { recursive: true });
    await writeFile(join(src, 'compiled-auth-plugins/ok.js'), 'var ok = 1;\n');
    await symlink('/etc/passwd', join(src, 'compiled-auth-plugins/passwd.js'));
    const image = join(work, 'umoci-evil-image');
    for (const args of [
      ['init', '--layout', image],
      ['new', '--image', `${image}:${VERSION}`],
      ['insert', '--rootless', '--image', `${image}:${VERSION}`, join(src, 'compiled-auth-plugins'), '/compiled-auth-plugins'],
    ]) {
      expect((await runTool('umoci', args)).code).toBe(0);
    }
    const ref = `${registry.host}/umoci/evil:${VERSION}`;
    expect((await runTool('skopeo', ['copy', '--dest-tls-verify=false', `oci:${image}:${VERSION}`, `docker://${ref}`])).code).toBe(0);
    const dest = join(work, 'dest-evil');
    const init = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', dest, '--gateway-version', VERSION], { env });
    expect(init.code).toBe(1);
    expect(init.stderr).toMatch(/passwd\.js" is a symbolic link .*\[GH_INIT_UNSAFE_ENTRY\]/);
    await expect(readdir(dest)).rejects.toThrow();
  });
});
