import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildLayer, encodeJson, MediaTypes, OciLayout, sha256, type Descriptor } from '@gatehouse/plugin-sdk/oci';
import { cleanEnv, pluginDir, printedDigest, runCli, runTool } from './helpers/cli.ts';
import { startRegistry, type TestRegistry } from './helpers/registry.ts';
import { startTokenServer, type TokenServer } from './helpers/token-server.ts';

const VERSION = (JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

let work: string;
beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'gh-image-cli-'));
});
afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

async function buildLayout(name: string, files?: Record<string, string>, extra: string[] = [], env = cleanEnv()): Promise<{ layout: string; digest: string }> {
  const layout = join(work, name);
  const result = await runCli('gatehouse-plugin', ['image', 'build', '--from', await pluginDir(work, files), '--tag', VERSION, '--output', layout, ...extra], { env });
  expect(result.code, result.stderr).toBe(0);
  return { layout, digest: printedDigest(result.stdout) };
}

describe('gatehouse-plugin image build', () => {
  it('gives the same digest for the same input, built twice into different layouts', async () => {
    const files = { 'same.js': 'var same = 1;\n' };
    const a = await buildLayout('repro-a', files);
    const b = await buildLayout('repro-b', files);
    expect(b.digest).toBe(a.digest);
    expect(await readFile(join(b.layout, 'index.json'), 'utf8')).toBe(await readFile(join(a.layout, 'index.json'), 'utf8'));
  });

  it('refuses a tag other than the gateway version, and reports usage errors with exit 2', async () => {
    const wrong = await runCli('gatehouse-plugin', ['image', 'build', '--from', await pluginDir(work), '--tag', '0.0.0-other', '--output', join(work, 'wrong')], { env: cleanEnv() });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(new RegExp(`--tag 0\\.0\\.0-other must equal the gateway version ${VERSION.replaceAll('.', '\\.')}.*\\[GH_OCI_TAG_MISMATCH\\]`));
    const usage = await runCli('gatehouse-plugin', ['image', 'build', '--from', work], { env: cleanEnv() });
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('missing --tag VERSION, --output LAYOUT_DIR');
  });
});

