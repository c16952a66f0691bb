import { createSecretKey, KeyObject, webcrypto } from 'node:crypto';
import type { HostAnswer } from '../sandbox-runtime.ts';

/**
 * The host's half of the sandbox's asynchronous `crypto.subtle` methods (encrypt, decrypt,
 * generateKey, deriveKey, deriveBits, wrapKey, unwrapKey, and importKey/exportKey of the
 * algorithms the synchronous path does not cover): the call is run by Node's own
 * `crypto.subtle` on the isolate's arguments, so algorithms, argument rules and errors are
 * Node's by construction, and the heavy work (AES, HKDF, PBKDF2, ECDH, key generation) runs on
 * Node's thread pool as Node schedules it. The isolate half (../web/subtle.ts) sends arguments
 * as tagged plain data ({@link Wire}); keys cross as handles with their material, which the
 * host re-registers when it has dropped the handle. Bounded: data sizes, PBKDF2 work, RSA
 * modulus, and the operations one isolate may have running and waiting.
 */

/** Largest BufferSource one operation takes. */
export const MAX_SUBTLE_DATA = 16 * 1024 * 1024;
/**
 * Most PBKDF2 iterations: OWASP's 2023 advice for PBKDF2-HMAC-SHA256 is 600 000 (and 210 000 for
 * SHA-512). Measured on the 2-core dev machine under load: 600 000 SHA-256 iterations 1.2 s of a
 * pool thread, so the bound keeps one operation to about two seconds of it.
 */
export const MAX_PBKDF2_ITERATIONS = 1_000_000;
/** Most bits one PBKDF2 deriveBits produces (each hash-sized block costs the iterations again). */
export const MAX_PBKDF2_BITS = 4096;
/** Largest RSA modulus generateKey makes (an 8192-bit key takes seconds of a pool thread). */
export const MAX_RSA_MODULUS_BITS = 4096;
/** Operations of one isolate running on the thread pool at once (Node's pool has 4 threads by default). */
export const MAX_SUBTLE_RUNNING = 2;
/** Operations of one isolate waiting for a turn; more are refused. */
export const MAX_SUBTLE_WAITING = 256;

/**
 * A value as it crosses: `{p}` a primitive, `{b}` the bytes of a BufferSource, `{a}` an array,
 * `{o}` an object's enumerable properties, `{k}` a CryptoKey of the isolate.
 */
export type Wire = { p: unknown } | { b: Uint8Array } | { a: Wire[] } | { o: Record<string, Wire> } | { k: WireKey };

/** A key as the isolate sends it: its handle, and what re-registers it. */
export interface WireKey {
  handle: number;
  type: 'secret' | 'public' | 'private';
  material: Uint8Array;
  algorithm: { name: string; hash?: string; namedCurve?: string; length?: number };
  extractable: boolean;
  usages: string[];
}

/** A key as the host answers it: a {@link WireKey} plus the algorithm it reports (WebCrypto's KeyAlgorithm). */
export interface AnsweredKey extends WireKey {
  reported: Record<string, unknown>;
}

/** What the async dispatcher answers in `value`. */
export type SubtleValue = { bytes: Uint8Array } | { key: AnsweredKey } | { pair: { publicKey: AnsweredKey; privateKey: AnsweredKey } } | { json: unknown } | { bool: boolean };

/** What the host crypto keeps per isolate that this half needs (./crypto.ts implements it). */
export interface KeyStore {
  /** Node's CryptoKey for a key the isolate sends (re-registered from its material when dropped). */
  webKey(key: WireKey): webcrypto.CryptoKey;
  /** Registers a key Node made (and its KeyObject, for the synchronous sign and verify); answers its handle. */
  holdWebKey(key: webcrypto.CryptoKey, object: KeyObject, description: Omit<WireKey, 'handle'>): number;
}

/** Node's CryptoKey class (a global of Node's; the webcrypto namespace's typings do not list it as a value). */
const NodeCryptoKey = (globalThis as unknown as { CryptoKey: abstract new () => webcrypto.CryptoKey }).CryptoKey;

const METHODS = new Set(['encrypt', 'decrypt', 'generateKey', 'deriveKey', 'deriveBits', 'wrapKey', 'unwrapKey', 'importKey', 'exportKey', 'sign', 'verify', 'digest']);

class SubtleBoundError extends Error {
  constructor(message: string, name = 'OperationError') {
    super(message);
    this.name = name;
  }
}

