import { constants, createHash, createHmac, createPrivateKey, createPublicKey, createSecretKey, sign, timingSafeEqual, verify, type KeyObject } from 'node:crypto';
import type { webcrypto } from 'node:crypto';
import type { HostCrypto } from '../host-api.ts';
import type { HostAnswer } from '../sandbox-runtime.ts';
import { createSubtleCall, type WireKey } from './subtle-call.ts';

/**
 * The host's half of the sandbox's `crypto.subtle` (SPEC 5.3): digest, importKey, sign, verify
 * and exportKey on Node's native crypto (a verify may be deferred to the thread pool). The
 * isolate keeps each key's canonical material (spki / pkcs8 DER, raw secret) in a slot plugin
 * code cannot reach; signing and verifying send only the key's handle (see createHostCrypto),
 * the material only to export a key or register a dropped handle again. Everything from the
 * isolate is untrusted: every field is checked, and failures are answers (`{error: {name,
 * message}}` with WebCrypto's error names), never host throws.
 */

/** Largest data one operation takes (digest, sign, verify). */
export const MAX_CRYPTO_DATA = 16 * 1024 * 1024;
/** Largest key material or signature. */
export const MAX_KEY_BYTES = 64 * 1024;
const CACHE_SIZE = 256;

type Answer = { value: unknown } | { error: { name: string; message: string } };
class CryptoError extends Error {
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
}

