import { buildSchema, getIntrospectionQuery, parse } from 'graphql';
import { describe, expect, it, vi } from 'vitest';
import { checkDocument, DEFAULT_LIMITS, jsonLargerThan, limitsOf, nestsDeeperThan, resolverFieldsOf } from './limits.ts';

const schema = buildSchema(`
  directive @resolve(name: String!) on FIELD_DEFINITION
  type Query { users(first: Int): [User] @resolve(name: "u") node: Node hello: String }
  type User { id: ID posts: [Post] @resolve(name: "p") }
  type Post { id: ID tags: [[String]] }
  type Node { id: ID a: Node b: Node }`);
const resolved = resolverFieldsOf(schema);
const measure = (query: string, limits = DEFAULT_LIMITS) => checkDocument(parse(query), schema, limits, resolved);

describe('checkDocument', () => {
  it('applies the documented cost model: 1 per field, 10 per resolver field, list sizes from first/limit or the default', () => {
    expect(resolved).toEqual(new Set(['Query.users', 'User.posts']));
    const limits = { ...DEFAULT_LIMITS, maxCost: 209 };
    // users 10 + 10 × (posts 10 + 10 × id 1) = 210
    expect(measure('{ users { posts { id } } }', limits).error?.message).toContain('costs 210, more than the 209');
    expect(measure('{ users(first: 2) { posts { id } } }', limits).error).toBeUndefined();
  });

  it('measures a fragment fan-out of 2^60 fields in time linear in the document', () => {
    const fragments = Array.from({ length: 60 }, (_, i) => `fragment F${i} on Node { ...F${i + 1} ...F${i + 1} }`).join('\n');
    const started = performance.now();
    const result = measure(`{ node { ...F0 } }\n${fragments}\nfragment F60 on Node { id }`);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(result.error?.extensions.code).toBe('GRAPHQL_LIMIT_COST');
  });

  it('refuses fragment cycles instead of recursing', () => {
    expect(measure('{ node { ...A } } fragment A on Node { a { ...B } } fragment B on Node { ...A }').error?.extensions.code).toBe('GRAPHQL_FRAGMENT_CYCLE');
  });

  it('lets the standard introspection query through the defaults (depth 15)', () => {
    expect(measure(getIntrospectionQuery({ descriptions: true, inputValueDeprecation: true, directiveIsRepeatable: true, specifiedByUrl: true })).error).toBeUndefined();
  });

  it("maps Gloo's maxDepth onto the depth limit; spec.limits.maxDepth wins", () => {
    expect(limitsOf(undefined, 5).maxDepth).toBe(5);
    expect(limitsOf({ maxDepth: 7 }, 5).maxDepth).toBe(7);
    expect(limitsOf({ maxOperationTime: '250ms' }, undefined).maxOperationMs).toBe(250);
    expect(limitsOf(undefined, undefined)).toBe(DEFAULT_LIMITS);
  });
});

describe('runtime measures', () => {
  it('nestsDeeperThan walks without recursion', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(nestsDeeperThan(deep, 32)).toBe(true);
    expect(nestsDeeperThan({ a: [{ b: 1 }] }, 32)).toBe(false);
  });

  it('jsonLargerThan stops once past the limit, without building the JSON', () => {
    const big = 'x'.repeat(1024 * 1024);
    const amplified = Array.from({ length: 10_000 }, () => big);
    expect(jsonLargerThan(amplified, 16 * 1024 * 1024)).toBe(true);
    expect(jsonLargerThan({ user: { id: '1', name: 'Ada' } }, 1024)).toBe(false);
  });
});

describe('GATEHOUSE_GRAPHQL_LIMITS=off (benchmarks only)', () => {
  it('unbounds the configurable limits, and keeps the hard caps: fragment cycles and the 50,000 expanded fields', async () => {
    vi.stubEnv('GATEHOUSE_GRAPHQL_LIMITS', 'off');
    vi.resetModules();
    try {
      const off = await import('./limits.ts');
      expect(off.LIMITS_OFF).toBe(true);
      const limits = off.limitsOf({ maxDepth: 3 }, 2);
      expect(limits).toBe(off.UNLIMITED);
      const check = (query: string) => off.checkDocument(parse(query), schema, limits, resolved);
      // Deeper than the default 15, more aliases than 30, costlier than 5,000: all let through.
      expect(check(`{ node ${'{ a '.repeat(20)}{ id }${' }'.repeat(20)} }`).error).toBeUndefined();
      expect(check(`{ ${Array.from({ length: 40 }, (_, i) => `h${i}: hello`).join(' ')} }`).error).toBeUndefined();
      expect(check('{ users(first: 1000) { posts { tags } } }').error).toBeUndefined();
      // Still refused: what validation and compilation could not survive.
      expect(check('{ node { ...A } } fragment A on Node { a { ...B } } fragment B on Node { ...A }').error?.extensions.code).toBe('GRAPHQL_FRAGMENT_CYCLE');
      const fragments = Array.from({ length: 20 }, (_, i) => `fragment F${i} on Node { ...F${i + 1} ...F${i + 1} }`).join('\n');
      expect(check(`{ node { ...F0 } }\n${fragments}\nfragment F20 on Node { id }`).error?.message).toContain('more than the 50000 any API allows');
      expect(limits.maxVariableDepth).toBe(DEFAULT_LIMITS.maxVariableDepth);
    } finally {
      vi.unstubAllEnvs();
      vi.resetModules();
    }
  });

  it('is off unless asked for', () => {
    expect(limitsOf(undefined, undefined)).toBe(DEFAULT_LIMITS);
  });
});
