/** OCI images for Gatehouse plugins: layouts, manifests, a distribution-API client, image build and push. */
export { OciError, OciCodes, type OciErrorCode } from './errors.ts';
export { isDigest, parseDigest, sha256, verifyDigest, verifyStream, type Digest } from './digest.ts';
export { MediaTypes, layerCompression, isDockerMediaType } from './media-types.ts';
export * from './manifest.ts';
export { parseReference, formatReference, isValidTag, type ImageReference } from './reference.ts';
export { OciLayout, REF_NAME } from './layout.ts';
export { isLayoutArchive, packLayout, unpackLayout } from './layout-archive.ts';
export { writeTar, buildLayer, type TarEntry, type Layer } from './layer.ts';
export { RegistryClient, type RegistryClientOptions, type RegistryCredentials, type BlobSource, type FetchedManifest } from './registry-client.ts';
export { parseChallenge, type Challenge } from './www-authenticate.ts';
export { layoutStore, registryStore, openImage, splitLayoutName, type ImageStore, type OpenedImage, type AccessOptions } from './image-store.ts';
export { resolveImage, type ResolvedImage, type ResolvedRoot } from './resolve.ts';
export { buildPluginImage, PLUGIN_DIR, Labels, type BuildImageOptions, type BuiltImage } from './image-build.ts';
export { pushImage, type PushResult } from './push.ts';
export { credentialsFromEnvironment } from './credentials.ts';
