import { randomFillSync } from 'node:crypto';

/** UUIDs drawn per `randomFillSync` call. */
const BATCH = 256;
const random = Buffer.allocUnsafe(16 * BATCH);
let used = BATCH;
const HEX: readonly number[] = Array.from('0123456789abcdef', (c) => c.charCodeAt(0));
const DASH = 0x2d;

/** The character codes of a byte's two hex digits. */
const hi = (byte: number): number => HEX[byte >> 4]!;
const lo = (byte: number): number => HEX[byte & 0x0f]!;

/**
 * A random (version 4) UUID for `x-request-id`, from a batch of CSPRNG bytes as
 * `crypto.randomUUID()` draws them, made as one string in one call: randomUUID concatenates
 * 20 pieces (~500 bytes allocated per request, a third of what the gateway's own request
 * path allocated). Measured alone: 70–120 ns against 150–210 ns.
 */
export function newRequestId(): string {
  if (used === BATCH) {
    randomFillSync(random);
    used = 0;
  }
  const r = random;
  const f = used++ * 16;
  // RFC 9562 5.4: version 4 in byte 6's high nibble, variant 0b10 in byte 8's two high bits.
  const b6 = (r[f + 6]! & 0x0f) | 0x40;
  const b8 = (r[f + 8]! & 0x3f) | 0x80;
  return String.fromCharCode(
    hi(r[f]!), lo(r[f]!), hi(r[f + 1]!), lo(r[f + 1]!), hi(r[f + 2]!), lo(r[f + 2]!), hi(r[f + 3]!), lo(r[f + 3]!), DASH,
    hi(r[f + 4]!), lo(r[f + 4]!), hi(r[f + 5]!), lo(r[f + 5]!), DASH,
    hi(b6), lo(b6), hi(r[f + 7]!), lo(r[f + 7]!), DASH,
    hi(b8), lo(b8), hi(r[f + 9]!), lo(r[f + 9]!), DASH,
    hi(r[f + 10]!), lo(r[f + 10]!), hi(r[f + 11]!), lo(r[f + 11]!), hi(r[f + 12]!), lo(r[f + 12]!),
    hi(r[f + 13]!), lo(r[f + 13]!), hi(r[f + 14]!), lo(r[f + 14]!), hi(r[f + 15]!), lo(r[f + 15]!),
  );
}
