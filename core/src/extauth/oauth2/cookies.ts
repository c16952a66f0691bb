/**
 * Cookies of the OIDC step: reading one from a `cookie` header (RFC 6265 §5.4 pairs), writing
 * `set-cookie` values with Gloo's `cookieOptions`, and sealing values with AES-256-GCM so the
 * browser holds tokens, PKCE verifiers and claims only as ciphertext it cannot read or alter.
 */
import { createCipheriv, createDecipheriv, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';

/** Longest `cookie` header looked at; a larger one is ignored (no session) rather than scanned. */
export const MAX_COOKIE_HEADER = 64 * 1024;
/** Longest sealed value opened (a session split over chunks included). */
const MAX_SEALED = 16 * 1024;

/** The value of cookie `name` in a `cookie` header (the first one), or undefined. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header || header.length > MAX_COOKIE_HEADER) return undefined;
  let at = 0;
  while (at < header.length) {
    let end = header.indexOf(';', at);
    if (end === -1) end = header.length;
    let start = at;
    while (start < end && (header.charCodeAt(start) === 32 || header.charCodeAt(start) === 9)) start++;
    if (header.startsWith(name, start) && header.charCodeAt(start + name.length) === 61 /* = */) {
      let value = header.slice(start + name.length + 1, end).trim();
      if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
      return value;
    }
    at = end + 1;
  }
  return undefined;
}

/** Names of the cookies in a header that start with `prefix`. */
export function cookieNames(header: string | undefined, prefix: string): string[] {
  if (!header || header.length > MAX_COOKIE_HEADER) return [];
  return header
    .split(';')
    .map((pair) => pair.trim().split('=', 1)[0]!)
    .filter((name) => name.startsWith(prefix));
}

/** Gloo's `cookieOptions`, resolved. */
export interface CookieAttributes {
  /** Seconds; 0 = a browser-session cookie (no Max-Age). */
  readonly maxAge: number;
  readonly secure: boolean;
  readonly httpOnly: boolean;
  /** undefined: no Path attribute. */
  readonly path: string | undefined;
  readonly domain: string | undefined;
  readonly sameSite: 'Lax' | 'Strict' | 'None' | undefined;
}

/** A `set-cookie` value. `maxAge`: overrides the attributes' (negative: delete). */
export function setCookie(name: string, value: string, attrs: CookieAttributes, override: { maxAge?: number; path?: string | undefined; sameSite?: CookieAttributes['sameSite'] } = {}): string {
  const maxAge = override.maxAge ?? attrs.maxAge;
  const path = 'path' in override ? override.path : attrs.path;
  const sameSite = 'sameSite' in override ? override.sameSite : attrs.sameSite;
  let out = `${name}=${value}`;
  if (maxAge < 0) out += '; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT';
  else if (maxAge > 0) out += `; Max-Age=${maxAge}`;
  if (path !== undefined) out += `; Path=${path}`;
  if (attrs.domain) out += `; Domain=${attrs.domain}`;
  if (attrs.secure) out += '; Secure';
  if (attrs.httpOnly) out += '; HttpOnly';
  if (sameSite) out += `; SameSite=${sameSite}`;
  return out;
}

/** AES-256-GCM with a 32-byte key: `seal` / `open` of JSON values, bound to a purpose (the cookie's name). */
export class Sealer {
  private readonly key: KeyObject;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new RangeError('the session key must be 32 bytes');
    // A KeyObject, not the bytes: a cipher from it is several times cheaper to create (measured: 3×).
    this.key = createSecretKey(key);
  }

  /**
   * base64url(iv ‖ ciphertext ‖ tag) of the JSON of `value`. Not compressed: a zlib context per
   * cookie opened cost more than the cipher (measured), and tokens are base64 already.
   */
  seal(value: unknown, purpose: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(purpose));
    const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
  }

  /** The value sealed for `purpose`, or undefined when it was not (another key, tampered, truncated, not JSON). */
  open(sealed: string, purpose: string): unknown {
    if (sealed.length < 40 || sealed.length > MAX_SEALED || !/^[A-Za-z0-9_-]+$/.test(sealed)) return undefined;
    const raw = Buffer.from(sealed, 'base64url');
    if (raw.length < 29) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
      decipher.setAAD(Buffer.from(purpose));
      decipher.setAuthTag(raw.subarray(raw.length - 16));
      const plain = Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]);
      return JSON.parse(plain.toString('utf8'));
    } catch {
      return undefined;
    }
  }
}
