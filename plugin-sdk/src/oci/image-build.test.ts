import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sha256 } from './digest.ts';
import { OciCodes } from './errors.ts';
import { buildPluginImage, Labels } from './image-build.ts';
import { layoutStore } from './image-store.ts';
import { buildLayer } from './layer.ts';
import { OciLayout } from './layout.ts';
import { encodeJson, parseImageConfig, parseManifest, type Descriptor, type ImageManifest } from './manifest.ts';
import { MediaTypes } from './media-types.ts';
import { resolveImage } from './resolve.ts';

const VERSION = '3.2.1';

/** Writes a base image (one layer per platform) into a layout: a manifest, or an index when several platforms. */
async function writeBase(dir: string, platforms: string[], docker = false): Promise<OciLayout> {
  const layout = await OciLayout.create(dir);
  const children: Descriptor[] = [];
  for (const platform of platforms) {
    const [os, architecture] = platform.split('/') as [string, string];
    const layer = buildLayer([{ path: 'app/gatehouse-init.mjs', type: 'File', data: Buffer.from(`// init for ${platform}`) }]);
    await layout.writeBlob(layer.blob);
    const config = encodeJson({ architecture, os, config: { Entrypoint: ['node', '/app/gatehouse-init.mjs'], Labels: { base: 'yes' } }, rootfs: { type: 'layers', diff_ids: [layer.diffId] } });
    await layout.writeBlob(config);
    const manifest = encodeJson({
      schemaVersion: 2,
      mediaType: docker ? MediaTypes.DOCKER_MANIFEST : MediaTypes.OCI_MANIFEST,
      config: { mediaType: docker ? MediaTypes.DOCKER_CONFIG : MediaTypes.OCI_CONFIG, digest: sha256(config), size: config.byteLength },
      layers: [{ mediaType: docker ? MediaTypes.DOCKER_LAYER_GZIP : MediaTypes.OCI_LAYER_GZIP, digest: layer.digest, size: layer.blob.byteLength }],
    });
    children.push({ mediaType: docker ? MediaTypes.DOCKER_MANIFEST : MediaTypes.OCI_MANIFEST, digest: await layout.writeBlob(manifest), size: manifest.byteLength, platform: { os, architecture } });
  }
  if (children.length === 1) {
    const { platform: _, ...only } = children[0]!;
    await layout.tag(only, 'base');
  } else {
    const index = encodeJson({ schemaVersion: 2, mediaType: docker ? MediaTypes.DOCKER_MANIFEST_LIST : MediaTypes.OCI_INDEX, manifests: children });
    await layout.tag({ mediaType: docker ? MediaTypes.DOCKER_MANIFEST_LIST : MediaTypes.OCI_INDEX, digest: await layout.writeBlob(index), size: index.byteLength }, 'base');
  }
  return layout;
}

