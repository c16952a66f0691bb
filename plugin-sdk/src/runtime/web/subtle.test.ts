import { randomBytes, webcrypto } from 'node:crypto';

type SubtleCrypto = webcrypto.SubtleCrypto;
type CryptoKeyPair = webcrypto.CryptoKeyPair;
import { describe, expect, it } from 'vitest';
import { createHostCrypto } from '../host/crypto.ts';
import { createSubtle } from './subtle.ts';

// Differential tests (issue 10 acceptance): the sandbox's crypto.subtle (isolate half run here,
// host half on node:crypto) against Node's own WebCrypto, results and failures alike.

const node = webcrypto.subtle;
const { subtle: sandbox, CryptoKey: SandboxKey } = createSubtle(createHostCrypto()) as { subtle: SubtleCrypto; CryptoKey: new () => unknown };
const bytes = (n: number) => new Uint8Array(randomBytes(n));
const equal = (a: ArrayBuffer, b: ArrayBuffer) => Buffer.from(a).equals(Buffer.from(b));

/** The error name a promise rejects with, or 'resolved:<value>'. */
async function outcome(run: () => Promise<unknown>): Promise<string> {
  try {
    const value = await run();
    return `resolved:${typeof value === 'boolean' ? value : typeof value}`;
  } catch (error) {
    return (error as Error).name;
  }
}

describe('digest', () => {
  it.each(['SHA-1', 'SHA-256', 'SHA-384', 'SHA-512', 'sha-256'])('%s equals Node for random and empty inputs', async (hash) => {
    for (const size of [0, 1, 55, 64, 1000, 70_000]) {
      const data = bytes(size);
      expect(equal(await sandbox.digest(hash, data), await node.digest(hash, data))).toBe(true);
    }
  });

  it('bad algorithms and data fail like Node', async () => {
    for (const [algorithm, data] of [['MD5', bytes(1)], ['SHA-256', 'text'], [{}, bytes(1)], [{ name: 'SHA-256' }, null]] as const) {
      expect(await outcome(() => sandbox.digest(algorithm as never, data as never))).toBe(await outcome(() => node.digest(algorithm as never, data as never)));
    }
  });
});

describe('HMAC', () => {
  it.each(['SHA-1', 'SHA-256', 'SHA-384', 'SHA-512'])('%s: signatures byte-equal Node, verify and tamper agree (raw and jwk)', async (hash) => {
    for (let i = 0; i < 20; i++) {
      const secret = bytes(1 + (i * 7) % 100);
      const data = bytes(i * 13);
      const ours = await sandbox.importKey('raw', secret, { name: 'HMAC', hash }, true, ['sign', 'verify']);
      const theirs = await node.importKey('raw', secret, { name: 'HMAC', hash }, true, ['sign', 'verify']);
      const signature = await sandbox.sign('HMAC', ours, data);
      expect(equal(signature, await node.sign('HMAC', theirs, data))).toBe(true);
      expect(await sandbox.verify('HMAC', ours, signature, data)).toBe(true);
      const tampered = new Uint8Array(data.byteLength + 1);
      tampered.set(data);
      expect(await sandbox.verify('HMAC', ours, signature, tampered)).toBe(false);
      const jwk = await node.exportKey('jwk', theirs);
      const fromJwk = await sandbox.importKey('jwk', jwk, { name: 'HMAC', hash }, false, ['verify']);
      expect(await sandbox.verify('HMAC', fromJwk, signature, data)).toBe(true);
      expect(ours.algorithm).toEqual(theirs.algorithm);
      expect(await sandbox.exportKey('jwk', ours)).toEqual(jwk);
    }
  });
});

