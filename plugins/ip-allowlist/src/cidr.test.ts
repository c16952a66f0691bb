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
    const cleared = parseCidr('10.1.2.3/8');
    expect([cleared.family, cleared.network.toString(), cleared.prefix]).toEqual([4, '10.0.0.0', 8]);
    const v6 = parseCidr('2001:db8:ffff::1/33');
    expect([v6.family, v6.network.toString(), v6.prefix]).toEqual([6, '2001:db8:8000::', 33]);
    expect(() => parseCidr('10.0.0.0/33')).toThrow('"10.0.0.0/33": the prefix length must be 0 to 32 for IPv4');
    expect(() => parseCidr('2001:db8::/129')).toThrow('the prefix length must be 0 to 128 for IPv6');
    expect(() => parseCidr('10.0.0/8')).toThrow('"10.0.0/8" is not a CIDR range');
    expect(() => parseCidr('10.0.0.0/8/1')).toThrow('is not a CIDR range');
    // Shorthand IPv4 forms that inet_aton takes (and ipaddr.js's loose parser) are not ranges here.
    for (const loose of ['10.1/8', '0x0a.0.0.0/8', '012.0.0.0/8', '10/8']) expect(() => parseCidr(loose)).toThrow('is not a CIDR range');
  });

  // Issue 26 item 7: the IPv4-mapped spelling of a range is refused no more; it is the IPv4 range.
  it('takes IPv4-mapped IPv6 ranges as the IPv4 ranges they hold', () => {
    const all = parseCidr('::ffff:0:0/96');
    expect([all.family, all.network.toString(), all.prefix]).toEqual([4, '0.0.0.0', 0]);
    const ten = parseCidr('::ffff:10.0.0.0/104');
    expect([ten.family, ten.network.toString(), ten.prefix]).toEqual([4, '10.0.0.0', 8]);
    for (const client of ['10.9.8.7', '::ffff:10.9.8.7', '[::ffff:a09:807]']) {
      expect(contains(all, parseIp(client)!)).toBe(true);
      expect(contains(ten, parseIp(client)!)).toBe(true);
    }
    expect(contains(ten, parseIp('11.0.0.1')!)).toBe(false);
    // A mapped prefix shorter than /96 reaches beyond the IPv4 space: it stays an IPv6 range, and IPv4 clients never match it.
    const wide = parseCidr('::ffff:0:0/95');
    expect(wide.family).toBe(6);
    expect(contains(wide, parseIp('10.9.8.7')!)).toBe(false);
    expect(contains(parseCidr('::/0'), parseIp('10.9.8.7')!)).toBe(false);
  });
});
