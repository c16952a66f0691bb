/**
 * The globals of the Gatehouse plugin sandbox (SPEC 5.3), and nothing else: no DOM, no Node.js.
 * Use with `"lib": ["es2023"]` and `"types": ["@gatehouse/plugin-sdk/sandbox"]` (what
 * `gatehouse-plugin init` writes), so code that would fail in the sandbox (`Buffer`,
 * `process`, `document`, `setImmediate`…) fails to type-check instead.
 */

type BufferSource = ArrayBufferView | ArrayBuffer;

// --- encoding -------------------------------------------------------------------------------
interface TextEncoderEncodeIntoResult {
  read: number;
  written: number;
}
declare class TextEncoder {
  readonly encoding: 'utf-8';
  encode(input?: string): Uint8Array;
  encodeInto(source: string, destination: Uint8Array): TextEncoderEncodeIntoResult;
}
interface TextDecoderOptions {
  fatal?: boolean;
  ignoreBOM?: boolean;
}
declare class TextDecoder {
  constructor(label?: 'utf-8' | 'utf8' | 'unicode-1-1-utf-8', options?: TextDecoderOptions);
  readonly encoding: string;
  readonly fatal: boolean;
  readonly ignoreBOM: boolean;
  decode(input?: BufferSource, options?: { stream?: boolean }): string;
}
declare function atob(data: string): string;
declare function btoa(data: string): string;
declare function structuredClone<T>(value: T, options?: { transfer?: unknown[] }): T;

// --- URL ------------------------------------------------------------------------------------
declare class URLSearchParams {
  constructor(init?: string | Record<string, string> | [string, string][] | URLSearchParams);
  readonly size: number;
  append(name: string, value: string): void;
  delete(name: string, value?: string): void;
  get(name: string): string | null;
  getAll(name: string): string[];
  has(name: string, value?: string): boolean;
  set(name: string, value: string): void;
  sort(): void;
  toString(): string;
  forEach(callback: (value: string, key: string, parent: URLSearchParams) => void): void;
  entries(): IterableIterator<[string, string]>;
  keys(): IterableIterator<string>;
  values(): IterableIterator<string>;
  [Symbol.iterator](): IterableIterator<[string, string]>;
}
declare class URL {
  constructor(url: string | URL, base?: string | URL);
  static canParse(url: string | URL, base?: string | URL): boolean;
  static parse(url: string | URL, base?: string | URL): URL | null;
  hash: string;
  host: string;
  hostname: string;
  href: string;
  readonly origin: string;
  password: string;
  pathname: string;
  port: string;
  protocol: string;
  search: string;
  readonly searchParams: URLSearchParams;
  username: string;
  toString(): string;
  toJSON(): string;
}

// --- console, performance, timers -----------------------------------------------------------
/** Goes to the step's logger (50 lines per call). */
declare const console: {
  log(...data: unknown[]): void;
  info(...data: unknown[]): void;
  debug(...data: unknown[]): void;
  trace(...data: unknown[]): void;
  warn(...data: unknown[]): void;
  error(...data: unknown[]): void;
};
declare const performance: { now(): number; readonly timeOrigin: number };
/** Timers serve a running call only: they fire while it is in flight, never after its deadline. */
declare function setTimeout<A extends unknown[]>(handler: (...args: A) => void, timeout?: number, ...args: A): number;
declare function clearTimeout(id: number | undefined): void;
declare function setInterval<A extends unknown[]>(handler: (...args: A) => void, timeout?: number, ...args: A): number;
declare function clearInterval(id: number | undefined): void;

// --- crypto ---------------------------------------------------------------------------------
type KeyUsage = 'sign' | 'verify';
type KeyFormat = 'raw' | 'jwk' | 'spki' | 'pkcs8';
type HashAlgorithm = 'SHA-1' | 'SHA-256' | 'SHA-384' | 'SHA-512';
type AlgorithmIdentifier =
  | string
  | { name: string; hash?: HashAlgorithm | { name: HashAlgorithm }; namedCurve?: 'P-256' | 'P-384' | 'P-521'; saltLength?: number; length?: number };
