import { isDigest, parseDigest, type Digest } from './digest.ts';
import { OciCodes, OciError } from './errors.ts';
import { INDEX_MEDIA_TYPES, MANIFEST_MEDIA_TYPES, MediaTypes } from './media-types.ts';

/** OCI image spec descriptor.md: a typed, sized, content-addressed pointer. */
export interface Descriptor {
  mediaType: string;
  digest: Digest;
  size: number;
  annotations?: Record<string, string>;
  platform?: Platform;
  urls?: string[];
  artifactType?: string;
}

/** image-index.md#image-index-property-descriptions (platform). */
export interface Platform {
  architecture: string;
  os: string;
  variant?: string;
  'os.version'?: string;
  'os.features'?: string[];
}

/** manifest.md: one image (Docker schema 2 has the same shape). */
export interface ImageManifest {
  schemaVersion: 2;
  mediaType?: string;
  artifactType?: string;
  config: Descriptor;
  layers: Descriptor[];
  subject?: Descriptor;
  annotations?: Record<string, string>;
}

/** image-index.md: several images, usually one per platform (Docker: manifest list). */
export interface ImageIndex {
  schemaVersion: 2;
  mediaType?: string;
  artifactType?: string;
  manifests: Descriptor[];
  subject?: Descriptor;
  annotations?: Record<string, string>;
}

/** config.md: the parts of an image configuration this module reads or writes; other fields pass through. */
export interface ImageConfig {
  created?: string;
  author?: string;
  architecture: string;
  os: string;
  variant?: string;
  config?: {
    User?: string;
    Env?: string[];
    Entrypoint?: string[] | null;
    Cmd?: string[] | null;
    WorkingDir?: string;
    Labels?: Record<string, string> | null;
    [key: string]: unknown;
  };
  rootfs: { type: 'layers'; diff_ids: Digest[] };
  history?: { created?: string; created_by?: string; comment?: string; empty_layer?: boolean; author?: string }[];
  [key: string]: unknown;
}

export type ParsedManifest =
  | { kind: 'manifest'; mediaType: string; manifest: ImageManifest }
  | { kind: 'index'; mediaType: string; index: ImageIndex };

/**
 * Parses manifest or index JSON. The media type comes from the document's own `mediaType`
 * field, else from `declared` (Content-Type or the pointing descriptor), else from its shape;
 * a document whose field contradicts the declared type is refused (OCI manifest.md).
 */
export function parseManifest(bytes: Uint8Array, declared: string | undefined, where: string): ParsedManifest {
  const doc = parseJsonObject(bytes, where);
  if (doc.schemaVersion !== 2) throw bad(where, `schemaVersion must be 2 (got ${JSON.stringify(doc.schemaVersion)}); Docker schema 1 manifests are not supported`);
  const own = doc.mediaType;
  if (own !== undefined && typeof own !== 'string') throw bad(where, 'mediaType must be a string');
  const known = (type: string | undefined) => type !== undefined && (MANIFEST_MEDIA_TYPES.includes(type) || INDEX_MEDIA_TYPES.includes(type));
  if (own !== undefined && known(declared) && own !== declared) {
    throw bad(where, `the document says mediaType ${own} but was served as ${declared}`);
  }
  const mediaType = own ?? (known(declared) ? declared! : Array.isArray(doc.manifests) ? MediaTypes.OCI_INDEX : MediaTypes.OCI_MANIFEST);
  if (INDEX_MEDIA_TYPES.includes(mediaType)) {
    if (!Array.isArray(doc.manifests)) throw bad(where, 'an index needs a "manifests" array');
    const manifests = doc.manifests.map((d, i) => parseDescriptor(d, `${where}: manifests[${i}]`));
    return { kind: 'index', mediaType, index: { ...(doc as object), schemaVersion: 2, manifests } as ImageIndex };
  }
  if (MANIFEST_MEDIA_TYPES.includes(mediaType)) {
    const config = parseDescriptor(doc.config, `${where}: config`);
    if (!Array.isArray(doc.layers)) throw bad(where, 'a manifest needs a "layers" array');
    const layers = doc.layers.map((d, i) => parseDescriptor(d, `${where}: layers[${i}]`));
    return { kind: 'manifest', mediaType, manifest: { ...(doc as object), schemaVersion: 2, config, layers } as ImageManifest };
  }
  throw new OciError(OciCodes.UNSUPPORTED_MEDIA_TYPE, `${where}: media type ${mediaType} is not an image manifest or index; expected one of ${[...MANIFEST_MEDIA_TYPES, ...INDEX_MEDIA_TYPES].join(', ')}`);
}

