/**
 * Request path normalisation, as Envoy's HTTP connection manager does it (`normalize_path`,
 * `merge_slashes`, `path_with_escaped_slashes_action`). The gateway routes, authorizes and
 * forwards one and the same normalised path: matching the raw path while the upstream
 * normalises it let `/%61dmin`, `//admin`, `/x/../admin` and the like past a protected route.
 */

/** What to do with `%2F`, `%5C` (and a raw `\`) in a path: Envoy's `path_with_escaped_slashes_action`. */
export type EscapedSlashesAction = 'reject' | 'unescape' | 'keep';

export interface PathNormalization {
  /** RFC 3986 6.2.2: decode percent-encoded unreserved characters, upper-case other escapes, remove dot segments. Default true. */
  normalize: boolean;
  /** Merge runs of `/` into one. Default true. */
  mergeSlashes: boolean;
  /** Default `reject` (400). */
  escapedSlashes: EscapedSlashesAction;
}

export const DEFAULT_PATH_NORMALIZATION: PathNormalization = Object.freeze({ normalize: true, mergeSlashes: true, escapedSlashes: 'reject' });

/**
 * Why a request target is refused before it is split or normalised, or undefined. A fragment
 * (`#`, anywhere, query included) is decided here, once, for HTTP/1.1 and HTTP/2 alike: clients
 * never send one (RFC 9110 7.1), and routing on `/admin#x` missed `exact` and `regex` routes
 * while upstreams cut the fragment off and served `/admin` (issue 29 finding 9). Envoy answers
 * 400 too; stripping it instead would make two spellings of one path.
 */
export function targetError(target: string): string | undefined {
  return target.includes('#') ? 'a fragment (#) in the request target' : undefined;
}

/** The normalised path, or an error naming why the path is refused (answered 400). */
export type NormalizedPath = { path: string } | { error: string };

/** Anything that may need work: an escape, a dot, a backslash or a doubled slash. Plain paths skip all of it. */
const NEEDS_WORK = /[%.\\#]|\/\//;
const HEX = /^[0-9a-fA-F]{2}$/;

/**
 * Normalises an origin-form path (no query). `path` must start with `/`. Fast path: a path
 * with no `%`, `.`, `\` or `//` is returned as it is.
 */
export function normalizePath(path: string, options: PathNormalization = DEFAULT_PATH_NORMALIZATION): NormalizedPath {
  if (!NEEDS_WORK.test(path)) return { path };
  const fragment = targetError(path);
  if (fragment) return { error: fragment };
  let out = path;
  if (options.normalize || options.escapedSlashes !== 'keep') {
    const decoded = decodeEscapes(out, options);
    if (typeof decoded !== 'string') return decoded;
    out = decoded;
  }
  // Slashes merge before dot segments go (Envoy does the reverse): `/x//../admin` is `/admin`
  // to nginx (merge_slashes on), and must not route as `/x/admin`.
  if (options.mergeSlashes) out = out.replace(/\/{2,}/g, '/');
  if (options.normalize) out = removeDotSegments(out);
  return { path: out };
}

/**
 * One pass over the escapes: unreserved characters decoded (when normalising), other escapes
 * upper-cased, encoded slashes handled per `escapedSlashes`; a `%` not followed by two hex
 * digits is an invalid path (Envoy answers 400 too).
 */
function decodeEscapes(path: string, options: PathNormalization): string | { error: string } {
  let out = '';
  let from = 0;
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c === 0x5c /* \ */) {
      if (options.escapedSlashes === 'reject') return { error: 'a backslash in the path' };
      if (options.escapedSlashes === 'unescape') {
        out += `${path.slice(from, i)}/`;
        from = i + 1;
      }
      continue;
    }
    if (c !== 0x25 /* % */) continue;
    const hex = path.slice(i + 1, i + 3);
    if (!HEX.test(hex)) return { error: 'an invalid percent-encoding in the path' };
    const byte = parseInt(hex, 16);
    let replacement: string | undefined;
    if (byte === 0x2f || byte === 0x5c) {
      if (options.escapedSlashes === 'reject') return { error: 'an encoded slash (%2F or %5C) in the path' };
      replacement = options.escapedSlashes === 'unescape' ? '/' : `%${hex.toUpperCase()}`;
    } else if (options.normalize) {
      replacement = isUnreserved(byte) ? String.fromCharCode(byte) : `%${hex.toUpperCase()}`;
    }
    if (replacement !== undefined) {
      out += path.slice(from, i) + replacement;
      from = i + 3;
    }
    i += 2;
  }
  return from === 0 ? path : out + path.slice(from);
}

/** RFC 3986 2.3: ALPHA / DIGIT / "-" / "." / "_" / "~". */
function isUnreserved(byte: number): boolean {
  return (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x30 && byte <= 0x39) || byte === 0x2d || byte === 0x2e || byte === 0x5f || byte === 0x7e;
}

/** RFC 3986 5.2.4, on an absolute path: `.` segments dropped, `..` pops (never above the root). */
export function removeDotSegments(path: string): string {
  if (!path.includes('.')) return path;
  const segments = path.split('/');
  const out: string[] = [];
  // segments[0] is '' (the path starts with '/').
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]!;
    const last = i === segments.length - 1;
    if (segment === '.') {
      if (last) out.push('');
    } else if (segment === '..') {
      out.pop();
      if (last) out.push('');
    } else out.push(segment);
  }
  return `/${out.join('/')}`;
}