const HASHES: Record<string, string> = { 'SHA-1': 'sha1', 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' };
const CURVES: Record<string, { node: string; size: number }> = { 'P-256': { node: 'prime256v1', size: 32 }, 'P-384': { node: 'secp384r1', size: 48 }, 'P-521': { node: 'secp521r1', size: 66 } };
const RSA = new Set(['RSASSA-PKCS1-v1_5', 'RSA-PSS']);

/** A normalized algorithm as the isolate sends it. */
interface Algorithm {
  name: string;
  hash?: string;
  namedCurve?: string;
  length?: number;
  saltLength?: number;
}

/** A key as the isolate sends it back: its canonical material and the algorithm it was imported for. */
interface KeyRef {
  type: 'secret' | 'public' | 'private';
  material: Uint8Array;
  algorithm: Algorithm;
}

function bytes(value: unknown, what: string, max = MAX_CRYPTO_DATA): Uint8Array {
  if (!(value instanceof Uint8Array)) throw new CryptoError('TypeError', `${what} must be bytes`);
  if (value.byteLength > max) throw new CryptoError('OperationError', `${what} larger than ${max} bytes`);
  return value;
}

function algorithmOf(value: unknown): Algorithm {
  if (typeof value !== 'object' || value === null || typeof (value as Algorithm).name !== 'string') throw new CryptoError('TypeError', 'algorithm: expected a normalized algorithm');
  const a = value as Record<string, unknown>;
  const out: Algorithm = { name: a.name as string };
  if (typeof a.hash === 'string') {
    if (!HASHES[a.hash]) throw new CryptoError('NotSupportedError', `Unrecognized hash name: ${a.hash}`);
    out.hash = a.hash;
  }
  if (typeof a.namedCurve === 'string') out.namedCurve = a.namedCurve;
  if (typeof a.length === 'number') out.length = a.length;
  if (typeof a.saltLength === 'number') out.saltLength = a.saltLength;
  return out;
}

function keyRefOf(value: unknown): KeyRef {
  const k = value as Record<string, unknown> | null;
  if (typeof k !== 'object' || k === null || (k.type !== 'secret' && k.type !== 'public' && k.type !== 'private')) throw new CryptoError('TypeError', 'key: not a CryptoKey');
  return { type: k.type, material: bytes(k.material, 'key material', MAX_KEY_BYTES), algorithm: algorithmOf(k.algorithm) };
}

const b64url = (data: Uint8Array): string => Buffer.from(data).toString('base64url');

/** What kind of asymmetric key an algorithm needs, and the curve when it is ECDSA. */
function expectKind(algorithm: Algorithm, key: KeyObject): void {
  const kind = key.asymmetricKeyType;
  const ok = RSA.has(algorithm.name) ? kind === 'rsa' || (algorithm.name === 'RSA-PSS' && kind === 'rsa-pss') : algorithm.name === 'ECDSA' ? kind === 'ec' : algorithm.name === 'Ed25519' ? kind === 'ed25519' : false;
  if (!ok) throw new CryptoError('DataError', `Invalid key type for ${algorithm.name}: ${kind ?? 'unknown'}`);
  if (algorithm.name === 'ECDSA') {
    const curve = CURVES[algorithm.namedCurve ?? ''];
    if (!curve) throw new CryptoError('NotSupportedError', `Unrecognized namedCurve: ${algorithm.namedCurve}`);
    if (key.asymmetricKeyDetails?.namedCurve !== curve.node) throw new CryptoError('DataError', 'Named curve mismatch');
  }
}

/** The algorithm a CryptoKey reports (WebCrypto's KeyAlgorithm dictionaries). */
function keyAlgorithm(algorithm: Algorithm, key: KeyObject | undefined, secretBits: number): Record<string, unknown> {
  if (algorithm.name === 'HMAC') return { name: 'HMAC', hash: { name: algorithm.hash }, length: secretBits };
  if (RSA.has(algorithm.name)) {
    const details = key!.asymmetricKeyDetails!;
    const exponent = BigInt(details.publicExponent ?? 65537n);
    const exponentBytes: number[] = [];
    for (let e = exponent; e > 0n; e >>= 8n) exponentBytes.unshift(Number(e & 0xffn));
    return { name: algorithm.name, modulusLength: details.modulusLength, publicExponent: new Uint8Array(exponentBytes), hash: { name: algorithm.hash } };
  }
  if (algorithm.name === 'ECDSA') return { name: 'ECDSA', namedCurve: algorithm.namedCurve };
  return { name: algorithm.name };
}

function importKey(args: Record<string, unknown>): unknown {
  const format = args.format;
  const algorithm = algorithmOf(args.algorithm);
  const usages = Array.isArray(args.usages) ? (args.usages as unknown[]).map(String) : [];
  if (algorithm.name === 'HMAC') {
    if (!algorithm.hash) throw new CryptoError('TypeError', 'HMAC needs a hash');
    let secret: Uint8Array;
    if (format === 'raw') secret = bytes(args.keyData, 'keyData', MAX_KEY_BYTES);
    else if (format === 'jwk') {
      const jwk = args.keyData as Record<string, unknown>;
      if (jwk?.kty !== 'oct' || typeof jwk.k !== 'string') throw new CryptoError('DataError', 'Invalid keyData');
      secret = new Uint8Array(Buffer.from(jwk.k, 'base64url'));
      const expected = `HS${algorithm.hash.slice(4)}`;
      if (jwk.alg !== undefined && jwk.alg !== expected) throw new CryptoError('DataError', 'JWK "alg" does not match the requested algorithm');
      checkJwkUse(jwk, usages, args.extractable === true);
    } else throw new CryptoError('NotSupportedError', `Unable to import HMAC key with format ${String(format)}`);
    if (secret.byteLength === 0) throw new CryptoError('DataError', 'Zero-length key is not supported');
    let length = secret.byteLength * 8;
    if (algorithm.length !== undefined) {
      if (algorithm.length === 0) throw new CryptoError('DataError', 'Zero-length key is not supported');
      if (algorithm.length > length || algorithm.length <= length - 8) throw new CryptoError('DataError', 'Invalid key length');
      length = algorithm.length;
    }
    return { type: 'secret', material: secret, algorithm: keyAlgorithm(algorithm, undefined, length) };
  }
  if (!RSA.has(algorithm.name) && algorithm.name !== 'ECDSA' && algorithm.name !== 'Ed25519') throw new CryptoError('NotSupportedError', `Unrecognized algorithm name: ${algorithm.name}`);
  if (RSA.has(algorithm.name) && !algorithm.hash) throw new CryptoError('TypeError', `${algorithm.name} needs a hash`);
  let key: KeyObject;
  try {
    if (format === 'spki') key = createPublicKey({ key: Buffer.from(bytes(args.keyData, 'keyData', MAX_KEY_BYTES)), format: 'der', type: 'spki' });
    else if (format === 'pkcs8') key = createPrivateKey({ key: Buffer.from(bytes(args.keyData, 'keyData', MAX_KEY_BYTES)), format: 'der', type: 'pkcs8' });
    else if (format === 'raw') key = rawPublicKey(algorithm, bytes(args.keyData, 'keyData', MAX_KEY_BYTES));
    else if (format === 'jwk') {
      const jwk = args.keyData as Record<string, unknown>;
      if (typeof jwk !== 'object' || jwk === null) throw new CryptoError('DataError', 'Invalid keyData');
      checkJwkUse(jwk, usages, args.extractable === true);
      const input = { key: jwk as never, format: 'jwk' as const };
      key = typeof jwk.d === 'string' ? createPrivateKey(input) : createPublicKey(input);
    } else throw new CryptoError('NotSupportedError', `Unsupported key format: ${String(format)}`);
  } catch (error) {
    if (error instanceof CryptoError) throw error;
    throw new CryptoError('DataError', `Invalid keyData: ${(error as Error).message}`);
  }
  expectKind(algorithm, key);
  const type = key.type as 'public' | 'private';
  const material = new Uint8Array(type === 'public' ? key.export({ format: 'der', type: 'spki' }) : key.export({ format: 'der', type: 'pkcs8' }));
  return { type, material, algorithm: keyAlgorithm(algorithm, key, 0) };
}

function checkJwkUse(jwk: Record<string, unknown>, usages: string[], extractable: boolean): void {
  if (jwk.ext === false && extractable) throw new CryptoError('DataError', 'JWK "ext" Parameter and extractable mismatch');
  if (Array.isArray(jwk.key_ops) && !usages.every((u) => (jwk.key_ops as unknown[]).includes(u))) throw new CryptoError('DataError', 'Key operations and usage mismatch');
  if (jwk.use !== undefined && jwk.use !== 'sig') throw new CryptoError('DataError', 'Invalid JWK "use" Parameter');
}

function rawPublicKey(algorithm: Algorithm, data: Uint8Array): KeyObject {
  if (algorithm.name === 'Ed25519') {
    if (data.byteLength !== 32) throw new CryptoError('DataError', 'Invalid keyData');
    return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: b64url(data) }, format: 'jwk' });
  }
  if (algorithm.name === 'ECDSA') {
    const curve = CURVES[algorithm.namedCurve ?? ''];
    if (!curve) throw new CryptoError('NotSupportedError', `Unrecognized namedCurve: ${algorithm.namedCurve}`);
    if (data.byteLength !== 1 + 2 * curve.size || data[0] !== 4) throw new CryptoError('DataError', 'Invalid keyData');
    const x = data.subarray(1, 1 + curve.size);
    const y = data.subarray(1 + curve.size);
    return createPublicKey({ key: { kty: 'EC', crv: algorithm.namedCurve, x: b64url(x), y: b64url(y) }, format: 'jwk' });
  }
  throw new CryptoError('NotSupportedError', `Unable to import ${algorithm.name} key with format raw`);
}