/** The plain value of a {@link Wire}, keys turned into Node's CryptoKeys. */
function decode(wire: unknown, keys: KeyStore, depth = 0): unknown {
  if (depth > 16) throw new SubtleBoundError('argument nested too deeply', 'TypeError');
  if (typeof wire !== 'object' || wire === null) throw new SubtleBoundError('bad argument', 'TypeError');
  const w = wire as Record<string, unknown>;
  if ('p' in w) {
    const p = w.p;
    return typeof p === 'object' ? null : p;
  }
  if ('b' in w) {
    if (!(w.b instanceof Uint8Array)) throw new SubtleBoundError('bad bytes', 'TypeError');
    if (w.b.byteLength > MAX_SUBTLE_DATA) throw new SubtleBoundError(`data larger than the sandbox's ${MAX_SUBTLE_DATA} bytes`);
    return w.b;
  }
  if ('a' in w) {
    if (!Array.isArray(w.a) || w.a.length > 64) throw new SubtleBoundError('bad array', 'TypeError');
    return w.a.map((item) => decode(item, keys, depth + 1));
  }
  if ('o' in w) {
    const entries = typeof w.o === 'object' && w.o !== null ? Object.entries(w.o) : [];
    if (entries.length > 64) throw new SubtleBoundError('object with too many members', 'TypeError');
    const out: Record<string, unknown> = {};
    // defineProperty: a member named __proto__ stays a member.
    for (const [name, value] of entries) Object.defineProperty(out, name, { value: decode(value, keys, depth + 1), enumerable: true, writable: true, configurable: true });
    return out;
  }
  if ('k' in w) return keys.webKey(w.k as WireKey);
  throw new SubtleBoundError('bad argument', 'TypeError');
}

const nameOf = (algorithm: unknown): string => String(typeof algorithm === 'string' ? algorithm : ((algorithm as { name?: unknown } | null)?.name ?? '')).toUpperCase();

/** The sandbox's bounds, checked before Node starts the work (Node itself bounds none of them). */
function checkBounds(method: string, args: unknown[]): void {
  const algorithm = method === 'unwrapKey' ? args[3] : method === 'importKey' ? args[2] : method === 'wrapKey' ? args[3] : args[0];
  const a = (typeof algorithm === 'object' && algorithm !== null ? algorithm : {}) as Record<string, unknown>;
  const name = nameOf(algorithm);
  if ((method === 'deriveBits' || method === 'deriveKey') && name === 'PBKDF2') {
    const iterations = Number(a.iterations);
    if (iterations > MAX_PBKDF2_ITERATIONS) throw new SubtleBoundError(`PBKDF2 with ${iterations} iterations: the plugin sandbox allows at most ${MAX_PBKDF2_ITERATIONS}`);
    const bits = method === 'deriveBits' ? Number(args[2]) : Number((args[2] as { length?: unknown } | null)?.length ?? 0);
    if (bits > MAX_PBKDF2_BITS) throw new SubtleBoundError(`PBKDF2 deriving ${bits} bits: the plugin sandbox allows at most ${MAX_PBKDF2_BITS}`);
  }
  if (method === 'generateKey' && name.startsWith('RSA') && Number(a.modulusLength) > MAX_RSA_MODULUS_BITS) {
    throw new SubtleBoundError(`RSA modulusLength ${Number(a.modulusLength)}: the plugin sandbox generates keys of at most ${MAX_RSA_MODULUS_BITS} bits`);
  }
}

/** A plain copy of a CryptoKey's reported algorithm (hash as `{name}`, publicExponent as bytes). */
function reportedAlgorithm(key: webcrypto.CryptoKey): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(key.algorithm)) {
    if (value instanceof Uint8Array) out[name] = new Uint8Array(value);
    else if (typeof value === 'object' && value !== null) out[name] = { ...(value as object) };
    else out[name] = value;
  }
  return out;
}

/**
 * Where the `extractable` argument of a key-making method is: the host makes the key
 * extractable to read its material (KeyObject.from of a non-extractable key is deprecated),
 * and hands the isolate a key with the extractability asked for.
 */
const EXTRACTABLE_AT: Record<string, number> = { importKey: 3, generateKey: 1, deriveKey: 3, unwrapKey: 5 };
/** Algorithms whose keys Node refuses to make extractable (WebCrypto: HKDF and PBKDF2 keys are never exported). */
const NEVER_EXTRACTABLE = new Set(['HKDF', 'PBKDF2']);

/** The algorithm of the key a key-making method makes. */
function madeAlgorithm(method: string, args: unknown[]): string {
  return nameOf(method === 'importKey' ? args[2] : method === 'generateKey' ? args[0] : method === 'deriveKey' ? args[2] : args[4]);
}