describe('buildPluginImage', () => {
  let dir: string;
  let plugins: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gh-build-'));
    plugins = join(dir, 'compiled-auth-plugins');
    await mkdir(plugins);
    await writeFile(join(plugins, 'RequiredHeader.js'), 'var RequiredHeader = 1;');
    await writeFile(join(plugins, 'Other.js'), 'var Other = 2;');
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is reproducible: the same input gives the same manifest digest, in any output directory', async () => {
    const a = await buildPluginImage({ from: plugins, tag: VERSION, output: join(dir, 'a'), gatewayVersion: VERSION });
    const b = await buildPluginImage({ from: plugins, tag: VERSION, output: join(dir, 'b'), gatewayVersion: VERSION });
    const again = await buildPluginImage({ from: plugins, tag: VERSION, output: join(dir, 'a'), gatewayVersion: VERSION });
    expect(b.digest).toBe(a.digest);
    expect(again.digest).toBe(a.digest);
    expect(await readFile(join(dir, 'a/index.json'), 'utf8')).toBe(await readFile(join(dir, 'b/index.json'), 'utf8'));
    await writeFile(join(plugins, 'Other.js'), 'var Other = 3;');
    expect((await buildPluginImage({ from: plugins, tag: VERSION, output: join(dir, 'c'), gatewayVersion: VERSION })).digest).not.toBe(a.digest);
  });

  it('labels the image with plugin names, gateway version and its plugin layer', async () => {
    const built = await buildPluginImage({ from: plugins, tag: VERSION, output: join(dir, 'out'), gatewayVersion: VERSION });
    expect(built.plugins).toEqual(['Other', 'RequiredHeader']);
    const root = await resolveImage(layoutStore(await OciLayout.open(join(dir, 'out'))), VERSION, 'all');
    const [image] = root.images;
    expect(image!.mediaType).toBe(MediaTypes.OCI_MANIFEST);
    expect(image!.config.config?.Labels).toEqual({
      [Labels.PLUGINS]: 'Other,RequiredHeader',
      [Labels.GATEWAY_VERSION]: VERSION,
      [Labels.PLUGIN_LAYER]: built.layerDigest,
      [Labels.VERSION]: VERSION,
    });
    expect(image!.config.created).toBeUndefined();
    expect(image!.manifest.layers.map((l) => l.digest)).toEqual([built.layerDigest]);
    expect(image!.manifest.annotations?.[Labels.PLUGINS]).toBe('Other,RequiredHeader');
  });

  it('refuses a tag other than the gateway version', async () => {
    await expect(buildPluginImage({ from: plugins, tag: '1.0.0', output: join(dir, 'out'), gatewayVersion: VERSION })).rejects.toMatchObject({
      code: OciCodes.TAG_MISMATCH,
      message: expect.stringContaining(`must equal the gateway version ${VERSION}`),
    });
  });

  it('names plugins from compiled-plugin metadata and refuses files built for another gateway version', async () => {
    const { formatPluginFile } = await import('../build/metadata.ts');
    const compiled = join(dir, 'compiled');
    await mkdir(compiled);
    const file = (gatewayVersion: string) => formatPluginFile('var __gatehousePlugin = {};', { name: 'Fancy', exports: ['Fancy'], gatewayVersion, sdkVersion: '0.0.0' }).text;
    await writeFile(join(compiled, 'fancy-file.js'), file(VERSION));
    expect((await buildPluginImage({ from: compiled, tag: VERSION, output: join(dir, 'out'), gatewayVersion: VERSION })).plugins).toEqual(['Fancy']);
    await writeFile(join(compiled, 'fancy-file.js'), file('0.0.1'));
    await expect(buildPluginImage({ from: compiled, tag: VERSION, output: join(dir, 'out'), gatewayVersion: VERSION })).rejects.toMatchObject({
      code: OciCodes.TAG_MISMATCH,
      message: expect.stringContaining(`was built for gateway 0.0.1, not ${VERSION}`),
    });
    await writeFile(join(compiled, 'fancy-file.js'), `${file(VERSION)}tampered`);
    await expect(buildPluginImage({ from: compiled, tag: VERSION, output: join(dir, 'out'), gatewayVersion: VERSION })).rejects.toMatchObject({ code: OciCodes.BAD_INPUT, message: expect.stringContaining('content hash') });
  });

  it('refuses input that is missing, empty or holds links', async () => {
    await expect(buildPluginImage({ from: join(dir, 'nope'), tag: VERSION, output: join(dir, 'out'), gatewayVersion: VERSION })).rejects.toMatchObject({ code: OciCodes.BAD_INPUT });
    await mkdir(join(dir, 'empty'));
    await expect(buildPluginImage({ from: join(dir, 'empty'), tag: VERSION, output: join(dir, 'out'), gatewayVersion: VERSION })).rejects.toMatchObject({ code: OciCodes.BAD_INPUT, message: expect.stringContaining('no compiled plugin') });
    await symlink('/etc/passwd', join(plugins, 'evil.js'));
    await expect(buildPluginImage({ from: plugins, tag: VERSION, output: join(dir, 'out'), gatewayVersion: VERSION })).rejects.toMatchObject({ code: OciCodes.BAD_INPUT, message: expect.stringContaining('symbolic link') });
  });

  it('puts the plugin layer on top of an OCI base image and makes it run gatehouse-init on itself', async () => {
    const base = await writeBase(join(dir, 'base'), ['linux/amd64']);
    const built = await buildPluginImage({ from: plugins, tag: VERSION, output: join(dir, 'out'), gatewayVersion: VERSION, base: { store: layoutStore(base), reference: 'base', display: 'oci:base' } });
    const out = await OciLayout.open(join(dir, 'out'));
    const [image] = (await resolveImage(layoutStore(out), VERSION, 'all')).images;
    const baseImage = (await resolveImage(layoutStore(base), 'base', 'all')).images[0]!;
    expect(image!.manifest.layers.map((l) => l.digest)).toEqual([...baseImage.manifest.layers.map((l) => l.digest), built.layerDigest]);
    expect(await out.hasBlob(baseImage.manifest.layers[0]!.digest)).toBe(true);
    expect(image!.config.rootfs.diff_ids).toHaveLength(2);
    expect(image!.config.config?.Entrypoint).toEqual(['node', '/app/gatehouse-init.mjs']);
    expect(image!.config.config?.Cmd).toEqual(['--rootfs', '/', '--tag', VERSION]);
    expect(image!.config.config?.Labels).toMatchObject({ base: 'yes', [Labels.GATEWAY_VERSION]: VERSION });
  });

  it('keeps the Docker media types of a Docker base', async () => {
    const base = await writeBase(join(dir, 'base'), ['linux/amd64'], true);
    const built = await buildPluginImage({ from: plugins, tag: VERSION, output: join(dir, 'out'), gatewayVersion: VERSION, base: { store: layoutStore(base), reference: 'base', display: 'oci:base' } });
    expect(built.mediaType).toBe(MediaTypes.DOCKER_MANIFEST);
    const out = await OciLayout.open(join(dir, 'out'));
    const bytes = await out.readBlob(await out.resolve(VERSION), 'manifest');
    const parsed = parseManifest(bytes, undefined, 'out');
    const manifest = (parsed as { manifest: ImageManifest }).manifest;
    expect(manifest.config.mediaType).toBe(MediaTypes.DOCKER_CONFIG);
    expect(manifest.layers.every((l) => l.mediaType === MediaTypes.DOCKER_LAYER_GZIP)).toBe(true);
    expect(parseImageConfig(await out.readBlob(manifest.config, 'config'), 'config').config?.Cmd).toContain('--rootfs');
  });

  it('builds one plugin image per platform of a multi-platform base', async () => {
    const base = await writeBase(join(dir, 'base'), ['linux/amd64', 'linux/arm64']);
    const built = await buildPluginImage({ from: plugins, tag: VERSION, output: join(dir, 'out'), gatewayVersion: VERSION, base: { store: layoutStore(base), reference: 'base', display: 'oci:base' } });
    expect(built.mediaType).toBe(MediaTypes.OCI_INDEX);
    const root = await resolveImage(layoutStore(await OciLayout.open(join(dir, 'out'))), VERSION, 'all');
    expect(root.index?.manifests.map((m) => `${m.platform?.os}/${m.platform?.architecture}`)).toEqual(['linux/amd64', 'linux/arm64']);
    expect(root.images.map((i) => i.config.architecture)).toEqual(['amd64', 'arm64']);
    expect(root.images.every((i) => i.manifest.layers.at(-1)!.digest === built.layerDigest)).toBe(true);
  });
});
