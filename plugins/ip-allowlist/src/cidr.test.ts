import { BlockList, isIP } from 'node:net';
import { describe, expect, it } from 'vitest';
import { contains, formatIp, parseCidr, parseIp } from './cidr.ts';

// The sandbox has no node:net, so the plugin parses addresses itself: held to Node's own here.
const addresses = ['10.1.2.3', '0.0.0.0', '255.255.255.255', '192.168.0.1', '::', '::1', '2001:db8::1', '2001:db8:0:0:1:0:0:1', 'fe80::1%eth0', '[2001:db8::2]', '::ffff:10.1.2.3', '2001:db8::10.1.2.3', '1:2:3:4:5:6:7:8'];
const notAddresses = ['', '10.1.2', '10.1.2.256', '01.2.3.4', '1.2.3.4.5', '2001:db8:::1', '1:2:3:4:5:6:7:8:9', '12345::', 'g::1', '1::2::3', 'localhost', ':1'];

describe('parseIp', () => {
  it.each(addresses)('parses %s as Node does', (text) => {
    const ip = parseIp(text)!;
    expect(ip).toBeDefined();
    const bare = text.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
    expect(isIP(bare)).not.toBe(0);
    // Node's canonical form, except that an IPv4-mapped address is its IPv4 address.
    const canonical = new URL(`http://[${bare.includes(':') ? bare : `::ffff:${bare}`}]/`).hostname.slice(1, -1);
    expect(ip.family === 4 ? `::ffff:${formatIp(ip)}` : formatIp(ip)).toBe(canonical.replace(/^::ffff:([0-9a-f]+):([0-9a-f]+)$/, (_, a: string, b: string) => `::ffff:${parseInt(a, 16) >> 8}.${parseInt(a, 16) & 255}.${parseInt(b, 16) >> 8}.${parseInt(b, 16) & 255}`));
  });

  it.each(notAddresses)('refuses %j, as Node does', (text) => {
    expect(parseIp(text)).toBeUndefined();
    expect(isIP(text)).toBe(0);
  });
});

describe('contains', () => {
  const ranges = ['10.0.0.0/8', '192.168.1.0/24', '0.0.0.0/0', '10.1.2.3/32', '10.1.2.3', '2001:db8::/32', '::/0', '2001:db8:1::/48', 'fe80::/10'];
  const probes = ['10.1.2.3', '10.255.255.255', '11.0.0.1', '192.168.1.77', '192.168.2.1', '2001:db8::1', '2001:db9::1', '2001:db8:1:ffff::1', 'fe80::abcd', '::1', '::ffff:10.9.9.9'];
  it('agrees with Node\'s BlockList on every range and address of the same family; families never mix', () => {
    for (const range of ranges) {
      const cidr = parseCidr(range);
      const list = new BlockList();
      const [net, prefix] = range.split('/');
      list.addSubnet(net!, Number(prefix ?? (cidr.family === 4 ? 32 : 128)), cidr.family === 4 ? 'ipv4' : 'ipv6');
      for (const probe of probes) {
        const ip = parseIp(probe)!;
        // BlockList lets IPv6 ranges hold IPv4 addresses (as ::ffff:a.b.c.d); here IPv4 clients match IPv4 ranges only.
        const node = ip.family === cidr.family && list.check(formatIp(ip), ip.family === 4 ? 'ipv4' : 'ipv6');
        expect([range, probe, contains(cidr, ip)]).toEqual([range, probe, node]);
      }
    }
  });

  it('clears host bits and refuses bad ranges, naming them', () => {
    expect(parseCidr('10.1.2.3/8')).toEqual({ family: 4, network: 0x0a000000n, prefix: 8 });
    expect(() => parseCidr('10.0.0.0/33')).toThrow('"10.0.0.0/33": the prefix length must be 0 to 32 for IPv4');
    expect(() => parseCidr('2001:db8::/129')).toThrow('the prefix length must be 0 to 128 for IPv6');
    expect(() => parseCidr('10.0.0/8')).toThrow('"10.0.0/8" is not a CIDR range');
    expect(() => parseCidr('10.0.0.0/8/1')).toThrow('is not a CIDR range');
  });
});
