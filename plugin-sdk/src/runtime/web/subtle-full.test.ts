import { randomBytes, webcrypto } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createHostCrypto } from '../host/crypto.ts';
import { MAX_PBKDF2_ITERATIONS, MAX_RSA_MODULUS_BITS } from '../host/subtle-call.ts';
import { createSubtle } from './subtle.ts';

// Differential tests (issue 30 item 5): the rest of crypto.subtle (encrypt/decrypt, generateKey,
// deriveBits/deriveKey, wrapKey/unwrapKey, import/export of every format of every algorithm),
// the isolate half run here over the host half, against Node's own crypto.subtle on the same
// inputs: the same bytes, and the same error name for every failure. Arguments cross as they
// cross isolated-vm (structured copies).

type SubtleCrypto = webcrypto.SubtleCrypto;
type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

const node = webcrypto.subtle;
const host = createHostCrypto();
const call = (op: string, args: unknown) => (op === 'crypto' ? host.subtle(structuredClone(args)).then((answer) => structuredClone(answer)) : Promise.reject(new Error(op)));
const { subtle: sandbox } = createSubtle(host, call) as { subtle: SubtleCrypto };
const bytes = (n: number) => new Uint8Array(randomBytes(n));
const hex = (buffer: ArrayBuffer) => Buffer.from(buffer).toString('hex');

/** The error name a promise rejects with, or 'resolved'. */
async function outcome(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
    return 'resolved';
  } catch (error) {
    return (error as Error).name;
  }
}

/** The same operation on both implementations: same bytes (or both fail with the same error name). */
async function same(ours: () => Promise<unknown>, theirs: () => Promise<unknown>): Promise<void> {
  const [a, b] = await Promise.allSettled([ours(), theirs()]);
  if (a.status === 'rejected' || b.status === 'rejected') {
    expect(a.status === 'rejected' ? (a.reason as Error).name : 'resolved').toBe(b.status === 'rejected' ? (b.reason as Error).name : 'resolved');
    return;
  }
  const value = (v: unknown) => (v instanceof ArrayBuffer ? hex(v) : v);
  expect(value(a.value)).toEqual(value(b.value));
}

/** A secret imported into both, from the same bytes. */
async function bothSecret(raw: Uint8Array, algorithm: webcrypto.AlgorithmIdentifier | webcrypto.HmacImportParams, usages: webcrypto.KeyUsage[], extractable = true): Promise<[CryptoKey, CryptoKey]> {
  return [await sandbox.importKey('raw', raw, algorithm, extractable, usages), await node.importKey('raw', raw, algorithm, extractable, usages)];
}

