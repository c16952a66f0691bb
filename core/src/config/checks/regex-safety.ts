import isSafeRegex from 'safe-regex2';

/**
 * Why a route regex could backtrack catastrophically, or undefined when it looks safe.
 * Envoy and Gloo match with RE2 (linear time); Node's engine backtracks, and `/(a+)+$` against
 * a 33-character path blocked the event loop for 10 s (issue 17 finding 13). Until route
 * regexes run on a linear-time engine, patterns of the known exponential shapes are refused at
 * load: nested unbounded quantifiers (star height > 1, via safe-regex2), an unboundedly repeated
 * group whose alternatives can start alike (`(a|aa)+`), and backreferences (RE2 has none).
 */
export function regexHazard(source: string): string | undefined {
  if (/\\[1-9]|\\k</.test(source)) return 'backreferences are not supported (RE2 syntax, as in Envoy and Gloo)';
  if (!isSafeRegex(source, { limit: 25 })) return 'nested repetition (like "(a+)+") can take exponential time; rewrite it without a quantifier inside a repeated group';
  const overlap = overlappingRepeatedAlternation(source);
  if (overlap) return `the repeated group "${overlap}" has alternatives that can match the same text, which can take exponential time`;
  return undefined;
}

/** The first `( … | … )` group under `*`, `+` or `{n,}` whose alternatives may begin alike. */
function overlappingRepeatedAlternation(source: string): string | undefined {
  const opens: number[] = [];
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '\\') {
      i++;
      continue;
    }
    if (c === '[') {
      // Skip a character class (a `]` right after `[` or `[^` is literal).
      let j = i + 1;
      if (source[j] === '^') j++;
      if (source[j] === ']') j++;
      while (j < source.length && source[j] !== ']') j += source[j] === '\\' ? 2 : 1;
      i = j;
      continue;
    }
    if (c === '(') opens.push(i);
    else if (c === ')') {
      const start = opens.pop();
      if (start === undefined) continue;
      const next = source.slice(i + 1, i + 16);
      if (!/^(?:[*+]|\{\d+,\})/.test(next)) continue;
      const body = source.slice(start + 1, i).replace(/^\?(?::|=|!|<[=!]|<[A-Za-z_][\w]*>)/, '');
      const alternatives = splitTopLevel(body);
      if (alternatives.length < 2) continue;
      const firsts = new Set<string>();
      for (const alt of alternatives) {
        const first = alt[0];
        // An empty, wildcard, class, escape or group start may overlap with anything.
        if (first === undefined || '.[\\(^$'.includes(first)) return source.slice(start, i + 1);
        if (firsts.has(first.toLowerCase())) return source.slice(start, i + 1);
        firsts.add(first.toLowerCase());
      }
    }
  }
  return undefined;
}

/** Splits a group body at its top-level `|`. */
function splitTopLevel(body: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '\\') i++;
    else if (c === '[') {
      while (i < body.length && body[i] !== ']') i += body[i] === '\\' ? 2 : 1;
    } else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === '|' && depth === 0) {
      parts.push(body.slice(from, i));
      from = i + 1;
    }
  }
  parts.push(body.slice(from));
  return parts;
}
