import type { HostCall, HostCrypto } from '../host-api.ts';
import { DOMException } from './abort.ts';
import type { AnsweredKey, SubtleValue, Wire, WireKey } from '../host/subtle-call.ts';

/**
 * The sandbox's `crypto.subtle` (SPEC 5.3): WebCrypto's argument rules and errors here, the
 * work in the host's native crypto (../host/crypto.ts) through one synchronous callback. A
 * CryptoKey shows only `type`, `extractable`, `algorithm` and `usages`; its material lives in
 * a WeakMap of this closure that no plugin code can reach. Runs inside the isolate.
 */

type Usage = 'encrypt' | 'decrypt' | 'sign' | 'verify' | 'deriveKey' | 'deriveBits' | 'wrapKey' | 'unwrapKey';
const USAGES = new Set<string>(['encrypt', 'decrypt', 'sign', 'verify', 'deriveKey', 'deriveBits', 'wrapKey', 'unwrapKey']);
const DIGESTS = ['SHA-1', 'SHA-256', 'SHA-384', 'SHA-512'];
const SIGNERS = ['HMAC', 'RSASSA-PKCS1-v1_5', 'RSA-PSS', 'ECDSA', 'Ed25519'];
const FORMATS = new Set(['raw', 'spki', 'pkcs8', 'jwk']);

/** WebCrypto's errors are DOMExceptions (OperationError, InvalidAccessError, …), as in Node. */
function domError(name: string, message: string): Error {
  return new DOMException(message, name);
}

interface Slot {
  /** The host's handle of the parsed key (verify sends only this). */
  handle: number;
  type: 'secret' | 'public' | 'private';
  material: Uint8Array;
  /** What the host needs to use the key: name, hash, namedCurve (and an HMAC key's length). */
  hostAlgorithm: { name: string; hash?: string; namedCurve?: string; length?: number };
  extractable: boolean;
  usages: string[];
}

/**
 * Builds `crypto.subtle` and the `CryptoKey` class over the host's crypto callback, and
 * `resolveJobs` for the host: the results of verifies it ran off the event loop, as
 * `[jobId, valid (0|1), …]` (never given to plugin code).
 */