describe('AES encrypt/decrypt equal Node', () => {
  for (const length of [128, 192, 256]) {
    it(`AES-GCM-${length}: ciphertexts byte-equal, tampered ciphertext and tag fail alike, bad parameters fail alike`, async () => {
      const [ours, theirs] = await bothSecret(bytes(length / 8), 'AES-GCM', ['encrypt', 'decrypt']);
      expect(ours.algorithm).toEqual(theirs.algorithm);
      for (const size of [0, 1, 16, 100, 5000]) {
        for (const params of [{ name: 'AES-GCM', iv: bytes(12) }, { name: 'AES-GCM', iv: bytes(16), additionalData: bytes(20), tagLength: 96 }]) {
          const data = bytes(size);
          const sealed = await sandbox.encrypt(params, ours, data);
          expect(hex(sealed)).toBe(hex(await node.encrypt(params, theirs, data)));
          expect(hex(await sandbox.decrypt(params, ours, sealed))).toBe(hex(data.buffer));
          const tampered = new Uint8Array(sealed);
          tampered[size % tampered.length]! ^= 1;
          const tag = new Uint8Array(sealed);
          tag[tag.length - 1]! ^= 0x80;
          for (const bad of [tampered, tag, tag.subarray(0, 4)]) await same(() => sandbox.decrypt(params, ours, bad), () => node.decrypt(params, theirs, bad));
        }
      }
      for (const params of [{ name: 'AES-GCM' }, { name: 'AES-GCM', iv: new Uint8Array(0) }, { name: 'AES-GCM', iv: bytes(12), tagLength: 33 }, { name: 'AES-GCM', iv: 'nope' }]) {
        await same(() => sandbox.encrypt(params as never, ours, bytes(8)), () => node.encrypt(params as never, theirs, bytes(8)));
      }
      await same(() => sandbox.encrypt({ name: 'AES-GCM', iv: bytes(12) }, ours, 'text' as never), () => node.encrypt({ name: 'AES-GCM', iv: bytes(12) }, theirs, 'text' as never));
    });
  }

  it('AES-CBC and AES-CTR: byte-equal, bad padding, bad iv and counter lengths fail alike', async () => {
    const [cbc, cbcNode] = await bothSecret(bytes(32), 'AES-CBC', ['encrypt', 'decrypt']);
    const [ctr, ctrNode] = await bothSecret(bytes(16), 'AES-CTR', ['encrypt', 'decrypt']);
    for (const size of [0, 15, 16, 17, 1000]) {
      const data = bytes(size);
      const cbcParams = { name: 'AES-CBC', iv: bytes(16) };
      const sealed = await sandbox.encrypt(cbcParams, cbc, data);
      expect(hex(sealed)).toBe(hex(await node.encrypt(cbcParams, cbcNode, data)));
      const broken = new Uint8Array(sealed);
      broken[broken.length - 1]! ^= 0xff;
      await same(() => sandbox.decrypt(cbcParams, cbc, broken), () => node.decrypt(cbcParams, cbcNode, broken));
      const ctrParams = { name: 'AES-CTR', counter: bytes(16), length: 64 };
      expect(hex(await sandbox.encrypt(ctrParams, ctr, data))).toBe(hex(await node.encrypt(ctrParams, ctrNode, data)));
    }
    await same(() => sandbox.encrypt({ name: 'AES-CBC', iv: bytes(8) }, cbc, bytes(8)), () => node.encrypt({ name: 'AES-CBC', iv: bytes(8) }, cbcNode, bytes(8)));
    await same(() => sandbox.encrypt({ name: 'AES-CTR', counter: bytes(16), length: 0 } as never, ctr, bytes(8)), () => node.encrypt({ name: 'AES-CTR', counter: bytes(16), length: 0 } as never, ctrNode, bytes(8)));
    await same(() => sandbox.encrypt({ name: 'AES-CTR', counter: bytes(4), length: 64 }, ctr, bytes(8)), () => node.encrypt({ name: 'AES-CTR', counter: bytes(4), length: 64 }, ctrNode, bytes(8)));
  });

  it('wrong key usages, the wrong algorithm for the key, a key of the wrong length, and a non-key fail like Node', async () => {
    const [sealOnly, sealOnlyNode] = await bothSecret(bytes(16), 'AES-GCM', ['encrypt']);
    const params = { name: 'AES-GCM', iv: bytes(12) };
    await same(() => sandbox.decrypt(params, sealOnly, bytes(32)), () => node.decrypt(params, sealOnlyNode, bytes(32)));
    await same(() => sandbox.encrypt({ name: 'AES-CBC', iv: bytes(16) }, sealOnly, bytes(32)), () => node.encrypt({ name: 'AES-CBC', iv: bytes(16) }, sealOnlyNode, bytes(32)));
    await same(() => sandbox.importKey('raw', bytes(17), 'AES-GCM', true, ['encrypt']), () => node.importKey('raw', bytes(17), 'AES-GCM', true, ['encrypt']));
    await same(() => sandbox.importKey('raw', bytes(16), 'AES-GCM', true, ['sign']), () => node.importKey('raw', bytes(16), 'AES-GCM', true, ['sign']));
    await same(() => sandbox.encrypt(params, {} as never, bytes(1)), () => node.encrypt(params, {} as never, bytes(1)));
    const [hmac, hmacNode] = await bothSecret(bytes(32), { name: 'HMAC', hash: 'SHA-256' }, ['sign']);
    await same(() => sandbox.encrypt(params, hmac, bytes(1)), () => node.encrypt(params, hmacNode, bytes(1)));
    expect(await outcome(() => sandbox.encrypt(params, sealOnly, bytes(1)))).toBe('resolved');
  });
});

