import { createPublicKey } from 'node:crypto';
import type { JWK } from 'jose';
import { jose } from './jose.ts';

/** The JWS algorithms Envoy's jwt_authn verifies (its filter documentation); `none` never. */
export const SUPPORTED_ALGS: readonly string[] = ['ES256', 'ES384', 'ES512', 'HS256', 'HS384', 'HS512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'EdDSA'];
const SUPPORTED = new Set(SUPPORTED_ALGS);

const EC_CURVE: Readonly<Record<string, string>> = { ES256: 'P-256', ES384: 'P-384', ES512: 'P-521' };
/** Private parts of an asymmetric JWK: dropped, so a JWKS holding a private key still only verifies. */
const PRIVATE = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth'];

type VerifyKey = import('node:crypto').webcrypto.CryptoKey | Uint8Array;

/** One usable key of a JWKS, imported lazily once per algorithm. */
export interface KeyEntry {
  readonly kid: string | undefined;
  readonly alg: string | undefined;
  readonly kty: string;
  readonly crv: string | undefined;
  readonly jwk: Readonly<JWK>;
  readonly imported: Map<string, Promise<VerifyKey>>;
}

/** Whether a key of this type (and `alg`, when the key names one) can verify `alg` (jwt_verify_lib's selection). */
function fits(entry: KeyEntry, alg: string): boolean {
  if (entry.alg !== undefined && entry.alg !== alg) return false;
  if (alg.startsWith('RS') || alg.startsWith('PS')) return entry.kty === 'RSA';
  if (alg.startsWith('ES')) return entry.kty === 'EC' && entry.crv === EC_CURVE[alg];
  if (alg.startsWith('HS')) return entry.kty === 'oct';
  if (alg === 'EdDSA') return entry.kty === 'OKP' && (entry.crv === 'Ed25519' || entry.crv === 'Ed448');
  return false;
}

/** A parsed JWKS (or single JWK, or PEM public key): the keys a provider verifies with. */
export class KeySet {
  readonly keys: readonly KeyEntry[];

  constructor(keys: readonly KeyEntry[]) {
    this.keys = keys;
  }

  /** Keys that may have signed a token with this `alg` and `kid` (every fitting key when the token names no kid). */
  candidates(alg: string, kid: string | undefined): KeyEntry[] {
    if (!SUPPORTED.has(alg)) return [];
    return this.keys.filter((k) => (kid === undefined || k.kid === undefined || k.kid === kid) && fits(k, alg));
  }

  /** Whether any key carries this kid. */
  hasKid(kid: string): boolean {
    return this.keys.some((k) => k.kid === kid);
  }

  /** The key, imported for `alg` (once; jose's CryptoKey, or the secret bytes for HS*). */
  static key(entry: KeyEntry, alg: string): Promise<VerifyKey> {
    let key = entry.imported.get(alg);
    if (!key) {
      key = jose().then((j) => j.importJWK({ ...entry.jwk, alg } as JWK, alg)) as Promise<VerifyKey>;
      // A key that fails to import for this alg is left out of later attempts (the promise stays rejected).
      key.catch(() => undefined);
      entry.imported.set(alg, key);
    }
    return key;
  }
}

/** What {@link parseKeySet} reports. */
export type ParsedKeys = { keys: KeySet; skipped: string[] } | { error: string };

/**
 * Parses the text of a local `key` or a fetched JWKS: a JWKS (`{"keys": [...]}`), one JWK, or a
 * PEM public key or certificate (Envoy's local_jwks accepts all three). Keys that cannot be
 * used (unknown kty, missing parameters, `use` other than `sig`) are skipped and named; none
 * usable is an error.
 */
export function parseKeySet(text: string): ParsedKeys {
  const trimmed = text.trim();
  if (trimmed.startsWith('-----BEGIN')) {
    try {
      const jwk = createPublicKey(trimmed).export({ format: 'jwk' }) as JWK;
      return { keys: new KeySet([entryOf(jwk)]), skipped: [] };
    } catch (error) {
      return { error: `the PEM key does not parse as a public key or certificate: ${(error as Error).message}` };
    }
  }
  let doc: unknown;
  try {
    doc = JSON.parse(trimmed);
  } catch (error) {
    return { error: `neither a PEM key nor JSON: ${(error as Error).message}` };
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) return { error: 'a JWKS must be a JSON object with "keys" (or one JWK)' };
  const list = 'keys' in doc ? (doc as { keys: unknown }).keys : [doc];
  if (!Array.isArray(list)) return { error: '"keys" must be an array' };
  const keys: KeyEntry[] = [];
  const skipped: string[] = [];
  list.forEach((raw, index) => {
    const problem = keyProblem(raw);
    if (problem) skipped.push(`keys[${index}]: ${problem}`);
    else keys.push(entryOf(raw as JWK));
  });
  if (keys.length === 0) return { error: `no usable key${skipped.length ? ` (${skipped.join('; ')})` : ''}` };
  return { keys: new KeySet(keys), skipped };
}

function keyProblem(raw: unknown): string | undefined {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return 'not a JSON object';
  const jwk = raw as Record<string, unknown>;
  if (jwk.use !== undefined && jwk.use !== 'sig') return `"use" is ${JSON.stringify(jwk.use)}, not "sig"`;
  if (jwk.alg !== undefined && (typeof jwk.alg !== 'string' || !SUPPORTED.has(jwk.alg))) return `"alg" ${JSON.stringify(jwk.alg)} is not one Envoy verifies (${SUPPORTED_ALGS.join(', ')})`;
  if (jwk.kid !== undefined && typeof jwk.kid !== 'string') return '"kid" must be a string';
  if (jwk.kty === 'oct') return typeof jwk.k === 'string' && jwk.k.length > 0 ? undefined : 'an "oct" key needs "k"';
  if (jwk.kty !== 'RSA' && jwk.kty !== 'EC' && jwk.kty !== 'OKP') return `"kty" ${JSON.stringify(jwk.kty)} is not RSA, EC, OKP or oct`;
  try {
    // Node checks the parameters (modulus, curve point) synchronously: a bad key is found at load.
    createPublicKey({ key: publicPart(jwk) as import('node:crypto').JsonWebKey, format: 'jwk' });
  } catch (error) {
    return `not a valid ${String(jwk.kty)} public key: ${(error as Error).message}`;
  }
  return undefined;
}

function publicPart(jwk: Record<string, unknown>): Record<string, unknown> {
  if (jwk.kty === 'oct') return jwk;
  const out = { ...jwk };
  for (const name of PRIVATE) delete out[name];
  return out;
}

function entryOf(jwk: JWK): KeyEntry {
  const pub = publicPart(jwk as Record<string, unknown>) as JWK;
  return { kid: typeof pub.kid === 'string' ? pub.kid : undefined, alg: typeof pub.alg === 'string' ? pub.alg : undefined, kty: String(pub.kty), crv: typeof pub.crv === 'string' ? pub.crv : undefined, jwk: pub, imported: new Map() };
}
