import { describe, expect, it } from 'vitest';
import { compileApi } from './schema.ts';

let n = 0;
/** A GraphQLApi spec with a fresh version (the cache is keyed by version). */
function api(schemaDefinition: string, resolutions: Record<string, unknown> = {}, extra: object = {}) {
  return { version: `test-${n++}`, spec: { executableSchema: { schemaDefinition, executor: { local: { resolutions } }, ...extra } } } as never;
}
const rest = (path: string, more: object = {}) => ({ restResolver: { upstreamRef: { name: 'u' }, request: { headers: { ':path': path } }, ...more } });
const problems = (spec: never) => compileApi(spec).problems.map((p) => [p.severity, p.path.join('.'), p.code, p.message]);

describe('compileApi (load-time check)', () => {
  it('builds a schema; @resolve need not be declared, and may be', () => {
    expect(compileApi(api('type Query { a: String @resolve(name: "m") }', { m: { mockResolver: { syncResponse: 'x' } } })).schema).toBeDefined();
    const declared = 'directive @resolve(name: String!) on FIELD_DEFINITION\ntype Query { a: String @resolve(name: "m") }';
    expect(problems(api(declared, { m: { mockResolver: { syncResponse: 'x' } } }))).toEqual([]);
  });

  it('rejects an unknown resolver name with the field and SDL line', () => {
    expect(problems(api('type Query {\n  a: String\n  user: String @resolve(name: "Query|usr")\n}', { 'Query|user': rest('/u') }))).toEqual([
      ['warning', 'spec.executableSchema.executor.local.resolutions.Query|user', 'GH_GRAPHQL_UNUSED_RESOLVER', 'no field uses this resolution; bind one with @resolve(name: "Query|user")'],
      ['error', 'spec.executableSchema.schemaDefinition', 'GH_GRAPHQL_UNKNOWN_RESOLVER', 'Query.user (SDL line 3): @resolve(name: "Query|usr") names no entry of executor.local.resolutions; defined: "Query|user"'],
    ].sort((a, b) => (a[0] === 'error' ? 1 : -1) - (b[0] === 'error' ? 1 : -1)).reverse());
  });

  it('rejects a schema without Query, and SDL that does not parse', () => {
    expect(problems(api('type User { id: ID }'))).toEqual([['error', 'spec.executableSchema.schemaDefinition', 'GH_GRAPHQL_NO_QUERY', 'the schema has no Query type; add "type Query { ... }"']]);
    expect(problems(api('type Query { a: String'))).toEqual([['error', 'spec.executableSchema.schemaDefinition', 'GH_GRAPHQL_SCHEMA', 'the SDL does not parse: Syntax Error: Expected Name, found <EOF>. (SDL line 1, column 23)']]);
    expect(problems(api('type Query { a: Missing }'))[0]!.slice(0, 3)).toEqual(['error', 'spec.executableSchema.schemaDefinition', 'GH_GRAPHQL_SCHEMA']);
  });

  it('rejects bad templates and bad paths at their field path', () => {
    const spec = api('type Query { a: String @resolve(name: "r") }', {
      r: rest('/users/{$args.id', { response: { resultRoot: 'data..items', setters: { name: '{$nope.x}' } } }),
    });
    const at = 'spec.executableSchema.executor.local.resolutions.r.restResolver';
    expect(problems(spec)).toEqual([
      ['error', `${at}.request.headers.:path`, 'GH_GRAPHQL_BAD_TEMPLATE', 'unclosed template at position 7 in "/users/{$args.id": add the closing "}"'],
      ['error', `${at}.response.resultRoot`, 'GH_GRAPHQL_BAD_PATH', 'empty segment at position 5 in path "data..items"'],
      ['error', `${at}.response.setters.name`, 'GH_GRAPHQL_BAD_TEMPLATE', 'unknown template source "{$nope.x}" in "{$nope.x}": use one of $body, $parent, $args, $headers'],
    ]);
    expect(compileApi(spec).rejected).toBe(true);
    expect(compileApi(spec).schema).toBeUndefined();
  });

  it('requires :path and refuses $body in request templates', () => {
    const at = 'spec.executableSchema.executor.local.resolutions.r.restResolver';
    const spec = api('type Query { a: String @resolve(name: "r") }', {
      r: { restResolver: { upstreamRef: { name: 'u' }, request: { headers: { 'x-a': '{$body.a}' } } } },
    });
    expect(problems(spec)).toEqual([
      ['error', `${at}.request.headers`, 'GH_GRAPHQL_BAD_TEMPLATE', 'a restResolver needs request.headers[":path"], e.g. ":path": /users/{$args.id}'],
      ['error', `${at}.request.headers.x-a`, 'GH_GRAPHQL_BAD_TEMPLATE', '"{$body.a}" in "{$body.a}": $body is not available here; use one of $parent, $args, $headers'],
    ]);
  });

  it('compiles each spec version once: the check and the endpoint share the result', () => {
    const spec = api('type Query { a: String }');
    expect(compileApi(spec)).toBe(compileApi(spec));
  });
});
