import type { IncomingMessage } from 'node:http';
import { describe, expect, test } from 'vitest';
import { Maglev, RingHash, compileHashPolicies, cookieValue, hashString, type HashTable } from './consistent-hash.ts';
import { UpstreamCluster } from './upstream-cluster.ts';

const KEYS = Array.from({ length: 10_000 }, (_, i) => hashString(`user-${i}`));
const hostKeys = (n: number) => Array.from({ length: n }, (_, i) => `10.0.0.${i + 1}:8080`);
const all = () => true;

function assignments(table: HashTable): number[] {
  return KEYS.map((k) => table.pick(k, all));
}

describe.each([
  ['ring hash', (keys: string[], weights: number[]) => new RingHash(keys, weights)],
  ['maglev', (keys: string[], weights: number[]) => new Maglev(keys, weights)],
])('%s', (_name, build) => {
  test('the same key always goes to the same host, and keys spread over every host', () => {
    const table = build(hostKeys(4), [1, 1, 1, 1]);
    expect(assignments(table)).toEqual(assignments(table));
    expect(assignments(build(hostKeys(4), [1, 1, 1, 1]))).toEqual(assignments(table));
    const counts = [0, 0, 0, 0];
    for (const host of assignments(table)) counts[host]!++;
    // Each host within ±40% of a fair 2,500 (ring hash at 1,024 points is the coarser of the two).
    for (const c of counts) expect(c).toBeGreaterThan(1500), expect(c).toBeLessThan(3500);
  });

  test('adding a fifth host moves about 1/5 of the keys, all of them to the new host', () => {
    const before = assignments(build(hostKeys(4), [1, 1, 1, 1]));
    const after = assignments(build(hostKeys(5), [1, 1, 1, 1, 1]));
    const moved = before.filter((host, i) => after[i] !== host);
    expect(moved.length / KEYS.length).toBeGreaterThan(0.12);
    expect(moved.length / KEYS.length).toBeLessThan(0.3);
    // Keys that moved went to the new host (ring hash exactly; Maglev nearly: its tables shuffle a few slots).
    const toNew = before.filter((host, i) => after[i] !== host && after[i] === 4).length;
    expect(toNew / moved.length).toBeGreaterThan(_name === 'ring hash' ? 0.999 : 0.9);
  });

  test('weights: a host of weight 3 gets about three times the keys of a host of weight 1', () => {
    const counts = [0, 0];
    for (const host of assignments(build(hostKeys(2), [3, 1]))) counts[host]!++;
    expect(counts[0]! / KEYS.length).toBeGreaterThan(0.65);
    expect(counts[0]! / KEYS.length).toBeLessThan(0.85);
  });

  test('a host that cannot take traffic: its keys go elsewhere, every other key stays', () => {
    const table = build(hostKeys(4), [1, 1, 1, 1]);
    const before = assignments(table);
    const after = KEYS.map((k) => table.pick(k, (i) => i !== 2));
    before.forEach((host, i) => {
      if (host !== 2) expect(after[i]).toBe(host);
      else expect(after[i]).not.toBe(2);
    });
  });
});

describe('ring size', () => {
  test('minimumRingSize points for the lightest host, the others in proportion; capped by maximumRingSize', () => {
    expect(new RingHash(hostKeys(3), [1, 1, 1]).size).toBe(3 * 1024);
    expect(new RingHash(hostKeys(2), [1, 3], 100).size).toBe(400);
    expect(new RingHash(hostKeys(2), [1, 1000], 1024, 2048).size).toBeLessThanOrEqual(2048);
  });
});

