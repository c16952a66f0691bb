/**
 * Where OIDC sessions live: sealed in the browser's cookie (AES-256-GCM; split over up to four
 * cookies when the tokens are large), or in Redis under a random id the cookie holds (Gloo's
 * `session.redis`, through core/src/redis/client.ts). Either way the browser never holds a token
 * it can read.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { RedisClient } from '../../redis/client.ts';
import { cookieNames, readCookie, setCookie, type CookieAttributes, type Sealer } from './cookies.ts';

/** One logged-in user's tokens. Times in epoch ms. */
export interface Session {
  /** ID token. */
  id: string;
  /** Access token. */
  at: string;
  rt?: string | undefined;
  /** When the tokens are to be refreshed (the earlier of the ID and access token's expiry). */
  exp: number;
  /** When the session began (a sealed cookie is refused after maxAge even if a browser kept it). */
  iat: number;
}

/** A loaded session and how to write it back. */
export interface Loaded {
  session: Session;
  /** The Redis session id; undefined for cookie sessions. */
  sid?: string | undefined;
  /** What was read (the cookie value(s)): a cache key. */
  raw: string;
}

/** A session store. `setCookies` are `set-cookie` values for the client. */
export interface SessionStore {
  readonly kind: 'cookie' | 'redis';
  /** The session in the request's cookies; undefined when none (or unusable); throws when the store failed. */
  load(cookieHeader: string | undefined): Promise<Loaded | undefined>;
  /** Stores `session` (a new one when `sid` is undefined); answers the cookies to set. */
  save(session: Session, previous: Loaded | undefined, cookieHeader: string | undefined): Promise<string[]>;
  /** Deletes the session; answers the cookies that clear it. */
  clear(previous: Loaded | undefined, cookieHeader: string | undefined): Promise<string[]>;
  close(): Promise<void>;
}

/** Longest value of one cookie (browsers keep at least 4096 bytes per cookie, name and attributes included). */
const CHUNK = 3_800;
const MAX_CHUNKS = 4;

function isSession(value: unknown): value is Session {
  const s = value as Session;
  return typeof s === 'object' && s !== null && typeof s.id === 'string' && typeof s.at === 'string' && typeof s.exp === 'number' && typeof s.iat === 'number' && (s.rt === undefined || typeof s.rt === 'string');
}

/** The session is too large for cookies. */
export class SessionTooLarge extends Error {}

/** Sessions sealed in cookies `<name>`, `<name>_1` … `<name>_3`. */
export class CookieSessionStore implements SessionStore {
  readonly kind = 'cookie';
  private readonly name: string;
  private readonly sealer: Sealer;
  private readonly attrs: CookieAttributes;

  constructor(name: string, sealer: Sealer, attrs: CookieAttributes) {
    this.name = name;
    this.sealer = sealer;
    this.attrs = attrs;
  }

  async load(header: string | undefined): Promise<Loaded | undefined> {
    const first = readCookie(header, this.name);
    if (!first) return undefined;
    let raw = first;
    const dot = first.indexOf('.');
    if (dot !== -1) {
      const count = Number(first.slice(0, dot));
      if (!Number.isInteger(count) || count < 2 || count > MAX_CHUNKS) return undefined;
      raw = first.slice(dot + 1);
      for (let i = 1; i < count; i++) {
        const piece = readCookie(header, `${this.name}_${i}`);
        if (!piece) return undefined;
        raw += piece;
      }
    }
    const session = this.sealer.open(raw, this.name);
    if (!isSession(session)) return undefined;
    if (this.attrs.maxAge > 0 && Date.now() - session.iat > this.attrs.maxAge * 1000) return undefined;
    return { session, raw };
  }

  async save(session: Session, _previous: Loaded | undefined, header: string | undefined): Promise<string[]> {
    const sealed = this.sealer.seal(session, this.name);
    const out: string[] = [];
    if (sealed.length <= CHUNK) out.push(setCookie(this.name, sealed, this.attrs));
    else {
      const count = Math.ceil(sealed.length / CHUNK);
      if (count > MAX_CHUNKS) throw new SessionTooLarge(`the sealed session is ${sealed.length} bytes, more than ${MAX_CHUNKS} cookies hold; use session.redis`);
      out.push(setCookie(this.name, `${count}.${sealed.slice(0, CHUNK)}`, this.attrs));
      for (let i = 1; i < count; i++) out.push(setCookie(`${this.name}_${i}`, sealed.slice(i * CHUNK, (i + 1) * CHUNK), this.attrs));
      // Chunks of a longer previous session are cleared below.
      for (const name of cookieNames(header, `${this.name}_`)) if (Number(name.slice(this.name.length + 1)) >= count) out.push(setCookie(name, '', this.attrs, { maxAge: -1 }));
      return out;
    }
    for (const name of cookieNames(header, `${this.name}_`)) if (/^\d$/.test(name.slice(this.name.length + 1))) out.push(setCookie(name, '', this.attrs, { maxAge: -1 }));
    return out;
  }

  async clear(_previous: Loaded | undefined, header: string | undefined): Promise<string[]> {
    const names = new Set([this.name, ...cookieNames(header, `${this.name}_`).filter((n) => /^\d$/.test(n.slice(this.name.length + 1)))]);
    return [...names].map((name) => setCookie(name, '', this.attrs, { maxAge: -1 }));
  }

  async close(): Promise<void> {}
}

/** Sessions in Redis under `<keyPrefix><sha256(id)>`; the cookie holds the random id only. */
export class RedisSessionStore implements SessionStore {
  readonly kind = 'redis';
  private readonly name: string;
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly attrs: CookieAttributes;

  constructor(name: string, redis: RedisClient, prefix: string, attrs: CookieAttributes) {
    this.name = name;
    this.redis = redis;
    this.prefix = prefix;
    this.attrs = attrs;
  }

  private key(sid: string): string {
    // Hashed: whoever reads Redis does not learn live session cookies.
    return this.prefix + createHash('sha256').update(sid).digest('base64url');
  }

  async load(header: string | undefined): Promise<Loaded | undefined> {
    const sid = readCookie(header, this.name);
    if (!sid || !/^[A-Za-z0-9_-]{43}$/.test(sid)) return undefined;
    const text = await this.redis.call((r) => r.get(this.key(sid)));
    if (!text) return undefined;
    let session: unknown;
    try {
      session = JSON.parse(text);
    } catch {
      return undefined;
    }
    return isSession(session) ? { session, sid, raw: sid } : undefined;
  }

  async save(session: Session, previous: Loaded | undefined): Promise<string[]> {
    const sid = previous?.sid ?? randomBytes(32).toString('base64url');
    const ttl = this.attrs.maxAge > 0 ? this.attrs.maxAge : 2_592_000;
    await this.redis.call((r) => r.set(this.key(sid), JSON.stringify(session), 'EX', ttl));
    return previous?.sid ? [] : [setCookie(this.name, sid, this.attrs)];
  }

  async clear(previous: Loaded | undefined, header: string | undefined): Promise<string[]> {
    const sid = previous?.sid ?? readCookie(header, this.name);
    if (sid && /^[A-Za-z0-9_-]{43}$/.test(sid)) await this.redis.call((r) => r.del(this.key(sid))).catch(() => 0);
    return [setCookie(this.name, '', this.attrs, { maxAge: -1 })];
  }

  async close(): Promise<void> {
    await this.redis.close();
  }
}
