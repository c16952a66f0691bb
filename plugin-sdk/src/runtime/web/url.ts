import type { HostUrl, HostUrlParts } from '../host-api.ts';
import { TextDecoder, utf8Encode } from './encoding.ts';

/**
 * `URL` and `URLSearchParams` for the sandbox (SPEC 5.3). URL parsing and setters are the host's
 * own WHATWG parser (Node's `URL`, through one synchronous callback answering the components),
 * so the sandbox's URL is Node's; `URLSearchParams` is plain JavaScript (the
 * application/x-www-form-urlencoded rules). Runs inside the isolate.
 */

const decoder = new TextDecoder();
const HEX = '0123456789ABCDEF';

/** application/x-www-form-urlencoded byte serializer (WHATWG URL §5.2). */
function serialize(text: string): string {
  const bytes = utf8Encode(text);
  let out = '';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b === 0x20) out += '+';
    else if (b === 0x2a || b === 0x2d || b === 0x2e || b === 0x5f || (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a)) out += String.fromCharCode(b);
    else out += `%${HEX[b >> 4]}${HEX[b & 15]}`;
  }
  return out;
}

/** Percent-decodes (after `+` → space) and decodes UTF-8 with replacement. */
function parseComponent(text: string): string {
  const bytes = utf8Encode(text.replace(/\+/g, ' '));
  const out = new Uint8Array(bytes.length);
  let n = 0;
  const hex = (c: number) => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b === 0x25 && i + 2 < bytes.length && hex(bytes[i + 1]!) && hex(bytes[i + 2]!)) {
      out[n++] = parseInt(String.fromCharCode(bytes[i + 1]!, bytes[i + 2]!), 16);
      i += 2;
    } else out[n++] = b;
  }
  return decoder.decode(out.subarray(0, n));
}

function parseQuery(query: string): [string, string][] {
  const list: [string, string][] = [];
  for (const sequence of query.split('&')) {
    if (sequence === '') continue;
    const at = sequence.indexOf('=');
    const name = at === -1 ? sequence : sequence.slice(0, at);
    const value = at === -1 ? '' : sequence.slice(at + 1);
    list.push([parseComponent(name), parseComponent(value)]);
  }
  return list;
}

/** USVString conversion: lone surrogates become U+FFFD. */
function usv(value: unknown): string {
  return String(value).replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
}

/**
 * The URL with an empty query removed (WHATWG URLSearchParams "update steps": an empty list sets
 * the query to null). Only a `?` before the fragment is the query's: one inside the fragment stays.
 */
function withoutEmptyQuery(parts: HostUrlParts): HostUrlParts {
  const hash = parts.href.indexOf('#');
  const beforeHash = hash === -1 ? parts.href : parts.href.slice(0, hash);
  if (!beforeHash.endsWith('?')) return { ...parts, search: '' };
  return { ...parts, href: beforeHash.slice(0, -1) + (hash === -1 ? '' : parts.href.slice(hash)), search: '' };
}

