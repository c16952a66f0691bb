import type { HostUrlParts } from '../host-api.ts';

/**
 * The host's half of the sandbox's `URL` (SPEC 5.3): Node's own WHATWG parser, so the
 * sandbox's URL behaves exactly like Node's. Untrusted arguments: anything but strings is
 * refused, and inputs are bounded (a URL beyond 64 KiB is not one an auth plugin needs).
 */
const SETTERS = new Set(['href', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash']);

export function hostUrl(input: unknown, base: unknown, set?: unknown): HostUrlParts | null {
  if (typeof input !== 'string' || (base !== undefined && typeof base !== 'string')) throw new TypeError('URL: expected strings');
  if (input.length > 65_536 || (base?.length ?? 0) > 65_536) throw new TypeError('URL: input longer than 65536 characters');
  const url = URL.parse(input, base);
  if (!url) return null;
  if (set !== undefined) {
    const [name, value] = Array.isArray(set) ? (set as unknown[]) : [];
    if (typeof name !== 'string' || !SETTERS.has(name) || typeof value !== 'string' || value.length > 65_536) throw new TypeError('URL: bad setter');
    // WHATWG setters ignore what they cannot apply; only href throws, as Node's does.
    (url as unknown as Record<string, string>)[name] = value;
  }
  const { href, origin, protocol, username, password, host, hostname, port, pathname, search, hash } = url;
  return { href, origin, protocol, username, password, host, hostname, port, pathname, search, hash };
}