describe('push and gatehouse-init against an anonymous registry', () => {
  let registry: TestRegistry;
  beforeAll(async () => {
    registry = await startRegistry();
  });
  afterAll(async () => {
    await registry?.close();
  });

  it('pulls, verifies and extracts a pushed image; a rerun changes nothing', async () => {
    const { layout } = await buildLayout('anon', { 'one.js': 'var one = 1;\n' });
    const ref = `${registry.host}/plugins/one:${VERSION}`;
    expect((await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure'], { env: cleanEnv() })).code).toBe(0);
    const dest = join(work, 'dest-anon');
    const first = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', dest], { env: cleanEnv() });
    expect(first.stderr).toBe('');
    expect(first.stdout).toContain('wrote 1 file(s) (one.js)');
    const second = await runCli('gatehouse-init', ['--image', ref, '--dest', dest], { env: cleanEnv({ GATEHOUSE_INSECURE: 'true' }) });
    expect(second.stdout).toContain('wrote 0 file(s), 1 unchanged');
    expect(await readFile(join(dest, 'one.js'), 'utf8')).toBe('var one = 1;\n');
  });

  it('refuses an image whose tag is not the gateway version, naming both', async () => {
    const { layout } = await buildLayout('retag', { 'two.js': 'var two = 2;\n' });
    const good = `${registry.host}/plugins/two:${VERSION}`;
    expect((await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, good, '--insecure'], { env: cleanEnv() })).code).toBe(0);
    const pushWrong = await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, `${registry.host}/plugins/two:latest`, '--insecure'], { env: cleanEnv() });
    expect(pushWrong.code).toBe(1);
    expect(pushWrong.stderr).toContain(`push it with the tag ${VERSION}, not latest`);
    // Re-tag behind gatehouse-plugin's back, the way a registry user might.
    expect((await runTool('skopeo', ['copy', '--src-tls-verify=false', '--dest-tls-verify=false', `docker://${good}`, `docker://${registry.host}/plugins/two:0.0.1`])).code).toBe(0);
    const dest = join(work, 'dest-retag');
    const wrongTag = await runCli('gatehouse-init', ['--image', `${registry.host}/plugins/two:0.0.1`, '--insecure', '--dest', dest], { env: cleanEnv() });
    expect(wrongTag.code).toBe(1);
    expect(wrongTag.stderr).toContain(`image tag 0.0.1 does not match gateway version ${VERSION}`);
    const otherGateway = await runCli('gatehouse-init', ['--image', good, '--insecure', '--dest', dest, '--gateway-version', '7.0.0'], { env: cleanEnv() });
    expect(otherGateway.code).toBe(1);
    expect(otherGateway.stderr).toContain(`image tag ${VERSION} does not match gateway version 7.0.0`);
    await expect(readdir(dest)).rejects.toThrow();
  });

  it('refuses a layer the registry serves with the wrong content (digest mismatch), writing nothing', async () => {
    const { layout } = await buildLayout('tamper', { 'three.js': 'var three = 3;\n' });
    const ref = `${registry.host}/plugins/three:${VERSION}`;
    expect((await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure'], { env: cleanEnv() })).code).toBe(0);
    const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8')) as { manifests: { digest: string }[] };
    const manifest = JSON.parse(await readFile(join(layout, 'blobs/sha256', index.manifests[0]!.digest.slice(7)), 'utf8')) as { layers: { digest: string }[] };
    const hex = manifest.layers[0]!.digest.slice(7);
    const stored = join(registry.storage, 'docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data');
    const original = await readFile(stored);
    const flipped = Buffer.from(original);
    flipped[flipped.length - 5]! ^= 0xff;
    await writeFile(stored, flipped);
    const dest = join(work, 'dest-tamper');
    const init = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', dest], { env: cleanEnv() });
    expect(init.code).toBe(1);
    expect(init.stderr).toMatch(/digest mismatch: expected sha256:[a-f0-9]{64}, content hashes to sha256:[a-f0-9]{64}.*\[GH_OCI_DIGEST_MISMATCH\]/);
    await expect(readdir(dest)).rejects.toThrow();
  });

  it('refuses an oversize layer', async () => {
    const { layout } = await buildLayout('big', { 'big.js': `var big = "${randomBytes(20_000).toString('hex')}";\n` });
    const ref = `${registry.host}/plugins/big:${VERSION}`;
    expect((await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure'], { env: cleanEnv() })).code).toBe(0);
    const dest = join(work, 'dest-big');
    const init = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', dest, '--max-layer-bytes', '10000'], { env: cleanEnv() });
    expect(init.code).toBe(1);
    expect(init.stderr).toMatch(/over the per-layer limit of 10000.*\[GH_INIT_TOO_LARGE\]/);
    await expect(readdir(dest)).rejects.toThrow();
  });

  it('speaks plain HTTP only with --insecure', async () => {
    const { layout } = await buildLayout('tls');
    const push = await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, `${registry.host}/plugins/tls:${VERSION}`], { env: cleanEnv() });
    expect(push.code).toBe(1);
    expect(push.stderr).toMatch(/pass --insecure.*\[GH_OCI_UNREACHABLE\]/);
    const init = await runCli('gatehouse-init', ['--image', `${registry.host}/plugins/tls:${VERSION}`, '--dest', join(work, 'dest-tls')], { env: cleanEnv() });
    expect(init.code).toBe(1);
    expect(init.stderr).toContain('--insecure');
  });

  it('builds on a base image from the registry; gatehouse-init then downloads only the plugin layer, and the image extracts itself with --rootfs', async () => {
    // A base made with umoci, with a large incompressible layer standing in for the Node runtime.
    const src = join(work, 'base-src');
    await mkdir(join(src, 'app'), { recursive: true });
    await writeFile(join(src, 'app/runtime.bin'), randomBytes(300_000));
    const base = join(work, 'base-image');
    for (const args of [
      ['init', '--layout', base],
      ['new', '--image', `${base}:1`],
      ['insert', '--rootless', '--image', `${base}:1`, join(src, 'app'), '/app'],
      ['config', '--image', `${base}:1`, '--config.entrypoint', 'gatehouse-init'],
    ]) {
      const result = await runTool('umoci', args);
      expect(result.code, result.stderr).toBe(0);
    }
    const baseRef = `${registry.host}/gatehouse/init:1`;
    expect((await runTool('skopeo', ['copy', '--dest-tls-verify=false', `oci:${base}:1`, `docker://${baseRef}`])).code).toBe(0);

    const { layout } = await buildLayout('with-base', { 'based.js': 'var based = 1;\n' }, ['--base', baseRef, '--insecure']);
    const ref = `${registry.host}/plugins/based:${VERSION}`;
    const push = await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure'], { env: cleanEnv() });
    expect(push.code, push.stderr).toBe(0);
    // The base layer lives in another repository, so it is uploaded here too (no cross-repository mount).
    expect(push.stdout).toMatch(/3 blob\(s\) uploaded, 0 already present/);
    const inspect = JSON.parse((await runTool('skopeo', ['inspect', '--tls-verify=false', `docker://${ref}`])).stdout) as { Layers: string[] };
    expect(inspect.Layers).toHaveLength(2);

    const dest = join(work, 'dest-based');
    const init = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', dest, '--max-layer-bytes', '100000'], { env: cleanEnv() });
    expect(init.stderr).toBe('');
    expect(await readdir(dest)).toEqual(['based.js']);

    const copied = join(work, 'based-copy');
    expect((await runTool('skopeo', ['copy', '--src-tls-verify=false', `docker://${ref}`, `oci:${copied}:${VERSION}`])).code).toBe(0);
    const bundle = join(work, 'based-bundle');
    expect((await runTool('umoci', ['unpack', '--rootless', '--image', `${copied}:${VERSION}`, bundle])).code).toBe(0);
    const config = JSON.parse(await readFile(join(bundle, 'config.json'), 'utf8')) as { process: { args: string[] } };
    expect(config.process.args).toEqual(['gatehouse-init', '--rootfs', '/', '--tag', VERSION]);
    const self = join(work, 'dest-self');
    const selfInit = await runCli('gatehouse-init', ['--rootfs', join(bundle, 'rootfs'), '--tag', VERSION, '--dest', self], { env: cleanEnv() });
    expect(selfInit.stderr).toBe('');
    expect(await readdir(self)).toEqual(['based.js']);
  });
});

