import type { HeaderToSet } from '../step.ts';
import type { ClaimHeader } from './compile.ts';

/** The payload of a JWT without verifying it (a token we received from the provider ourselves), or undefined. */
export function jwtPayload(token: string | undefined): Record<string, unknown> | undefined {
  if (!token) return undefined;
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  try {
    const value = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** A claim as a header value: strings as they are, anything else as JSON; control characters make it unusable. */
function headerValue(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return /^[\t\x20-\x7e\x80-\xff]*$/.test(text) && text.length <= 8192 ? text : undefined;
}

/** Gloo's `claimsToHeaders`: each present claim copied to its header (appended when asked). */
export function claimHeaders(claims: Record<string, unknown> | undefined, mapping: readonly ClaimHeader[], out: HeaderToSet[]): void {
  if (!claims) return;
  for (const { claim, header, append } of mapping) {
    const value = headerValue(claims[claim]);
    if (value !== undefined) out.push({ key: header, value, append });
  }
}