const ASYMMETRIC: { name: string; params: Record<string, unknown>; sign: Record<string, unknown>; deterministic: boolean }[] = [
  { name: 'RSASSA-PKCS1-v1_5', params: { modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, sign: {}, deterministic: true },
  { name: 'RSA-PSS', params: { modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-384' }, sign: { saltLength: 32 }, deterministic: false },
  { name: 'ECDSA', params: { namedCurve: 'P-256' }, sign: { hash: 'SHA-256' }, deterministic: false },
  { name: 'ECDSA', params: { namedCurve: 'P-384' }, sign: { hash: 'SHA-384' }, deterministic: false },
  { name: 'ECDSA', params: { namedCurve: 'P-521' }, sign: { hash: 'SHA-512' }, deterministic: false },
  { name: 'Ed25519', params: {}, sign: {}, deterministic: true },
];

describe.each(ASYMMETRIC)('$name $params.namedCurve', ({ name, params, sign, deterministic }) => {
  it('keys from Node import in every format; signatures cross-verify both ways; tampering fails', async () => {
    const pair = (await node.generateKey({ name, ...params } as never, true, ['sign', 'verify'])) as CryptoKeyPair;
    const importParams = { name, ...(params.hash ? { hash: params.hash } : {}), ...(params.namedCurve ? { namedCurve: params.namedCurve } : {}) };
    const algorithm = { name, ...sign };
    const spki = await node.exportKey('spki', pair.publicKey);
    const pkcs8 = await node.exportKey('pkcs8', pair.privateKey);
    const publicJwk = await node.exportKey('jwk', pair.publicKey);
    const ourPrivate = await sandbox.importKey('pkcs8', pkcs8, importParams, false, ['sign']);
    const ourPublic = await sandbox.importKey('spki', spki, importParams, true, ['verify']);
    const ourJwkPublic = await sandbox.importKey('jwk', publicJwk, importParams, true, ['verify']);
    expect(ourPublic.algorithm).toEqual(pair.publicKey.algorithm);
    expect([ourPublic.type, ourPrivate.type, ourPrivate.extractable]).toEqual(['public', 'private', false]);
    for (let i = 0; i < 5; i++) {
      const data = bytes(i * 100);
      const ours = await sandbox.sign(algorithm, ourPrivate, data);
      const theirs = await node.sign(algorithm as never, pair.privateKey, data);
      if (deterministic) expect(equal(ours, theirs)).toBe(true);
      expect(await node.verify(algorithm as never, pair.publicKey, ours, data)).toBe(true);
      expect(await sandbox.verify(algorithm, ourPublic, theirs, data)).toBe(true);
      expect(await sandbox.verify(algorithm, ourJwkPublic, theirs, data)).toBe(true);
      const tampered = data.length ? Uint8Array.from(data, (b, j) => (j === 0 ? b ^ 1 : b)) : new Uint8Array([1]);
      expect(await sandbox.verify(algorithm, ourPublic, theirs, tampered)).toBe(await node.verify(algorithm as never, pair.publicKey, theirs, tampered));
      // A signature of the wrong length is false, not an error, in both.
      expect(await sandbox.verify(algorithm, ourPublic, new Uint8Array(3), data)).toBe(await node.verify(algorithm as never, pair.publicKey, new Uint8Array(3), data));
    }
    expect(equal(await sandbox.exportKey('spki', ourPublic), spki)).toBe(true);
    expect(await sandbox.exportKey('jwk', ourPublic)).toEqual(await node.exportKey('jwk', pair.publicKey));
    if (name === 'ECDSA' || name === 'Ed25519') {
      const raw = await node.exportKey('raw', pair.publicKey);
      const ourRaw = await sandbox.importKey('raw', raw, importParams, true, ['verify']);
      expect(equal(await sandbox.exportKey('raw', ourRaw), raw)).toBe(true);
    }
  });
});

describe('failures equal Node by error name', () => {
  it('usages, key types, formats, algorithms and bad key data', async () => {
    const rsa = (await node.generateKey({ name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, true, ['sign', 'verify'])) as CryptoKeyPair;
    const spki = await node.exportKey('spki', rsa.publicKey);
    const cases: [string, unknown, unknown, unknown, unknown][] = [
      ['spki', spki, { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, true, ['sign']],
      ['spki', spki, { name: 'ECDSA', namedCurve: 'P-256' }, true, ['verify']],
      ['spki', bytes(40), { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, true, ['verify']],
      ['jwk', { kty: 'oct', k: 'AAAA', alg: 'HS512' }, { name: 'HMAC', hash: 'SHA-256' }, true, ['sign']],
      ['jwk', { kty: 'RSA', n: 'bad' }, { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, true, ['verify']],
      ['raw', bytes(16), { name: 'HMAC', hash: 'SHA-256' }, true, []],
      ['raw', bytes(16), { name: 'HMAC', hash: 'SHA-256' }, true, ['encrypt']],
      ['raw', bytes(16), { name: 'HMAC', hash: 'SHA-256' }, true, ['fly']],
      ['raw', new Uint8Array(0), { name: 'HMAC', hash: 'SHA-256' }, true, ['sign']],
      ['raw', bytes(10), { name: 'Ed25519' }, true, ['verify']],
      ['pem', bytes(10), { name: 'HMAC', hash: 'SHA-256' }, true, ['sign']],
    ];
    for (const [format, data, algorithm, extractable, usages] of cases) {
      const ours = await outcome(() => sandbox.importKey(format as never, data as never, algorithm as never, extractable as boolean, usages as never));
      const theirs = await outcome(() => node.importKey(format as never, data as never, algorithm as never, extractable as boolean, usages as never));
      expect(`${format} ${JSON.stringify(algorithm)} ${JSON.stringify(usages)}: ${ours}`).toBe(`${format} ${JSON.stringify(algorithm)} ${JSON.stringify(usages)}: ${theirs}`);
    }
    const ourPublic = await sandbox.importKey('spki', spki, { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, false, ['verify']);
    expect(await outcome(() => sandbox.sign('RSASSA-PKCS1-v1_5', ourPublic, bytes(4)))).toBe(await outcome(() => node.sign('RSASSA-PKCS1-v1_5', rsa.publicKey, bytes(4))));
    expect(await outcome(() => sandbox.verify('RSA-PSS', ourPublic, bytes(4), bytes(4)))).toBe('InvalidAccessError');
    expect(await outcome(() => sandbox.exportKey('spki', ourPublic))).toBe('InvalidAccessError');
    expect(await outcome(() => sandbox.verify('HMAC', {} as never, bytes(4), bytes(4)))).toBe(await outcome(() => node.verify('HMAC', {} as never, bytes(4), bytes(4))));
    // Deliberate difference: algorithms outside SPEC 5.3's list are not supported at all in the sandbox.
    expect(await outcome(() => sandbox.importKey('raw', bytes(16), { name: 'AES-GCM' }, true, ['encrypt']))).toBe('NotSupportedError');
  });
});

describe('hostile plugin code', () => {
  it('a CryptoKey shows no material, cannot be forged and its constructor leads nowhere', async () => {
    const key = await sandbox.importKey('raw', bytes(32), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    expect(Object.getOwnPropertyNames(key)).toEqual([]);
    expect(Object.getOwnPropertySymbols(key)).toEqual([]);
    expect(JSON.stringify(key)).toBe('{}');
    expect(() => new SandboxKey()).toThrow(TypeError);
    const forged = Object.create(Object.getPrototypeOf(key));
    expect(await outcome(() => sandbox.sign('HMAC', forged, bytes(1)))).toBe('TypeError');
    expect(Object.isFrozen(key.usages) && Object.isFrozen(key.algorithm)).toBe(true);
  });

  it('huge inputs are refused with an error, not a crash', async () => {
    const key = await sandbox.importKey('raw', bytes(32), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    expect(await outcome(() => sandbox.sign('HMAC', key, new Uint8Array(16 * 1024 * 1024 + 1)))).toBe('OperationError');
    expect(await outcome(() => sandbox.importKey('raw', new Uint8Array(65 * 1024), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']))).toBe('OperationError');
  });

  it('the host half never throws and refuses what no isolate half would send', () => {
    const host = createHostCrypto();
    for (const [op, args] of [['sign', { key: { type: 'secret', material: 'x' } }], ['verify', null], ['exportKey', { key: { type: 'root' } }], ['nope', {}], ['digest', { hash: 'SHA-256', data: [1, 2] }]] as const) {
      const answer = host(op, args) as { error?: { name: string } };
      expect(answer.error?.name, `${op}`).toMatch(/Error$/);
    }
  });
});
