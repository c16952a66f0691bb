/** Media types of the OCI image spec (v1.1) and the Docker registry v2 schema 2 they mirror. */
export const MediaTypes = {
  OCI_MANIFEST: 'application/vnd.oci.image.manifest.v1+json',
  OCI_INDEX: 'application/vnd.oci.image.index.v1+json',
  OCI_CONFIG: 'application/vnd.oci.image.config.v1+json',
  OCI_LAYER: 'application/vnd.oci.image.layer.v1.tar',
  OCI_LAYER_GZIP: 'application/vnd.oci.image.layer.v1.tar+gzip',
  OCI_LAYER_ZSTD: 'application/vnd.oci.image.layer.v1.tar+zstd',
  DOCKER_MANIFEST: 'application/vnd.docker.distribution.manifest.v2+json',
  DOCKER_MANIFEST_LIST: 'application/vnd.docker.distribution.manifest.list.v2+json',
  DOCKER_CONFIG: 'application/vnd.docker.container.image.v1+json',
  DOCKER_LAYER_GZIP: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
  DOCKER_LAYER: 'application/vnd.docker.image.rootfs.diff.tar',
} as const;

export const MANIFEST_MEDIA_TYPES: readonly string[] = [MediaTypes.OCI_MANIFEST, MediaTypes.DOCKER_MANIFEST];
export const INDEX_MEDIA_TYPES: readonly string[] = [MediaTypes.OCI_INDEX, MediaTypes.DOCKER_MANIFEST_LIST];

/** The `Accept` header for manifest requests: every manifest and index type we can read. */
export const MANIFEST_ACCEPT = [...MANIFEST_MEDIA_TYPES, ...INDEX_MEDIA_TYPES].join(', ');

const LAYER_COMPRESSION: Record<string, 'none' | 'gzip' | 'zstd'> = {
  [MediaTypes.OCI_LAYER]: 'none',
  [MediaTypes.OCI_LAYER_GZIP]: 'gzip',
  [MediaTypes.OCI_LAYER_ZSTD]: 'zstd',
  [MediaTypes.DOCKER_LAYER]: 'none',
  [MediaTypes.DOCKER_LAYER_GZIP]: 'gzip',
  // Non-distributable variants: same content, different push rules.
  'application/vnd.oci.image.layer.nondistributable.v1.tar': 'none',
  'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip': 'gzip',
  'application/vnd.oci.image.layer.nondistributable.v1.tar+zstd': 'zstd',
  'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip': 'gzip',
};

/** How a layer media type is compressed, or undefined when it is not a filesystem layer. */
export function layerCompression(mediaType: string): 'none' | 'gzip' | 'zstd' | undefined {
  return LAYER_COMPRESSION[mediaType];
}

/** Whether a manifest media type belongs to the Docker family (so new parts use Docker types too). */
export function isDockerMediaType(mediaType: string): boolean {
  return mediaType.startsWith('application/vnd.docker.');
}