/** Parsed keys by material: the isolate sends the material with every operation. */
const cache = new Map<string, KeyObject>();
function keyObjectOf(ref: KeyRef): KeyObject {
  const id = `${ref.type}:${Buffer.from(ref.material).toString('latin1')}`;
  let key = cache.get(id);
  if (key) {
    // Least recently used goes first: re-insert on use.
    cache.delete(id);
    cache.set(id, key);
    return key;
  }
  try {
    key =
      ref.type === 'secret'
        ? createSecretKey(ref.material)
        : ref.type === 'public'
          ? createPublicKey({ key: Buffer.from(ref.material), format: 'der', type: 'spki' })
          : createPrivateKey({ key: Buffer.from(ref.material), format: 'der', type: 'pkcs8' });
  } catch {
    throw new CryptoError('InvalidAccessError', 'The key is not usable');
  }
  cache.set(id, key);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return key;
}

function signatureParams(algorithm: Algorithm, key: KeyRef, object: KeyObject): { hash: string | null; options: Parameters<typeof sign>[2] } {
  if (algorithm.name !== key.algorithm.name) throw new CryptoError('InvalidAccessError', 'The requested operation is not valid for the provided key');
  switch (algorithm.name) {
    case 'RSASSA-PKCS1-v1_5':
      return { hash: HASHES[key.algorithm.hash!]!, options: object };
    case 'RSA-PSS': {
      const saltLength = algorithm.saltLength;
      if (typeof saltLength !== 'number' || !Number.isInteger(saltLength) || saltLength < 0) throw new CryptoError('TypeError', 'RSA-PSS needs a saltLength');
      return { hash: HASHES[key.algorithm.hash!]!, options: { key: object, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength } };
    }
    case 'ECDSA':
      if (!algorithm.hash) throw new CryptoError('TypeError', 'ECDSA needs a hash');
      return { hash: HASHES[algorithm.hash]!, options: { key: object, dsaEncoding: 'ieee-p1363' } };
    case 'Ed25519':
      return { hash: null, options: object };
    default:
      throw new CryptoError('NotSupportedError', `Unrecognized algorithm name: ${algorithm.name}`);
  }
}

