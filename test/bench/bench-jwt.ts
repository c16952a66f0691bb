// Signing keys and tokens for the JWT bench rows and the CPU probe: one RSA and one P-256 key
// pair per process, long-lived tokens signed with node:crypto, and the JWKS the plugin verifies with.
import { generateKeyPairSync, sign } from 'node:crypto';

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const b64url = (data: Buffer | string) => Buffer.from(data).toString('base64url');

/** A token valid for a day, `kid` = the algorithm. */
export function benchJwt(alg: 'RS256' | 'ES256'): string {
  const input = `${b64url(JSON.stringify({ alg, kid: alg, typ: 'JWT' }))}.${b64url(JSON.stringify({ sub: 'bench', exp: Math.floor(Date.now() / 1000) + 86_400 }))}`;
  const signature = alg === 'RS256' ? sign('sha256', Buffer.from(input), rsa.privateKey) : sign('sha256', Buffer.from(input), { key: ec.privateKey, dsaEncoding: 'ieee-p1363' });
  return `${input}.${b64url(signature)}`;
}

/** The public keys, as the Jwt plugin's `Jwks` config takes them. */
export const BENCH_JWKS = { keys: [{ ...rsa.publicKey.export({ format: 'jwk' }), kid: 'RS256', alg: 'RS256' }, { ...ec.publicKey.export({ format: 'jwk' }), kid: 'ES256', alg: 'ES256' }] };
