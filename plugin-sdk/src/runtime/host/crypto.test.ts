import { constants, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { createHostCrypto, p1363ToDer } from './crypto.ts';

describe('p1363ToDer (ECDSA signatures handed to OpenSSL as DER)', () => {
  for (const [curve, hash, size, count] of [['P-256', 'sha256', 32, 2400], ['P-384', 'sha384', 48, 200], ['P-521', 'sha512', 66, 200]] as const) {
    it(`${curve}: verifies exactly what Node's own P1363 verify does, leading zero bytes and high bits included`, () => {
      const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: curve });
      let leadingZero = 0;
      let highBit = 0;
      for (let i = 0; i < count; i++) {
        const data = Buffer.from(`message ${i}`);
        const signature = sign(hash, data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
        if (signature[0] === 0 || signature[size] === 0) leadingZero++;
        if (signature[0]! & 0x80 || signature[size]! & 0x80) highBit++;
        const tampered = Buffer.from(signature);
        tampered[i % tampered.length]! ^= 1 << i % 8;
        for (const candidate of [signature, tampered]) {
          const der = p1363ToDer(candidate, size);
          const ours = der !== undefined && verify(hash, data, publicKey, der);
          expect(ours).toBe(verify(hash, data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, candidate));
        }
      }
      // The cases the conversion exists for were met: a zero leading byte (~1 in 128 P-256
      // signatures, ~19 expected here; about every other P-521 one, whose top byte is 0 or 1)
      // and a high bit (a DER integer then needs a zero byte in front).
      if (curve === 'P-521') expect(leadingZero).toBeGreaterThan(50);
      else expect(highBit).toBeGreaterThan(count / 4);
      if (curve === 'P-256') expect(leadingZero).toBeGreaterThan(0);
    });
  }

  it('a signature of the wrong size converts to nothing (a failed verification)', () => {
    expect(p1363ToDer(new Uint8Array(63), 32)).toBeUndefined();
    expect(p1363ToDer(new Uint8Array(0), 32)).toBeUndefined();
    // All zeros is the right size: DER of r = s = 0, which OpenSSL then refuses.
    expect(p1363ToDer(new Uint8Array(64), 32)?.toString('hex')).toBe('3006020100020100');
  });
});

describe('verifyHandle (the host half of crypto.subtle.verify)', () => {
  it('never throws on what no isolate half would send; an unknown handle is stale', () => {
    const host = createHostCrypto();
    for (const args of [[undefined], [1.5, 'x'], [-1, 'ECDSA|SHA-256||P-256', new Uint8Array(64), new Uint8Array(1)], ['1', null, null, null]]) {
      expect(host('verifyHandle', ...(args as [unknown]))).toBe('stale');
    }
    expect((host('rekey', 99, { type: 'public', material: new Uint8Array(3), algorithm: { name: 'ECDSA' } }) as { error?: { name: string } }).error?.name).toBe('TypeError');
  });

  it('a deferred verify answers a job and finishes with the right result; HMAC never defers', async () => {
    const started: number[] = [];
    const finished = new Map<number, boolean>();
    const host = createHostCrypto({
      defer: (work) => {
        const id = started.push(started.length + 1);
        work((valid) => finished.set(id, valid));
        return id;
      },
    });
    const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const imported = host('importKey', { format: 'jwk', keyData: publicKey.export({ format: 'jwk' }), algorithm: { name: 'ECDSA', namedCurve: 'P-256' }, usages: ['verify'] }) as { value: { handle: number } };
    const data = new Uint8Array(Buffer.from('deferred'));
    const signature = new Uint8Array(sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' }));
    const good = host('verifyHandle', imported.value.handle, 'ECDSA|SHA-256||P-256', signature, data) as { job: number };
    const bad = host('verifyHandle', imported.value.handle, 'ECDSA|SHA-256||P-256', signature, new Uint8Array(Buffer.from('other'))) as { job: number };
    expect([good.job, bad.job]).toEqual([1, 2]);
    await vi.waitFor(() => expect([finished.get(1), finished.get(2)]).toEqual([true, false]), { timeout: 5_000, interval: 10 });
    const secret = host('importKey', { format: 'raw', keyData: new Uint8Array(32), algorithm: { name: 'HMAC', hash: 'SHA-256' }, usages: ['verify'] }) as { value: { handle: number } };
    expect(host('verifyHandle', secret.value.handle, 'HMAC|||', new Uint8Array(32), data)).toBe(false);
    expect(started).toHaveLength(2);
  });

  // Found by CI (a PS256 case read a short signature as valid about 1 run in 25): OpenSSL's PSS
  // verify takes a signature whose leading zero byte was dropped; RFC 8017 8.1.2 says invalid.
  for (const [name, params, signer] of [
    ['RSA-PSS', 'RSA-PSS|SHA-256|32|', (data: Buffer, key: KeyObject) => sign('sha256', data, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 })],
    ['RSASSA-PKCS1-v1_5', 'RSASSA-PKCS1-v1_5|SHA-256||', (data: Buffer, key: KeyObject) => sign('sha256', data, key)],
  ] as const) {
    it(`${name}: a signature with its leading zero byte dropped is invalid, in line and deferred`, async () => {
      const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      let data = Buffer.alloc(0);
      let signature = Buffer.alloc(0);
      // About 1 signature in 256 starts with a zero byte.
      for (let i = 0; i < 5000 && signature[0] !== 0; i++) {
        data = Buffer.from(`message ${i}`);
        signature = signer(data, privateKey);
      }
      expect(signature[0]).toBe(0);
      const pending: Promise<boolean>[] = [];
      const deferred = createHostCrypto({ defer: (work) => pending.push(new Promise((resolve) => work(resolve))) });
      for (const host of [createHostCrypto(), deferred]) {
        const imported = host('importKey', { format: 'jwk', keyData: publicKey.export({ format: 'jwk' }), algorithm: { name, hash: 'SHA-256' }, usages: ['verify'] }) as { value: { handle: number } };
        const answer = (sig: Buffer) => host('verifyHandle', imported.value.handle, params, new Uint8Array(sig), new Uint8Array(data));
        const whole = answer(signature);
        expect(whole === true || (typeof whole === 'object' && 'job' in (whole as object))).toBe(true);
        expect(answer(signature.subarray(1))).toBe(false);
        expect(answer(Buffer.concat([Buffer.alloc(1), signature]))).toBe(false);
      }
      expect(await Promise.all(pending)).toEqual([true]);
    });
  }
});

