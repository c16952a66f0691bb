/**
 * IPv4 and IPv6 addresses and CIDR ranges on `ipaddr.js` (bundled into the plugin: the sandbox
 * has no `node:net`, and a well-kept parser beats a hand-written one). An IPv4-mapped IPv6
 * address (`::ffff:a.b.c.d`, what a dual-stack listener reports for IPv4 clients) is the IPv4
 * address, and an IPv4-mapped range (`::ffff:0:0/96`, `::ffff:10.0.0.0/104`) is the IPv4 range,
 * so either spelling of a client or a range means the same thing.
 */
import ipaddr from 'ipaddr.js';

export interface Ip {
  family: 4 | 6;
  address: ipaddr.IPv4 | ipaddr.IPv6;
}

export interface Cidr {
  family: 4 | 6;
  network: ipaddr.IPv4 | ipaddr.IPv6;
  prefix: number;
}

const BITS = { 4: 32, 6: 128 } as const;
/** `::ffff:0:0/96`: the IPv6 range that holds the IPv4 addresses. */
const MAPPED_PREFIX = 96;

/** An address, or undefined when `text` is not one. A zone (`fe80::1%eth0`) and brackets are dropped. */
export function parseIp(text: string): Ip | undefined {
  const bare = text.trim().replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  // Four-part dotted decimal only: ipaddr.js also takes `10.1.2`, hex and octal forms, which no
  // socket reports and which would let a config entry mean something other than it reads.
  if (ipaddr.IPv4.isValidFourPartDecimal(bare)) return { family: 4, address: ipaddr.IPv4.parse(bare) };
  if (!ipaddr.IPv6.isValid(bare)) return undefined;
  const v6 = ipaddr.IPv6.parse(bare);
  return v6.isIPv4MappedAddress() ? { family: 4, address: v6.toIPv4Address() } : { family: 6, address: v6 };
}

/** A CIDR range (`10.0.0.0/8`, `2001:db8::/32`; a bare address is a /32 or /128); throws naming what is wrong. */
export function parseCidr(text: string): Cidr {
  const [addressText, prefixText, extra] = text.trim().split('/');
  const bare = (addressText ?? '').replace(/^\[(.*)\]$/, '$1');
  const v4 = ipaddr.IPv4.isValidFourPartDecimal(bare);
  if ((!v4 && !ipaddr.IPv6.isValid(bare)) || bare.includes('%') || extra !== undefined) {
    throw new Error(`${JSON.stringify(text)} is not a CIDR range such as 10.0.0.0/8 or 2001:db8::/32`);
  }
  const family = v4 ? 4 : 6;
  const bits = BITS[family];
  const prefix = prefixText === undefined ? bits : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!(prefix >= 0 && prefix <= bits)) throw new Error(`${JSON.stringify(text)}: the prefix length must be 0 to ${bits} for IPv${family}`);
  if (v4) return { family: 4, network: network(ipaddr.IPv4.parse(bare), prefix), prefix };
  const v6 = ipaddr.IPv6.parse(bare);
  if (prefix >= MAPPED_PREFIX && v6.isIPv4MappedAddress()) return { family: 4, network: network(v6.toIPv4Address(), prefix - MAPPED_PREFIX), prefix: prefix - MAPPED_PREFIX };
  return { family: 6, network: network(v6, prefix), prefix };
}

/** `address` with its host bits cleared. */
function network<A extends ipaddr.IPv4 | ipaddr.IPv6>(address: A, prefix: number): A {
  const bytes = address.toByteArray();
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - i * 8));
    bytes[i]! &= (0xff << (8 - keep)) & 0xff;
  }
  return ipaddr.fromByteArray(bytes) as A;
}

/** Whether `ip` lies in `cidr`. Families never mix: IPv4 clients match IPv4 (or IPv4-mapped) ranges only. */
export function contains(cidr: Cidr, ip: Ip): boolean {
  if (cidr.family !== ip.family) return false;
  return (ip.address as ipaddr.IPv4).match(cidr.network as ipaddr.IPv4, cidr.prefix);
}

/** The canonical text of an address: dotted IPv4, or IPv6 with the longest zero run compressed (RFC 5952). */
export function formatIp(ip: Ip): string {
  return ip.address.toString();
}