/** Validates one descriptor (descriptor.md#properties). */
export function parseDescriptor(value: unknown, where: string): Descriptor {
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw bad(where, 'a descriptor must be an object with mediaType, digest and size');
  const d = value as Record<string, unknown>;
  if (typeof d.mediaType !== 'string' || d.mediaType === '') throw bad(where, 'descriptor mediaType must be a non-empty string');
  const digest = parseDigest(d.digest, `${where}: digest`);
  if (typeof d.size !== 'number' || !Number.isSafeInteger(d.size) || d.size < 0) throw bad(where, `descriptor size must be a non-negative integer (got ${JSON.stringify(d.size)})`);
  return { ...(d as object), mediaType: d.mediaType, digest, size: d.size } as Descriptor;
}

/** Parses an image configuration blob, checking the fields this module relies on. */
export function parseImageConfig(bytes: Uint8Array, where: string): ImageConfig {
  const doc = parseJsonObject(bytes, where);
  if (typeof doc.architecture !== 'string' || typeof doc.os !== 'string') throw bad(where, 'an image config needs "architecture" and "os" strings');
  const rootfs = doc.rootfs as { type?: unknown; diff_ids?: unknown } | undefined;
  if (!rootfs || rootfs.type !== 'layers' || !Array.isArray(rootfs.diff_ids) || !rootfs.diff_ids.every(isDigest)) {
    throw bad(where, 'an image config needs rootfs {type: "layers", diff_ids: [digest...]}');
  }
  return doc as ImageConfig;
}

/** The platform wanted by default: linux on this machine's architecture, in OCI spelling. */
export function hostPlatform(): Platform {
  const arch = ({ x64: 'amd64', arm64: 'arm64', arm: 'arm', ia32: '386', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64' } as Record<string, string>)[process.arch] ?? process.arch;
  return { os: 'linux', architecture: arch };
}

/**
 * Picks the entry of an index for `wanted`: same os and architecture (and variant when both
 * say), else the only entry, else undefined. Attestation manifests (`unknown/unknown`) never match.
 */
export function selectPlatform(index: ImageIndex, wanted: Platform): Descriptor | undefined {
  const images = index.manifests.filter((d) => d.platform?.os !== 'unknown' && d.annotations?.['vnd.docker.reference.type'] !== 'attestation-manifest');
  const match = images.find((d) => d.platform && d.platform.os === wanted.os && d.platform.architecture === wanted.architecture && (!wanted.variant || !d.platform.variant || d.platform.variant === wanted.variant));
  if (match) return match;
  return images.length === 1 ? images[0] : undefined;
}

/** Formats a platform as `os/arch[/variant]`. */
export function formatPlatform(p: Platform | undefined): string {
  return p ? [p.os, p.architecture, p.variant].filter(Boolean).join('/') : 'unknown';
}

/** Parses `os/arch[/variant]`. */
export function parsePlatform(value: string): Platform {
  const [os, architecture, variant, ...rest] = value.split('/');
  if (!os || !architecture || rest.length > 0) throw new OciError(OciCodes.BAD_INPUT, `platform ${JSON.stringify(value)} must look like os/arch or os/arch/variant (e.g. linux/amd64)`);
  return { os, architecture, ...(variant ? { variant } : {}) };
}

/** Canonical bytes for a JSON document we write: compact, in the key order it was built with. */
export function encodeJson(value: unknown): Uint8Array {
  return Buffer.from(JSON.stringify(value), 'utf8');
}

function parseJsonObject(bytes: Uint8Array, where: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (error) {
    throw new OciError(OciCodes.BAD_MANIFEST, `${where}: not valid JSON (${(error as Error).message})`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw bad(where, 'expected a JSON object');
  return doc as Record<string, unknown>;
}

function bad(where: string, message: string): OciError {
  return new OciError(OciCodes.BAD_MANIFEST, `${where}: ${message}`);
}
