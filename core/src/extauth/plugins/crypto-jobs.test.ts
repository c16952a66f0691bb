import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthDecision } from '../step.ts';
import { createPluginStep } from './plugin-step.ts';
import { pluginDir, recordingLogger, request } from './test-support.ts';

// crypto.subtle.verify with an asymmetric key runs on Node's thread pool (the host crypto's
// `defer`): the results reach the plugin through one crossing per event-loop turn. Real
// isolates, keys and signatures from node:crypto (OpenSSL).

const HOST_API = new URL('./fixtures/host-api.ts', import.meta.url);
let plugins: Awaited<ReturnType<typeof pluginDir>>;

beforeAll(async () => {
  plugins = await pluginDir([{ entry: HOST_API, name: 'HostApi' }]);
});
afterAll(async () => {
  await plugins?.remove();
});

interface Case {
  name: string;
  key: () => { publicKey: KeyObject; privateKey: KeyObject };
  import: Record<string, unknown>;
  verify: Record<string, unknown>;
  sign: (data: Buffer, key: KeyObject) => Buffer;
}
const CASES: Case[] = [
  { name: 'RS256', key: () => generateKeyPairSync('rsa', { modulusLength: 2048 }), import: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, verify: { name: 'RSASSA-PKCS1-v1_5' }, sign: (d, k) => sign('sha256', d, k) },
  { name: 'PS256', key: () => generateKeyPairSync('rsa', { modulusLength: 2048 }), import: { name: 'RSA-PSS', hash: 'SHA-256' }, verify: { name: 'RSA-PSS', saltLength: 32 }, sign: (d, k) => sign('sha256', d, { key: k, padding: 6, saltLength: 32 }) },
  ...(['P-256', 'P-384', 'P-521'] as const).map((curve, i): Case => ({
    name: `ECDSA ${curve}`,
    key: () => generateKeyPairSync('ec', { namedCurve: curve }),
    import: { name: 'ECDSA', namedCurve: curve },
    verify: { name: 'ECDSA', hash: ['SHA-256', 'SHA-384', 'SHA-512'][i] },
    sign: (d, k) => sign(['sha256', 'sha384', 'sha512'][i]!, d, { key: k, dsaEncoding: 'ieee-p1363' }),
  })),
  { name: 'Ed25519', key: () => generateKeyPairSync('ed25519'), import: { name: 'Ed25519' }, verify: { name: 'Ed25519' }, sign: (d, k) => sign(null, d, k) },
];

function verifierStep(symbol: 'Verifier' | 'ManyKeys', c: Case, pair: { publicKey: KeyObject }, options: { cpuTimeoutMs?: number } = {}) {
  const logger = recordingLogger();
  const step = createPluginStep(
    { name: 'HostApi', exportedSymbolName: symbol, config: { Jwk: pair.publicKey.export({ format: 'jwk' }), Import: c.import, Verify: c.verify } },
    { pluginDir: plugins.dir, logger, ...options },
  );
  return { logger, step };
}
const valid = (decision: AuthDecision): string | undefined => (decision.allowed ? decision.headersToSet : decision.headers).find((h) => h.key === 'x-valid')?.value;

describe('crypto.subtle.verify off the event loop', () => {
  for (const c of CASES) {
    it(`${c.name}: 40 calls in one turn each get their own answer (valid, tampered, wrong size)`, async () => {
      const pair = c.key();
      const s = await verifierStep('Verifier', c, pair).step;
      const calls = Array.from({ length: 40 }, (_, i) => {
        const data = `payload ${i}`;
        const signature = c.sign(Buffer.from(data), pair.privateKey);
        if (i % 4 === 1) signature[signature.length - 1]! ^= 1;
        const sig = i % 4 === 2 ? signature.subarray(1) : signature;
        return { expected: i % 4 === 0 || i % 4 === 3 ? 'true' : 'false', headers: { 'x-data': data, 'x-sig': sig.toString('hex') } };
      });
      const decisions = await Promise.all(calls.map((call) => s.authorize(request(call.headers))));
      expect(decisions.map(valid)).toEqual(calls.map((call) => call.expected));
      expect(s.mode).toBe('inline');
      await s.close();
    });
  }

  it('more verifies at once than run off the loop (300 in one call): the rest run synchronously, all agree', async () => {
    const c = CASES[2]!;
    const pair = c.key();
    const s = await verifierStep('Verifier', c, pair, { cpuTimeoutMs: 2000 }).step;
    const signature = c.sign(Buffer.from('many'), pair.privateKey).toString('hex');
    expect(valid(await s.authorize(request({ 'x-data': 'many', 'x-sig': signature, 'x-count': '300' })))).toBe('true');
    await s.close();
  });

  it('a loop after the verify: denied, the isolate is dropped and rebuilt, the step recovers', async () => {
    const c = CASES[0]!;
    const pair = c.key();
    const { step: built, logger } = verifierStep('Verifier', c, pair);
    const s = await built;
    const signature = c.sign(Buffer.from('x'), pair.privateKey).toString('hex');
    const started = performance.now();
    expect(await s.authorize(request({ 'x-data': 'x', 'x-sig': signature, 'x-after': 'loop' }))).toMatchObject({ allowed: false, status: 403 });
    expect(performance.now() - started).toBeLessThan(1000);
    expect(logger.lines.some((l) => l.message.startsWith('plugin isolate dropped: the code after a crypto.subtle.verify failed'))).toBe(true);
    let decision: AuthDecision | undefined;
    for (let i = 0; i < 40 && !decision?.allowed; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      decision = await s.authorize(request({ 'x-data': 'x', 'x-sig': signature }));
    }
    expect(decision && valid(decision)).toBe('true');
    await s.close();
  });

  it('a key whose host handle was pushed out by 600 newer keys still verifies (registered again)', async () => {
    const c = CASES[2]!;
    const pair = c.key();
    const s = await verifierStep('ManyKeys', c, pair, { cpuTimeoutMs: 2000 }).step;
    const signature = c.sign(Buffer.from('old key'), pair.privateKey);
    expect(valid(await s.authorize(request({ 'x-data': 'old key', 'x-sig': signature.toString('hex'), 'x-keys': '600' })))).toBe('true');
    signature[0]! ^= 1;
    expect(valid(await s.authorize(request({ 'x-data': 'old key', 'x-sig': signature.toString('hex') })))).toBe('false');
    await s.close();
  });
});