function exportKey(args: Record<string, unknown>): unknown {
  const key = keyRefOf(args.key);
  const format = args.format;
  if (key.type === 'secret') {
    if (format === 'raw') return key.material;
    if (format === 'jwk') return { kty: 'oct', k: b64url(key.material), alg: `HS${key.algorithm.hash!.slice(4)}` };
    throw new CryptoError('NotSupportedError', `Unable to export a secret key as ${String(format)}`);
  }
  const object = keyObjectOf(key);
  if (format === 'spki' && key.type === 'public') return key.material;
  if (format === 'pkcs8' && key.type === 'private') return key.material;
  if (format === 'jwk') {
    const jwk: Record<string, unknown> = object.export({ format: 'jwk' });
    // WebCrypto names the JWS algorithm where one algorithm fits the key (not for ECDSA: the hash is chosen per signature).
    const bits = key.algorithm.hash?.slice(4);
    const alg = key.algorithm.name === 'RSASSA-PKCS1-v1_5' ? `RS${bits}` : key.algorithm.name === 'RSA-PSS' ? `PS${bits}` : key.algorithm.name === 'Ed25519' ? 'Ed25519' : undefined;
    return alg ? { ...jwk, alg } : jwk;
  }
  if (format === 'raw' && key.type === 'public') {
    const jwk = object.export({ format: 'jwk' }) as { kty: string; x: string; y?: string };
    if (jwk.kty === 'OKP') return new Uint8Array(Buffer.from(jwk.x, 'base64url'));
    if (jwk.kty === 'EC') return new Uint8Array(Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x, 'base64url'), Buffer.from(jwk.y!, 'base64url')]));
  }
  throw new CryptoError('InvalidAccessError', `Unable to export a ${key.type} ${key.algorithm.name} key as ${String(format)}`);
}

/** A verify parameter set, prepared once per key and `params` text. */
interface Prepared {
  /** `node:crypto`'s digest name (null for Ed25519). */
  hash: string | null;
  /** What `verify` takes as the key: the KeyObject itself where it can (measured: an options object costs 10+ µs a call). */
  key: Parameters<typeof verify>[2];
  /**
   * The exact size a signature must have, any other being a failed verification; 0 where
   * OpenSSL checks it itself (Ed25519) or the comparison does (HMAC). RSA: the modulus's bytes,
   * as RFC 8017 (8.1.2, 8.2.2) says, where OpenSSL's PSS verify (and so Node's, WebCrypto's
   * included) also takes a signature with its leading zero bytes dropped. ECDSA: P1363's r ‖ s.
   */
  signatureSize: number;
  /** ECDSA: the P1363 signature goes to OpenSSL as DER. */
  ecdsa: boolean;
  hmac: boolean;
}