interface JsonWebKey {
  kty?: string;
  use?: string;
  key_ops?: string[];
  alg?: string;
  ext?: boolean;
  kid?: string;
  crv?: string;
  x?: string;
  y?: string;
  d?: string;
  n?: string;
  e?: string;
  p?: string;
  q?: string;
  dp?: string;
  dq?: string;
  qi?: string;
  k?: string;
}
/** An opaque handle: the key material stays with the host. */
declare class CryptoKey {
  readonly type: 'secret' | 'public' | 'private';
  readonly extractable: boolean;
  readonly algorithm: { name: string; [key: string]: unknown };
  readonly usages: KeyUsage[];
}
interface SubtleCrypto {
  digest(algorithm: HashAlgorithm | { name: HashAlgorithm }, data: BufferSource): Promise<ArrayBuffer>;
  importKey(format: 'jwk', keyData: JsonWebKey, algorithm: AlgorithmIdentifier, extractable: boolean, usages: KeyUsage[]): Promise<CryptoKey>;
  importKey(format: Exclude<KeyFormat, 'jwk'>, keyData: BufferSource, algorithm: AlgorithmIdentifier, extractable: boolean, usages: KeyUsage[]): Promise<CryptoKey>;
  sign(algorithm: AlgorithmIdentifier, key: CryptoKey, data: BufferSource): Promise<ArrayBuffer>;
  verify(algorithm: AlgorithmIdentifier, key: CryptoKey, signature: BufferSource, data: BufferSource): Promise<boolean>;
  exportKey(format: 'jwk', key: CryptoKey): Promise<JsonWebKey>;
  exportKey(format: Exclude<KeyFormat, 'jwk'>, key: CryptoKey): Promise<ArrayBuffer>;
}
declare const crypto: {
  getRandomValues<T extends Int8Array | Uint8Array | Uint8ClampedArray | Int16Array | Uint16Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array>(array: T): T;
  randomUUID(): `${string}-${string}-${string}-${string}-${string}`;
  readonly subtle: SubtleCrypto;
};

// --- fetch (only to the step's egress) ------------------------------------------------------
type HeadersInit = [string, string][] | Record<string, string> | Headers;
type BodyInit = string | BufferSource | URLSearchParams;
declare class Headers {
  constructor(init?: HeadersInit);
  append(name: string, value: string): void;
  delete(name: string): void;
  get(name: string): string | null;
  getSetCookie(): string[];
  has(name: string): boolean;
  set(name: string, value: string): void;
  forEach(callback: (value: string, key: string, parent: Headers) => void): void;
  entries(): IterableIterator<[string, string]>;
  keys(): IterableIterator<string>;
  values(): IterableIterator<string>;
  [Symbol.iterator](): IterableIterator<[string, string]>;
}
interface RequestInit {
  method?: string;
  headers?: HeadersInit;
  body?: BodyInit | null;
  redirect?: 'follow' | 'manual' | 'error';
}
interface Body {
  readonly bodyUsed: boolean;
  arrayBuffer(): Promise<ArrayBuffer>;
  bytes(): Promise<Uint8Array>;
  json(): Promise<unknown>;
  text(): Promise<string>;
}
declare class Request implements Body {
  constructor(input: string | URL | Request, init?: RequestInit);
  readonly method: string;
  readonly url: string;
  readonly headers: Headers;
  readonly redirect: 'follow' | 'manual' | 'error';
  readonly bodyUsed: boolean;
  arrayBuffer(): Promise<ArrayBuffer>;
  bytes(): Promise<Uint8Array>;
  json(): Promise<unknown>;
  text(): Promise<string>;
  clone(): Request;
}
interface ResponseInit {
  status?: number;
  statusText?: string;
  headers?: HeadersInit;
}
declare class Response implements Body {
  constructor(body?: BodyInit | null, init?: ResponseInit);
  static json(data: unknown, init?: ResponseInit): Response;
  static error(): Response;
  readonly status: number;
  readonly statusText: string;
  readonly ok: boolean;
  readonly headers: Headers;
  readonly url: string;
  readonly redirected: boolean;
  readonly type: string;
  readonly bodyUsed: boolean;
  arrayBuffer(): Promise<ArrayBuffer>;
  bytes(): Promise<Uint8Array>;
  json(): Promise<unknown>;
  text(): Promise<string>;
  clone(): Response;
}
/** Only to the origins of the step's `pluginAuth.egress`; anything else rejects with a TypeError naming them. */
declare function fetch(input: string | URL | Request, init?: RequestInit): Promise<Response>;
