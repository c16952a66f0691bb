// Issue 24 finding 4, fuzzed: whatever path, query or redirect a plugin's fetch to an Upstream's
// virtual origin carries, the request goes to that Upstream or nowhere. Real servers on
// 127.0.0.1: the declared Upstream, and one nobody declared that must never see a request.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Egress, upstreamOrigin } from './egress.ts';

let keys: Server;
let forbidden: Server;
const keysSeen: string[] = [];
const forbiddenSeen: string[] = [];
let keysPort = 0;
let forbiddenPort = 0;

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

beforeAll(async () => {
  keys = createServer((req, res) => {
    keysSeen.push(req.url!);
    // Not `new URL(req.url, base)`: a request-target such as `///` is exactly what this test sends.
    const to = req.url!.startsWith('/r?') ? new URLSearchParams(req.url!.slice(3)).get('to') : null;
    if (to !== null) res.writeHead(302, { location: to }).end();
    else res.end('keys');
  });
  forbidden = createServer((req, res) => {
    forbiddenSeen.push(req.url!);
    res.end('escaped');
  });
  keysPort = await listen(keys);
  forbiddenPort = await listen(forbidden);
});

afterAll(async () => {
  await Promise.all([new Promise((resolve) => keys.close(resolve)), new Promise((resolve) => forbidden.close(resolve))]);
});

/** mulberry32: a seeded PRNG (the seed is in every failure message). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('egress to an upstreamRef keeps its authority (finding 4)', () => {
  const seed = Number(process.env.GATEHOUSE_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
  it(`no path, query or redirect reaches another host (seed ${seed})`, async () => {
    const origin = upstreamOrigin('keys', 'default');
    const egress = new Egress([{ origin, upstream: { hosts: [{ addr: '127.0.0.1', port: keysPort }], useTls: false } }]);
    const host = `127.0.0.1:${forbiddenPort}`;
    // Pieces that, put together, spell authorities in paths: slashes of every kind, dot segments,
    // encodings, userinfo, ports, IPv4 spellings.
    const pieces = ['/', '//', '\\', '\\\\', '/./', '/../', '/.//', '%2f', '%2F', '%5c', '%2e', '@', ':', '?', '#', host, `user@${host}`, `2130706433:${forbiddenPort}`, `0x7f.1:${forbiddenPort}`, `[::ffff:127.0.0.1]:${forbiddenPort}`, 'x', '\t', ' '];
    const random = prng(seed);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const cancel = new AbortController().signal;
    for (let i = 0; i < 300; i++) {
      let path = '';
      for (let n = 1 + Math.floor(random() * 6); n > 0; n--) path += pick(pieces);
      const direct = random() < 0.5;
      // Half of them as a URL the plugin writes, half as a redirect the Upstream answers.
      const url = direct ? `${origin}${path}` : `${origin}/r?to=${encodeURIComponent(random() < 0.5 ? `${origin}${path}` : path)}`;
      const answer = await egress.fetch({ url, method: 'GET', headers: [], body: null, redirect: 'follow' }, cancel);
      const where = `seed ${seed}, case ${i}: ${url}`;
      expect(forbiddenSeen, where).toEqual([]);
      if ('value' in answer) expect((answer.value as { body: Uint8Array }).body.byteLength, where).toBe(4);
      else expect(answer, where).toMatchObject({ error: { name: 'TypeError' } });
    }
    // The Upstream did see them: the test reached the code it means to.
    expect(keysSeen.length).toBeGreaterThan(100);
  });
});