export function createSubtle(hostCrypto: HostCrypto, hostCall?: HostCall): { subtle: object; CryptoKey: unknown; resolveJobs: (results: readonly number[]) => void } {
  const slots = new WeakMap<object, Slot>();
  /** Verifies the host runs off the event loop: job id → the plugin's promise's resolve. */
  const jobs = new Map<number, (valid: boolean) => void>();
  const { freeze, defineProperty } = Object;
  const isView = ArrayBuffer.isView;
  const isArray = Array.isArray;
  // Node's WebCrypto throws JavaScript TypeErrors (and RangeErrors) for arguments, DOMExceptions (SyntaxError included) for the rest.
  const errors: Record<string, ErrorConstructor> = { TypeError, RangeError };

  /** WebCrypto's CryptoKey: created only by importKey. */
  class CryptoKey {
    readonly #type: string;
    readonly #extractable: boolean;
    readonly #algorithm: object;
    readonly #usages: readonly string[];
    constructor(token: unknown, type: string, extractable: boolean, algorithm: object, usages: string[]) {
      if (token !== slots) throw new TypeError('Illegal constructor');
      this.#type = type;
      this.#extractable = extractable;
      this.#algorithm = algorithm;
      this.#usages = freeze([...usages]);
    }
    get type(): string {
      return this.#type;
    }
    get extractable(): boolean {
      return this.#extractable;
    }
    get algorithm(): object {
      return this.#algorithm;
    }
    get usages(): readonly string[] {
      return this.#usages;
    }
    get [Symbol.toStringTag](): string {
      return 'CryptoKey';
    }
  }

  type Answer = { value?: unknown; error?: { name: string; message: string }; job?: number };
  const rethrow = (answer: Answer): unknown => {
    if (answer.error) {
      const Type = errors[answer.error.name];
      throw Type ? new Type(answer.error.message) : domError(answer.error.name, answer.error.message);
    }
    return answer.value;
  };
  const host = (op: string, ...args: unknown[]): unknown => rethrow(hostCrypto(op, ...(args as [unknown])) as Answer);

  /** A call on the key's host handle; a handle the host dropped (it keeps the most recently used keys) is registered again from the slot. */
  const byHandle = (slot: Slot, op: 'signHandle' | 'verifyHandle', ...args: unknown[]): unknown => {
    const answer = hostCrypto(op, slot.handle, ...args);
    if (answer !== 'stale') return answer;
    host('rekey', slot.handle, { type: slot.type, material: slot.material, algorithm: slot.hostAlgorithm, extractable: slot.extractable, usages: slot.usages });
    return hostCrypto(op, slot.handle, ...args);
  };

  /** The algorithm of a sign or verify call as the host's handle operations take it: `name|hash|saltLength|namedCurve`. */
  const paramsOf = (normalized: Record<string, unknown> & { name: string }, key: CryptoKey): string =>
    `${normalized.name}|${(normalized.hash as string | undefined) ?? ''}|${normalized.saltLength === undefined ? '' : String(normalized.saltLength)}|${(key.algorithm as { namedCurve?: string }).namedCurve ?? ''}`;

  /** The bytes of a BufferSource for a host call, which copies them itself: a copy here only for a view of part of a buffer (so the host gets no more than the view). */
  const bytesFor = (value: unknown, what: string): Uint8Array => {
    if (value instanceof Uint8Array && value.byteOffset === 0 && value.byteLength === value.buffer.byteLength) return value;
    if (value instanceof ArrayBuffer) return new Uint8Array(value);
    return bufferSource(value, what);
  };

  const bufferSource = (value: unknown, what: string): Uint8Array => {
    if (value instanceof ArrayBuffer) return new Uint8Array(value.slice(0));
    if (isView(value)) return new Uint8Array(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength) as ArrayBuffer);
    throw new TypeError(`Failed to execute '${what}' on 'SubtleCrypto': parameter is not of type 'BufferSource'.`);
  };

  /** WebCrypto "normalize an algorithm": a name from `names` (case-insensitive) and its members. */
  const normalize = (input: unknown, names: readonly string[]): Record<string, unknown> & { name: string } => {
    const object = typeof input === 'string' ? { name: input } : input;
    if (typeof object !== 'object' || object === null || typeof (object as { name?: unknown }).name !== 'string') {
      throw new TypeError('Algorithm: name is required and must be a string');
    }
    const wanted = (object as { name: string }).name.toUpperCase();
    const name = names.find((n) => n.toUpperCase() === wanted);
    if (!name) throw domError('NotSupportedError', 'Unrecognized algorithm name');
    const out: Record<string, unknown> & { name: string } = { name };
    const a = object as Record<string, unknown>;
    if (a.hash !== undefined) out.hash = normalize(a.hash, DIGESTS).name;
    if (a.namedCurve !== undefined) out.namedCurve = String(a.namedCurve);
    if (a.length !== undefined) out.length = Number(a.length);
    if (a.saltLength !== undefined) out.saltLength = Number(a.saltLength);
    return out;
  };

  const slotOf = (key: unknown, usage: Usage, algorithm: string, what: string): Slot => {
    const slot = typeof key === 'object' && key !== null ? slots.get(key) : undefined;
    if (!slot) throw new TypeError(`Failed to execute '${what}' on 'SubtleCrypto': parameter 2 is not of type 'CryptoKey'.`);
    const k = key as CryptoKey;
    if ((k.algorithm as { name: string }).name !== algorithm) throw domError('InvalidAccessError', 'The requested operation is not valid for the provided key');
    if (!k.usages.includes(usage)) throw domError('InvalidAccessError', 'The requested operation is not valid for the provided key');
    return slot;
  };

  // Every method answers with a promise, rejecting (never throwing) as WebCrypto does.
  const promised =
    <A extends unknown[]>(run: (...args: A) => unknown) =>
    (...args: A): Promise<unknown> => {
      try {
        return Promise.resolve(run(...args));
      } catch (error) {
        return Promise.reject(error);
      }
    };

  const buffer = (value: unknown): ArrayBuffer => {
    const bytes = value as Uint8Array;
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  };

  const isSigner = (algorithm: unknown): boolean => {
    const name = typeof algorithm === 'string' ? algorithm : (algorithm as { name?: unknown } | null)?.name;
    return typeof name === 'string' && SIGNERS.some((n) => n.toUpperCase() === name.toUpperCase());
  };

  /** A key of this isolate as the host's asynchronous half takes it. */
  const wireKey = (slot: Slot): WireKey => ({ handle: slot.handle, type: slot.type, material: slot.material, algorithm: slot.hostAlgorithm, extractable: slot.extractable, usages: slot.usages });

  /** An argument as it crosses (../host/subtle-call.ts `Wire`): Node's crypto.subtle then applies its own WebIDL rules to it. */
  const wire = (value: unknown, depth = 0): Wire => {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return { p: typeof value === 'bigint' || typeof value === 'symbol' ? undefined : value };
    if (depth > 8) throw new TypeError('crypto.subtle: argument nested too deeply');
    const slot = slots.get(value);
    if (slot) return { k: wireKey(slot) };
    if (value instanceof ArrayBuffer || isView(value)) return { b: bufferSource(value, 'crypto.subtle') };
    if (isArray(value)) return { a: value.slice(0, 64).map((item) => wire(item, depth + 1)) };
    if (typeof value === 'function') return { o: {} };
    const members: Record<string, Wire> = {};
    let count = 0;
    // WebIDL reads a dictionary's members through [[Get]]: inherited ones count too.
    for (const name in value) {
      if (++count > 64) break;
      defineProperty(members, name, { value: wire((value as Record<string, unknown>)[name], depth + 1), enumerable: true, writable: true, configurable: true });
    }
    return { o: members };
  };

  /** A CryptoKey for a key the host answered. */
  const keyOf = (answered: AnsweredKey): CryptoKey => {
    const reported = { ...answered.reported };
    if (typeof reported.hash === 'object' && reported.hash !== null) reported.hash = freeze({ ...(reported.hash as object) });
    const key = new CryptoKey(slots, answered.type, answered.extractable, freeze(reported), answered.usages);
    slots.set(key, { handle: answered.handle, type: answered.type, material: answered.material, hostAlgorithm: answered.algorithm, extractable: answered.extractable, usages: [...answered.usages] });
    return key;
  };

  const then = Promise.prototype.then;
  /** Runs `crypto.subtle[method]` in the host, on Node's own implementation. */
  const viaNode = (method: string, args: unknown[]): Promise<unknown> => {
    let request: { method: string; args: Wire[] };
    try {
      request = { method, args: args.map((arg) => wire(arg)) };
    } catch (error) {
      return Promise.reject(error);
    }
    return then.call(hostCall!('crypto', request), (answer: unknown) => {
      const a = answer as { value?: SubtleValue; error?: { name: string; message: string }; cancelled?: true };
      // The call this operation served is over: nobody waits for it any more.
      if (a.cancelled) return new Promise(() => {});
      if (a.error) rethrow(a as Answer);
      const value = a.value as SubtleValue;
      if ('bytes' in value) return buffer(value.bytes);
      if ('key' in value) return keyOf(value.key);
      if ('pair' in value) return { publicKey: keyOf(value.pair.publicKey), privateKey: keyOf(value.pair.privateKey) };
      if ('bool' in value) return value.bool;
      return value.json;
    }) as Promise<unknown>;
  };

  /** importKey of a signer's key on the synchronous path (the host's node:crypto). */
  const importSigner = (format: unknown, keyData: unknown, algorithm: unknown, extractable: unknown, keyUsages: unknown): CryptoKey => {
    {
      if (!FORMATS.has(String(format))) throw new TypeError(`Failed to execute 'importKey' on 'SubtleCrypto': The provided value '${String(format)}' is not a valid enum value of type KeyFormat.`);
      const usages = Array.isArray(keyUsages) ? keyUsages.map(String) : [];
      if (!Array.isArray(keyUsages)) throw new TypeError("Failed to execute 'importKey' on 'SubtleCrypto': parameter 5 is not iterable.");
      for (const usage of usages) if (!USAGES.has(usage)) throw new TypeError(`Failed to execute 'importKey' on 'SubtleCrypto': The provided value '${usage}' is not a valid enum value of type KeyUsage.`);
      const normalized = normalize(algorithm, SIGNERS);
      let data: unknown;
      if (format === 'jwk') {
        if (typeof keyData !== 'object' || keyData === null || isView(keyData) || keyData instanceof ArrayBuffer) throw new TypeError("Failed to execute 'importKey' on 'SubtleCrypto': keyData is not a JsonWebKey.");
        // A plain copy of the JWK's own fields: no getters or prototypes cross.
        data = JSON.parse(JSON.stringify(keyData));
      } else data = bufferSource(keyData, 'importKey');
      const imported = host('importKey', { format, keyData: data, algorithm: normalized, extractable: extractable === true, usages }) as {
        handle: number;
        type: Slot['type'];
        material: Uint8Array;
        algorithm: Record<string, unknown>;
      };
      const allowed = imported.type === 'secret' ? ['sign', 'verify'] : imported.type === 'public' ? ['verify'] : ['sign'];
      for (const usage of usages) if (!allowed.includes(usage)) throw domError('SyntaxError', `Unsupported key usage for a ${normalized.name} key`);
      if (usages.length === 0 && imported.type !== 'public') throw domError('SyntaxError', 'Usages cannot be empty when creating a key.');
      const shown = { ...imported.algorithm };
      if (typeof shown.hash === 'object' && shown.hash !== null) shown.hash = freeze({ ...(shown.hash as object) });
      const key = new CryptoKey(slots, imported.type, extractable === true, freeze(shown), [...new Set(usages)]);
      slots.set(key, {
        handle: imported.handle,
        type: imported.type,
        material: imported.material,
        hostAlgorithm: { name: normalized.name, ...(normalized.hash ? { hash: normalized.hash as string } : {}), ...(normalized.namedCurve ? { namedCurve: normalized.namedCurve as string } : {}) },
        extractable: extractable === true,
        usages: [...new Set(usages)],
      });
      return key;
    }
  };

  const subtle = {
    digest: promised((algorithm: unknown, data: unknown) => {
      const { name } = normalize(algorithm, DIGESTS);
      return buffer(host('digest', { hash: name, data: bufferSource(data, 'digest') }));
    }),

    importKey: promised((format: unknown, keyData: unknown, algorithm: unknown, extractable: unknown, keyUsages: unknown) => {
      // Algorithms without a synchronous path here (AES, HKDF, PBKDF2, ECDH, X25519, RSA-OAEP…) are Node's.
      if (hostCall && !isSigner(algorithm)) return viaNode('importKey', [format, keyData, algorithm, extractable, keyUsages]);
      // The signers' fast path; where it refuses, Node's own answer (its error, or its key).
      if (hostCall) {
        try {
          return importSigner(format, keyData, algorithm, extractable, keyUsages);
        } catch {
          return viaNode('importKey', [format, keyData, algorithm, extractable, keyUsages]);
        }
      }
      return importSigner(format, keyData, algorithm, extractable, keyUsages);
    }),

    sign: promised((algorithm: unknown, key: unknown, data: unknown) => {
      const normalized = normalize(algorithm, SIGNERS);
      const slot = slotOf(key, 'sign', normalized.name, 'sign');
      const answer = byHandle(slot, 'signHandle', paramsOf(normalized, key as CryptoKey), bytesFor(data, 'sign'));
      return answer instanceof Uint8Array ? buffer(answer) : rethrow(answer as Answer);
    }),

    verify: promised((algorithm: unknown, key: unknown, signature: unknown, data: unknown) => {
      const normalized = normalize(algorithm, SIGNERS);
      const slot = slotOf(key, 'verify', normalized.name, 'verify');
      // The hot path of a JWT plugin: only the key's handle and flat values cross.
      const answer = byHandle(slot, 'verifyHandle', paramsOf(normalized, key as CryptoKey), bytesFor(signature, 'verify'), bytesFor(data, 'verify'));
      if (typeof answer === 'boolean') return answer;
      if (typeof answer !== 'object' || answer === null) throw domError('OperationError', 'the host could not verify');
      const job = (answer as Answer).job;
      if (typeof job === 'number') return new Promise<boolean>((resolve) => jobs.set(job, resolve));
      return rethrow(answer as Answer) as boolean;
    }),

    exportKey: promised((format: unknown, key: unknown) => {
      if (hostCall && !isSigner((key as CryptoKey | null)?.algorithm) && slots.has(key as object)) return viaNode('exportKey', [format, key]);
      if (!FORMATS.has(String(format))) throw new TypeError(`Failed to execute 'exportKey' on 'SubtleCrypto': The provided value '${String(format)}' is not a valid enum value of type KeyFormat.`);
      const slot = typeof key === 'object' && key !== null ? slots.get(key) : undefined;
      if (!slot) throw new TypeError("Failed to execute 'exportKey' on 'SubtleCrypto': parameter 2 is not of type 'CryptoKey'.");
      if (!(key as CryptoKey).extractable) throw domError('InvalidAccessError', 'key is not extractable');
      const out = host('exportKey', { format, key: { type: slot.type, material: slot.material, algorithm: slot.hostAlgorithm } });
      if (format === 'jwk') {
        const jwk = out as Record<string, unknown>;
        jwk.key_ops = [...(key as CryptoKey).usages];
        jwk.ext = true;
        return jwk;
      }
      return buffer(out);
    }),
  };
  for (const name of ['encrypt', 'decrypt', 'generateKey', 'deriveKey', 'deriveBits', 'wrapKey', 'unwrapKey']) {
    (subtle as Record<string, unknown>)[name] = hostCall
      ? (...args: unknown[]) => viaNode(name, args)
      : () => Promise.reject(domError('NotSupportedError', `crypto.subtle.${name} is not available in the plugin sandbox`));
  }
  const resolveJobs = (results: readonly number[]): void => {
    for (let i = 0; i + 1 < results.length; i += 2) {
      const resolve = jobs.get(results[i]!);
      if (!resolve) continue;
      jobs.delete(results[i]!);
      resolve(results[i + 1] === 1);
    }
  };
  return freeze({ subtle: freeze(subtle), CryptoKey, resolveJobs });
}
