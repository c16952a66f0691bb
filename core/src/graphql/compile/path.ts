/**
 * Paths into JSON values (SPEC 3.3): `a.b`, `a[0]`, `a[*].b`. Parsed once at load time
 * into segments; the request path only walks them.
 */

export type Segment = { readonly key: string } | { readonly index: number } | { readonly all: true };

/** A parse failure, with the offending input and position. */
export class PathSyntaxError extends Error {
  override name = 'PathSyntaxError';
}

const KEY_END = /[.[\]{}]/;

/** Parses `a.b[0][*].c` (a leading `.` or `[` is allowed, so `$args[0]` and `$args.x` both work). */
export function parsePath(text: string): Segment[] {
  const out: Segment[] = [];
  let i = 0;
  let expectKey = true;
  while (i < text.length) {
    const ch = text[i]!;
    if (ch === '[') {
      const end = text.indexOf(']', i);
      if (end < 0) throw new PathSyntaxError(`unclosed "[" at position ${i} in path "${text}"`);
      const inner = text.slice(i + 1, end).trim();
      if (inner === '*') out.push({ all: true });
      else if (/^[0-9]+$/.test(inner)) out.push({ index: Number(inner) });
      else throw new PathSyntaxError(`"[${inner}]" in path "${text}": an index must be a number or *`);
      i = end + 1;
      expectKey = false;
      continue;
    }
    if (ch === '.') {
      if (expectKey && i > 0) throw new PathSyntaxError(`empty segment at position ${i} in path "${text}"`);
      i++;
      expectKey = true;
      if (i >= text.length) throw new PathSyntaxError(`path "${text}" ends with "."`);
      continue;
    }
    if (!expectKey && out.length > 0) throw new PathSyntaxError(`expected "." or "[" at position ${i} in path "${text}"`);
    let end = i;
    while (end < text.length && !KEY_END.test(text[end]!)) end++;
    if (end === i) throw new PathSyntaxError(`unexpected "${ch}" at position ${i} in path "${text}"`);
    out.push({ key: text.slice(i, end) });
    i = end;
    expectKey = false;
  }
  return out;
}

/**
 * The value at `path` in `value`; `undefined` when any step is missing. `[*]` maps over an
 * array, or over an object's `[key, value]` pairs.
 */
export function getPath(value: unknown, path: readonly Segment[], from = 0): unknown {
  let current = value;
  for (let i = from; i < path.length; i++) {
    if (current === null || current === undefined) return undefined;
    const segment = path[i]!;
    if ('key' in segment) {
      if (typeof current !== 'object') return undefined;
      current = (current as Record<string, unknown>)[segment.key];
    } else if ('index' in segment) {
      if (!Array.isArray(current)) return undefined;
      current = current[segment.index];
    } else {
      const rest = i + 1;
      if (Array.isArray(current)) return current.map((item) => nullish(getPath(item, path, rest)));
      // Gloo's RequestTemplate docs: `[*]` on an object lists its key/value pairs, each as
      // `[key, value]` (bookinfo's ratings `{"Reviewer1": 5}` → `[["Reviewer1", 5]]`).
      if (typeof current !== 'object') return undefined;
      return Object.entries(current as Record<string, unknown>).map((pair) => nullish(getPath(pair, path, rest)));
    }
  }
  return current;
}

function nullish(value: unknown): unknown {
  return value === undefined ? null : value;
}

/** `a.b[0]` back from segments, for messages. */
export function formatJsonPath(path: readonly Segment[]): string {
  let out = '';
  for (const s of path) {
    if ('key' in s) out += out ? `.${s.key}` : s.key;
    else if ('index' in s) out += `[${s.index}]`;
    else out += '[*]';
  }
  return out;
}
