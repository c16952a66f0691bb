import { CodedError } from '../errors.ts';

/**
 * Errors of the OCI module. Callers match on `code` (stable, `GH_OCI_*`), never on the
 * message; messages name what to change.
 */
export class OciError extends CodedError<OciErrorCode> {
  override name = 'OciError';
}

export const OciCodes = {
  /** An image reference (`registry/repository:tag@digest`) cannot be parsed. */
  BAD_REFERENCE: 'GH_OCI_BAD_REFERENCE',
  /** A digest string is malformed or uses an unsupported algorithm. */
  BAD_DIGEST: 'GH_OCI_BAD_DIGEST',
  /** Content does not hash to the digest it was addressed by. */
  DIGEST_MISMATCH: 'GH_OCI_DIGEST_MISMATCH',
  /** A manifest, index or config is not valid JSON of the expected shape. */
  BAD_MANIFEST: 'GH_OCI_BAD_MANIFEST',
  /** A media type this module does not handle. */
  UNSUPPORTED_MEDIA_TYPE: 'GH_OCI_UNSUPPORTED_MEDIA_TYPE',
  /** A blob or manifest is larger than the configured limit or its descriptor says. */
  TOO_LARGE: 'GH_OCI_TOO_LARGE',
  /** The manifest, blob or tag does not exist. */
  NOT_FOUND: 'GH_OCI_NOT_FOUND',
  /** The registry refused the credentials, or none were given where needed. */
  UNAUTHORIZED: 'GH_OCI_UNAUTHORIZED',
  /** The registry answered with an unexpected status or an error body. */
  REGISTRY: 'GH_OCI_REGISTRY',
  /** The registry could not be reached (connection refused, TLS, DNS, timeout). */
  UNREACHABLE: 'GH_OCI_UNREACHABLE',
  /** A directory is not an OCI image layout, or names no usable image. */
  BAD_LAYOUT: 'GH_OCI_BAD_LAYOUT',
  /** An image tag does not equal the gateway version it must match. */
  TAG_MISMATCH: 'GH_OCI_TAG_MISMATCH',
  /** Input to an image build is unusable (missing directory, link, no files). */
  BAD_INPUT: 'GH_OCI_BAD_INPUT',
  /** A plain-HTTP registry was addressed without `--insecure`. */
  INSECURE: 'GH_OCI_INSECURE',
} as const;

export type OciErrorCode = (typeof OciCodes)[keyof typeof OciCodes];
