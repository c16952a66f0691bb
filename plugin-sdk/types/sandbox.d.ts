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
/**
 * Timers serve a running call only: they fire while it is in flight, never after its deadline.
 * `await new Promise((resolve) => setTimeout(resolve, ms))` type-checks (the first overload, as in
 * Workers' types); extra arguments are passed to the handler (the second).
 */
declare function setTimeout(handler: (...args: any[]) => void, timeout?: number): number;
declare function setTimeout<A extends unknown[]>(handler: (...args: A) => void, timeout: number | undefined, ...args: A): number;
declare function clearTimeout(id: number | undefined): void;
declare function setInterval(handler: (...args: any[]) => void, timeout?: number): number;
declare function setInterval<A extends unknown[]>(handler: (...args: A) => void, timeout: number | undefined, ...args: A): number;
declare function clearInterval(id: number | undefined): void;

// --- DOMException, AbortController, AbortSignal ---------------------------------------------
declare class DOMException extends Error {
  constructor(message?: string, name?: string);
  readonly name: string;
  readonly code: number;
}
interface AbortSignalEventListenerOptions {
  once?: boolean;
  signal?: AbortSignal;
}
interface AbortSignalEvent {
  readonly type: 'abort';
  readonly target: AbortSignal;
  readonly currentTarget: AbortSignal;
}
/** `AbortSignal.timeout(ms)` runs on the sandbox's timers: it fires while a call is in flight. */
declare class AbortSignal {
  private constructor();
  static abort(reason?: unknown): AbortSignal;
  static timeout(milliseconds: number): AbortSignal;
  static any(signals: Iterable<AbortSignal>): AbortSignal;
  readonly aborted: boolean;
  readonly reason: unknown;
  onabort: ((event: AbortSignalEvent) => void) | null;
  throwIfAborted(): void;
  addEventListener(type: 'abort', listener: ((event: AbortSignalEvent) => void) | { handleEvent(event: AbortSignalEvent): void }, options?: boolean | AbortSignalEventListenerOptions): void;
  removeEventListener(type: 'abort', listener: ((event: AbortSignalEvent) => void) | { handleEvent(event: AbortSignalEvent): void }): void;
}
declare class AbortController {
  readonly signal: AbortSignal;
  abort(reason?: unknown): void;
}

// --- WebAssembly (V8's; linear memory counted against the step's memoryLimitMb) -------------
/**
 * V8's WebAssembly, with every linear memory inside the plugin's Wasm budget (the step's
 * `memoryLimitMb`): a memory reserves its maximum (what is left of the budget when it declares
 * none). Compiling and instantiating run synchronously within the call's CPU limit. No shared
 * or 64-bit memories.
 */
declare namespace WebAssembly {
  type ImportValue = Function | Global | Memory | Table | number;
  type ModuleImports = Record<string, ImportValue>;
  type Imports = Record<string, ModuleImports>;
  type ExportValue = Function | Global | Memory | Table;
  type Exports = Record<string, ExportValue>;
  type ImportExportKind = 'function' | 'table' | 'memory' | 'global' | 'tag';
  type ValueType = 'i32' | 'i64' | 'f32' | 'f64' | 'v128' | 'externref' | 'anyfunc' | 'funcref';
  interface ModuleExportDescriptor {
    kind: ImportExportKind;
    name: string;
  }
  interface ModuleImportDescriptor {
    kind: ImportExportKind;
    module: string;
    name: string;
  }
  interface MemoryDescriptor {
    initial: number;
    maximum?: number;
  }
  interface TableDescriptor {
    element: 'anyfunc' | 'externref' | 'funcref';
    initial: number;
    maximum?: number;
  }
  interface GlobalDescriptor {
    mutable?: boolean;
    value: ValueType;
  }
  interface WebAssemblyInstantiatedSource {
    instance: Instance;
    module: Module;
  }
  class Module {
    constructor(bytes: BufferSource);
    static customSections(moduleObject: Module, sectionName: string): ArrayBuffer[];
    static exports(moduleObject: Module): ModuleExportDescriptor[];
    static imports(moduleObject: Module): ModuleImportDescriptor[];
  }
  class Instance {
    constructor(module: Module, importObject?: Imports);
    readonly exports: Exports;
  }
  class Memory {
    constructor(descriptor: MemoryDescriptor);
    readonly buffer: ArrayBuffer;
    grow(delta: number): number;
  }
  class Table {
    constructor(descriptor: TableDescriptor, value?: unknown);
    readonly length: number;
    get(index: number): unknown;
    grow(delta: number, value?: unknown): number;
    set(index: number, value?: unknown): void;
  }
  class Global {
    constructor(descriptor: GlobalDescriptor, v?: unknown);
    value: unknown;
    valueOf(): unknown;
  }
  class CompileError extends Error {}
  class LinkError extends Error {}
  class RuntimeError extends Error {}
  function validate(bytes: BufferSource): boolean;
  function compile(bytes: BufferSource): Promise<Module>;
  function instantiate(bytes: BufferSource, importObject?: Imports): Promise<WebAssemblyInstantiatedSource>;
  function instantiate(moduleObject: Module, importObject?: Imports): Promise<Instance>;
  function compileStreaming(source: Response | PromiseLike<Response>): Promise<Module>;
  function instantiateStreaming(source: Response | PromiseLike<Response>, importObject?: Imports): Promise<WebAssemblyInstantiatedSource>;
}

