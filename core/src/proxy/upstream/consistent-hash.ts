import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { durationMs } from '../../config/schema/common.ts';

/**
 * Consistent hashing for Gloo's `loadBalancerConfig.ringHash` / `maglev` with a route's
 * `options.lbHash.hashPolicies` (Envoy's semantics): a request's key (a header, a cookie, the
 * source IP) always lands on the same host while the hosts stay the same, and adding or
 * removing one host moves only about 1/N of the keys.
 *
 * Hashes are 32-bit (FNV-1a over UTF-16 code units, finished with MurmurHash3's fmix32 so
 * neighbouring keys spread); Envoy uses xxHash64, so the key-to-host mapping differs from
 * Envoy's, never its properties.
 */

/** A 32-bit hash of a string. */
export function hashString(value: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < value.length; i++) {
    h ^= value.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return fmix32(h);
}

function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Picks a host index for a hash; `usable` says whether an index may take traffic now. */
export interface HashTable {
  pick(hash: number, usable: (index: number) => boolean): number;
}

/** Envoy's ring hash defaults and limit (entries on the ring). */
export const RING_DEFAULT_MIN = 1024;
export const RING_DEFAULT_MAX = 8 * 1024 * 1024;

/**
 * Envoy's ring hash (Ketama): each host owns points on a 32-bit ring in proportion to its
 * weight; a key goes to the first point at or after its hash.
 *
 * Point counts: the lightest host gets `minSize` points and the others proportionally more,
 * the ring capped at `maxSize`. Envoy spreads `minSize` over all hosts instead, so its hosts
 * lose points when one is added and some keys move between the old hosts; here a host's
 * points depend only on its own weight, so adding a host moves keys to it and nowhere else
 * (below the cap). The ring still has at least `minSize` points.
 */
export class RingHash implements HashTable {
  private readonly points: Uint32Array;
  private readonly owners: Uint32Array;

  constructor(keys: readonly string[], weights: readonly number[], minSize = RING_DEFAULT_MIN, maxSize = RING_DEFAULT_MAX) {
    const lightest = Math.min(...weights);
    let counts = weights.map((w) => Math.ceil((w / lightest) * minSize));
    const total = counts.reduce((a, b) => a + b, 0);
    if (total > maxSize) counts = counts.map((c) => Math.max(1, Math.floor((c * maxSize) / total)));
    // hash * 2^16 + owner is exact in a double (48 bits): one numeric sort orders both.
    const entries = new Float64Array(counts.reduce((a, b) => a + b, 0));
    let n = 0;
    counts.forEach((count, owner) => {
      for (let i = 0; i < count; i++) entries[n++] = hashString(`${keys[owner]}_${i}`) * 65536 + owner;
    });
    entries.sort();
    this.points = new Uint32Array(entries.length);
    this.owners = new Uint32Array(entries.length);
    entries.forEach((entry, i) => {
      this.owners[i] = entry % 65536;
      this.points[i] = Math.floor(entry / 65536);
    });
  }

  get size(): number {
    return this.points.length;
  }

  pick(hash: number, usable: (index: number) => boolean): number {
    // First point at or after the hash (wrapping), then onward past hosts that cannot take traffic.
    let lo = 0;
    let hi = this.points.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.points[mid]! < hash) lo = mid + 1;
      else hi = mid;
    }
    for (let step = 0; step < this.points.length; step++) {
      const owner = this.owners[(lo + step) % this.points.length]!;
      if (usable(owner)) return owner;
    }
    return this.owners[lo % this.points.length]!;
  }
}

/** Envoy's Maglev table size (a prime). */
export const MAGLEV_TABLE_SIZE = 65537;

/**
 * Maglev (Google's, as Envoy builds it): every host walks its own permutation of a 65,537-slot
 * table, taking free slots in turn (weighted hosts take more turns); a key goes to
 * `table[hash % size]`. Lookups are one array read; a host change moves about 1/N of the slots.
 */
export class Maglev implements HashTable {
  private readonly table: Uint32Array;

  constructor(keys: readonly string[], weights: readonly number[], size = MAGLEV_TABLE_SIZE) {
    const table = new Uint32Array(size).fill(0xffffffff);
    const n = keys.length;
    const offset = keys.map((k) => hashString(`${k}#offset`) % size);
    const skip = keys.map((k) => (hashString(`${k}#skip`) % (size - 1)) + 1);
    const next = new Array<number>(n).fill(0);
    const maxWeight = Math.max(...weights);
    // Weighted turns (Envoy's): a host fills a slot on a round when its accumulated share reaches the next whole turn.
    const credit = new Array<number>(n).fill(0);
    let filled = 0;
    while (filled < size) {
      for (let i = 0; i < n && filled < size; i++) {
        credit[i]! += weights[i]! / maxWeight;
        if (credit[i]! < 1) continue;
        credit[i]! -= 1;
        let slot = (offset[i]! + next[i]! * skip[i]!) % size;
        while (table[slot] !== 0xffffffff) {
          next[i]!++;
          slot = (offset[i]! + next[i]! * skip[i]!) % size;
        }
        table[slot] = i;
        next[i]!++;
        filled++;
      }
    }
    this.table = table;
  }

