import { describe, expect, it } from 'vitest';
import { parseBasicCredentials } from './credentials.ts';

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

describe('parseBasicCredentials', () => {
  it('accepts the scheme in any case', () => {
    for (const scheme of ['Basic', 'basic', 'BASIC', 'bAsIc']) {
      expect(parseBasicCredentials(`${scheme} ${b64('alice:secret')}`)).toEqual({ username: 'alice', password: 'secret' });
    }
  });

  it('splits at the first colon: the password may contain more', () => {
    expect(parseBasicCredentials(`Basic ${b64('alice:a:b::c')}`)).toEqual({ username: 'alice', password: 'a:b::c' });
  });

  it('keeps an empty password and UTF-8', () => {
    expect(parseBasicCredentials(`Basic ${b64('zoë:')}`)).toEqual({ username: 'zoë', password: '' });
  });

  it('rejects other schemes, missing colons and malformed base64', () => {
    for (const header of [undefined, '', 'Bearer abc', `Basic ${b64('nocolon')}`, 'Basic !!!', 'Basic', `Basic ${b64('a:b')}x`, `Basicx ${b64('a:b')}`]) {
      expect(parseBasicCredentials(header)).toBeUndefined();
    }
  });
});