describe('RSA-OAEP', () => {
  it('generated in the sandbox: Node encrypts to its public key, the sandbox decrypts; tampered fails alike', async () => {
    const pair = (await sandbox.generateKey({ name: 'RSA-OAEP', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, true, ['encrypt', 'decrypt'])) as CryptoKeyPair;
    expect(pair.publicKey.algorithm).toMatchObject({ name: 'RSA-OAEP', modulusLength: 2048, hash: { name: 'SHA-256' } });
    expect(pair.privateKey.usages).toEqual(['decrypt']);
    const spki = await sandbox.exportKey('spki', pair.publicKey);
    const theirs = await node.importKey('spki', spki, { name: 'RSA-OAEP', hash: 'SHA-256' }, true, ['encrypt']);
    const data = bytes(100);
    const label = bytes(8);
    const sealed = await node.encrypt({ name: 'RSA-OAEP', label }, theirs, data);
    expect(hex(await sandbox.decrypt({ name: 'RSA-OAEP', label }, pair.privateKey, sealed))).toBe(hex(data.buffer));
    const pkcs8 = await sandbox.exportKey('pkcs8', pair.privateKey);
    const theirPrivate = await node.importKey('pkcs8', pkcs8, { name: 'RSA-OAEP', hash: 'SHA-256' }, true, ['decrypt']);
    const tampered = new Uint8Array(sealed);
    tampered[5]! ^= 1;
    await same(() => sandbox.decrypt({ name: 'RSA-OAEP', label }, pair.privateKey, tampered), () => node.decrypt({ name: 'RSA-OAEP', label }, theirPrivate, tampered));
    await same(() => sandbox.decrypt({ name: 'RSA-OAEP' }, pair.privateKey, sealed), () => node.decrypt({ name: 'RSA-OAEP' }, theirPrivate, sealed));
    await same(() => sandbox.encrypt({ name: 'RSA-OAEP' }, pair.privateKey, data), () => node.encrypt({ name: 'RSA-OAEP' }, theirPrivate, data));
  });

  it(`generateKey refuses an RSA modulus over ${MAX_RSA_MODULUS_BITS} bits (a pool thread for seconds)`, async () => {
    await expect(sandbox.generateKey({ name: 'RSA-PSS', modulusLength: 8192, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, true, ['sign'])).rejects.toMatchObject({
      name: 'OperationError',
      message: expect.stringContaining(`at most ${MAX_RSA_MODULUS_BITS} bits`),
    });
  });
});

describe('key derivation', () => {
  it('HKDF deriveBits and deriveKey equal Node; bad lengths and usages fail alike', async () => {
    const ikm = bytes(32);
    const [ours, theirs] = await bothSecret(ikm, 'HKDF', ['deriveBits', 'deriveKey'], false);
    for (const [hash, length] of [['SHA-256', 256], ['SHA-512', 512], ['SHA-1', 8], ['SHA-384', 0]] as const) {
      const params = { name: 'HKDF', hash, salt: bytes(16), info: bytes(5) };
      await same(() => sandbox.deriveBits(params, ours, length), () => node.deriveBits(params, theirs, length));
    }
    const params = { name: 'HKDF', hash: 'SHA-256', salt: bytes(16), info: new Uint8Array(0) };
    await same(() => sandbox.deriveBits(params, ours, 7), () => node.deriveBits(params, theirs, 7));
    await same(() => sandbox.deriveBits(params, ours, 256 * 255 * 8 + 8), () => node.deriveBits(params, theirs, 256 * 255 * 8 + 8));
    await same(() => sandbox.deriveBits({ name: 'HKDF', hash: 'SHA-256' } as never, ours, 8), () => node.deriveBits({ name: 'HKDF', hash: 'SHA-256' } as never, theirs, 8));
    const derived = await sandbox.deriveKey(params, ours, { name: 'AES-GCM', length: 256 }, true, ['encrypt']);
    const derivedNode = await node.deriveKey(params, theirs, { name: 'AES-GCM', length: 256 }, true, ['encrypt']);
    expect(hex(await sandbox.exportKey('raw', derived))).toBe(hex(await node.exportKey('raw', derivedNode)));
    expect(derived.algorithm).toEqual(derivedNode.algorithm);
    await same(() => sandbox.importKey('raw', ikm, 'HKDF', true, ['deriveBits']), () => node.importKey('raw', ikm, 'HKDF', true, ['deriveBits']));
    const [bitsOnly, bitsOnlyNode] = await bothSecret(ikm, 'HKDF', ['deriveBits'], false);
    await same(() => sandbox.deriveKey(params, bitsOnly, { name: 'AES-GCM', length: 128 }, true, ['encrypt']), () => node.deriveKey(params, bitsOnlyNode, { name: 'AES-GCM', length: 128 }, true, ['encrypt']));
  });

  it(`PBKDF2 deriveBits and deriveKey equal Node; iterations 0 fails alike; more than ${MAX_PBKDF2_ITERATIONS} iterations are refused`, async () => {
    const [ours, theirs] = await bothSecret(new TextEncoder().encode('correct horse'), 'PBKDF2', ['deriveBits', 'deriveKey'], false);
    for (const [hash, iterations, length] of [['SHA-256', 1000, 256], ['SHA-1', 1, 160], ['SHA-512', 10, 1024]] as const) {
      const params = { name: 'PBKDF2', hash, salt: bytes(16), iterations };
      await same(() => sandbox.deriveBits(params, ours, length), () => node.deriveBits(params, theirs, length));
    }
    const zero = { name: 'PBKDF2', hash: 'SHA-256', salt: bytes(16), iterations: 0 };
    await same(() => sandbox.deriveBits(zero, ours, 256), () => node.deriveBits(zero, theirs, 256));
    const params = { name: 'PBKDF2', hash: 'SHA-256', salt: bytes(16), iterations: 100 };
    const key = await sandbox.deriveKey(params, ours, { name: 'HMAC', hash: 'SHA-256' }, true, ['sign']);
    const keyNode = await node.deriveKey(params, theirs, { name: 'HMAC', hash: 'SHA-256' }, true, ['sign']);
    expect(hex(await sandbox.exportKey('raw', key))).toBe(hex(await node.exportKey('raw', keyNode)));
    // The derived HMAC key signs on the synchronous path: the same MAC as Node's.
    expect(hex(await sandbox.sign('HMAC', key, bytes(0)))).toBe(hex(await node.sign('HMAC', keyNode, bytes(0))));
    await expect(sandbox.deriveBits({ ...params, iterations: MAX_PBKDF2_ITERATIONS + 1 }, ours, 256)).rejects.toMatchObject({ name: 'OperationError', message: expect.stringContaining(`at most ${MAX_PBKDF2_ITERATIONS}`) });
    await expect(sandbox.deriveBits(params, ours, 8192)).rejects.toMatchObject({ name: 'OperationError' });
  });

  for (const [name, curve] of [['ECDH', 'P-256'], ['ECDH', 'P-384'], ['ECDH', 'P-521'], ['X25519', undefined]] as const) {
    it(`${name}${curve ? ` ${curve}` : ''}: a sandbox key pair and a Node key pair agree on the shared secret; bad peers fail alike`, async () => {
      const algorithm = curve ? { name, namedCurve: curve } : { name };
      const ours = (await sandbox.generateKey(algorithm, true, ['deriveBits', 'deriveKey'])) as CryptoKeyPair;
      const theirs = (await node.generateKey(algorithm, true, ['deriveBits', 'deriveKey'])) as CryptoKeyPair;
      expect(ours.publicKey.algorithm).toEqual(theirs.publicKey.algorithm);
      expect(ours.privateKey.usages).toEqual(theirs.privateKey.usages);
      const theirPublicInSandbox = await sandbox.importKey('raw', await node.exportKey('raw', theirs.publicKey), algorithm, true, []);
      const ourPublicInNode = await node.importKey('raw', await sandbox.exportKey('raw', ours.publicKey), algorithm, true, []);
      const bits = curve === 'P-521' ? 528 : curve === 'P-384' ? 384 : 256;
      const a = await sandbox.deriveBits({ name, public: theirPublicInSandbox } as never, ours.privateKey, bits);
      const b = await node.deriveBits({ name, public: ourPublicInNode } as never, theirs.privateKey, bits);
      expect(hex(a)).toBe(hex(b));
      const aes = await sandbox.deriveKey({ name, public: theirPublicInSandbox } as never, ours.privateKey, { name: 'AES-KW', length: 128 }, true, ['wrapKey']);
      expect(aes.algorithm).toEqual({ name: 'AES-KW', length: 128 });
      // A public key as the private one, and a peer of another algorithm, fail like Node.
      await same(() => sandbox.deriveBits({ name, public: theirPublicInSandbox } as never, theirPublicInSandbox, bits), () => node.deriveBits({ name, public: ourPublicInNode } as never, ourPublicInNode, bits));
      const other = (await node.generateKey({ name: 'ECDH', namedCurve: curve === 'P-256' ? 'P-384' : 'P-256' }, true, ['deriveBits'])) as CryptoKeyPair;
      const otherInSandbox = await sandbox.importKey('spki', await node.exportKey('spki', other.publicKey), { name: 'ECDH', namedCurve: curve === 'P-256' ? 'P-384' : 'P-256' }, true, []);
      await same(() => sandbox.deriveBits({ name, public: otherInSandbox } as never, ours.privateKey, bits), () => node.deriveBits({ name, public: other.publicKey } as never, theirs.privateKey, bits));
    });
  }
});

describe('wrapKey / unwrapKey', () => {
  it('AES-KW and AES-GCM wrapping: wrapped bytes equal Node, unwrap gives a working key, tampering and a non-extractable key fail alike', async () => {
    const kek = bytes(32);
    const [kw, kwNode] = await bothSecret(kek, 'AES-KW', ['wrapKey', 'unwrapKey']);
    const [gcm, gcmNode] = await bothSecret(kek, 'AES-GCM', ['wrapKey', 'unwrapKey']);
    const secret = bytes(32);
    const [inner, innerNode] = await bothSecret(secret, { name: 'HMAC', hash: 'SHA-256' }, ['sign', 'verify']);
    const [aes, aesNode] = await bothSecret(bytes(16), 'AES-CBC', ['encrypt']);
    const wrapped = await sandbox.wrapKey('raw', inner, kw, 'AES-KW');
    expect(hex(wrapped)).toBe(hex(await node.wrapKey('raw', innerNode, kwNode, 'AES-KW')));
    const unwrapped = await sandbox.unwrapKey('raw', wrapped, kw, 'AES-KW', { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    expect(hex(await sandbox.sign('HMAC', unwrapped, bytes(0)))).toBe(hex(await node.sign('HMAC', innerNode, bytes(0))));
    expect(unwrapped.extractable).toBe(false);
    const iv = bytes(12);
    for (const format of ['raw', 'jwk'] as const) {
      const sealed = await sandbox.wrapKey(format, aes, gcm, { name: 'AES-GCM', iv });
      expect(hex(sealed)).toBe(hex(await node.wrapKey(format, aesNode, gcmNode, { name: 'AES-GCM', iv })));
      const back = await sandbox.unwrapKey(format, sealed, gcm, { name: 'AES-GCM', iv }, 'AES-CBC', true, ['encrypt']);
      expect(await sandbox.exportKey('jwk', back)).toEqual(await node.exportKey('jwk', aesNode));
      const tampered = new Uint8Array(sealed);
      tampered[0]! ^= 1;
      await same(() => sandbox.unwrapKey(format, tampered, gcm, { name: 'AES-GCM', iv }, 'AES-CBC', true, ['encrypt']), () => node.unwrapKey(format, tampered, gcmNode, { name: 'AES-GCM', iv }, 'AES-CBC', true, ['encrypt']));
    }
    const [locked, lockedNode] = await bothSecret(bytes(16), 'AES-GCM', ['encrypt'], false);
    await same(() => sandbox.wrapKey('raw', locked, kw, 'AES-KW'), () => node.wrapKey('raw', lockedNode, kwNode, 'AES-KW'));
    await same(() => sandbox.unwrapKey('raw', bytes(24), kw, 'AES-KW', 'AES-GCM', true, ['encrypt']), () => node.unwrapKey('raw', bytes(24), kwNode, 'AES-KW', 'AES-GCM', true, ['encrypt']));
    await same(() => sandbox.wrapKey('raw', inner, kw, { name: 'AES-GCM', iv } as never), () => node.wrapKey('raw', innerNode, kwNode, { name: 'AES-GCM', iv } as never));
  });
});

describe('import and export: every format of every algorithm, as Node does', () => {
  const cases: [string, webcrypto.AlgorithmIdentifier | Record<string, unknown>, webcrypto.KeyUsage[]][] = [
    ['AES-GCM', { name: 'AES-GCM', length: 256 }, ['encrypt', 'decrypt']],
    ['AES-CBC', { name: 'AES-CBC', length: 128 }, ['encrypt', 'decrypt']],
    ['AES-CTR', { name: 'AES-CTR', length: 192 }, ['encrypt', 'decrypt']],
    ['AES-KW', { name: 'AES-KW', length: 256 }, ['wrapKey', 'unwrapKey']],
    ['HMAC', { name: 'HMAC', hash: 'SHA-384' }, ['sign', 'verify']],
    ['ECDSA', { name: 'ECDSA', namedCurve: 'P-384' }, ['sign', 'verify']],
    ['ECDH', { name: 'ECDH', namedCurve: 'P-256' }, ['deriveBits']],
    ['X25519', { name: 'X25519' }, ['deriveBits']],
    ['Ed25519', { name: 'Ed25519' }, ['sign', 'verify']],
    ['RSA-OAEP', { name: 'RSA-OAEP', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, ['encrypt', 'decrypt']],
    ['RSA-PSS', { name: 'RSA-PSS', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-512' }, ['sign', 'verify']],
  ];
  for (const [label, algorithm, usages] of cases) {
    it(`${label}: what Node exports in each format imports into the sandbox and exports again identically; formats Node refuses fail alike`, async () => {
      const generated = (await node.generateKey(algorithm as never, true, usages)) as CryptoKey | CryptoKeyPair;
      const keys = 'publicKey' in generated ? [generated.publicKey, generated.privateKey] : [generated];
      for (const key of keys) {
        for (const format of ['raw', 'spki', 'pkcs8', 'jwk'] as const) {
          const exported = await node.exportKey(format as never, key).catch(() => undefined);
          const importAlgorithm = { ...(algorithm as object), ...(key.algorithm as object), ...('hash' in key.algorithm ? { hash: (key.algorithm as { hash: { name: string } }).hash.name } : {}) };
          if (exported === undefined) {
            // A format this key has not: importing some key material in it fails like Node.
            const material = format === 'jwk' ? { kty: 'oct', k: 'AAAA' } : bytes(32);
            await same(() => sandbox.importKey(format as never, material as never, importAlgorithm as never, true, key.usages), () => node.importKey(format as never, material as never, importAlgorithm as never, true, key.usages));
            continue;
          }
          const ours = await sandbox.importKey(format as never, exported as never, importAlgorithm as never, true, key.usages);
          const again = await sandbox.exportKey(format as never, ours);
          if (format === 'jwk') expect(again).toEqual(exported);
          else expect(hex(again as ArrayBuffer)).toBe(hex(exported as ArrayBuffer));
          expect(ours.type).toBe(key.type);
          expect(ours.algorithm).toEqual(key.algorithm);
        }
      }
      // Non-extractable: exporting fails like Node.
      const [locked] = keys;
      const lockedOurs = await sandbox.importKey('jwk', await node.exportKey('jwk', locked!), { ...(algorithm as object), ...('hash' in locked!.algorithm ? { hash: (locked!.algorithm as { hash: { name: string } }).hash.name } : {}) } as never, false, locked!.usages);
      const lockedNode = await node.importKey('jwk', await node.exportKey('jwk', locked!), { ...(algorithm as object), ...('hash' in locked!.algorithm ? { hash: (locked!.algorithm as { hash: { name: string } }).hash.name } : {}) } as never, false, locked!.usages);
      await same(() => sandbox.exportKey('jwk', lockedOurs), () => node.exportKey('jwk', lockedNode));
    });
  }

  it('generateKey: the sandbox makes keys Node accepts (ECDSA and Ed25519 sign in the sandbox, verify in Node)', async () => {
    for (const algorithm of [{ name: 'ECDSA', namedCurve: 'P-256' }, { name: 'Ed25519' }]) {
      const pair = (await sandbox.generateKey(algorithm, true, ['sign', 'verify'])) as CryptoKeyPair;
      const data = bytes(40);
      const params = algorithm.name === 'ECDSA' ? { name: 'ECDSA', hash: 'SHA-256' } : algorithm;
      const signature = await sandbox.sign(params, pair.privateKey, data);
      const theirs = await node.importKey('jwk', await sandbox.exportKey('jwk', pair.publicKey), algorithm, true, ['verify']);
      expect(await node.verify(params, theirs, signature, data)).toBe(true);
      expect(await sandbox.verify(params, pair.publicKey, signature, data)).toBe(true);
    }
    await same(() => sandbox.generateKey({ name: 'AES-GCM', length: 100 }, true, ['encrypt']), () => node.generateKey({ name: 'AES-GCM', length: 100 }, true, ['encrypt']));
    await same(() => sandbox.generateKey({ name: 'AES-GCM', length: 128 }, true, []), () => node.generateKey({ name: 'AES-GCM', length: 128 }, true, []));
    await same(() => sandbox.generateKey({ name: 'NOPE' }, true, ['encrypt']), () => node.generateKey({ name: 'NOPE' }, true, ['encrypt']));
  });
});

describe('handles the host dropped', () => {
  it('a key whose handle the host no longer holds is registered again from its material (513 keys, the first used last)', async () => {
    const keys: CryptoKey[] = [];
    for (let i = 0; i < 513; i++) keys.push(await sandbox.importKey('raw', new Uint8Array(16).fill(i % 256), 'AES-GCM', false, ['encrypt']));
    const [, theirs] = await bothSecret(new Uint8Array(16).fill(0), 'AES-GCM', ['encrypt']);
    const params = { name: 'AES-GCM', iv: new Uint8Array(12) };
    expect(hex(await sandbox.encrypt(params, keys[0]!, bytes(0)))).toBe(hex(await node.encrypt(params, theirs, bytes(0))));
  });
});
