/**
 * Fetch's `Headers`, `Request` and `Response` for the sandbox (SPEC 5.3), as far as an auth
 * plugin's `fetch` needs them: plain JavaScript, bodies held as bytes. Runs inside the isolate;
 * ./fetch-types.test.ts holds them to Node's own (undici) classes.
 */
import { TextDecoder, utf8Encode } from './encoding.ts';

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Header values: no NUL, CR or LF; surrounding HTTP whitespace is trimmed (Fetch "normalize").
const BAD_VALUE = /[\0\r\n]/;
const decoder = new TextDecoder();
const { isArray } = Array;

function normalizeValue(value: unknown): string {
  return String(value).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '');
}

function checkName(name: string): string {
  if (!TOKEN.test(name)) throw new TypeError(`Headers: invalid header name "${name}"`);
  return name.toLowerCase();
}

function checkValue(name: string, value: string): string {
  const v = normalizeValue(value);
  if (BAD_VALUE.test(v) || /[^\0-\xff]/.test(v)) throw new TypeError(`Headers: invalid value for header "${name}"`);
  return v;
}

type HeadersInit = Headers | Record<string, string> | Iterable<readonly [string, string]> | [string, string][];

/** Fetch `Headers`: case-insensitive, combined with ", " (set-cookie kept apart), iterated sorted. */
export class Headers {
  readonly #list = new Map<string, string[]>();

