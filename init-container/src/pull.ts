import { lstat, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isLayoutArchive, Labels, layerCompression, OciCodes, OciError, OciLayout, openImage, REF_NAME, unpackLayout, resolveImage, type AccessOptions, type OpenedImage, type Platform } from '@gatehouse/plugin-sdk/oci';
import { InitCodes, InitError } from './errors.ts';
import { applyLayer, PLUGIN_DIR, type PluginFiles } from './extract.ts';
import type { Limits } from './limits.ts';

/** Plugin files read from one source, with what to call it in messages. */
export interface PulledPlugins {
  source: string;
  /** Digest of the manifest the files came from (absent for --rootfs). */
  digest?: string;
  files: PluginFiles;
}

export interface PullOptions {
  gatewayVersion: string;
  limits: Limits;
  platform: Platform;
  access: AccessOptions;
}

/** Refuses a tag that is not the gateway version, naming both (SPEC 6). */
export function checkTag(tag: string | undefined, gatewayVersion: string, source: string): void {
  if (tag === undefined) {
    throw new InitError(InitCodes.TAG_MISMATCH, `${source} has no tag; plugin images must be tagged with the gateway version (${gatewayVersion}), e.g. ${source.split('@')[0]}:${gatewayVersion}`);
  }
  if (tag !== gatewayVersion) {
    throw new InitError(InitCodes.TAG_MISMATCH, `${source}: image tag ${tag} does not match gateway version ${gatewayVersion}; rebuild the plugin for ${gatewayVersion} and push it tagged ${gatewayVersion}`);
  }
}

/**
 * Pulls a plugin image from a registry reference (`--image`): checks the tag, resolves the
 * manifest for `platform`, verifies every manifest, config and layer digest, and gathers the
 * files under compiled-auth-plugins/. Images built by gatehouse-plugin name their plugin layer
 * in a label, so base-image layers are not downloaded; other images are read layer by layer.
 */
export async function pullImage(name: string, options: PullOptions): Promise<PulledPlugins> {
  const opened = await openImage(name, options.access);
  try {
    checkTag(opened.tag, options.gatewayVersion, name);
    return await readImage(opened, options);
  } finally {
    await opened.store.close();
  }
}

/**
 * Reads a local OCI layout (`--layout DIR[:TAG]`, or a layout tarball `FILE.tar[:TAG]`): the
 * image named TAG, which must be the gateway version; without TAG, the image named with the
 * gateway version.
 */
export async function readLayout(value: string, options: PullOptions): Promise<PulledPlugins> {
  const colon = value.lastIndexOf(':');
  const explicit = colon > 0 && /^[\w][\w.-]{0,127}$/.test(value.slice(colon + 1)) ? value.slice(colon + 1) : undefined;
  const given = explicit === undefined ? value : value.slice(0, colon);
  if (explicit !== undefined) checkTag(explicit, options.gatewayVersion, `oci:${value}`);
  const dir = isLayoutArchive(given) ? await unpackLayout(given) : given;
  try {
    if (explicit === undefined) {
      const index = await (await OciLayout.open(dir)).readIndex();
      const names = index.manifests.map((d) => d.annotations?.[REF_NAME]);
      if (!names.includes(options.gatewayVersion)) {
        const named = names.filter((n): n is string => n !== undefined);
        if (named.length === 1) checkTag(named[0], options.gatewayVersion, `oci:${given}`);
        throw new InitError(InitCodes.TAG_MISMATCH, `oci:${given} has no image tagged with gateway version ${options.gatewayVersion} (it has ${named.length ? named.join(', ') : 'no tagged images'}); rebuild the plugin image with --tag ${options.gatewayVersion}`);
      }
    }
    const opened = await openImage(`oci:${dir}:${explicit ?? options.gatewayVersion}`, options.access);
    const pulled = await readImage(opened, options);
    return { ...pulled, source: `oci:${given}:${explicit ?? options.gatewayVersion}` };
  } finally {
    if (dir !== given) await rm(dir, { recursive: true, force: true });
  }
}