/** A key Node made, registered with the host and described for the isolate (with the extractability asked for). */
function answerKey(made: webcrypto.CryptoKey, keys: KeyStore, extractable = made.extractable, raw?: Uint8Array): AnsweredKey {
  const object = raw ? createSecretKey(raw) : KeyObject.from(made);
  const key = made.extractable === extractable ? made : object.toCryptoKey(made.algorithm as never, extractable, made.usages);
  const material = new Uint8Array(object.type === 'secret' ? object.export() : object.type === 'public' ? object.export({ format: 'der', type: 'spki' }) : object.export({ format: 'der', type: 'pkcs8' }));
  const reported = reportedAlgorithm(key);
  const hash = (reported.hash as { name?: string } | undefined)?.name;
  const algorithm = {
    name: key.algorithm.name,
    ...(hash ? { hash } : {}),
    ...(typeof reported.namedCurve === 'string' ? { namedCurve: reported.namedCurve } : {}),
    ...(key.algorithm.name === 'HMAC' && typeof reported.length === 'number' ? { length: reported.length } : {}),
  };
  const description = { type: key.type, material, algorithm, extractable: key.extractable, usages: [...key.usages] };
  return { ...description, handle: keys.holdWebKey(key, object, description), reported };
}

function answerOf(result: unknown, keys: KeyStore, extractable?: boolean, material?: Uint8Array): SubtleValue {
  if (result instanceof ArrayBuffer) return { bytes: new Uint8Array(result) };
  if (typeof result === 'boolean') return { bool: result };
  if (result instanceof NodeCryptoKey) return { key: answerKey(result, keys, extractable, material) };
  const pair = result as { publicKey?: unknown; privateKey?: unknown } | null;
  if (pair?.publicKey instanceof NodeCryptoKey && pair.privateKey instanceof NodeCryptoKey) {
    // A generated public key is always extractable (WebCrypto's generateKey); the private one as asked.
    return { pair: { publicKey: answerKey(pair.publicKey, keys), privateKey: answerKey(pair.privateKey, keys, extractable) } };
  }
  // exportKey('jwk'): a JsonWebKey, plain data.
  return { json: JSON.parse(JSON.stringify(result ?? null)) };
}

/**
 * The async dispatcher for one isolate: `call({method, args})` runs `crypto.subtle[method]` on
 * the decoded arguments. Never rejects: failures are `{error: {name, message}}` with Node's
 * error names (TypeError, OperationError, InvalidAccessError, DataError, …).
 */
export function createSubtleCall(keys: KeyStore): (request: unknown, live?: () => boolean) => Promise<HostAnswer> {
  let running = 0;
  const waiting: (() => void)[] = [];
  const turn = async (): Promise<void> => {
    if (running < MAX_SUBTLE_RUNNING) {
      running++;
      return;
    }
    if (waiting.length >= MAX_SUBTLE_WAITING) throw new SubtleBoundError(`too many crypto.subtle operations waiting: at most ${MAX_SUBTLE_WAITING} per plugin isolate`);
    await new Promise<void>((resolve) => waiting.push(resolve));
  };
  const release = (): void => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };
  return async (request: unknown, live?: () => boolean): Promise<HostAnswer> => {
    try {
      const r = (typeof request === 'object' && request !== null ? request : {}) as { method?: unknown; args?: unknown };
      const method = String(r.method);
      if (!METHODS.has(method) || !Array.isArray(r.args) || r.args.length > 8) throw new SubtleBoundError(`crypto.subtle: unknown operation ${method.slice(0, 40)}`, 'TypeError');
      const args = r.args.map((arg) => decode(arg, keys));
      checkBounds(method, args);
      await turn();
      try {
        // The call it served ended while it waited for a turn: it never starts (nobody waits for it).
        if (live && !live()) return { cancelled: true };
        const run = (a: unknown[]) => (webcrypto.subtle as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[method]!(...a);
        const at = EXTRACTABLE_AT[method];
        if (at === undefined) return { value: answerOf(await run(args), keys) };
        const extractable = Boolean(args[at]);
        if (NEVER_EXTRACTABLE.has(madeAlgorithm(method, args))) {
          // Its material is the raw key data imported (the only way such a key is made in practice).
          const result = await run(args);
          const material = method === 'importKey' && args[0] === 'raw' && args[1] instanceof Uint8Array ? args[1] : undefined;
          return { value: answerOf(result, keys, extractable, material) };
        }
        const jwk = method === 'importKey' && args[0] === 'jwk' && typeof args[1] === 'object' && args[1] !== null ? (args[1] as Record<string, unknown>) : undefined;
        if (jwk?.ext === false) {
          // Node's own checks first (ext against extractable), then an extractable twin for the material.
          await run(args);
          const { ext: _ext, ...open } = jwk;
          return { value: answerOf(await run([args[0], open, args[2], true, args[4]]), keys, extractable) };
        }
        const forced = [...args];
        forced[at] = true;
        return { value: answerOf(await run(forced), keys, extractable) };
      } finally {
        release();
      }
    } catch (error) {
      const e = error as { name?: unknown; message?: unknown };
      return { error: { name: typeof e?.name === 'string' ? e.name : 'OperationError', message: String(e?.message ?? error).slice(0, 500) } };
    }
  };
}
