/**
 * Gloo's `AuthConfig.booleanExpr`: which named steps must allow, as a boolean expression over
 * step names with `&&`, `||`, `!` and parentheses, e.g. `basic1 || (plugin2 && !plugin3)`.
 * Evaluated left to right with short-circuiting (Gloo's extauth.proto), so a step whose
 * value cannot change the result is not run. Parsed once at load.
 */

/** A parsed expression: a tree over step names. */
export type BoolExpr = { readonly kind: 'step'; readonly name: string } | { readonly kind: 'not'; readonly operand: BoolExpr } | { readonly kind: 'and' | 'or'; readonly left: BoolExpr; readonly right: BoolExpr };

/** Why an expression does not parse; `at` is the character offset. */
export class BoolExprError extends Error {
  readonly at: number;
  constructor(message: string, at: number) {
    super(message);
    this.at = at;
  }
}

/** Longest expression accepted, and deepest nesting: an AuthConfig has a few steps, not thousands. */
const MAX_LENGTH = 4096;
const MAX_DEPTH = 64;
const NAME = /[A-Za-z0-9_.:-]/;

type Token = { kind: 'name'; text: string; at: number } | { kind: '&&' | '||' | '!' | '(' | ')' | 'end'; at: number };

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const c = source[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
    } else if ((c === '&' || c === '|') && source[i + 1] === c) {
      tokens.push({ kind: c === '&' ? '&&' : '||', at: i });
      i += 2;
    } else if (c === '!' || c === '(' || c === ')') {
      tokens.push({ kind: c, at: i });
      i++;
    } else if (NAME.test(c)) {
      const start = i;
      while (i < source.length && NAME.test(source[i]!)) i++;
      tokens.push({ kind: 'name', text: source.slice(start, i), at: start });
    } else {
      throw new BoolExprError(`unexpected character ${JSON.stringify(c)}; use step names, &&, ||, ! and parentheses`, i);
    }
  }
  tokens.push({ kind: 'end', at: source.length });
  return tokens;
}

/** Parses `source`; throws a {@link BoolExprError} naming the offset of the problem. */
export function parseBoolExpr(source: string): BoolExpr {
  if (source.length > MAX_LENGTH) throw new BoolExprError(`longer than ${MAX_LENGTH} characters`, MAX_LENGTH);
  const tokens = tokenize(source);
  let pos = 0;
  const peek = () => tokens[pos]!;
  const or = (depth: number): BoolExpr => {
    let left = and(depth);
    while (peek().kind === '||') {
      pos++;
      left = { kind: 'or', left, right: and(depth) };
    }
    return left;
  };
  const and = (depth: number): BoolExpr => {
    let left = unary(depth);
    while (peek().kind === '&&') {
      pos++;
      left = { kind: 'and', left, right: unary(depth) };
    }
    return left;
  };
  const unary = (depth: number): BoolExpr => {
    if (depth > MAX_DEPTH) throw new BoolExprError(`nested deeper than ${MAX_DEPTH} levels`, peek().at);
    const token = peek();
    if (token.kind === '!') {
      pos++;
      return { kind: 'not', operand: unary(depth + 1) };
    }
    if (token.kind === '(') {
      pos++;
      const inner = or(depth + 1);
      if (peek().kind !== ')') throw new BoolExprError('missing )', peek().at);
      pos++;
      return inner;
    }
    if (token.kind === 'name') {
      pos++;
      return { kind: 'step', name: token.text };
    }
    throw new BoolExprError(token.kind === 'end' ? 'ends where a step name is expected' : `"${token.kind}" where a step name is expected`, token.at);
  };
  const expr = or(0);
  if (peek().kind !== 'end') throw new BoolExprError(`unexpected "${(peek() as { text?: string }).text ?? peek().kind}" after a complete expression`, peek().at);
  return expr;
}

/** Every step name the expression uses, in order of first use. */
export function namesIn(expr: BoolExpr): string[] {
  const out = new Set<string>();
  const walk = (node: BoolExpr): void => {
    if (node.kind === 'step') out.add(node.name);
    else if (node.kind === 'not') walk(node.operand);
    else {
      walk(node.left);
      walk(node.right);
    }
  };
  walk(expr);
  return [...out];
}

/**
 * Evaluates `expr` left to right, short-circuiting; `step(name)` decides one step (each
 * name is asked at most once per evaluation: a name used twice reuses its first answer).
 */
export async function evaluateBoolExpr(expr: BoolExpr, step: (name: string) => Promise<boolean>): Promise<boolean> {
  const seen = new Map<string, boolean>();
  const run = async (node: BoolExpr): Promise<boolean> => {
    switch (node.kind) {
      case 'step': {
        const known = seen.get(node.name);
        if (known !== undefined) return known;
        const value = await step(node.name);
        seen.set(node.name, value);
        return value;
      }
      case 'not':
        return !(await run(node.operand));
      case 'and':
        return (await run(node.left)) && run(node.right);
      case 'or':
        return (await run(node.left)) || run(node.right);
    }
  };
  return run(expr);
}
