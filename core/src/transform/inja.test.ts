import { describe, expect, test } from 'vitest';
import { compileInja, InjaError, renderState, type HostFunction, type Json } from './inja.ts';

/** Inja 3.4's language as Envoy-Gloo runs it, and what a hostile template cannot do. */

const header: HostFunction = { minArgs: 1, maxArgs: 1, call: ([name]) => (name === 'foo' ? 'bar' : '') };
const functions = new Map([['header', header]]);

function render(source: string, data: Json = {}, options: { escapeStrings?: boolean; pointerNotation?: boolean; steps?: number; maxChars?: number } = {}): string {
  const t = compileInja(source, { functions, ...options });
  return t.render(renderState(data, null, { steps: options.steps ?? 100_000, maxChars: options.maxChars ?? 1_000_000 }));
}

function error(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (e) {
    if (e instanceof InjaError) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error('expected an InjaError');
}

describe('Inja 3.4 semantics', () => {
  test('names hold dots, slashes and dashes: a.b.0, my-extractor', () => {
    expect(render('{{ a.b.1 }} {{ my-extractor }} {{ a/b/0 }}', { a: { b: ['x', 'y'] }, 'my-extractor': 'e' })).toBe('y e x');
  });

  test('pointer notation (advancedTemplates): dots are literal', () => {
    expect(render('{{ time/start }} {{ a.b }}', { time: { start: 1 }, 'a.b': 2 }, { pointerNotation: true })).toBe('1 2');
    // JSON-pointer escapes, reachable through exists() (Inja's names cannot hold `~`).
    expect(render('{{ exists("paths/~1api~0v1") }}', { paths: { '/api~v1': 'escaped' } }, { pointerNotation: true })).toBe('true');
  });

  test('if / else if / else, comparisons, and/or share one precedence, not binds tighter than ==', () => {
    const t = '{% if x == 1 %}one{% else if x == 2 %}two{% else %}many{% endif %}';
    expect([1, 2, 3].map((x) => render(t, { x }))).toEqual(['one', 'two', 'many']);
    // Inja 3.4: `and` and `or` have the same precedence, left to right.
    expect(render('{{ true or false and false }}')).toBe('false');
    expect(render('{{ not 1 == 2 }}')).toBe('false');
    expect(render('{{ 2 ^ 3 ^ 2 }} {{ 7 % 3 }} {{ 1 + 2 * 3 }} {{ 10 / 4 }}')).toBe('512 1 7 2.5');
  });

  test('strings are always truthy (nlohmann), empty arrays and objects, 0 and null are not', () => {
    expect(render('{% if "" %}t{% endif %}{% if [] %}x{% endif %}{% if {} %}x{% endif %}{% if 0 %}x{% endif %}{% if null %}x{% endif %}')).toBe('t');
  });

  test('for over arrays and objects (keys sorted), loop.index, index1, is_first, is_last, parent', () => {
    expect(render('{% for x in xs %}{{ loop.index }}{{ x }}{% if loop.is_last %}.{% else %},{% endif %}{% endfor %}', { xs: ['a', 'b'] })).toBe('0a,1b.');
    expect(render('{% for k, v in o %}{{ k }}={{ v }};{% endfor %}', { o: { b: 2, a: 1 } })).toBe('a=1;b=2;');
    expect(render('{% for r in rows %}{% for c in r %}{{ loop.parent.index }}{{ c }}{% endfor %}{% endfor %}', { rows: [['x'], ['y']] })).toBe('0x1y');
  });

  test('set, comments, raw, whitespace control, line statements', () => {
    expect(render('{% set a = 2 %}{{ a * 3 }}{# gone #}')).toBe('6');
    expect(render('{% raw %}{{ kept }}{% endraw %}')).toBe('{{ kept }}');
    expect(render('a  {%- if true -%}  \n b{% endif %}')).toBe('a  b');
    expect(render('x\n## for i in range(2)\n{{ i }}\n## endfor\n')).toBe('x\n0\n1\n');
  });

  test('printing: objects as compact JSON with sorted keys, null as nothing, literals', () => {
    expect(render('{{ o }}|{{ n }}|{{ [1,"a"] }}|{{ true }}', { o: { b: [1], a: 'x' }, n: null })).toBe('{"a":"x","b":[1]}||[1,"a"]|true');
  });

  test("Inja's functions", () => {
    expect(render('{{ upper("aé") }} {{ lower("AB") }} {{ length("abc") }} {{ length(xs) }} {{ first(xs) }} {{ last(xs) }} {{ join(xs, "-") }}', { xs: [3, 1, 2] })).toBe('Aé ab 3 3 3 2 3-1-2');
    expect(render('{{ sort(xs) }} {{ max(xs) }} {{ min(xs) }} {{ range(3) }} {{ round(3.14159, 2) }} {{ int("42") }} {{ float("1.5") }}', { xs: [3, 1, 2] })).toBe('[1,2,3] 3 1 [0,1,2] 3.14 42 1.5');
    expect(render('{{ odd(3) }} {{ even(3) }} {{ divisibleBy(9, 3) }} {{ exists("a.b") }} {{ exists("a.c") }} {{ existsIn(a, "b") }} {{ at(a, "b") }} {{ at(xs, 1) }}', { a: { b: 1 }, xs: [3, 1, 2] })).toBe('true false true true false true 1 1');
    expect(render('{{ isString("a") }} {{ isNumber(1) }} {{ isInteger(1.5) }} {{ isFloat(1.5) }} {{ isArray(xs) }} {{ isObject(a) }} {{ isBoolean(false) }} {{ 2 in xs }}', { a: {}, xs: [2] })).toBe('true true false true true true true true');
    expect(render('{{ default(missing.path, "fallback") }} {{ default(a, "no") }}', { a: 'yes' })).toBe('fallback yes');
  });

  test('escapeCharacters prints strings JSON-escaped', () => {
    expect(render('{{ s }}', { s: 'a"b\\c\n' }, { escapeStrings: true })).toBe('a\\"b\\\\c\\n');
    expect(render('{{ s }}', { s: 'a"b' })).toBe('a"b');
  });

  test('a missing variable is a render error naming it; a function of the wrong arity a compile error', () => {
    expect(error(() => render('{{ nope.deeper }}'))).toEqual({ code: 'GH_TRANSFORM_RENDER', message: "variable 'nope.deeper' not found" });
    expect(error(() => compileInja('{{ header() }}', { functions })).code).toBe('GH_TRANSFORM_TEMPLATE');
    expect(error(() => compileInja('{{ nosuch(1) }}', { functions })).message).toMatch(/unknown function nosuch/);
  });

  test('syntax errors name line and column', () => {
    expect(error(() => compileInja('line one\n{% if x %}no end')).message).toMatch(/^\(at 2:1\) unmatched if/);
    expect(error(() => compileInja('{{ 1 + }}')).code).toBe('GH_TRANSFORM_TEMPLATE');
    expect(error(() => compileInja('{% endfor %}')).message).toMatch(/unexpected 'endfor'/);
    expect(error(() => compileInja('{{ "open }}')).message).toMatch(/unterminated string/);
    expect(error(() => compileInja('{% include "other" %}')).message).toMatch(/not supported/);
    expect(error(() => compileInja('{{ ["a", x] }}')).message).toMatch(/constant JSON/);
  });

  test('usesBody: data names and body()/context() read the body; host names, locals and header() do not', () => {
    const body: HostFunction = { minArgs: 0, maxArgs: 0, usesBody: true, call: () => '' };
    const fns = new Map([
      ['header', header],
      ['body', body],
    ]);
    const uses = (s: string) => compileInja(s, { functions: fns, hostNames: new Set(['ex']) }).usesBody;
    expect(uses('{{ header("a") }}')).toBe(false);
    expect(uses('{{ ex }} {{ ex.deeper }}')).toBe(false);
    expect(uses('{% for i in range(2) %}{{ i }}{{ loop.index }}{% endfor %}{% set v = 1 %}{{ v }}')).toBe(false);
    expect(uses('{{ Favorites.Color }}')).toBe(true);
    // A loop variable is local to its loop: the same name after it reads the body.
    expect(uses('{% for x in range(1) %}{{ x }}{% endfor %}{{ x }}')).toBe(true);
    expect(uses('{{ body() }}')).toBe(true);
    expect(uses('{{ body }}')).toBe(true);
    expect(uses('{{ exists("a") }}')).toBe(true);
  });
});

describe('hostile templates: bounded at compile time and while rendering', () => {
  test('no prototype is reachable: constructor, __proto__, toString are plain missing names', () => {
    for (const name of ['constructor', '__proto__', 'toString', 'a.constructor', 'a.__proto__.polluted', 'xs.length', 'xs.constructor.name']) {
      expect(error(() => render(`{{ ${name} }}`, { a: {}, xs: [1] })).code).toBe('GH_TRANSFORM_RENDER');
    }
    expect(error(() => render('{{ at(a, "constructor") }}', { a: {} })).code).toBe('GH_TRANSFORM_RENDER');
    expect(render('{{ existsIn(a, "toString") }}', { a: {} })).toBe('false');
    // A body's own "__proto__" key (JSON.parse makes it an own property) is plain data.
    expect(render('{{ __proto__.x }}', JSON.parse('{"__proto__": {"x": 1}}') as Json)).toBe('1');
    render('{% set __proto__.polluted = 1 %}{% set constructor.prototype.polluted = 1 %}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  test('deep nesting is refused at compile time, not by a stack overflow', () => {
    expect(error(() => compileInja(`{{ ${'('.repeat(5000)}1${')'.repeat(5000)} }}`)).message).toMatch(/nesting deeper than 64/);
    expect(error(() => compileInja(`${'{% if true %}'.repeat(200)}x${'{% endif %}'.repeat(200)}`)).message).toMatch(/nesting deeper than 64/);
    expect(error(() => compileInja(`{{ ${'not '.repeat(5000)}true }}`)).message).toMatch(/nesting deeper than 64/);
    expect(error(() => compileInja(`{{ ${Array.from({ length: 3000 }, () => '1').join(' ^ ')} }}`)).message).toMatch(/nesting deeper than 64/);
  });

  test('an over-long template is refused', () => {
    expect(error(() => compileInja('x'.repeat(64 * 1024 + 1))).message).toMatch(/over the limit of 65536/);
  });

  test('nested loops over big arrays stop at the step budget', () => {
    const xs = Array.from({ length: 100_000 }, (_, i) => i);
    expect(error(() => render('{% for a in xs %}{% for b in xs %}{% endfor %}{% endfor %}', { xs })).code).toBe('GH_TRANSFORM_BUDGET');
    expect(error(() => render('{% for i in range(1000000000) %}{% endfor %}')).code).toBe('GH_TRANSFORM_BUDGET');
    expect(error(() => render('{{ length(range(100000000)) }}')).code).toBe('GH_TRANSFORM_BUDGET');
    expect(error(() => render('{% for a in xs %}{{ sort(xs) }}{% endfor %}', { xs })).code).toBe('GH_TRANSFORM_BUDGET');
  });

  test('strings cannot grow past the output limit: doubling with set, printing in a loop, join', () => {
    expect(error(() => render('{% set s = "ab" %}{% for i in range(40) %}{% set s = s + s %}{% endfor %}{{ length(s) }}')).code).toBe('GH_TRANSFORM_BUDGET');
    expect(error(() => render('{% for i in range(50000) %}{{ big }}{% endfor %}', { big: 'x'.repeat(1000) })).code).toBe('GH_TRANSFORM_BUDGET');
    expect(error(() => render('{{ join(xs, "-----------") }}', { xs: Array.from({ length: 90_000 }, () => 'abcdefghijk') })).code).toBe('GH_TRANSFORM_BUDGET');
  });

  test('deeply nested data prints or fails cleanly, within the budget', () => {
    const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`) as Json;
    const outcome = (() => {
      try {
        return render('{{ d }}', { d: deep }, { steps: 1_000_000 });
      } catch (e) {
        return (e as InjaError).code;
      }
    })();
    expect(['GH_TRANSFORM_BUDGET', '['.repeat(100_000) + ']'.repeat(100_000)]).toContain(outcome);
  });

  test('division and modulo by zero are render errors', () => {
    expect(error(() => render('{{ 1 / 0 }}')).message).toBe('division by zero');
    expect(error(() => render('{{ 1 % 0 }}')).message).toBe('modulo by zero');
  });
});