/** A key the isolate holds a handle to. */
interface HeldKey {
  ref: KeyRef;
  object: KeyObject;
  prepared: Map<string, Prepared>;
  extractable: boolean;
  usages: string[];
  /** Node's CryptoKey of the key, for the operations Node's crypto.subtle runs (made when first needed). */
  web?: webcrypto.CryptoKey;
}

/** The host crypto of one isolate: the synchronous dispatcher, and `subtle` for the operations that run on Node's crypto.subtle (./subtle-call.ts). */
export type HostCryptoDispatcher = HostCrypto & { subtle: (request: unknown, live?: () => boolean) => Promise<HostAnswer> };

/** Keys one isolate holds handles to; least recently used go first (the isolate re-registers them: `stale`). */
const MAX_HANDLES = 512;

/** Options of {@link createHostCrypto}. */
export interface HostCryptoOptions {
  /**
   * Runs an asymmetric verify off the event loop: `defer(work)` starts `work` (which calls
   * `finish` once, later) and answers a job id, whose result the host delivers to the isolate
   * itself (the runtime's `resolveJobs`); undefined runs the verify here, synchronously.
   */
  defer?: (work: (finish: (valid: boolean) => void) => void) => number | undefined;
}

/**
 * P1363 (`r ‖ s`, WebCrypto's ECDSA format) → DER, which OpenSSL verifies without Node's
 * conversion (measured: 92 → 64 µs for a P-256 verify). Undefined when `signature` has the wrong size.
 */
export function p1363ToDer(signature: Uint8Array, size: number): Buffer | undefined {
  if (signature.byteLength !== 2 * size) return undefined;
  const integer = (start: number): Buffer => {
    let from = start;
    const end = start + size;
    while (from < end - 1 && signature[from] === 0) from++;
    const pad = signature[from]! & 0x80 ? 1 : 0;
    const out = Buffer.alloc(pad + end - from);
    out.set(signature.subarray(from, end), pad);
    return out;
  };
  const r = integer(0);
  const s = integer(size);
  const body = 4 + r.length + s.length;
  // P-521's sequence needs the long length form (over 127 bytes).
  const head = body > 127 ? [0x30, 0x81, body] : [0x30, body];
  return Buffer.concat([Buffer.from(head), Buffer.from([2, r.length]), r, Buffer.from([2, s.length]), s]);
}

/**
 * The dispatcher the isolate calls (an isolated-vm Callback). Never throws. `importKey` answers
 * a key handle (the parsed key is kept per dispatcher), and signing and verifying take one, so
 * no key material crosses on the hot path: `verifyHandle(handle, params, signature, data)`
 * answers a bare boolean, `signHandle(handle, params, data)` the signature's bytes. Both answer
 * `'stale'` for a handle this dispatcher dropped, which `rekey(handle, key)` registers again.
 * `digest` and `exportKey` take whole descriptions.
 */