/** A two-platform base image (an OCI index) in a layout, tagged `base`. */
async function multiPlatformBase(dir: string): Promise<void> {
  const layout = await OciLayout.create(dir);
  const children: Descriptor[] = [];
  for (const architecture of ['amd64', 'arm64']) {
    const layer = buildLayer([{ path: 'app/arch.txt', type: 'File', data: Buffer.from(architecture) }]);
    await layout.writeBlob(layer.blob);
    const config = encodeJson({ architecture, os: 'linux', config: { Entrypoint: ['gatehouse-init'] }, rootfs: { type: 'layers', diff_ids: [layer.diffId] } });
    await layout.writeBlob(config);
    const manifest = encodeJson({
      schemaVersion: 2,
      mediaType: MediaTypes.OCI_MANIFEST,
      config: { mediaType: MediaTypes.OCI_CONFIG, digest: sha256(config), size: config.byteLength },
      layers: [{ mediaType: MediaTypes.OCI_LAYER_GZIP, digest: layer.digest, size: layer.blob.byteLength }],
    });
    children.push({ mediaType: MediaTypes.OCI_MANIFEST, digest: await layout.writeBlob(manifest), size: manifest.byteLength, platform: { os: 'linux', architecture } });
  }
  const index = encodeJson({ schemaVersion: 2, mediaType: MediaTypes.OCI_INDEX, manifests: children });
  await layout.tag({ mediaType: MediaTypes.OCI_INDEX, digest: await layout.writeBlob(index), size: index.byteLength }, 'base');
}

describe('multi-platform plugin images', () => {
  let registry: TestRegistry;
  beforeAll(async () => {
    registry = await startRegistry();
  });
  afterAll(async () => {
    await registry?.close();
  });

  it('builds an index on a multi-platform base, pushes it with its children, and pulls the wanted platform', async () => {
    const base = join(work, 'multi-base');
    await multiPlatformBase(base);
    const { layout, digest } = await buildLayout('multi', { 'multi.js': 'var multi = 1;\n' }, ['--base', `oci:${base}:base`]);
    const ref = `${registry.host}/plugins/multi:${VERSION}`;
    const push = await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure'], { env: cleanEnv() });
    expect(push.code, push.stderr).toBe(0);
    expect(push.stdout).toContain(`@${digest}`);
    const raw = JSON.parse((await runTool('skopeo', ['inspect', '--raw', '--tls-verify=false', `docker://${ref}`])).stdout) as { mediaType: string; manifests: { platform: { architecture: string } }[] };
    expect(raw.mediaType).toBe(MediaTypes.OCI_INDEX);
    expect(raw.manifests.map((m) => m.platform.architecture)).toEqual(['amd64', 'arm64']);
    const arm = JSON.parse((await runTool('skopeo', ['inspect', '--override-arch', 'arm64', '--tls-verify=false', `docker://${ref}`])).stdout) as { Architecture: string; Layers: string[] };
    expect(arm.Architecture).toBe('arm64');
    expect(arm.Layers).toHaveLength(2);
    for (const platform of ['linux/amd64', 'linux/arm64']) {
      const dest = join(work, `dest-multi-${platform.replace('/', '-')}`);
      const init = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', dest, '--platform', platform], { env: cleanEnv() });
      expect(init.stderr).toBe('');
      expect(await readdir(dest)).toEqual(['multi.js']);
    }
    const none = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', join(work, 'dest-multi-s390x'), '--platform', 'linux/s390x'], { env: cleanEnv() });
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no image for linux/s390x; it has linux/amd64, linux/arm64');
  });
});

