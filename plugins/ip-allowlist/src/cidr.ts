/**
 * IPv4 and IPv6 addresses and CIDR ranges, in plain JavaScript (the sandbox has no `node:net`).
 * Addresses are BigInts in their family's space; an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`,
 * what a dual-stack listener reports for IPv4 clients) is the IPv4 address.
 */
export interface Ip {
  family: 4 | 6;
  value: bigint;
}

export interface Cidr {
  family: 4 | 6;
  /** The network, host bits cleared. */
  network: bigint;
  prefix: number;
}

const BITS = { 4: 32, 6: 128 } as const;
const DECIMAL_OCTET = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
const HEXTET = /^[0-9a-fA-F]{1,4}$/;

function parseIpv4(text: string): bigint | undefined {
  const parts = text.split('.');
  if (parts.length !== 4 || !parts.every((part) => DECIMAL_OCTET.test(part))) return undefined;
  return parts.reduce((value, part) => (value << 8n) | BigInt(Number(part)), 0n);
}

function parseIpv6(text: string): bigint | undefined {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (half: string): number[] | undefined => {
    if (half === '') return [];
    const out: number[] = [];
    const parts = half.split(':');
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      if (i === parts.length - 1 && part.includes('.')) {
        const v4 = parseIpv4(part);
        if (v4 === undefined) return undefined;
        out.push(Number(v4 >> 16n), Number(v4 & 0xffffn));
      } else if (HEXTET.test(part)) out.push(parseInt(part, 16));
      else return undefined;
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (!head || !tail) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  return [...head, ...new Array<number>(missing).fill(0), ...tail].reduce((value, group) => (value << 16n) | BigInt(group), 0n);
}

/** An address, or undefined when `text` is not one. A zone (`fe80::1%eth0`) and brackets are dropped. */
export function parseIp(text: string): Ip | undefined {
  const bare = text.trim().replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  if (bare.includes(':')) {
    const value = parseIpv6(bare);
    if (value === undefined) return undefined;
    // ::ffff:a.b.c.d is the IPv4 client of a dual-stack socket.
    if (value >> 32n === 0xffffn) return { family: 4, value: value & 0xffffffffn };
    return { family: 6, value };
  }
  const value = parseIpv4(bare);
  return value === undefined ? undefined : { family: 4, value };
}

/** A CIDR range (`10.0.0.0/8`, `2001:db8::/32`; a bare address is a /32 or /128); throws naming what is wrong. */
export function parseCidr(text: string): Cidr {
  const [address, prefixText, extra] = text.trim().split('/');
  const ip = parseIp(address ?? '');
  if (!ip || extra !== undefined) throw new Error(`${JSON.stringify(text)} is not a CIDR range such as 10.0.0.0/8 or 2001:db8::/32`);
  const bits = BITS[ip.family];
  const prefix = prefixText === undefined ? bits : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!(prefix >= 0 && prefix <= bits)) throw new Error(`${JSON.stringify(text)}: the prefix length must be 0 to ${bits} for IPv${ip.family}`);
  const mask = prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(bits - prefix);
  return { family: ip.family, network: ip.value & mask, prefix };
}

/** Whether `ip` lies in `cidr`. */
export function contains(cidr: Cidr, ip: Ip): boolean {
  if (cidr.family !== ip.family) return false;
  const shift = BigInt(BITS[ip.family] - cidr.prefix);
  return ip.value >> shift === cidr.network >> shift;
}

/** The canonical text of an address: dotted IPv4, or IPv6 with the longest zero run compressed (RFC 5952). */
export function formatIp(ip: Ip): string {
  if (ip.family === 4) return [24n, 16n, 8n, 0n].map((shift) => String((ip.value >> shift) & 0xffn)).join('.');
  const groups = Array.from({ length: 8 }, (_, i) => Number((ip.value >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) [best, bestLength] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((group) => group.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLength).join(':')}`;
}
