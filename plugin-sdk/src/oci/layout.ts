import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { sha256, tooLarge, verifyDigest, verifyStream, type Digest } from './digest.ts';
import { OciCodes, OciError } from './errors.ts';
import { encodeJson, parseManifest, type Descriptor, type ImageIndex } from './manifest.ts';
import { MediaTypes } from './media-types.ts';

/** The annotation an image layout uses to name (tag) an entry of index.json (image-layout.md). */
export const REF_NAME = 'org.opencontainers.image.ref.name';

const LAYOUT_FILE = 'oci-layout';
const LAYOUT_VERSION = '1.0.0';

/**
 * An OCI image layout directory (image-layout.md): `oci-layout`, `index.json` and
 * content-addressed `blobs/<alg>/<hex>`. Every read is verified against its digest; every write
 * goes to a temporary file first and is renamed into place, so readers never see partial blobs.
 */
export class OciLayout {
  readonly dir: string;

  private constructor(dir: string) {
    this.dir = dir;
  }

  /** Opens an existing layout, checking `oci-layout` and `index.json`. */
  static async open(dir: string): Promise<OciLayout> {
    let marker: string;
    try {
      marker = await readFile(join(dir, LAYOUT_FILE), 'utf8');
    } catch (error) {
      throw new OciError(OciCodes.BAD_LAYOUT, `${dir} is not an OCI image layout: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? `no ${LAYOUT_FILE} file` : (error as Error).message}`);
    }
    let version: unknown;
    try {
      version = (JSON.parse(marker) as { imageLayoutVersion?: unknown }).imageLayoutVersion;
    } catch {
      version = undefined;
    }
    if (typeof version !== 'string' || !version.startsWith('1.')) {
      throw new OciError(OciCodes.BAD_LAYOUT, `${dir}/${LAYOUT_FILE}: imageLayoutVersion must be 1.x (got ${JSON.stringify(version)})`);
    }
    const layout = new OciLayout(dir);
    await layout.readIndex();
    return layout;
  }

  /** Opens `dir` as a layout, creating an empty one when it does not exist or is empty (any other directory is refused). */
  static async create(dir: string): Promise<OciLayout> {
    const exists = await stat(join(dir, LAYOUT_FILE)).then(() => true, () => false);
    if (exists) return OciLayout.open(dir);
    const entries = await readdir(dir).catch(() => [] as string[]);
    if (entries.length > 0) throw new OciError(OciCodes.BAD_LAYOUT, `${dir} exists and is not an OCI image layout (no ${LAYOUT_FILE}); choose an empty or new directory`);
    await mkdir(join(dir, 'blobs', 'sha256'), { recursive: true });
    const layout = new OciLayout(dir);
    await layout.writeFileAtomic('index.json', encodeJson({ schemaVersion: 2, mediaType: MediaTypes.OCI_INDEX, manifests: [] }));
    await layout.writeFileAtomic(LAYOUT_FILE, encodeJson({ imageLayoutVersion: LAYOUT_VERSION }));
    return layout;
  }

  /** The top-level index (`index.json`). */
  async readIndex(): Promise<ImageIndex> {
    let bytes: Buffer;
    try {
      bytes = await readFile(join(this.dir, 'index.json'));
    } catch (error) {
      throw new OciError(OciCodes.BAD_LAYOUT, `${this.dir} is not an OCI image layout: cannot read index.json (${(error as Error).message})`);
    }
    const parsed = parseManifest(bytes, MediaTypes.OCI_INDEX, `${this.dir}/index.json`);
    if (parsed.kind !== 'index') throw new OciError(OciCodes.BAD_LAYOUT, `${this.dir}/index.json must be an image index`);
    return parsed.index;
  }

  /** Path of a blob inside the layout (it may not exist). */
  blobPath(digest: Digest): string {
    const colon = digest.indexOf(':');
    return join(this.dir, 'blobs', digest.slice(0, colon), digest.slice(colon + 1));
  }

  /** Whether the blob is present (its content is verified only when read). */
  async hasBlob(digest: Digest): Promise<boolean> {
    return stat(this.blobPath(digest)).then((s) => s.isFile(), () => false);
  }

  /** Reads a whole blob, verifying size and digest. */
  async readBlob(descriptor: Pick<Descriptor, 'digest' | 'size'>, what: string, maxBytes: number = Infinity): Promise<Buffer> {
    if (descriptor.size > maxBytes) throw tooLarge(what, descriptor.size, maxBytes);
    let bytes: Buffer;
    try {
      bytes = await readFile(this.blobPath(descriptor.digest));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new OciError(OciCodes.NOT_FOUND, `${what}: blob ${descriptor.digest} is missing from the layout ${this.dir}`);
      throw error;
    }
    if (bytes.byteLength !== descriptor.size) throw new OciError(OciCodes.DIGEST_MISMATCH, `${what}: blob ${descriptor.digest} has ${bytes.byteLength} bytes, but its descriptor declares ${descriptor.size}`);
    verifyDigest(bytes, descriptor.digest, what);
    return bytes;
  }

