import type { Digest } from './digest.ts';
import { OciCodes, OciError } from './errors.ts';
import type { ImageStore } from './image-store.ts';
import { formatPlatform, parseImageConfig, parseManifest, selectPlatform, type Descriptor, type ImageConfig, type ImageIndex, type ImageManifest, type Platform } from './manifest.ts';

/** One runnable image: its manifest and configuration, both verified. */
export interface ResolvedImage {
  /** Descriptor of the manifest (from the index, or synthesised for a top-level manifest). */
  descriptor: Descriptor;
  manifest: ImageManifest;
  manifestBytes: Uint8Array;
  mediaType: string;
  config: ImageConfig;
  configBytes: Uint8Array;
}

/** What a reference points at: one image, or an index and the images chosen from it. */
export interface ResolvedRoot {
  digest: Digest;
  mediaType: string;
  bytes: Uint8Array;
  index?: ImageIndex;
  images: ResolvedImage[];
}

const MAX_DEPTH = 3;
const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

/**
 * Resolves `reference` in `store`. For an index, `platform` picks one image (its os and
 * architecture, or the only image), and `'all'` keeps every image (attestations skipped).
 * Nested indexes are followed. Every manifest and config is verified against its digest.
 */
export async function resolveImage(store: ImageStore, reference: string, platform: Platform | 'all'): Promise<ResolvedRoot> {
  const root = await store.manifest(reference);
  const parsed = parseManifest(root.bytes, root.mediaType, `${store.name}: ${reference}`);
  const rootDescriptor: Descriptor = { mediaType: parsed.mediaType, digest: root.digest, size: root.bytes.byteLength };
  if (parsed.kind === 'manifest') {
    const image = await withConfig(store, rootDescriptor, parsed.manifest, root.bytes, parsed.mediaType);
    return { digest: root.digest, mediaType: parsed.mediaType, bytes: root.bytes, images: [image] };
  }
  const images = await fromIndex(store, parsed.index, platform, `${store.name}: ${reference}`, 1);
  return { digest: root.digest, mediaType: parsed.mediaType, bytes: root.bytes, index: parsed.index, images };
}

async function fromIndex(store: ImageStore, index: ImageIndex, platform: Platform | 'all', where: string, depth: number): Promise<ResolvedImage[]> {
  if (depth > MAX_DEPTH) throw new OciError(OciCodes.BAD_MANIFEST, `${where}: indexes nested more than ${MAX_DEPTH} deep`);
  let chosen: Descriptor[];
  if (platform === 'all') {
    chosen = index.manifests.filter((d) => d.platform?.os !== 'unknown' && d.annotations?.['vnd.docker.reference.type'] !== 'attestation-manifest');
  } else {
    const one = selectPlatform(index, platform);
    if (!one) {
      throw new OciError(OciCodes.NOT_FOUND, `${where}: the index has no image for ${formatPlatform(platform)}; it has ${index.manifests.map((d) => formatPlatform(d.platform)).join(', ') || 'no images'}`);
    }
    chosen = [one];
  }
  const images: ResolvedImage[] = [];
  for (const descriptor of chosen) {
    if (descriptor.size > MAX_CONFIG_BYTES) throw new OciError(OciCodes.TOO_LARGE, `${where}: manifest ${descriptor.digest} declares ${descriptor.size} bytes, over the limit of ${MAX_CONFIG_BYTES}`);
    // Fetched by digest, so the store verifies the content; the size must match the descriptor too.
    const { bytes } = await store.manifest(descriptor.digest);
    if (bytes.byteLength !== descriptor.size) throw new OciError(OciCodes.DIGEST_MISMATCH, `${where}: manifest ${descriptor.digest} has ${bytes.byteLength} bytes, but the index declares ${descriptor.size}`);
    const parsed = parseManifest(bytes, descriptor.mediaType, `${where}: manifest ${descriptor.digest}`);
    if (parsed.kind === 'index') images.push(...(await fromIndex(store, parsed.index, platform, `${where} > ${descriptor.digest}`, depth + 1)));
    else images.push(await withConfig(store, { ...descriptor, mediaType: parsed.mediaType }, parsed.manifest, bytes, parsed.mediaType));
  }
  if (images.length === 0) throw new OciError(OciCodes.NOT_FOUND, `${where}: the index holds no images`);
  return images;
}

async function withConfig(store: ImageStore, descriptor: Descriptor, manifest: ImageManifest, manifestBytes: Uint8Array, mediaType: string): Promise<ResolvedImage> {
  const configBytes = await store.blob(manifest.config, `config ${manifest.config.digest} of ${store.name}@${descriptor.digest}`, MAX_CONFIG_BYTES);
  const config = parseImageConfig(configBytes, `config ${manifest.config.digest} of ${store.name}@${descriptor.digest}`);
  return { descriptor, manifest, manifestBytes, mediaType, config, configBytes };
}
