import { describe, expect, it } from 'vitest';
import { evaluateBoolExpr, namesIn, parseBoolExpr, type BoolExprError } from './boolean-expr.ts';

/** Evaluates `source` with fixed step answers; returns the result and the steps asked, in order. */
async function run(source: string, answers: Record<string, boolean>): Promise<{ result: boolean; asked: string[] }> {
  const asked: string[] = [];
  const result = await evaluateBoolExpr(parseBoolExpr(source), async (name) => {
    asked.push(name);
    return answers[name]!;
  });
  return { result, asked };
}

describe('booleanExpr (Gloo AuthConfig.booleanExpr)', () => {
  it('honours precedence (! over && over ||) and parentheses', async () => {
    expect((await run('a || b && c', { a: false, b: true, c: false })).result).toBe(false);
    expect((await run('(a || b) && c', { a: true, b: false, c: false })).result).toBe(false);
    expect((await run('a || b && c', { a: true, b: false, c: false })).result).toBe(true);
    expect((await run('!a && b', { a: false, b: true })).result).toBe(true);
    expect((await run('!(a || b)', { a: false, b: false })).result).toBe(true);
    expect((await run('!!a', { a: true })).result).toBe(true);
    expect((await run(' basic1 || (oidc1 && !oidc2) ', { basic1: false, oidc1: true, oidc2: false })).result).toBe(true);
  });

  it('evaluates left to right and short-circuits: a step whose answer cannot matter is not run', async () => {
    expect((await run('a || b', { a: true, b: true })).asked).toEqual(['a']);
    expect((await run('a && b', { a: false, b: true })).asked).toEqual(['a']);
    expect((await run('a && b || c', { a: false, b: true, c: true })).asked).toEqual(['a', 'c']);
    // A name used twice is run once.
    expect((await run('(a && b) || (a && c)', { a: true, b: false, c: true })).asked).toEqual(['a', 'b', 'c']);
  });

  it('lists the names it uses, once each', () => {
    expect(namesIn(parseBoolExpr('x || (y && !x) || config_0'))).toEqual(['x', 'y', 'config_0']);
  });

  it.each([
    ['a ||', 'ends where a step name is expected', 4],
    ['(a && b', 'missing )', 7],
    ['a b', 'unexpected "b" after a complete expression', 2],
    ['a & b', 'unexpected character "&"', 2],
    ['a || )', '")" where a step name is expected', 5],
    ['', 'ends where a step name is expected', 0],
  ])('refuses %j at the offending character', (source, message, at) => {
    let error: BoolExprError | undefined;
    try {
      parseBoolExpr(source);
    } catch (caught) {
      error = caught as BoolExprError;
    }
    expect(error?.message).toContain(message);
    expect(error?.at).toBe(at);
  });

  it('bounds length and nesting (no stack overflow on hostile input)', () => {
    expect(() => parseBoolExpr('('.repeat(10_000) + 'a' + ')'.repeat(10_000))).toThrow(/longer than 4096|nested deeper/);
    expect(() => parseBoolExpr('!'.repeat(100) + 'a')).toThrow(/nested deeper than 64/);
    expect(() => parseBoolExpr('('.repeat(100) + 'a' + ')'.repeat(100))).toThrow(/nested deeper than 64/);
  });
});