/** Builds the two classes over the host's parser. */
export function createUrlClasses(hostUrl: HostUrl): { URL: unknown; URLSearchParams: unknown } {
  const parse = (input: string, base?: string, set?: [keyof HostUrlParts, string]): HostUrlParts | null => hostUrl(input, base, set);
  /** The URL a URLSearchParams object updates (set only for `url.searchParams`). */
  const owners = new WeakMap<URLSearchParams, { update(search: string): void }>();

  class URLSearchParams {
    #list: [string, string][] = [];

    constructor(init: unknown = '') {
      if (init instanceof URLSearchParams) this.#list = init.#list.map(([n, v]) => [n, v]);
      else if (typeof init === 'object' && init !== null && typeof (init as Iterable<unknown>)[Symbol.iterator] === 'function') {
        for (const pair of init as Iterable<unknown>) {
          if (typeof pair !== 'object' || pair === null || typeof (pair as Iterable<unknown>)[Symbol.iterator] !== 'function') throw new TypeError('Each query pair must be an iterable [name, value] tuple');
          const entry = [...(pair as Iterable<unknown>)];
          if (entry.length !== 2) throw new TypeError('Each query pair must be an iterable [name, value] tuple');
          this.#list.push([usv(entry[0]), usv(entry[1])]);
        }
      } else if ((typeof init === 'object' && init !== null) || typeof init === 'function') {
        for (const name of Object.keys(init as object)) this.#list.push([usv(name), usv((init as Record<string, unknown>)[name])]);
      } else {
        const text = usv(init);
        this.#list = parseQuery(text.startsWith('?') ? text.slice(1) : text);
      }
    }

    /** @internal replaces the list from a URL's query (no update back). */
    static fromQuery(query: string): URLSearchParams {
      const params = new URLSearchParams();
      params.#list = parseQuery(query);
      return params;
    }

    /** @internal */
    static reset(params: URLSearchParams, query: string): void {
      params.#list = parseQuery(query);
    }

    #update(): void {
      owners.get(this)?.update(this.toString());
    }

    get size(): number {
      return this.#list.length;
    }

    append(name: unknown, value: unknown): void {
      this.#list.push([usv(name), usv(value)]);
      this.#update();
    }

    delete(name: unknown, value?: unknown): void {
      const n = usv(name);
      const v = value === undefined ? undefined : usv(value);
      this.#list = this.#list.filter(([k, x]) => k !== n || (v !== undefined && x !== v));
      this.#update();
    }

    get(name: unknown): string | null {
      const n = usv(name);
      return this.#list.find(([k]) => k === n)?.[1] ?? null;
    }

    getAll(name: unknown): string[] {
      const n = usv(name);
      return this.#list.filter(([k]) => k === n).map(([, v]) => v);
    }

    has(name: unknown, value?: unknown): boolean {
      const n = usv(name);
      const v = value === undefined ? undefined : usv(value);
      return this.#list.some(([k, x]) => k === n && (v === undefined || x === v));
    }

    set(name: unknown, value: unknown): void {
      const n = usv(name);
      const v = usv(value);
      const at = this.#list.findIndex(([k]) => k === n);
      if (at === -1) this.#list.push([n, v]);
      else {
        this.#list[at] = [n, v];
        this.#list = this.#list.filter(([k], i) => k !== n || i === at);
      }
      this.#update();
    }

    sort(): void {
      // Stable, by UTF-16 code units (Array.prototype.sort is stable; < compares code units).
      this.#list = this.#list.map((entry, i) => [entry, i] as const).sort(([a, i], [b, j]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : i - j)).map(([entry]) => entry);
      this.#update();
    }

    forEach(callback: (value: string, name: string, params: URLSearchParams) => void, thisArg?: unknown): void {
      if (typeof callback !== 'function') throw new TypeError('The "callback" argument must be of type function');
      for (let i = 0; i < this.#list.length; i++) {
        const [name, value] = this.#list[i]!;
        callback.call(thisArg, value, name, this);
      }
    }

    *entries(): IterableIterator<[string, string]> {
      for (let i = 0; i < this.#list.length; i++) yield [this.#list[i]![0], this.#list[i]![1]];
    }

    *keys(): IterableIterator<string> {
      for (const [name] of this.entries()) yield name;
    }

    *values(): IterableIterator<string> {
      for (const [, value] of this.entries()) yield value;
    }

    [Symbol.iterator](): IterableIterator<[string, string]> {
      return this.entries();
    }

    toString(): string {
      return this.#list.map(([n, v]) => `${serialize(n)}=${serialize(v)}`).join('&');
    }

    get [Symbol.toStringTag](): string {
      return 'URLSearchParams';
    }
  }

  // Internal doors of URLSearchParams, taken off the class so plugin code cannot call them.
  const fromQuery = URLSearchParams.fromQuery;
  const reset = URLSearchParams.reset;
  delete (URLSearchParams as { fromQuery?: unknown }).fromQuery;
  delete (URLSearchParams as { reset?: unknown }).reset;

  class URL {
    #parts: HostUrlParts;
    #query: URLSearchParams | undefined;

    constructor(input: unknown, base?: unknown) {
      const parts = parse(usv(input), base === undefined ? undefined : usv(base));
      if (!parts) throw new TypeError('Invalid URL');
      this.#parts = parts;
    }

    static canParse(input: unknown, base?: unknown): boolean {
      return parse(usv(input), base === undefined ? undefined : usv(base)) !== null;
    }

    static parse(input: unknown, base?: unknown): URL | null {
      try {
        return new URL(input, base);
      } catch {
        return null;
      }
    }

    #set(name: keyof HostUrlParts, value: unknown): void {
      const parts = parse(this.#parts.href, undefined, [name, usv(value)]);
      if (!parts) throw new TypeError('Invalid URL');
      this.#parts = parts;
      if (this.#query) reset(this.#query, parts.search.slice(1));
    }

    get href(): string {
      return this.#parts.href;
    }
    set href(value: string) {
      const parts = parse(usv(value));
      if (!parts) throw new TypeError('Invalid URL');
      this.#parts = parts;
      if (this.#query) reset(this.#query, parts.search.slice(1));
    }
    get origin(): string {
      return this.#parts.origin;
    }
    get protocol(): string {
      return this.#parts.protocol;
    }
    set protocol(value: string) {
      this.#set('protocol', value);
    }
    get username(): string {
      return this.#parts.username;
    }
    set username(value: string) {
      this.#set('username', value);
    }
    get password(): string {
      return this.#parts.password;
    }
    set password(value: string) {
      this.#set('password', value);
    }
    get host(): string {
      return this.#parts.host;
    }
    set host(value: string) {
      this.#set('host', value);
    }
    get hostname(): string {
      return this.#parts.hostname;
    }
    set hostname(value: string) {
      this.#set('hostname', value);
    }
    get port(): string {
      return this.#parts.port;
    }
    set port(value: string) {
      this.#set('port', value);
    }
    get pathname(): string {
      return this.#parts.pathname;
    }
    set pathname(value: string) {
      this.#set('pathname', value);
    }
    get search(): string {
      return this.#parts.search;
    }
    set search(value: string) {
      this.#set('search', value);
    }
    get hash(): string {
      return this.#parts.hash;
    }
    set hash(value: string) {
      this.#set('hash', value);
    }
    get searchParams(): URLSearchParams {
      if (!this.#query) {
        const query = fromQuery(this.#parts.search.slice(1));
        owners.set(query, {
          update: (search) => {
            // Setting search through the host, without re-reading the list (WHATWG "update steps").
            const parts = parse(this.#parts.href, undefined, ['search', search]);
            if (parts) this.#parts = search === '' ? withoutEmptyQuery(parts) : parts;
          },
        });
        this.#query = query;
      }
      return this.#query;
    }
    toString(): string {
      return this.#parts.href;
    }
    toJSON(): string {
      return this.#parts.href;
    }
    get [Symbol.toStringTag](): string {
      return 'URL';
    }
  }

  return { URL, URLSearchParams };
}
