import { createHash, hash } from 'node:crypto';

const MAGIC = Buffer.from('$apr1$');
const ITOA64 = './0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** The salt as Apache uses it: at most 8 characters, stopping at a `$`. */
export function apr1Salt(salt: string): string {
  const end = salt.indexOf('$');
  return (end === -1 ? salt : salt.slice(0, end)).slice(0, 8);
}

/**
 * The hash part of `$apr1$<salt>$<hash>` (22 characters): Apache's MD5 crypt variant
 * (apr_md5_encode in apr-util), as `htpasswd -m` and `openssl passwd -apr1` write it.
 */
export function apr1Hash(password: string | Buffer, salt: string): string {
  const pw = typeof password === 'string' ? Buffer.from(password, 'utf8') : password;
  const sl = Buffer.from(apr1Salt(salt), 'utf8');

  let final = hash('md5', Buffer.concat([pw, sl, pw]), 'buffer');
  const ctx = createHash('md5').update(pw).update(MAGIC).update(sl);
  for (let left = pw.length; left > 0; left -= 16) ctx.update(final.subarray(0, Math.min(left, 16)));
  // Apache's quirk: a zero byte for each set bit of the length, else the password's first byte.
  const zero = Buffer.alloc(1);
  const first = pw.subarray(0, 1);
  for (let i = pw.length; i > 0; i >>= 1) ctx.update(i & 1 ? zero : first);
  final = ctx.digest();

  // 1000 rounds to slow down brute force (the reason verified credentials are cached).
  for (let i = 0; i < 1000; i++) {
    const parts: Buffer[] = [i & 1 ? pw : final];
    if (i % 3) parts.push(sl);
    if (i % 7) parts.push(pw);
    parts.push(i & 1 ? final : pw);
    final = hash('md5', Buffer.concat(parts), 'buffer');
  }

  let out = '';
  const to64 = (value: number, chars: number): void => {
    for (let n = 0; n < chars; n++, value >>= 6) out += ITOA64[value & 0x3f];
  };
  to64((final[0]! << 16) | (final[6]! << 8) | final[12]!, 4);
  to64((final[1]! << 16) | (final[7]! << 8) | final[13]!, 4);
  to64((final[2]! << 16) | (final[8]! << 8) | final[14]!, 4);
  to64((final[3]! << 16) | (final[9]! << 8) | final[15]!, 4);
  to64((final[4]! << 16) | (final[10]! << 8) | final[5]!, 4);
  to64(final[11]!, 2);
  return out;
}

/** The full `$apr1$<salt>$<hash>` string. */
export function apr1Crypt(password: string | Buffer, salt: string): string {
  return `$apr1$${apr1Salt(salt)}$${apr1Hash(password, salt)}`;
}