// --- crypto ---------------------------------------------------------------------------------
type KeyUsage = 'encrypt' | 'decrypt' | 'sign' | 'verify' | 'deriveKey' | 'deriveBits' | 'wrapKey' | 'unwrapKey';
type KeyFormat = 'raw' | 'jwk' | 'spki' | 'pkcs8';
type KeyType = 'secret' | 'public' | 'private';
type HashAlgorithm = 'SHA-1' | 'SHA-256' | 'SHA-384' | 'SHA-512';
type HashAlgorithmIdentifier = HashAlgorithm | { name: HashAlgorithm };
type NamedCurve = 'P-256' | 'P-384' | 'P-521';
interface Algorithm {
  name: string;
}
interface RsaHashedKeyGenParams extends Algorithm {
  modulusLength: number;
  publicExponent: Uint8Array;
  hash: HashAlgorithmIdentifier;
}
interface RsaHashedImportParams extends Algorithm {
  hash: HashAlgorithmIdentifier;
}
interface RsaPssParams extends Algorithm {
  saltLength: number;
}
interface RsaOaepParams extends Algorithm {
  label?: BufferSource;
}
interface EcKeyGenParams extends Algorithm {
  namedCurve: NamedCurve;
}
type EcKeyImportParams = EcKeyGenParams;
interface EcdsaParams extends Algorithm {
  hash: HashAlgorithmIdentifier;
}
interface EcdhKeyDeriveParams extends Algorithm {
  public: CryptoKey;
}
interface HmacKeyGenParams extends Algorithm {
  hash: HashAlgorithmIdentifier;
  length?: number;
}
type HmacImportParams = HmacKeyGenParams;
interface AesKeyGenParams extends Algorithm {
  length: 128 | 192 | 256;
}
type AesDerivedKeyParams = AesKeyGenParams;
interface AesGcmParams extends Algorithm {
  iv: BufferSource;
  additionalData?: BufferSource;
  tagLength?: 32 | 64 | 96 | 104 | 112 | 120 | 128;
}
interface AesCbcParams extends Algorithm {
  iv: BufferSource;
}
interface AesCtrParams extends Algorithm {
  counter: BufferSource;
  length: number;
}
interface HkdfParams extends Algorithm {
  hash: HashAlgorithmIdentifier;
  salt: BufferSource;
  info: BufferSource;
}
/** `iterations` is at most 2 000 000 in the sandbox (the host's thread pool is shared). */
interface Pbkdf2Params extends Algorithm {
  hash: HashAlgorithmIdentifier;
  salt: BufferSource;
  iterations: number;
}
type AlgorithmIdentifier =
  | string
  | Algorithm
  | (Algorithm & {
      hash?: HashAlgorithmIdentifier;
      namedCurve?: string;
      saltLength?: number;
      length?: number;
    });
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
  readonly type: KeyType;
  readonly extractable: boolean;
  readonly algorithm: { name: string; [key: string]: unknown };
  readonly usages: KeyUsage[];
}
interface CryptoKeyPair {
  publicKey: CryptoKey;
  privateKey: CryptoKey;
}
/**
 * Node's crypto.subtle, run by the host: sign, verify and digest synchronously on the hot path,
 * the rest (encrypt, decrypt, generateKey, deriveKey, deriveBits, wrapKey, unwrapKey) on Node's
 * thread pool. Data is at most 16 MB an operation; RSA keys generated are at most 4096 bits.
 */