  pick(hash: number, usable: (index: number) => boolean): number {
    const size = this.table.length;
    const start = hash % size;
    // A host that cannot take traffic: the next slots' owners, in table order (stable for every key of that slot).
    for (let step = 0; step < size; step++) {
      const owner = this.table[(start + step) % size]!;
      if (usable(owner)) return owner;
    }
    return this.table[start]!;
  }
}

/** One of Gloo's HashPolicy entries. */
export interface HashPolicySpec {
  header?: string | undefined;
  cookie?: { name: string; ttl?: string | undefined; path?: string | undefined } | undefined;
  sourceIp?: boolean | undefined;
  terminal?: boolean | undefined;
}

/**
 * A route's hash key: undefined when no policy produced one (the host is then picked at random, as
 * Envoy does). `setCookie` receives a `Set-Cookie` value for the response when a cookie policy with
 * `ttl` generated its cookie.
 */
export type HashKey = (req: IncomingMessage, headers: IncomingHttpHeaders, setCookie?: (value: string) => void) => number | undefined;

/**
 * Envoy's generated hash cookie (a cookie policy with `ttl`, the request without the cookie): the
 * value is a hash of the client's address and port, the same for every request of a connection;
 * `Max-Age` is the ttl in seconds (none for 0s: a session cookie), `Path` the policy's, HttpOnly.
 */
function generatedCookie(req: IncomingMessage, name: string, ttl: string, path: string | undefined): { value: string; header: string } {
  const value = createHash('sha256').update(`${req.socket.remoteAddress ?? ''}:${req.socket.remotePort ?? ''}`).digest('hex').slice(0, 16);
  const seconds = Math.floor(durationMs(ttl) / 1000);
  return { value, header: `${name}="${value}"${seconds > 0 ? `; Max-Age=${seconds}` : ''}${path ? `; Path=${path}` : ''}; HttpOnly` };
}

/**
 * Envoy's hash policy evaluation: each policy that finds its value is folded into the key
 * (rotate left one bit, XOR); a `terminal` policy that produced a key ends the list.
 */
export function compileHashPolicies(policies: readonly HashPolicySpec[] | undefined): HashKey | undefined {
  if (!policies || policies.length === 0) return undefined;
  const parts = policies.map((p) => {
    const terminal = p.terminal === true;
    if (p.header !== undefined) {
      const name = p.header.toLowerCase();
      return { terminal, value: (_req: IncomingMessage, headers: IncomingHttpHeaders) => { const v = headers[name]; return v === undefined ? undefined : Array.isArray(v) ? v.join(',') : v; } };
    }
    if (p.cookie) {
      const { name, ttl, path } = p.cookie;
      if (ttl === undefined) return { terminal, value: (_req: IncomingMessage, headers: IncomingHttpHeaders) => cookieValue(headers.cookie, name) };
      return {
        terminal,
        value: (req: IncomingMessage, headers: IncomingHttpHeaders, setCookie?: (value: string) => void) => {
          const found = cookieValue(headers.cookie, name);
          if (found !== undefined || !setCookie) return found;
          const cookie = generatedCookie(req, name, ttl, path);
          setCookie(cookie.header);
          return cookie.value;
        },
      };
    }
    if (p.sourceIp) return { terminal, value: (req: IncomingMessage) => req.socket.remoteAddress };
    return { terminal, value: () => undefined };
  });
  return (req, headers, setCookie) => {
    let key: number | undefined;
    for (const part of parts) {
      const value = part.value(req, headers, setCookie);
      if (value !== undefined) {
        const h = hashString(value);
        key = key === undefined ? h : (((key << 1) | (key >>> 31)) ^ h) >>> 0;
      }
      if (part.terminal && key !== undefined) break;
    }
    return key;
  };
}

/** A cookie's value from a `cookie` header ('' values count: Envoy hashes what is there). */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq === -1 || pair.slice(0, eq).trim() !== name) continue;
    const value = pair.slice(eq + 1).trim();
    // A quoted value is its content (RFC 6265; Envoy strips the quotes, and generates quoted cookies).
    return value.length >= 2 && value.charCodeAt(0) === 0x22 && value.charCodeAt(value.length - 1) === 0x22 ? value.slice(1, -1) : value;
  }
  return undefined;
}
