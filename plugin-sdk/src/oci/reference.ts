import { isDigest, type Digest } from './digest.ts';
import { OciCodes, OciError } from './errors.ts';

/** A parsed image reference: `registry/repository[:tag][@digest]` (distribution/reference grammar). */
export interface ImageReference {
  /** The registry as written, or `docker.io` when omitted. */
  readonly registry: string;
  /** Where the distribution API is served (`registry-1.docker.io` for Docker Hub). */
  readonly apiHost: string;
  /** The repository path, with `library/` added for single-name Docker Hub images. */
  readonly repository: string;
  readonly tag?: string;
  readonly digest?: Digest;
}

const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DOMAIN = /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?$/;

/** Parses an image reference; the error says which part is wrong. */
export function parseReference(input: string): ImageReference {
  const fail = (why: string) => new OciError(OciCodes.BAD_REFERENCE, `image reference ${JSON.stringify(input)}: ${why}; expected registry/repository:tag (e.g. ghcr.io/acme/my-plugin:0.1.0)`);
  if (input.length === 0 || input.length > 4096) throw fail('empty or too long');
  if (/^[a-z]+:\/\//i.test(input)) throw fail('leave out the scheme (http:// or https://); use --insecure for a plain-HTTP registry');
  let rest = input;
  let digest: Digest | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    const candidate = rest.slice(at + 1);
    if (!isDigest(candidate)) throw fail(`${JSON.stringify(candidate)} is not a sha256 or sha512 digest`);
    digest = candidate;
    rest = rest.slice(0, at);
  }
  let tag: string | undefined;
  const lastSlash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1);
    if (!TAG.test(tag)) throw fail(`tag ${JSON.stringify(tag)} must be 1-128 of [A-Za-z0-9_.-], not starting with . or -`);
    rest = rest.slice(0, colon);
  }
  const slash = rest.indexOf('/');
  const first = slash >= 0 ? rest.slice(0, slash) : '';
  let registry = 'docker.io';
  let path = rest;
  if (slash >= 0 && (first.includes('.') || first.includes(':') || first === 'localhost' || first.startsWith('['))) {
    if (!DOMAIN.test(first)) throw fail(`registry ${JSON.stringify(first)} is not a host name with an optional port`);
    registry = first;
    path = rest.slice(slash + 1);
  }
  const components = path.split('/');
  for (const c of components) {
    if (!COMPONENT.test(c)) throw fail(`repository component ${JSON.stringify(c)} must be lowercase letters and digits, separated by ".", "_", "__" or "-"`);
  }
  const isHub = registry === 'docker.io' || registry === 'index.docker.io';
  const repository = isHub && components.length === 1 ? `library/${path}` : path;
  if (repository.length > 255) throw fail('the repository name is longer than 255 characters');
  return {
    registry,
    apiHost: isHub ? 'registry-1.docker.io' : registry,
    repository,
    ...(tag !== undefined ? { tag } : {}),
    ...(digest !== undefined ? { digest } : {}),
  };
}

/** The reference written back out, `registry/repository[:tag][@digest]`. */
export function formatReference(ref: ImageReference): string {
  return `${ref.registry}/${ref.repository}${ref.tag !== undefined ? `:${ref.tag}` : ''}${ref.digest !== undefined ? `@${ref.digest}` : ''}`;
}

/** Whether `tag` is a valid tag (used for layout ref names too). */
export function isValidTag(tag: string): boolean {
  return TAG.test(tag);
}