  constructor(init?: HeadersInit | null) {
    if (init === undefined || init === null) return;
    if (init instanceof Headers) {
      for (const [name, values] of init.#list) this.#list.set(name, [...values]);
    } else if (typeof init === 'object' && typeof (init as Iterable<unknown>)[Symbol.iterator] === 'function') {
      for (const pair of init as Iterable<unknown>) {
        const entry = [...(pair as Iterable<unknown>)];
        if (entry.length !== 2) throw new TypeError('Headers: each header pair must be [name, value]');
        this.append(String(entry[0]), String(entry[1]));
      }
    } else if (typeof init === 'object') {
      for (const name of Object.keys(init)) this.append(name, String((init as Record<string, unknown>)[name]));
    } else {
      throw new TypeError('Headers: init must be an object, an iterable of pairs or Headers');
    }
  }

  append(name: string, value: string): void {
    const key = checkName(String(name));
    const v = checkValue(key, value);
    const values = this.#list.get(key);
    if (values) values.push(v);
    else this.#list.set(key, [v]);
  }

  set(name: string, value: string): void {
    const key = checkName(String(name));
    this.#list.set(key, [checkValue(key, value)]);
  }

  delete(name: string): void {
    this.#list.delete(checkName(String(name)));
  }

  get(name: string): string | null {
    const values = this.#list.get(checkName(String(name)));
    return values ? values.join(', ') : null;
  }

  getSetCookie(): string[] {
    return [...(this.#list.get('set-cookie') ?? [])];
  }

  has(name: string): boolean {
    return this.#list.has(checkName(String(name)));
  }

  forEach(callback: (value: string, name: string, headers: Headers) => void, thisArg?: unknown): void {
    for (const [name, value] of this.entries()) callback.call(thisArg, value, name, this);
  }

  *entries(): IterableIterator<[string, string]> {
    const names = [...this.#list.keys()].sort();
    for (const name of names) {
      const values = this.#list.get(name);
      if (!values) continue;
      // set-cookie values are never combined (Fetch "sort and combine").
      if (name === 'set-cookie') for (const value of values) yield [name, value];
      else yield [name, values.join(', ')];
    }
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

  get [Symbol.toStringTag](): string {
    return 'Headers';
  }
}

type BodyInit = string | ArrayBuffer | ArrayBufferView | { toString(): string } | null | undefined;

/** Bytes and a default content type of a body (strings UTF-8; URLSearchParams form-encoded). */
function extractBody(body: BodyInit): { bytes: Uint8Array | null; type: string | null } {
  if (body === null || body === undefined) return { bytes: null, type: null };
  if (typeof body === 'string') return { bytes: utf8Encode(body), type: 'text/plain;charset=UTF-8' };
  if (body instanceof ArrayBuffer) return { bytes: new Uint8Array(body.slice(0)), type: null };
  if (ArrayBuffer.isView(body)) return { bytes: new Uint8Array(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer), type: null };
  if (Object.prototype.toString.call(body) === '[object URLSearchParams]') return { bytes: utf8Encode(String(body)), type: 'application/x-www-form-urlencoded;charset=UTF-8' };
  return { bytes: utf8Encode(String(body)), type: 'text/plain;charset=UTF-8' };
}

/** The body half shared by Request and Response: each body can be read once. */
class Body {
  #bytes: Uint8Array | null;
  #used = false;

  constructor(bytes: Uint8Array | null) {
    this.#bytes = bytes;
  }

  get bodyUsed(): boolean {
    return this.#used;
  }

  /** Fetch has a ReadableStream here; the sandbox has none, so `body` is null or a copy of the bytes. */
  get body(): Uint8Array | null {
    return this.#bytes ? this.#bytes.slice() : null;
  }

  #consume(): Promise<Uint8Array> {
    if (this.#used) return Promise.reject(new TypeError('Body is unusable: Body has already been read'));
    this.#used = true;
    return Promise.resolve(this.#bytes ? this.#bytes.slice() : new Uint8Array(0));
  }

  arrayBuffer(): Promise<ArrayBuffer> {
    return this.#consume().then((bytes) => bytes.buffer as ArrayBuffer);
  }

  bytes(): Promise<Uint8Array> {
    return this.#consume();
  }

  text(): Promise<string> {
    return this.#consume().then((bytes) => decoder.decode(bytes));
  }

  json(): Promise<unknown> {
    return this.text().then((text) => JSON.parse(text) as unknown);
  }

  /** For clone(): the bytes, without marking the body used. */
  protected peek(): Uint8Array | null {
    if (this.#used) throw new TypeError('Response.clone: Body has already been consumed.');
    return this.#bytes;
  }
}

const FORBIDDEN_METHODS = new Set(['CONNECT', 'TRACE', 'TRACK']);
// Fetch's "normalize a method": these six only. `patch` stays `patch` (a server may tell them apart).
const NORMALIZED_METHODS = new Set(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT']);

/** The URL parser Request and Response.redirect use: the sandbox's (the host's WHATWG parser), set once its URL class exists. */
type UrlClass = new (input: string) => { href: string; username: string; password: string };
let UrlClass: UrlClass | undefined;

/** Gives Request and Response.redirect the sandbox's `URL` (install time, before plugin code runs). */
export function useUrlClass(url: UrlClass | undefined): void {
  UrlClass = url;
}

/** `text` parsed as an absolute URL (the sandbox has no base URL), or the TypeError Fetch throws. */
function parseUrl(text: string): { href: string; username: string; password: string } {
  const Url = UrlClass ?? (globalThis as unknown as { URL?: UrlClass }).URL;
  if (Url) {
    try {
      return new Url(text);
    } catch {
      throw new TypeError(`Failed to parse URL from ${text}`);
    }
  }
  // No URL class at all (a host that grants no URL parsing): the scheme at least must be there.
  if (!/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(text)) throw new TypeError(`Failed to parse URL from ${text}`);
  return { href: text, username: '', password: '' };
}

interface RequestInit {
  method?: string;
  headers?: HeadersInit;
  body?: BodyInit;
  redirect?: 'follow' | 'manual' | 'error';
}

/** Fetch `Request`: an absolute http(s) URL (the sandbox has no base URL), method, headers, body. */
export class Request extends Body {
  readonly url: string;
  readonly method: string;
  readonly headers: Headers;
  readonly redirect: 'follow' | 'manual' | 'error';

  constructor(input: unknown, init: RequestInit = {}) {
    const source = input instanceof Request ? input : undefined;
    let url: string;
    if (source) url = source.url;
    else {
      const parsed = parseUrl(String(input));
      if (parsed.username !== '' || parsed.password !== '') throw new TypeError(`Request cannot be constructed from a URL that includes credentials: ${String(input)}`);
      url = parsed.href;
    }
    let method = init.method !== undefined ? String(init.method) : (source?.method ?? 'GET');
    if (!TOKEN.test(method)) throw new TypeError(`'${method}' is not a valid HTTP method.`);
    const upper = method.toUpperCase();
    if (FORBIDDEN_METHODS.has(upper)) throw new TypeError(`'${method}' HTTP method is unsupported.`);
    if (NORMALIZED_METHODS.has(upper)) method = upper;
    const headers = new Headers(init.headers ?? source?.headers);
    const hasBody = init.body !== undefined && init.body !== null;
    if (hasBody && (method === 'GET' || method === 'HEAD')) throw new TypeError('Request with GET/HEAD method cannot have body.');
    const extracted = hasBody ? extractBody(init.body) : { bytes: source ? source.peekBytes() : null, type: null };
    if (extracted.type && !headers.has('content-type')) headers.set('content-type', extracted.type);
    const redirect = init.redirect ?? source?.redirect ?? 'follow';
    if (redirect !== 'follow' && redirect !== 'manual' && redirect !== 'error') throw new TypeError(`Request: redirect must be "follow", "manual" or "error"`);
    super(extracted.bytes);
    this.url = url;
    this.method = method;
    this.headers = headers;
    this.redirect = redirect;
  }

  /** @internal the bytes for a copy. */
  peekBytes(): Uint8Array | null {
    return this.peek();
  }

  clone(): Request {
    return new Request(this);
  }

  get [Symbol.toStringTag](): string {
    return 'Request';
  }
}

interface ResponseInit {
  status?: number;
  statusText?: string;
  headers?: HeadersInit;
}

const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Set by {@link responseFrom} only: a response's url and redirected flag come from the network. */
const fromNetwork = new WeakMap<object, { url: string; redirected: boolean; type: string }>();

/** Fetch `Response`. */
export class Response extends Body {
  readonly status: number;
  readonly statusText: string;
  readonly headers: Headers;

  constructor(body?: BodyInit, init: ResponseInit = {}) {
    const status = init.status === undefined ? 200 : Number(init.status);
    if (!Number.isInteger(status) || status < 200 || status > 599) throw new RangeError(`init["status"] must be in the range of 200 to 599, inclusive.`);
    const statusText = init.statusText === undefined ? '' : String(init.statusText);
    if (/[^\t\x20-\x7e\x80-\xff]/.test(statusText)) throw new TypeError('Invalid statusText');
    const headers = new Headers(init.headers);
    const extracted = extractBody(body);
    if (extracted.bytes && NULL_BODY_STATUSES.has(status)) throw new TypeError('Response constructor: Invalid response status code ' + status);
    if (extracted.type && !headers.has('content-type')) headers.set('content-type', extracted.type);
    super(extracted.bytes);
    this.status = status;
    this.statusText = statusText;
    this.headers = headers;
  }

  get ok(): boolean {
    return this.status >= 200 && this.status <= 299;
  }

  get url(): string {
    return fromNetwork.get(this)?.url ?? '';
  }

  get redirected(): boolean {
    return fromNetwork.get(this)?.redirected ?? false;
  }

  get type(): string {
    return fromNetwork.get(this)?.type ?? 'default';
  }

  clone(): Response {
    const cloned = rebuild(this, this.peek());
    const network = fromNetwork.get(this);
    if (network) fromNetwork.set(cloned, network);
    return cloned;
  }

  static json(data: unknown, init: ResponseInit = {}): Response {
    const text = JSON.stringify(data);
    if (text === undefined) throw new TypeError('Value is not JSON serializable');
    const headers = new Headers(init.headers);
    if (!headers.has('content-type')) headers.set('content-type', 'application/json');
    return new Response(text, { ...init, headers });
  }

  static redirect(url: string, status = 302): Response {
    const location = parseUrl(String(url)).href;
    if (!REDIRECT_STATUSES.has(status)) throw new RangeError(`Invalid status code ${status}`);
    return new Response(null, { status, headers: { location } });
  }

  static error(): Response {
    const response = new Response(null, { status: 200 });
    fromNetwork.set(response, { url: '', redirected: false, type: 'error' });
    Object.defineProperty(response, 'status', { value: 0 });
    return response;
  }

  get [Symbol.toStringTag](): string {
    return 'Response';
  }
}

/** A response with the same status/headers and `bytes` as body (bypasses the null-body check for 1xx/204/304 copies). */
function rebuild(shape: Response, bytes: Uint8Array | null): Response {
  const response = new Response(bytes && !NULL_BODY_STATUSES.has(shape.status) ? bytes.slice() : null, { status: shape.status < 200 ? 200 : shape.status, statusText: shape.statusText, headers: shape.headers });
  if (shape.status < 200) Object.defineProperty(response, 'status', { value: shape.status });
  return response;
}

/** The parts of a Request the host's fetch needs (a copy). */
export function requestParts(request: Request): { url: string; method: string; headers: [string, string][]; body: Uint8Array | null; redirect: 'follow' | 'manual' | 'error' } {
  const body = request.peekBytes();
  return { url: request.url, method: request.method, headers: [...request.headers], body: body ? body.slice() : null, redirect: request.redirect };
}

/** A Response built from what the host's fetch answered (status may be any 1xx–5xx, url and redirected set). */
export function responseFrom(parts: { status: number; statusText: string; headers: [string, string][]; body: Uint8Array; url: string; redirected: boolean }): Response {
  const status = Number(parts.status);
  const nullBody = NULL_BODY_STATUSES.has(status) || status < 200;
  const response = new Response(nullBody ? null : parts.body, { status: status >= 200 && status <= 599 ? status : 200, statusText: String(parts.statusText ?? ''), headers: isArray(parts.headers) ? parts.headers : [] });
  if (status < 200 || status > 599) Object.defineProperty(response, 'status', { value: status });
  fromNetwork.set(response, { url: String(parts.url), redirected: parts.redirected === true, type: 'basic' });
  return response;
}