describe('hash policies (Envoy)', () => {
  const req = (remoteAddress: string) => ({ socket: { remoteAddress } }) as unknown as IncomingMessage;

  test('header, cookie and source IP keys; policies without a value are skipped; terminal stops', () => {
    const byHeader = compileHashPolicies([{ header: 'X-User' }])!;
    expect(byHeader(req('1.1.1.1'), { 'x-user': 'ann' })).toBe(hashString('ann'));
    expect(byHeader(req('1.1.1.1'), {})).toBeUndefined();
    const byCookie = compileHashPolicies([{ cookie: { name: 'session' } }])!;
    expect(byCookie(req('1.1.1.1'), { cookie: 'a=1; session=xyz' })).toBe(hashString('xyz'));
    const fallback = compileHashPolicies([{ header: 'x-user', terminal: true }, { sourceIp: true }])!;
    expect(fallback(req('10.1.1.1'), { 'x-user': 'ann' })).toBe(hashString('ann'));
    expect(fallback(req('10.1.1.1'), {})).toBe(hashString('10.1.1.1'));
    const both = compileHashPolicies([{ header: 'x-user' }, { sourceIp: true }])!;
    const a = hashString('ann');
    expect(both(req('10.1.1.1'), { 'x-user': 'ann' })).toBe((((a << 1) | (a >>> 31)) ^ hashString('10.1.1.1')) >>> 0);
    expect(cookieValue('a=1;b=2', 'c')).toBeUndefined();
  });

  test('a cookie policy with ttl generates the cookie when absent (Envoy): one value per client connection, Max-Age, Path, HttpOnly', () => {
    const conn = (remoteAddress: string, remotePort: number) => ({ socket: { remoteAddress, remotePort } }) as unknown as IncomingMessage;
    const policy = compileHashPolicies([{ cookie: { name: 'sticky', ttl: '30m', path: '/app' } }])!;
    const set: string[] = [];
    const key = policy(conn('10.0.0.1', 40000), {}, (c) => set.push(c));
    expect(set).toHaveLength(1);
    const value = /^sticky="([0-9a-f]{16})"; Max-Age=1800; Path=\/app; HttpOnly$/.exec(set[0]!)![1]!;
    expect(key).toBe(hashString(value));
    // The same connection gets the same value; the cookie sent back (quoted or bare) gives the same key and sets nothing.
    policy(conn('10.0.0.1', 40000), {}, (c) => set.push(c));
    expect(set[1]).toBe(set[0]);
    expect(policy(conn('10.0.0.9', 1), { cookie: `sticky="${value}"` }, (c) => set.push(c))).toBe(key);
    expect(policy(conn('10.0.0.9', 1), { cookie: `sticky=${value}` }, (c) => set.push(c))).toBe(key);
    expect(set).toHaveLength(2);
    // ttl 0s: a session cookie (no Max-Age); no callback (a policy evaluated for no response): no key, nothing generated.
    const session: string[] = [];
    compileHashPolicies([{ cookie: { name: 's', ttl: '0s' } }])!(conn('10.0.0.1', 1), {}, (c) => session.push(c));
    expect(session[0]).toMatch(/^s="[0-9a-f]{16}"; HttpOnly$/);
    expect(policy(conn('10.0.0.1', 40000), {})).toBeUndefined();
  });

  test('a ring hash cluster sends one key to one host, and keyless requests anywhere', async () => {
    const cluster = new UpstreamCluster('c', [1, 2, 3].map((port) => ({ addr: '127.0.0.1', port })), { loadBalancing: { kind: 'ring-hash', minimumRingSize: 1024, maximumRingSize: 8_388_608 } });
    const key = hashString('ann');
    const first = cluster.pick(undefined, key);
    for (let i = 0; i < 20; i++) expect(cluster.pick(undefined, key)).toBe(first);
    const seen = new Set(Array.from({ length: 200 }, () => cluster.pick().port));
    expect(seen.size).toBe(3);
    // An ejected host's keys move; it comes back with its keys.
    cluster.eject(first, 1000);
    expect(cluster.pick(1001, key)).not.toBe(first);
    expect(cluster.pick(1000 + 60_000, key)).toBe(first);
    await cluster.close();
  });
});
