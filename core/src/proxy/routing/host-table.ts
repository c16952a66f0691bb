/**
 * Virtual host lookup by the request's Host (SPEC 3.2), in Envoy's order: exact names first,
 * then the longest matching suffix wildcard (`*.example.com`, `*-bar.example.com`), then the
 * longest prefix wildcard (`api.*`), then `*`. Port ignored, case-insensitive. A wildcard
 * matches at least one character.
 */
export class HostTable<T> {
  private readonly exact = new Map<string, T>();
  /** `.example.com` → value, longest suffix first. */
  private suffixes: { suffix: string; value: T }[] = [];
  /** `api.` → value, longest prefix first. */
  private prefixes: { prefix: string; value: T }[] = [];
  private any: T | undefined;

  /** Adds a domain; the caller has already rejected conflicts. */
  add(domain: string, value: T): void {
    const d = domain.toLowerCase().replace(/:\d+$/, '');
    if (d === '*') this.any = value;
    else if (d.startsWith('*')) {
      this.suffixes.push({ suffix: d.slice(1), value });
      this.suffixes.sort((a, b) => b.suffix.length - a.suffix.length);
    } else if (d.endsWith('*')) {
      this.prefixes.push({ prefix: d.slice(0, -1), value });
      this.prefixes.sort((a, b) => b.prefix.length - a.prefix.length);
    } else this.exact.set(d, value);
  }

  /** The virtual host for a raw Host header; undefined when none matches or the header is malformed. */
  match(hostHeader: string | undefined): T | undefined {
    const host = parseHostHeader(hostHeader);
    return host === undefined ? undefined : this.matchHost(host);
  }

  /** The virtual host for a host already parsed by {@link parseHostHeader}. */
  matchHost(host: string): T | undefined {
    const exact = this.exact.get(host);
    if (exact !== undefined) return exact;
    // Indexed loops: per request, and for-of allocated an iterator here before being optimised.
    const suffixes = this.suffixes;
    for (let i = 0; i < suffixes.length; i++) {
      const { suffix, value } = suffixes[i]!;
      if (host.length > suffix.length && host.endsWith(suffix)) return value;
    }
    const prefixes = this.prefixes;
    for (let i = 0; i < prefixes.length; i++) {
      const { prefix, value } = prefixes[i]!;
      if (host.length > prefix.length && host.startsWith(prefix)) return value;
    }
    return this.any;
  }
}

/** reg-name or IPv4 (RFC 3986 3.2.2) without percent-encoding, then an optional `:port`. */
const NAME_AND_PORT = /^([a-z0-9\-._~!$&'()*+,;=]+?)\.?(?::(\d{0,5}))?$/;
/** `[IPv6]` or `[IPvFuture]`, then an optional `:port`. */
const LITERAL_AND_PORT = /^(\[[0-9a-f:.]+\]|\[v[0-9a-f]+\.[a-z0-9\-._~!$&'()*+,;=:]+\])(?::(\d{0,5}))?$/;

/**
 * The host part of a Host header, lower-cased, without its port and without one trailing
 * dot (`Shop.Test.:80` → `shop.test`, `[::1]:80` → `[::1]`); `''` when there is no Host at
 * all (HTTP/1.0); undefined when the header is not a valid RFC 9110 7.2 authority
 * (`a@shop.test`, `shop.test:abc`, `shop.test:1:2`, an empty value): those are answered 400,
 * never routed to the catch-all virtual host.
 */
export function parseHostHeader(hostHeader: string | undefined): string | undefined {
  if (hostHeader === undefined) return '';
  if (hostHeader.length === 0 || hostHeader.length > MAX_HOST_LENGTH) return undefined;
  // Clients send the same few Host values again and again: their parse (a regex with captures,
  // a lower-cased copy) is kept, for a bounded number of them.
  const known = PARSED_HOSTS.get(hostHeader);
  if (known !== undefined) return known === INVALID ? undefined : known;
  const parsed = parseHost(hostHeader);
  if (PARSED_HOSTS.size >= MAX_PARSED_HOSTS) PARSED_HOSTS.clear();
  PARSED_HOSTS.set(hostHeader, parsed ?? INVALID);
  return parsed;
}

const MAX_PARSED_HOSTS = 1024;
/** Marks a Host header known to be malformed in {@link PARSED_HOSTS}. */
const INVALID = Symbol('invalid host');
const PARSED_HOSTS = new Map<string, string | typeof INVALID>();

/** A DNS name's 255 characters and a `:port`. */
const MAX_HOST_LENGTH = 255 + 6;

function parseHost(hostHeader: string): string | undefined {
  const lower = hostHeader.toLowerCase();
  const m = lower.charCodeAt(0) === 0x5b ? LITERAL_AND_PORT.exec(lower) : NAME_AND_PORT.exec(lower);
  if (!m) return undefined;
  const port = m[2];
  if (port !== undefined && port !== '' && Number(port) > 65535) return undefined;
  return m[1]!;
}