  /** Streams a blob; the stream throws at its end unless size and digest match. */
  openBlob(descriptor: Pick<Descriptor, 'digest' | 'size'>, what: string, maxBytes: number = Infinity): AsyncIterable<Uint8Array> {
    const path = this.blobPath(descriptor.digest);
    const dir = this.dir;
    async function* read(): AsyncGenerator<Uint8Array> {
      try {
        yield* createReadStream(path) as AsyncIterable<Buffer>;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new OciError(OciCodes.NOT_FOUND, `${what}: blob ${descriptor.digest} is missing from the layout ${dir}`);
        throw error;
      }
    }
    return verifyStream(read(), descriptor, what, maxBytes);
  }

  /** Stores `bytes` as a blob and returns its sha256 digest; a blob already present is kept. */
  async writeBlob(bytes: Uint8Array): Promise<Digest> {
    const digest = sha256(bytes);
    if (!(await this.hasBlob(digest))) await this.writeFileAtomic(join('blobs', 'sha256', digest.slice(7)), bytes);
    return digest;
  }

  /** Stores a streamed blob, verifying it against `expected` before it becomes visible. */
  async writeBlobStream(chunks: AsyncIterable<Uint8Array>, expected: Pick<Descriptor, 'digest' | 'size'>, what: string): Promise<void> {
    // Callers check hasBlob first to avoid opening a download they would not consume.
    if (await this.hasBlob(expected.digest)) return;
    const colon = expected.digest.indexOf(':');
    const dir = join(this.dir, 'blobs', expected.digest.slice(0, colon));
    await mkdir(dir, { recursive: true });
    const temp = join(dir, `.tmp-${randomBytes(8).toString('hex')}`);
    try {
      await pipeline(verifyStream(chunks, expected, what), createWriteStream(temp));
      await rename(temp, this.blobPath(expected.digest));
    } finally {
      await rm(temp, { force: true });
    }
  }

  /**
   * Names `descriptor` with `refName` in index.json, replacing any entry of that name; other
   * entries are kept. Without a name the descriptor is added untagged (unless already present).
   */
  async tag(descriptor: Descriptor, refName: string | undefined): Promise<void> {
    const index = await this.readIndex();
    const named = refName === undefined ? descriptor : { ...descriptor, annotations: { ...descriptor.annotations, [REF_NAME]: refName } };
    const others = index.manifests.filter((d) => (refName === undefined ? d.digest !== descriptor.digest || d.annotations?.[REF_NAME] !== undefined : d.annotations?.[REF_NAME] !== refName));
    const next: ImageIndex = { schemaVersion: 2, mediaType: MediaTypes.OCI_INDEX, manifests: [...others, named], ...(index.annotations ? { annotations: index.annotations } : {}) };
    await this.writeFileAtomic('index.json', encodeJson(next));
  }

  /**
   * The index.json entry named `refName`; without a name, the only entry. The error lists the
   * names present so the user can pick one.
   */
  async resolve(refName: string | undefined): Promise<Descriptor> {
    const index = await this.readIndex();
    if (refName !== undefined) {
      const found = index.manifests.filter((d) => d.annotations?.[REF_NAME] === refName);
      if (found.length === 1) return found[0]!;
      if (found.length > 1) throw new OciError(OciCodes.BAD_LAYOUT, `${this.dir}: more than one image is named ${JSON.stringify(refName)} in index.json`);
      throw new OciError(OciCodes.NOT_FOUND, `${this.dir}: no image named ${JSON.stringify(refName)}; the layout has ${describeNames(index)}`);
    }
    if (index.manifests.length === 1) return index.manifests[0]!;
    throw new OciError(OciCodes.BAD_LAYOUT, `${this.dir}: the layout has ${describeNames(index)}; name the one to use`);
  }

  private async writeFileAtomic(relative: string, bytes: Uint8Array): Promise<void> {
    const target = join(this.dir, relative);
    const temp = `${target}.tmp-${randomBytes(8).toString('hex')}`;
    try {
      await writeFile(temp, bytes);
      await rename(temp, target);
    } finally {
      await rm(temp, { force: true });
    }
  }
}

function describeNames(index: ImageIndex): string {
  if (index.manifests.length === 0) return 'no images';
  const names = index.manifests.map((d) => d.annotations?.[REF_NAME]);
  return `${index.manifests.length} image(s) named ${names.map((n) => (n === undefined ? '(untagged)' : JSON.stringify(n))).join(', ')}`;
}
