import { randomBytes } from 'node:crypto';

/** The host's half of the sandbox's `crypto.getRandomValues`: `n` CSPRNG bytes, copied out as base64. */
export function hostRandom(n: unknown): string {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 65_536) throw new RangeError('random bytes: expected 0 to 65536');
  return randomBytes(n).toString('base64');
}