export function createHostCrypto(options: HostCryptoOptions = {}): HostCryptoDispatcher {
  const held = new Map<number, HeldKey>();
  let handles = 0;
  const hold = (ref: KeyRef, object: KeyObject, handle = ++handles, use: { extractable: boolean; usages: string[]; web?: webcrypto.CryptoKey } = { extractable: false, usages: [] }): number => {
    held.set(handle, { ref, object, prepared: new Map(), ...use });
    if (held.size > MAX_HANDLES) held.delete(held.keys().next().value!);
    return handle;
  };
  const usesOf = (value: Record<string, unknown> | null | undefined): { extractable: boolean; usages: string[] } => ({
    extractable: value?.extractable === true,
    usages: Array.isArray(value?.usages) ? (value.usages as unknown[]).slice(0, 8).map(String) : [],
  });
  const subtle = createSubtleCall({
    webKey(key: WireKey): webcrypto.CryptoKey {
      let entry = use(key?.handle);
      if (!entry) {
        const ref = keyRefOf(key);
        const handle = key.handle;
        if (typeof handle !== 'number' || !Number.isSafeInteger(handle) || handle < 1 || handle > handles) throw new CryptoError('TypeError', 'key: not a handle');
        hold(ref, keyObjectOf(ref), handle, usesOf(key as unknown as Record<string, unknown>));
        entry = held.get(handle)!;
      }
      if (!entry.web) {
        const { name, hash, namedCurve, length } = entry.ref.algorithm;
        const algorithm = { name, ...(hash ? { hash } : {}), ...(namedCurve ? { namedCurve } : {}), ...(name === 'HMAC' && length ? { length } : {}) };
        entry.web = entry.object.toCryptoKey(algorithm, entry.extractable, entry.usages as webcrypto.KeyUsage[]);
      }
      return entry.web;
    },
    holdWebKey(key, object, description) {
      const ref: KeyRef = { type: description.type, material: description.material, algorithm: description.algorithm };
      return hold(ref, object, ++handles, { extractable: description.extractable, usages: description.usages, web: key });
    },
  });
  /** What `sign` or `verify` with a held key and `params` (`name|hash|saltLength|namedCurve`) needs, prepared once. */
  const prepare = (entry: HeldKey, params: string, mode: 'sign' | 'verify'): Prepared => {
    const id = `${mode}|${params}`;
    let prepared = entry.prepared.get(id);
    if (prepared) return prepared;
    const [name = '', hash = '', salt = '', curve = ''] = params.split('|');
    const algorithm: Algorithm = algorithmOf({ name, ...(hash ? { hash } : {}), ...(salt ? { saltLength: Number(salt) } : {}), ...(curve ? { namedCurve: curve } : {}) });
    const key = entry.ref;
    if (key.type === (mode === 'sign' ? 'public' : 'private')) throw new CryptoError('InvalidAccessError', `Unable to use this key to ${mode}`);
    if (algorithm.name === 'HMAC') {
      if (key.algorithm.name !== 'HMAC') throw new CryptoError('InvalidAccessError', 'The requested operation is not valid for the provided key');
      prepared = { hash: HASHES[key.algorithm.hash!]!, key: entry.object, signatureSize: 0, ecdsa: false, hmac: true };
    } else {
      const { hash: digest, options: keyOptions } = signatureParams(algorithm, key, entry.object);
      // Verifies hand OpenSSL a DER signature and the bare KeyObject; signs keep WebCrypto's P1363 output.
      const ecdsa = algorithm.name === 'ECDSA' && mode === 'verify';
      const signatureSize = RSA.has(algorithm.name)
        ? Math.ceil((entry.object.asymmetricKeyDetails?.modulusLength ?? 0) / 8)
        : algorithm.name === 'ECDSA'
          ? 2 * CURVES[key.algorithm.namedCurve ?? '']!.size
          : 0;
      prepared = { hash: digest, key: ecdsa ? entry.object : (keyOptions as Parameters<typeof verify>[2]), signatureSize, ecdsa, hmac: false };
    }
    if (entry.prepared.size < 16) entry.prepared.set(id, prepared);
    return prepared;
  };
  /** The held key of `handle`, as the most recently used; undefined when this dispatcher dropped it. */
  const use = (handle: unknown): HeldKey | undefined => {
    const entry = typeof handle === 'number' ? held.get(handle) : undefined;
    if (!entry) return undefined;
    // Least recently used goes first: re-insert on use.
    held.delete(handle as number);
    held.set(handle as number, entry);
    return entry;
  };
  // The hot path answers a bare boolean (a copied object costs the crossing a few µs), 'stale' for
  // a handle this dispatcher no longer holds, `{job}` for a deferred verify, `{error}` otherwise.
  const verifyHandle = (handle: unknown, params: unknown, rawSignature: unknown, rawData: unknown): boolean | 'stale' | Answer | { job: number } => {
    const entry = use(handle);
    if (!entry) return 'stale';
    const prepared = prepare(entry, String(params), 'verify');
    const data = bytes(rawData, 'data');
    const signature = bytes(rawSignature, 'signature', MAX_KEY_BYTES);
    if (prepared.hmac) {
      const mac = createHmac(prepared.hash!, entry.object).update(data).digest();
      return signature.byteLength === mac.byteLength && timingSafeEqual(signature, mac);
    }
    // A signature of the wrong size is a failed verification, as in WebCrypto.
    if (prepared.signatureSize && signature.byteLength !== prepared.signatureSize) return false;
    const der = prepared.ecdsa ? p1363ToDer(signature, prepared.signatureSize / 2) : signature;
    if (!der) return false;
    if (options.defer) {
      const job = options.defer((finish) => {
        try {
          verify(prepared.hash, data, prepared.key, der, (error, valid) => finish(!error && valid));
        } catch {
          finish(false);
        }
      });
      if (job !== undefined) return { job };
    }
    try {
      return verify(prepared.hash, data, prepared.key, der);
    } catch {
      return false;
    }
  };
  /** The signature (bytes), 'stale', or `{error}`: a webhook plugin's HMAC runs on every request. */
  const signHandle = (handle: unknown, params: unknown, rawData: unknown): Uint8Array | 'stale' => {
    const entry = use(handle);
    if (!entry) return 'stale';
    const prepared = prepare(entry, String(params), 'sign');
    const data = bytes(rawData, 'data');
    if (prepared.hmac) return new Uint8Array(createHmac(prepared.hash!, entry.object).update(data).digest());
    try {
      return new Uint8Array(sign(prepared.hash, data, prepared.key as Parameters<typeof sign>[2]));
    } catch (error) {
      throw new CryptoError('OperationError', (error as Error).message);
    }
  };
  const dispatch = (op: string, raw: unknown, a?: unknown, b?: unknown, c?: unknown): unknown => {
    try {
      if (op === 'verifyHandle') return verifyHandle(raw, a, b, c);
      if (op === 'signHandle') return signHandle(raw, a, b);
      const args = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
      switch (op) {
        case 'rekey': {
          const key = keyRefOf(a);
          if (typeof raw !== 'number' || !Number.isSafeInteger(raw) || raw < 1 || raw > handles) throw new CryptoError('TypeError', 'rekey: not a handle');
          hold(key, keyObjectOf(key), raw, usesOf(a as Record<string, unknown>));
          return { value: null };
        }
        case 'importKey': {
          const imported = importKey(args) as KeyRef;
          // Held as the isolate describes a key in later calls: the algorithm it was imported for.
          const requested = algorithmOf(args.algorithm);
          const ref: KeyRef = { type: imported.type, material: imported.material, algorithm: { name: requested.name, ...(requested.hash ? { hash: requested.hash } : {}), ...(requested.namedCurve ? { namedCurve: requested.namedCurve } : {}) } };
          return { value: { ...imported, handle: hold(ref, keyObjectOf(ref), undefined, usesOf(args)) } };
        }
        case 'digest': {
          const hash = HASHES[String(args.hash)];
          if (!hash) throw new CryptoError('NotSupportedError', `Unrecognized algorithm name: ${String(args.hash)}`);
          return { value: new Uint8Array(createHash(hash).update(bytes(args.data, 'data')).digest()) };
        }
        case 'exportKey':
          return { value: exportKey(args) };
        default:
          throw new CryptoError('NotSupportedError', `unknown crypto operation ${String(op).slice(0, 40)}`);
      }
    } catch (error) {
      const e = error as Error;
      return { error: { name: e instanceof CryptoError ? e.name : 'OperationError', message: String(e.message).slice(0, 500) } };
    }
  };
  return Object.assign(dispatch, { subtle });
}
