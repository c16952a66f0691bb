import { rm, stat } from 'node:fs/promises';
import { isDigest, type Digest } from './digest.ts';
import { OciCodes, OciError } from './errors.ts';
import { isLayoutArchive, unpackLayout } from './layout-archive.ts';
import { OciLayout } from './layout.ts';
import type { Descriptor } from './manifest.ts';
import { formatReference, parseReference, type ImageReference } from './reference.ts';
import { RegistryClient, type RegistryCredentials } from './registry-client.ts';

/** Read access to images in one place (a registry repository or a layout), every read verified. */
export interface ImageStore {
  /** For messages: `registry/repository` or `oci:DIR`. */
  readonly name: string;
  /** A manifest or index by tag (layout: ref name) or digest. */
  manifest(reference: string): Promise<{ bytes: Uint8Array; mediaType: string | undefined; digest: Digest }>;
  /** A whole blob, verified. */
  blob(descriptor: Pick<Descriptor, 'digest' | 'size'>, what: string, maxBytes?: number): Promise<Buffer>;
  /** A blob as a stream that throws at its end unless size and digest match. */
  openBlob(descriptor: Pick<Descriptor, 'digest' | 'size'>, what: string, maxBytes?: number): AsyncIterable<Uint8Array>;
  close(): Promise<void>;
}

/** A layout as an {@link ImageStore}; tags are index.json ref names. */
export function layoutStore(layout: OciLayout, cleanup?: () => Promise<void>, name = `oci:${layout.dir}`): ImageStore {
  return {
    name,
    async manifest(reference) {
      let descriptor: Pick<Descriptor, 'digest' | 'size' | 'mediaType'>;
      if (isDigest(reference)) {
        const size = await stat(layout.blobPath(reference)).then(
          (s) => s.size,
          () => {
            throw new OciError(OciCodes.NOT_FOUND, `oci:${layout.dir}: no manifest ${reference} in the layout`);
          },
        );
        descriptor = { digest: reference, size, mediaType: '' };
      } else {
        descriptor = await layout.resolve(reference);
      }
      const bytes = await layout.readBlob(descriptor, `manifest ${descriptor.digest} in oci:${layout.dir}`);
      return { bytes, mediaType: descriptor.mediaType || undefined, digest: descriptor.digest };
    },
    blob: (descriptor, what, maxBytes) => layout.readBlob(descriptor, what, maxBytes),
    openBlob: (descriptor, what, maxBytes) => layout.openBlob(descriptor, what, maxBytes),
    close: async () => {
      await cleanup?.();
    },
  };
}

/** One repository of a registry as an {@link ImageStore}. */
export function registryStore(client: RegistryClient, repository: string): ImageStore {
  return {
    name: `${client.host}/${repository}`,
    manifest: (reference) => client.getManifest(repository, reference),
    blob: (descriptor, _what, maxBytes) => client.getBlob(repository, descriptor, maxBytes),
    openBlob: (descriptor, _what, maxBytes) => client.openBlob(repository, descriptor, maxBytes),
    close: () => client.close(),
  };
}

/** How to reach registries: plain HTTP allowed or not, and credentials per registry host. */
export interface AccessOptions {
  insecure?: boolean;
  credentials?: (registry: string) => RegistryCredentials | undefined;
  chunkSize?: number;
}

/** An image named either `oci:DIR[:TAG]` (a local layout) or a registry reference. */
export interface OpenedImage {
  store: ImageStore;
  /** The tag or digest to read from the store. */
  reference: string;
  /** The registry reference, when it is one. */
  image?: ImageReference;
  /** The tag written in the name, if any. */
  tag?: string;
  /** The name as the user wrote it, for messages. */
  display: string;
}

/**
 * Opens an image by name. `oci:DIR[:TAG]` reads a layout, `oci:FILE.tar[:TAG]` a layout tarball
 * (TAG is an index.json ref name; without it the layout must hold one image); anything else is
 * a registry reference. Close the store when done.
 */
export async function openImage(name: string, access: AccessOptions = {}): Promise<OpenedImage> {
  if (name.startsWith('oci:')) {
    const { dir: given, tag } = splitLayoutName(name.slice(4));
    // A layout tarball is unpacked to a temporary directory, removed again by store.close().
    const dir = isLayoutArchive(given) ? await unpackLayout(given) : given;
    const cleanup = dir === given ? undefined : () => rm(dir, { recursive: true, force: true });
    let layout: OciLayout;
    try {
      layout = await OciLayout.open(dir);
    } catch (error) {
      await cleanup?.();
      throw error;
    }
    const store = layoutStore(layout, cleanup, `oci:${given}`);
    if (tag !== undefined) return { store, reference: tag, tag, display: name };
    const only = await layout.resolve(undefined).catch(async (error: unknown) => {
      await store.close();
      throw error;
    });
    return { store, reference: only.digest, display: name, ...(only.annotations?.['org.opencontainers.image.ref.name'] ? { tag: only.annotations['org.opencontainers.image.ref.name'] } : {}) };
  }
  const image = parseReference(name);
  const reference = image.digest ?? image.tag;
  if (reference === undefined) {
    throw new OciError(OciCodes.BAD_REFERENCE, `image reference ${JSON.stringify(name)} has neither a tag nor a digest; add :TAG (e.g. ${formatReference({ ...image, tag: '0.1.0' })})`);
  }
  const credentials = access.credentials?.(image.registry);
  const client = new RegistryClient({
    host: image.apiHost,
    ...(access.insecure ? { insecure: true } : {}),
    ...(credentials ? { credentials } : {}),
    ...(access.chunkSize ? { chunkSize: access.chunkSize } : {}),
  });
  return { store: registryStore(client, image.repository), reference, image, display: name, ...(image.tag !== undefined ? { tag: image.tag } : {}) };
}

/** `DIR[:TAG]`: a trailing `:TAG` that looks like a tag is the ref name (skopeo's `oci:` syntax). */
export function splitLayoutName(value: string): { dir: string; tag?: string } {
  const colon = value.lastIndexOf(':');
  if (colon > 0 && !value.slice(colon + 1).includes('/') && /^[\w][\w.-]{0,127}$/.test(value.slice(colon + 1))) {
    return { dir: value.slice(0, colon), tag: value.slice(colon + 1) };
  }
  return { dir: value };
}
