/** One authentication challenge from a `WWW-Authenticate` header (RFC 9110 section 11.6.1). */
export interface Challenge {
  scheme: 'basic' | 'bearer';
  /** Auth-params with lowercase names (`realm`, `service`, `scope`, ...). */
  params: Record<string, string>;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+/;

/**
 * Parses a `WWW-Authenticate` value and returns the challenge to answer: Bearer when offered
 * (it is what registries mean), else Basic; other schemes are ignored.
 */
export function parseChallenge(header: string | undefined): Challenge | undefined {
  if (!header) return undefined;
  const challenges: Challenge[] = [];
  let rest = header.trim();
  let current: { scheme: string; params: Record<string, string> } | undefined;
  while (rest.length > 0) {
    rest = rest.replace(/^[\s,]+/, '');
    const name = TOKEN.exec(rest)?.[0];
    if (!name) break;
    const after = rest.slice(name.length);
    const param = /^\s*=\s*/.exec(after);
    if (param && current) {
      // auth-param: name=token or name="quoted string"
      let value = '';
      let tail = after.slice(param[0].length);
      if (tail.startsWith('"')) {
        let i = 1;
        while (i < tail.length && tail[i] !== '"') {
          if (tail[i] === '\\' && i + 1 < tail.length) i++;
          value += tail[i];
          i++;
        }
        tail = tail.slice(i + 1);
      } else {
        value = TOKEN.exec(tail)?.[0] ?? '';
        tail = tail.slice(value.length);
      }
      current.params[name.toLowerCase()] = value;
      rest = tail;
      continue;
    }
    current = { scheme: name.toLowerCase(), params: {} };
    challenges.push(current as Challenge);
    rest = after;
  }
  return challenges.find((c) => c.scheme === 'bearer') ?? challenges.find((c) => c.scheme === 'basic');
}