async function readImage(opened: OpenedImage, options: PullOptions): Promise<PulledPlugins> {
  const root = await resolveImage(opened.store, opened.reference, options.platform);
  const image = root.images[0]!;
  const where = `${opened.display}@${root.digest}`;
  const labels = image.config.config?.Labels ?? {};
  const labelled = labels[Labels.GATEWAY_VERSION];
  if (labelled !== undefined && labelled !== options.gatewayVersion) {
    throw new InitError(InitCodes.TAG_MISMATCH, `${where}: the image is labelled for gateway version ${labelled}, not ${options.gatewayVersion}; it was re-tagged, rebuild it for ${options.gatewayVersion}`);
  }
  let layers = image.manifest.layers;
  const pluginLayer = labels[Labels.PLUGIN_LAYER];
  if (pluginLayer !== undefined) {
    layers = layers.filter((l) => l.digest === pluginLayer);
    if (layers.length === 0) throw new OciError(OciCodes.BAD_MANIFEST, `${where}: label ${Labels.PLUGIN_LAYER} names layer ${pluginLayer}, which the manifest does not have`);
  }
  const files: PluginFiles = new Map();
  for (const layer of layers) {
    const index = image.manifest.layers.indexOf(layer);
    const what = `${where}: layer ${index} (${layer.digest})`;
    if (layerCompression(layer.mediaType) === undefined) {
      throw new OciError(OciCodes.UNSUPPORTED_MEDIA_TYPE, `${what}: media type ${layer.mediaType} is not a filesystem layer (tar, tar+gzip or tar+zstd)`);
    }
    if (layer.size > options.limits.maxLayerBytes) {
      throw new InitError(InitCodes.TOO_LARGE, `${what}: ${layer.size} bytes is over the per-layer limit of ${options.limits.maxLayerBytes} (raise --max-layer-bytes if this is expected)`);
    }
    await applyLayer(opened.store.openBlob(layer, what, options.limits.maxLayerBytes), files, what, options.limits);
  }
  if (files.size === 0) throw new InitError(InitCodes.NO_PLUGINS, `${where} holds no files under ${PLUGIN_DIR}/; is it a plugin image? (build one with gatehouse-plugin image build)`);
  return { source: opened.display, digest: root.digest, files };
}

/**
 * Reads plugins already on disk (`--rootfs DIR`): an image run as its own init container
 * finds its files at DIR/compiled-auth-plugins. Only regular files are taken; a link or
 * special file there refuses the run.
 */
export async function readRootfs(rootfs: string, tag: string | undefined, options: PullOptions): Promise<PulledPlugins> {
  const source = `${join(rootfs, PLUGIN_DIR)}`;
  checkTag(tag, options.gatewayVersion, `--rootfs ${rootfs} (--tag)`);
  const files: PluginFiles = new Map();
  const top = await lstat(source).catch(() => undefined);
  if (!top) throw new InitError(InitCodes.NO_PLUGINS, `${source} does not exist; is this a plugin image built with --base?`);
  if (!top.isDirectory()) throw new InitError(InitCodes.UNSAFE_ENTRY, `${source} is not a directory (a ${top.isSymbolicLink() ? 'symbolic link' : 'special file'}); refusing`);
  async function walk(dir: string, prefix: string): Promise<void> {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const relative = prefix ? `${prefix}/${entry.name}` : entry.name;
      if (entry.isDirectory()) await walk(path, relative);
      else if (entry.isFile()) {
        const info = await lstat(path);
        if (info.size > options.limits.maxFileBytes) throw new InitError(InitCodes.TOO_LARGE, `${path} is ${info.size} bytes, over the per-file limit of ${options.limits.maxFileBytes}`);
        files.set(relative, await readFile(path));
      } else {
        throw new InitError(InitCodes.UNSAFE_ENTRY, `${path} is a ${entry.isSymbolicLink() ? 'symbolic link' : 'special file'}; only regular files are allowed under ${PLUGIN_DIR}/, refusing`);
      }
    }
  }
  await walk(source, '');
  if (files.size === 0) throw new InitError(InitCodes.NO_PLUGINS, `${source} holds no files`);
  return { source, files };
}
