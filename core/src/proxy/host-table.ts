/**
 * Virtual host lookup by the request's Host (SPEC 3.2): exact names first, then the
 * longest matching `*.suffix`, then `*`. Port ignored, case-insensitive.
 */
export class HostTable<T> {
  private readonly exact = new Map<string, T>();
  /** `.example.com` → value, longest suffix first. */
  private suffixes: { suffix: string; value: T }[] = [];
  private any: T | undefined;

  /** Adds a domain; the caller has already rejected conflicts. */
  add(domain: string, value: T): void {
    const d = domain.toLowerCase().replace(/:\d+$/, '');
    if (d === '*') this.any = value;
    else if (d.startsWith('*.')) {
      this.suffixes.push({ suffix: d.slice(1), value });
      this.suffixes.sort((a, b) => b.suffix.length - a.suffix.length);
    } else this.exact.set(d, value);
  }

  match(hostHeader: string | undefined): T | undefined {
    const host = hostOnly(hostHeader);
    const exact = this.exact.get(host);
    if (exact !== undefined) return exact;
    for (const { suffix, value } of this.suffixes) {
      if (host.length > suffix.length && host.endsWith(suffix)) return value;
    }
    return this.any;
  }
}

/** The Host header without its port, lower-cased (`[::1]:80` → `[::1]`). */
export function hostOnly(hostHeader: string | undefined): string {
  if (!hostHeader) return '';
  let host = hostHeader;
  const colon = host.lastIndexOf(':');
  if (colon !== -1 && host.indexOf(']', colon) === -1 && /^\d+$/.test(host.slice(colon + 1))) host = host.slice(0, colon);
  return host.toLowerCase();
}
