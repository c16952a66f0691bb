/** Username and password from a `Basic` credential (RFC 7617). */
export interface BasicCredentials {
  readonly username: string;
  readonly password: string;
}

const BASIC = /^basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i;

/**
 * Parses an `Authorization` / `Proxy-Authorization` value. The scheme is case-insensitive;
 * the password is everything after the first `:` (it may contain more). Returns undefined
 * for any other scheme or malformed base64.
 */
export function parseBasicCredentials(header: string | undefined): BasicCredentials | undefined {
  if (!header) return undefined;
  const match = BASIC.exec(header);
  if (!match || match[1]!.length % 4 !== 0) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return undefined;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
