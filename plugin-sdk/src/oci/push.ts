import { open } from 'node:fs/promises';
import type { Digest } from './digest.ts';
import { OciCodes, OciError } from './errors.ts';
import { Labels } from './image-build.ts';
import { layoutStore } from './image-store.ts';
import type { OciLayout } from './layout.ts';
import { parseImageConfig, parseManifest, type Descriptor } from './manifest.ts';
import { formatReference, type ImageReference } from './reference.ts';
import type { BlobSource, RegistryClient } from './registry-client.ts';

export interface PushResult {
  digest: Digest;
  /** Blobs sent, and blobs the registry already had (skipped). */
  uploaded: number;
  existing: number;
}

/**
 * Pushes the image `descriptor` of `layout` to `target`: blobs first (skipping those the
 * repository has), then child manifests by digest, then the top manifest or index under the
 * target's tag. Digests are unchanged, so the pushed image is byte-identical to the layout's.
 * A plugin image whose gateway-version label differs from the target tag is refused.
 */
export async function pushImage(layout: OciLayout, descriptor: Descriptor, client: RegistryClient, target: ImageReference): Promise<PushResult> {
  const where = `oci:${layout.dir}@${descriptor.digest}`;
  if (target.digest && target.digest !== descriptor.digest) {
    throw new OciError(OciCodes.DIGEST_MISMATCH, `${formatReference(target)}: the image in ${layout.dir} has digest ${descriptor.digest}; push it by tag or by that digest`);
  }
  const result: PushResult = { digest: descriptor.digest, uploaded: 0, existing: 0 };
  const store = layoutStore(layout);
  const push = async (d: Descriptor, reference: string, depth: number): Promise<void> => {
    const bytes = await layout.readBlob(d, `manifest ${d.digest} in ${where}`);
    const parsed = parseManifest(bytes, d.mediaType, `${where}: manifest ${d.digest}`);
    if (parsed.kind === 'index') {
      if (depth > 3) throw new OciError(OciCodes.BAD_MANIFEST, `${where}: indexes nested too deep`);
      for (const child of parsed.index.manifests) await push(child, child.digest, depth + 1);
    } else {
      const configBytes = await store.blob(parsed.manifest.config, `config of ${where}`);
      const version = parseImageConfig(configBytes, `config of ${where}`).config?.Labels?.[Labels.GATEWAY_VERSION];
      if (version !== undefined && target.tag !== undefined && version !== target.tag) {
        throw new OciError(OciCodes.TAG_MISMATCH, `${where} is a plugin image for gateway ${version}; push it with the tag ${version}, not ${target.tag}`);
      }
      for (const blob of [parsed.manifest.config, ...parsed.manifest.layers]) {
        const outcome = await client.pushBlob(target.repository, fileSource(layout, blob));
        if (outcome === 'uploaded') result.uploaded++;
        else result.existing++;
      }
    }
    await client.putManifest(target.repository, reference, bytes, parsed.mediaType);
  };
  await push(descriptor, target.tag ?? descriptor.digest, 0);
  return result;
}

/** Reads byte ranges of a layout blob on demand, so large layers are never held whole in memory. */
function fileSource(layout: OciLayout, descriptor: Descriptor): BlobSource {
  return {
    digest: descriptor.digest,
    size: descriptor.size,
    async read(start, end) {
      const handle = await open(layout.blobPath(descriptor.digest), 'r').catch(() => {
        throw new OciError(OciCodes.NOT_FOUND, `blob ${descriptor.digest} is missing from the layout ${layout.dir}`);
      });
      try {
        const buffer = Buffer.alloc(end - start);
        const { bytesRead } = await handle.read(buffer, 0, end - start, start);
        if (bytesRead !== end - start) throw new OciError(OciCodes.DIGEST_MISMATCH, `blob ${descriptor.digest} in ${layout.dir} is shorter than its descriptor's ${descriptor.size} bytes`);
        return buffer;
      } finally {
        await handle.close();
      }
    },
  };
}
