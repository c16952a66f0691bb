import { lstat, readdir, readFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { parsePluginFile, PluginFileError } from '../build/metadata.ts';
import type { Digest } from './digest.ts';
import { OciCodes, OciError } from './errors.ts';
import type { ImageStore } from './image-store.ts';
import { OciLayout } from './layout.ts';
import { buildLayer, type Layer, type TarEntry } from './layer.ts';
import { encodeJson, type Descriptor, type ImageConfig, type ImageIndex, type ImageManifest, type Platform } from './manifest.ts';
import { isDockerMediaType, MediaTypes } from './media-types.ts';
import { isValidTag } from './reference.ts';
import { resolveImage, type ResolvedImage } from './resolve.ts';

/** The directory inside the image that holds compiled plugins (SPEC 6). */
export const PLUGIN_DIR = 'compiled-auth-plugins';

/** Labels (config) and annotations (OCI manifest) on plugin images. */
export const Labels = {
  /** Comma-separated plugin names (file names without `.js`). */
  PLUGINS: 'dev.gatehouse.plugins',
  /** The gateway version the plugins were built for; equals the tag. */
  GATEWAY_VERSION: 'dev.gatehouse.gateway-version',
  /** Digest of the layer that holds the plugins, so pullers can skip base layers. */
  PLUGIN_LAYER: 'dev.gatehouse.plugin-layer',
  VERSION: 'org.opencontainers.image.version',
} as const;

export interface BuildImageOptions {
  /** Directory of compiled plugin files (the output of `gatehouse-plugin build`). */
  from: string;
  /** The image tag: must equal `gatewayVersion`. */
  tag: string;
  /** OCI image layout directory to write (created if missing; other tags in it are kept). */
  output: string;
  gatewayVersion: string;
  /** A base image to put the plugin layer on (e.g. the init-container image). */
  base?: { store: ImageStore; reference: string; display: string };
  /** Platform recorded for an image without base (default linux/amd64: the files are platform-neutral). */
  platform?: Platform;
  /** Layer mtime; default the epoch, or `SOURCE_DATE_EPOCH` when set. */
  mtime?: Date;
}

export interface BuiltImage {
  /** Digest of what the tag names: a manifest, or an index for a multi-platform base. */
  digest: Digest;
  mediaType: string;
  plugins: string[];
  layerDigest: Digest;
}

const MAX_PLUGIN_FILE = 16 * 1024 * 1024;

/**
 * Builds a plugin image into an OCI layout: one layer holding `compiled-auth-plugins/*`,
 * labelled with the plugin names and the gateway version. The output is reproducible: the same
 * files (and base) give the same digest. With a base, the layer goes on top of every platform
 * image of the base, in the base's media type family (OCI or Docker).
 */
export async function buildPluginImage(options: BuildImageOptions): Promise<BuiltImage> {
  if (!isValidTag(options.tag)) throw new OciError(OciCodes.BAD_INPUT, `--tag ${JSON.stringify(options.tag)} is not a valid image tag`);
  if (options.tag !== options.gatewayVersion) {
    throw new OciError(OciCodes.TAG_MISMATCH, `--tag ${options.tag} must equal the gateway version ${options.gatewayVersion}: plugin images are tagged with the gateway version they were built for`);
  }
  const files = await collectPluginFiles(options.from);
  const plugins = files.filter((f) => f.name.endsWith('.js') && !f.name.includes('/')).map((f) => pluginName(f, options));
  if (plugins.length === 0) throw new OciError(OciCodes.BAD_INPUT, `${options.from} holds no compiled plugin (*.js); run gatehouse-plugin build first`);
  const mtime = options.mtime ?? sourceDateEpoch();
  const layer = buildLayer(
    [{ path: `${PLUGIN_DIR}/`, type: 'Directory' }, ...files.map((f): TarEntry => ({ path: `${PLUGIN_DIR}/${f.name}`, type: 'File', mode: 0o644, data: f.data }))],
    mtime,
  );
  const labels: Record<string, string> = {
    [Labels.PLUGINS]: plugins.join(','),
    [Labels.GATEWAY_VERSION]: options.gatewayVersion,
    [Labels.PLUGIN_LAYER]: layer.digest,
    [Labels.VERSION]: options.tag,
  };
  const layout = await OciLayout.create(options.output);
  await layout.writeBlob(layer.blob);

  let root: Descriptor;
  if (!options.base) {
    const platform = options.platform ?? { os: 'linux', architecture: 'amd64' };
    const config: ImageConfig = {
      architecture: platform.architecture,
      os: platform.os,
      ...(platform.variant ? { variant: platform.variant } : {}),
      config: { Labels: labels },
      rootfs: { type: 'layers', diff_ids: [layer.diffId] },
      history: [{ created_by: 'gatehouse-plugin image build', comment: `plugins: ${plugins.join(', ')}` }],
    };
    root = await writeManifest(layout, config, [], layer, labels, false);
  } else {
    const resolved = await resolveImage(options.base.store, options.base.reference, 'all');
    const docker = isDockerMediaType(resolved.mediaType);
    const children: Descriptor[] = [];
    for (const image of resolved.images) {
      await copyLayers(options.base.store, image, layout, options.base.display);
      const config = extendConfig(image.config, layer, labels, options.tag, plugins);
      const child = await writeManifest(layout, config, image.manifest.layers, layer, labels, isDockerMediaType(image.mediaType));
      children.push(image.descriptor.platform ? { ...child, platform: image.descriptor.platform } : child);
    }
    if (resolved.index) {
      const index: ImageIndex = {
        schemaVersion: 2,
        mediaType: docker ? MediaTypes.DOCKER_MANIFEST_LIST : MediaTypes.OCI_INDEX,
        manifests: children,
        ...(docker ? {} : { annotations: manifestAnnotations(labels) }),
      };
      const bytes = encodeJson(index);
      root = { mediaType: index.mediaType!, digest: await layout.writeBlob(bytes), size: bytes.byteLength };
    } else {
      root = children[0]!;
      delete root.platform;
    }
  }
  await layout.tag(root, options.tag);
  return { digest: root.digest, mediaType: root.mediaType, plugins, layerDigest: layer.digest };
}

const METADATA_PREFIX = '// @gatehouse-plugin ';

/**
 * The plugin name of a top-level `.js` file: from its compiled-plugin metadata when it has some
 * (whose gateway version must then equal the tag), else the file name without `.js`.
 */
function pluginName(file: { name: string; data: Buffer }, options: BuildImageOptions): string {
  const text = file.data.toString('utf8');
  if (!text.startsWith(METADATA_PREFIX)) return file.name.slice(0, -3);
  let metadata;
  try {
    ({ metadata } = parsePluginFile(text));
  } catch (error) {
    if (error instanceof PluginFileError) throw new OciError(OciCodes.BAD_INPUT, `${join(options.from, file.name)}: ${error.message}`);
    throw error;
  }
  if (metadata.gatewayVersion !== options.tag) {
    throw new OciError(OciCodes.TAG_MISMATCH, `${join(options.from, file.name)} was built for gateway ${metadata.gatewayVersion}, not ${options.tag}; rebuild it with the gatehouse-plugin of gateway ${options.tag}`);
  }
  return metadata.name;
}

/** The files to put in the layer: regular files below `dir`, sorted by path; links and specials are refused. */
async function collectPluginFiles(dir: string): Promise<{ name: string; data: Buffer }[]> {
  const top = await lstat(dir).catch(() => undefined);
  if (!top?.isDirectory()) throw new OciError(OciCodes.BAD_INPUT, `--from ${dir} is not a directory; point it at the compiled plugins (default output of gatehouse-plugin build: compiled-auth-plugins)`);
  const out: { name: string; data: Buffer }[] = [];
  async function walk(current: string): Promise<void> {
    const entries = (await readdir(current, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      const path = join(current, entry.name);
      const name = relative(dir, path).split(sep).join('/');
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile()) {
        const info = await lstat(path);
        if (info.size > MAX_PLUGIN_FILE) throw new OciError(OciCodes.BAD_INPUT, `${path}: ${info.size} bytes is over the ${MAX_PLUGIN_FILE}-byte limit gatehouse-init applies to plugin files`);
        out.push({ name, data: await readFile(path) });
      } else {
        throw new OciError(OciCodes.BAD_INPUT, `${path}: only regular files can go into a plugin image (found a ${entry.isSymbolicLink() ? 'symbolic link' : 'special file'})`);
      }
    }
  }
  await walk(dir);
  // Sorted by full path so that nested names interleave the same way on every machine.
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

async function copyLayers(store: ImageStore, image: ResolvedImage, layout: OciLayout, display: string): Promise<void> {
  for (const [i, layer] of image.manifest.layers.entries()) {
    if (await layout.hasBlob(layer.digest)) continue;
    await layout.writeBlobStream(store.openBlob(layer, `layer ${i} of base ${display}`), layer, `layer ${i} of base ${display}`);
  }
}

/** The base config with the plugin layer appended, labels merged, and the command set to self-extract. */
function extendConfig(base: ImageConfig, layer: Layer, labels: Record<string, string>, tag: string, plugins: string[]): ImageConfig {
  const inner = base.config ?? {};
  return {
    ...base,
    config: {
      ...inner,
      Labels: { ...(inner.Labels ?? {}), ...labels },
      // Run as its own init container: the base's entrypoint is gatehouse-init.
      Cmd: ['--rootfs', '/', '--tag', tag],
    },
    rootfs: { type: 'layers', diff_ids: [...base.rootfs.diff_ids, layer.diffId] },
    history: [...(base.history ?? []), { created_by: 'gatehouse-plugin image build', comment: `plugins: ${plugins.join(', ')}` }],
  };
}

async function writeManifest(layout: OciLayout, config: ImageConfig, baseLayers: Descriptor[], layer: Layer, labels: Record<string, string>, docker: boolean): Promise<Descriptor> {
  const configBytes = encodeJson(config);
  const configDigest = await layout.writeBlob(configBytes);
  const manifest: ImageManifest = {
    schemaVersion: 2,
    mediaType: docker ? MediaTypes.DOCKER_MANIFEST : MediaTypes.OCI_MANIFEST,
    config: { mediaType: docker ? MediaTypes.DOCKER_CONFIG : MediaTypes.OCI_CONFIG, digest: configDigest, size: configBytes.byteLength },
    layers: [...baseLayers, { mediaType: docker ? MediaTypes.DOCKER_LAYER_GZIP : MediaTypes.OCI_LAYER_GZIP, digest: layer.digest, size: layer.blob.byteLength }],
    ...(docker ? {} : { annotations: manifestAnnotations(labels) }),
  };
  const bytes = encodeJson(manifest);
  return { mediaType: manifest.mediaType!, digest: await layout.writeBlob(bytes), size: bytes.byteLength };
}

function manifestAnnotations(labels: Record<string, string>): Record<string, string> {
  return { [Labels.VERSION]: labels[Labels.VERSION]!, [Labels.PLUGINS]: labels[Labels.PLUGINS]!, [Labels.GATEWAY_VERSION]: labels[Labels.GATEWAY_VERSION]! };
}

function sourceDateEpoch(): Date {
  const value = process.env.SOURCE_DATE_EPOCH;
  if (value === undefined || value === '') return new Date(0);
  if (!/^[0-9]+$/.test(value)) throw new OciError(OciCodes.BAD_INPUT, `SOURCE_DATE_EPOCH must be whole seconds since 1970 (got ${JSON.stringify(value)})`);
  return new Date(Number(value) * 1000);
}