describe('push and gatehouse-init with registry credentials', () => {
  let basic: TestRegistry;
  let tokens: TokenServer;
  let bearer: TestRegistry;
  beforeAll(async () => {
    basic = await startRegistry({ kind: 'htpasswd', users: { ci: 's3cret' } });
    tokens = await startTokenServer({ ci: { password: 't0ken', actions: ['pull', 'push'] } });
    bearer = await startRegistry({ kind: 'token', realm: tokens.realm, service: tokens.service, issuer: tokens.issuer, certFile: tokens.certFile });
  });
  afterAll(async () => {
    await basic?.close();
    await bearer?.close();
    await tokens?.close();
  });

  it('Basic auth: environment credentials push, a Docker config file pulls, no credentials fail clearly', async () => {
    const { layout } = await buildLayout('basic', { 'basic.js': 'var basic = 1;\n' });
    const ref = `${basic.host}/plugins/basic:${VERSION}`;
    const anonymous = await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure'], { env: cleanEnv() });
    expect(anonymous.code).toBe(1);
    expect(anonymous.stderr).toContain('requires credentials');
    const push = await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure'], { env: cleanEnv({ GATEHOUSE_REGISTRY_USERNAME: 'ci', GATEHOUSE_REGISTRY_PASSWORD: 's3cret' }) });
    expect(push.code, push.stderr).toBe(0);

    const dockerConfig = join(work, 'docker-config');
    await mkdir(dockerConfig, { recursive: true });
    await writeFile(join(dockerConfig, 'config.json'), JSON.stringify({ auths: { [basic.host]: { auth: Buffer.from('ci:s3cret').toString('base64') } } }));
    const dest = join(work, 'dest-basic');
    const init = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', dest], { env: cleanEnv({ DOCKER_CONFIG: dockerConfig }) });
    expect(init.stderr).toBe('');
    expect(await readdir(dest)).toEqual(['basic.js']);
    const wrong = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', dest], { env: cleanEnv({ GATEHOUSE_REGISTRY_USERNAME: 'ci', GATEHOUSE_REGISTRY_PASSWORD: 'nope' }) });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('[GH_OCI_UNAUTHORIZED]');
  });

  it('Bearer tokens: push and pull through the token server', async () => {
    const { layout } = await buildLayout('bearer', { 'bearer.js': 'var bearer = 1;\n' });
    const ref = `${bearer.host}/plugins/bearer:${VERSION}`;
    const creds = { GATEHOUSE_REGISTRY_USERNAME: 'ci', GATEHOUSE_REGISTRY_PASSWORD: 't0ken' };
    const push = await runCli('gatehouse-plugin', ['image', 'push', '--from', layout, ref, '--insecure'], { env: cleanEnv(creds) });
    expect(push.code, push.stderr).toBe(0);
    const dest = join(work, 'dest-bearer');
    const init = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', dest], { env: cleanEnv(creds) });
    expect(init.stderr).toBe('');
    expect(await readdir(dest)).toEqual(['bearer.js']);
    expect(tokens.requests.some((r) => r.user === 'ci' && r.scope.includes('repository:plugins/bearer:pull,push'))).toBe(true);
    expect(tokens.requests.some((r) => r.user === 'ci' && r.scope.includes('repository:plugins/bearer:pull'))).toBe(true);
    const anonymous = await runCli('gatehouse-init', ['--image', ref, '--insecure', '--dest', join(work, 'dest-bearer-anon')], { env: cleanEnv() });
    expect(anonymous.code).toBe(1);
    expect(anonymous.stderr).toContain('[GH_OCI_UNAUTHORIZED]');
  });
});
