import { jose } from './jose.ts';
import { deepFreeze } from '../config/resource.ts';
import { KeySet, SUPPORTED_ALGS, type KeyEntry } from './key-set.ts';
import { normalizeAudience, type CompiledProvider } from './provider.ts';

/**
 * Envoy's jwt_authn outcomes (jwt_verify_lib's `Status`) with the text Envoy sends as the body
 * of its 401/403, so clients and scripts written against Gloo see the same answers.
 */
export const JwtStatus = {
  Ok: 'OK',
  JwtMissed: 'Jwt is missing',
  JwtNotYetValid: 'Jwt not yet valid',
  JwtExpired: 'Jwt is expired',
  JwtBadFormat: 'Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections',
  JwtHeaderParseError: 'Jwt header is an invalid Base64url encoded',
  JwtHeaderBadJson: 'Jwt header is an invalid JSON',
  JwtHeaderBadAlg: 'Jwt header [alg] is not supported',
  JwtPayloadParseError: 'Jwt payload is an invalid Base64url encoded',
  JwtPayloadBadJson: 'Jwt payload is an invalid JSON',
  JwtTimeNotInteger: 'Jwt payload [exp] or [nbf] field is not an integer',
  JwtSignatureParseError: 'Jwt signature is an invalid Base64url encoded',
  JwtUnknownIssuer: 'Jwt issuer is not configured',
  JwtAudienceNotAllowed: 'Audiences in Jwt are not allowed',
  JwtVerificationFail: 'Jwt verification fails',
  JwksKidAlgMismatch: "Jwks doesn't have key to match kid or alg from Jwt",
  JwksFetchFail: 'Jwks remote fetch is failed',
} as const;
export type JwtStatusText = (typeof JwtStatus)[keyof typeof JwtStatus];

/** What verifying one token against one provider gives. */
export type Verified = { ok: true; payload: Record<string, unknown> } | { ok: false; status: JwtStatusText };

/** Longer tokens are refused before any parsing (Envoy's header limit is 60 KiB; real tokens are a few KiB). */
export const MAX_TOKEN_LENGTH = 16_384;
const BASE64URL = /^[A-Za-z0-9_-]*$/;
const ALGS = new Set(SUPPORTED_ALGS);

function decodeJson(segment: string): Record<string, unknown> | 'base64' | 'json' {
  if (!BASE64URL.test(segment) || segment.length % 4 === 1) return 'base64';
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
  } catch {
    return 'json';
  }
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : 'json';
}

const fail = (status: JwtStatusText): Verified => ({ ok: false, status });

/**
 * The claims of a token this provider verified before with its current (fresh) keys, when its
 * time claims still hold; synchronous, so a cached token costs no promise.
 */
export function cachedPayload(token: string, provider: CompiledProvider, nowS = Date.now() / 1000): Record<string, unknown> | undefined {
  const seen = provider.verified.get(token);
  if (seen === undefined || seen.keys !== (provider.local ?? provider.remote!.fresh()) || !timeValid(seen.payload, provider.clockSkewS, nowS)) return undefined;
  return seen.payload as Record<string, unknown>;
}

/**
 * Verifies `token` for `provider` in jwt_verify_lib's order: form, header, payload, issuer, time
 * (with the provider's clock skew), audiences, then the signature with the keys that fit the
 * token's `alg` and `kid` (jose's compactVerify). An unknown `kid` on a remote JWKS triggers one
 * rate-limited refetch (key rotation). Never throws.
 */
export async function verifyToken(token: string, provider: CompiledProvider, nowS = Date.now() / 1000): Promise<Verified> {
  if (token.length > MAX_TOKEN_LENGTH) return fail(JwtStatus.JwtBadFormat);
  const cached = cachedPayload(token, provider, nowS);
  if (cached) return { ok: true, payload: cached };
  const dot1 = token.indexOf('.');
  const dot2 = dot1 === -1 ? -1 : token.indexOf('.', dot1 + 1);
  if (dot2 === -1 || token.indexOf('.', dot2 + 1) !== -1) return fail(JwtStatus.JwtBadFormat);
  const header = decodeJson(token.slice(0, dot1));
  if (header === 'base64') return fail(JwtStatus.JwtHeaderParseError);
  if (header === 'json') return fail(JwtStatus.JwtHeaderBadJson);
  const alg = header.alg;
  if (typeof alg !== 'string' || !ALGS.has(alg)) return fail(JwtStatus.JwtHeaderBadAlg);
  const payload = decodeJson(token.slice(dot1 + 1, dot2));
  if (payload === 'base64') return fail(JwtStatus.JwtPayloadParseError);
  if (payload === 'json') return fail(JwtStatus.JwtPayloadBadJson);
  const signature = token.slice(dot2 + 1);
  if (signature === '' || !BASE64URL.test(signature)) return fail(JwtStatus.JwtSignatureParseError);

  if (provider.issuer !== undefined && payload.iss !== provider.issuer) return fail(JwtStatus.JwtUnknownIssuer);
  const { exp, nbf } = payload;
  if ((exp !== undefined && !Number.isInteger(exp)) || (nbf !== undefined && !Number.isInteger(nbf))) return fail(JwtStatus.JwtTimeNotInteger);
  if (typeof nbf === 'number' && nowS + provider.clockSkewS < nbf) return fail(JwtStatus.JwtNotYetValid);
  if (typeof exp === 'number' && nowS - provider.clockSkewS > exp) return fail(JwtStatus.JwtExpired);
  if (provider.audiences.size > 0 && !audienceAllowed(payload.aud, provider.audiences)) return fail(JwtStatus.JwtAudienceNotAllowed);

  const kid = typeof header.kid === 'string' ? header.kid : undefined;
  let keys: KeySet | undefined = provider.local ?? (await provider.remote!.get());
  if (!keys) return fail(JwtStatus.JwksFetchFail);
  let candidates = keys.candidates(alg, kid);
  if (candidates.length === 0 && kid !== undefined && provider.remote && !keys.hasKid(kid)) {
    const refreshed = await provider.remote.refreshForUnknownKid();
    if (refreshed) {
      keys = refreshed;
      candidates = keys.candidates(alg, kid);
    }
  }
  if (candidates.length === 0) return fail(JwtStatus.JwksKidAlgMismatch);
  for (const entry of candidates) {
    if (await signatureVerifies(token, entry, alg)) {
      // Frozen: one payload object serves every request that presents this token.
      deepFreeze(payload);
      provider.verified.set(token, { keys, payload });
      return { ok: true, payload };
    }
  }
  return fail(JwtStatus.JwtVerificationFail);
}

async function signatureVerifies(token: string, entry: KeyEntry, alg: string): Promise<boolean> {
  try {
    const key = await KeySet.key(entry, alg);
    // The payload checked above is the one these bytes sign: compactVerify covers header.payload exactly.
    await (await jose()).compactVerify(token, key, { algorithms: [alg] });
    return true;
  } catch {
    return false;
  }
}

function timeValid(payload: Readonly<Record<string, unknown>>, skewS: number, nowS: number): boolean {
  const { exp, nbf } = payload;
  return !(typeof nbf === 'number' && nowS + skewS < nbf) && !(typeof exp === 'number' && nowS - skewS > exp);
}

function audienceAllowed(aud: unknown, allowed: ReadonlySet<string>): boolean {
  if (typeof aud === 'string') return allowed.has(normalizeAudience(aud));
  if (Array.isArray(aud)) return aud.some((a) => typeof a === 'string' && allowed.has(normalizeAudience(a)));
  return false;
}
