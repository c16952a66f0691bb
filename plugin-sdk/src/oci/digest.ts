import { createHash, type Hash } from 'node:crypto';
import { OciCodes, OciError } from './errors.ts';

/** A content digest, `algorithm:hex` (OCI image spec, descriptor.md#digests). Only sha256 and sha512 are accepted. */
export type Digest = `sha256:${string}` | `sha512:${string}`;

const DIGEST = /^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$/;

/** Whether `value` is a well-formed digest this module can verify. */
export function isDigest(value: unknown): value is Digest {
  return typeof value === 'string' && DIGEST.test(value);
}

/** `value` as a digest, or an error naming where it came from. */
export function parseDigest(value: unknown, where: string): Digest {
  if (!isDigest(value)) {
    throw new OciError(OciCodes.BAD_DIGEST, `${where}: ${JSON.stringify(value)} is not a sha256 or sha512 digest (expected "sha256:" followed by 64 lowercase hex digits)`);
  }
  return value;
}

/** The sha256 digest of `bytes`. */
export function sha256(bytes: Uint8Array | string): Digest {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** An incremental hasher for the algorithm of `expected`, for streaming verification. */
export function hasherFor(expected: Digest): Hash {
  return createHash(expected.slice(0, expected.indexOf(':')));
}

/** The digest a finished hasher produced, in the algorithm of `expected`. */
export function digestOf(hash: Hash, expected: Digest): Digest {
  return `${expected.slice(0, expected.indexOf(':'))}:${hash.digest('hex')}` as Digest;
}

/** Throws `GH_OCI_DIGEST_MISMATCH` unless `bytes` hash to `expected`. */
export function verifyDigest(bytes: Uint8Array, expected: Digest, what: string): void {
  const actual = digestOf(hasherFor(expected).update(bytes), expected);
  if (actual !== expected) throw digestMismatch(what, expected, actual);
}

/** The error for content that does not match its digest. */
export function digestMismatch(what: string, expected: string, actual: string): OciError {
  return new OciError(OciCodes.DIGEST_MISMATCH, `${what}: digest mismatch: expected ${expected}, content hashes to ${actual}; the content is corrupt or was tampered with`);
}

/**
 * Passes `chunks` through while hashing and counting them. Throws `GH_OCI_TOO_LARGE` as soon as
 * more than `maxBytes` (or the descriptor's size) arrive, and after the last chunk throws
 * `GH_OCI_DIGEST_MISMATCH` unless size and digest match: a consumer must not commit anything
 * derived from the stream until it has ended without error.
 */
export async function* verifyStream(chunks: AsyncIterable<Uint8Array>, expected: { digest: Digest; size: number }, what: string, maxBytes: number = Infinity): AsyncGenerator<Uint8Array> {
  const limit = Math.min(expected.size, maxBytes);
  if (expected.size > maxBytes) throw tooLarge(what, expected.size, maxBytes);
  const hash = hasherFor(expected.digest);
  let seen = 0;
  for await (const chunk of chunks) {
    seen += chunk.byteLength;
    if (seen > limit) {
      if (seen > maxBytes) throw tooLarge(what, seen, maxBytes);
      throw new OciError(OciCodes.DIGEST_MISMATCH, `${what}: more than the ${expected.size} bytes its descriptor declares; the content is corrupt or was tampered with`);
    }
    hash.update(chunk);
    yield chunk;
  }
  if (seen !== expected.size) throw new OciError(OciCodes.DIGEST_MISMATCH, `${what}: ${seen} bytes, but its descriptor declares ${expected.size}; the content is truncated or was tampered with`);
  const actual = digestOf(hash, expected.digest);
  if (actual !== expected.digest) throw digestMismatch(what, expected.digest, actual);
}

/** The error for content over a size limit. */
export function tooLarge(what: string, size: number, limit: number): OciError {
  return new OciError(OciCodes.TOO_LARGE, `${what}: ${size} bytes is over the limit of ${limit} bytes`);
}