interface SubtleCrypto {
  digest(algorithm: HashAlgorithmIdentifier, data: BufferSource): Promise<ArrayBuffer>;
  importKey(format: 'jwk', keyData: JsonWebKey, algorithm: AlgorithmIdentifier | RsaHashedImportParams | EcKeyImportParams | HmacImportParams, extractable: boolean, usages: KeyUsage[]): Promise<CryptoKey>;
  importKey(format: Exclude<KeyFormat, 'jwk'>, keyData: BufferSource, algorithm: AlgorithmIdentifier | RsaHashedImportParams | EcKeyImportParams | HmacImportParams, extractable: boolean, usages: KeyUsage[]): Promise<CryptoKey>;
  exportKey(format: 'jwk', key: CryptoKey): Promise<JsonWebKey>;
  exportKey(format: Exclude<KeyFormat, 'jwk'>, key: CryptoKey): Promise<ArrayBuffer>;
  sign(algorithm: AlgorithmIdentifier | RsaPssParams | EcdsaParams, key: CryptoKey, data: BufferSource): Promise<ArrayBuffer>;
  verify(algorithm: AlgorithmIdentifier | RsaPssParams | EcdsaParams, key: CryptoKey, signature: BufferSource, data: BufferSource): Promise<boolean>;
  encrypt(algorithm: AlgorithmIdentifier | RsaOaepParams | AesGcmParams | AesCbcParams | AesCtrParams, key: CryptoKey, data: BufferSource): Promise<ArrayBuffer>;
  decrypt(algorithm: AlgorithmIdentifier | RsaOaepParams | AesGcmParams | AesCbcParams | AesCtrParams, key: CryptoKey, data: BufferSource): Promise<ArrayBuffer>;
  generateKey(algorithm: RsaHashedKeyGenParams | EcKeyGenParams, extractable: boolean, usages: KeyUsage[]): Promise<CryptoKeyPair>;
  generateKey(algorithm: 'Ed25519' | 'X25519' | { name: 'Ed25519' | 'X25519' }, extractable: boolean, usages: KeyUsage[]): Promise<CryptoKeyPair>;
  generateKey(algorithm: AesKeyGenParams | HmacKeyGenParams, extractable: boolean, usages: KeyUsage[]): Promise<CryptoKey>;
  generateKey(algorithm: AlgorithmIdentifier, extractable: boolean, usages: KeyUsage[]): Promise<CryptoKey | CryptoKeyPair>;
  deriveBits(algorithm: AlgorithmIdentifier | EcdhKeyDeriveParams | HkdfParams | Pbkdf2Params, baseKey: CryptoKey, length?: number | null): Promise<ArrayBuffer>;
  deriveKey(
    algorithm: AlgorithmIdentifier | EcdhKeyDeriveParams | HkdfParams | Pbkdf2Params,
    baseKey: CryptoKey,
    derivedKeyType: AlgorithmIdentifier | AesDerivedKeyParams | HmacImportParams,
    extractable: boolean,
    usages: KeyUsage[],
  ): Promise<CryptoKey>;
  wrapKey(format: KeyFormat, key: CryptoKey, wrappingKey: CryptoKey, wrapAlgorithm: AlgorithmIdentifier | RsaOaepParams | AesGcmParams | AesCbcParams | AesCtrParams): Promise<ArrayBuffer>;
  unwrapKey(
    format: KeyFormat,
    wrappedKey: BufferSource,
    unwrappingKey: CryptoKey,
    unwrapAlgorithm: AlgorithmIdentifier | RsaOaepParams | AesGcmParams | AesCbcParams | AesCtrParams,
    unwrappedKeyAlgorithm: AlgorithmIdentifier | RsaHashedImportParams | EcKeyImportParams | HmacImportParams,
    extractable: boolean,
    usages: KeyUsage[],
  ): Promise<CryptoKey>;
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
  /** Aborting it rejects the fetch with the signal's reason and cancels the request in the host. */
  signal?: AbortSignal | null;
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
