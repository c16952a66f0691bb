import type { HostUrlParts } from '../host-api.ts';

/**
 * The host's half of the sandbox's `URL` (SPEC 5.3): Node's own WHATWG parser, so the
 * sandbox's URL behaves exactly like Node's. Untrusted arguments: anything but strings is
 * refused, and inputs are bounded (a URL beyond 64 KiB is not one an auth plugin needs).
 */
export function hostUrl(input: unknown, base: unknown): HostUrlParts | null {
  if (typeof input !== 'string' || (base !== undefined && typeof base !== 'string')) throw new TypeError('URL: expected strings');
  if (input.length > 65_536 || (base?.length ?? 0) > 65_536) throw new TypeError('URL: input longer than 65536 characters');
  const url = URL.parse(input, base);
  if (!url) return null;
  const { href, origin, protocol, username, password, host, hostname, port, pathname, search, hash } = url;
  return { href, origin, protocol, username, password, host, hostname, port, pathname, search, hash };
}
