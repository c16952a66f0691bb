import { describe, expect, it } from 'vitest';
import { htpasswdApr1, opensslApr1 } from '../../../../test/extauth/support.ts';
import { apr1Crypt, apr1Hash } from './apr1.ts';

describe('apr1Hash', () => {
  // Lengths around the 16-byte digest boundary exercise the length loops of the algorithm.
  const passwords = ['secret', 'pa:ss:word', 'a', 'exactly16chars!!', 'seventeen chars!!', 'a much longer passphrase, with spaces and 40+ chars', 'päss wörd ✓'];

  it.each(passwords)('matches htpasswd -nbm for %j', (password) => {
    const { salt, hashedPassword } = htpasswdApr1('user', password);
    expect(apr1Hash(password, salt)).toBe(hashedPassword);
  });

  it.each([
    ['secret', 'abcdefgh'],
    ['', 'abc'],
    ['pa$$word', 'x'],
  ])('matches openssl passwd -apr1 for %j with salt %j', (password, salt) => {
    expect(apr1Crypt(password, salt)).toBe(opensslApr1(password, salt));
  });

  it('uses at most 8 salt characters, as Apache does', () => {
    expect(apr1Crypt('secret', 'abcdefghijkl')).toBe(opensslApr1('secret', 'abcdefgh'));
  });
});
