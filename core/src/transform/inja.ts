/**
 * The Inja template language (pantor/inja v3.4, the engine Envoy-Gloo's transformation filter
 * embeds), compiled once at load into closures. Hand-written rather than built on a Jinja
 * library (docs/transformations.md, "Why a hand-written engine"): Inja is not Jinja (identifiers
 * hold `.`, `/` and `-`, so `my-extractor` and `a.b.0` are single names; functions, not filters;
 * `and`/`or` share one precedence; strings are always truthy), and a template here must never
 * reach JavaScript objects' prototypes or run unbounded.
 *
 * Bounds: a template's source length and nesting depth are limited at compile time; rendering
 * spends a step budget (every node, loop iteration and per-element work of functions such as
 * `sort` or `range`) and an output budget (characters printed, and the size of every string a
 * template builds), shared by all templates of one transformation. Exceeding either is an
 * {@link InjaError} with code `GH_TRANSFORM_BUDGET`, never a stall.
 */

/** A JSON value, as templates see request data. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** An error in a template: at compile time (`GH_TRANSFORM_TEMPLATE`) or while rendering (`GH_TRANSFORM_RENDER`, `GH_TRANSFORM_BUDGET`). */
export class InjaError extends Error {
  override name = 'InjaError';
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/** Stable codes of {@link InjaError}. */
export const InjaCodes = {
  /** The template does not parse (reported at load with the field path). */
  TEMPLATE: 'GH_TRANSFORM_TEMPLATE',
  /** Rendering failed (a missing variable, a type error): Envoy-Gloo answers 400. */
  RENDER: 'GH_TRANSFORM_RENDER',
  /** Rendering exceeded its step or output budget. */
  BUDGET: 'GH_TRANSFORM_BUDGET',
} as const;

/** A function a template may call besides Inja's own (Gloo's `header`, `body`, …). */
export interface HostFunction {
  readonly minArgs: number;
  readonly maxArgs: number;
  /** Reads the message body: a template calling it makes the transformation buffer the body. */
  readonly usesBody?: boolean;
  /** Reads the body's parsed JSON (`context()`): the body is buffered and parsed. */
  readonly usesData?: boolean;
  call(args: readonly Json[], state: RenderState): Json;
}

/** Per-render state: data, locals, budgets, and the host's context for {@link HostFunction}s. */
export interface RenderState {
  /** The template's data (the parsed body with extractions merged in, or `{}`). */
  data: Json;
  /** Loop variables, `loop` and `set` names. */
  locals: Record<string, Json>;
  /** Steps left (shared across the templates of one transformation). */
  steps: number;
  /** Largest string a template may print or build. */
  maxChars: number;
  /** Whatever the host functions need (the message being transformed). */
  readonly host: unknown;
}

/** Compile-time options. */
export interface InjaOptions {
  /** `advancedTemplates`: names are JSON pointers (`a/b`), and dots are literal. */
  readonly pointerNotation?: boolean;
  /** `escapeCharacters`: strings print JSON-escaped (without the quotes). */
  readonly escapeStrings?: boolean;
  readonly functions?: ReadonlyMap<string, HostFunction>;
  /** Names whose first segment is filled by the host, not read from the body (extractor names). */
  readonly hostNames?: ReadonlySet<string>;
  /** Longest template source (default {@link DEFAULT_MAX_TEMPLATE_CHARS}). */
  readonly maxSourceChars?: number;
}

/** A compiled template. */
export interface CompiledTemplate {
  /** Renders with `state`; throws {@link InjaError}. */
  render(state: RenderState): string;
  /** True when rendering can read the body: a data name the host does not fill, `body()`, `context()`, `exists()`. */
  readonly usesBody: boolean;
  /** True when rendering can read the body's parsed JSON: a data name the host does not fill, `context()`, `exists()`. */
  readonly usesData: boolean;
  /** Host and built-in functions the template calls. */
  readonly functions: ReadonlySet<string>;
}

/** Longest template source accepted by default. */
export const DEFAULT_MAX_TEMPLATE_CHARS = 64 * 1024;
/** Deepest nesting of expressions and blocks. */
export const MAX_NESTING = 64;

const MISSING: unique symbol = Symbol('missing');
type Val = Json | typeof MISSING;
type Expr = (s: RenderState) => Val;
type Stmt = (s: RenderState, out: Out) => void;
interface Out {
  text: string;
}

// ---------------------------------------------------------------------------------------------
// Scanning: the template's text, and the tokens of `{{ }}`, `{% %}` and `## ` line statements.

type TokKind = 'id' | 'num' | 'str' | 'op' | 'end';
interface Tok {
  readonly kind: TokKind;
  readonly text: string;
  readonly pos: number;
}

type Segment = { readonly kind: 'text'; readonly text: string } | { readonly kind: 'expr' | 'stmt'; readonly toks: readonly Tok[]; readonly pos: number };

function isAlpha(c: string): boolean {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
function isDigit(c: string): boolean {
  return c >= '0' && c <= '9';
}
function isIdChar(c: string): boolean {
  return isAlpha(c) || isDigit(c) || c === '.' || c === '/' || c === '_' || c === '-';
}

/** Line and column of `pos` in `source`, for messages. */
function where(source: string, pos: number): string {
  let line = 1;
  let col = 1;
  for (let i = 0; i < pos && i < source.length; i++) {
    if (source[i] === '\n') {
      line++;
      col = 1;
    } else col++;
  }
  return `(at ${line}:${col})`;
}

function parseError(source: string, pos: number, message: string): InjaError {
  return new InjaError(InjaCodes.TEMPLATE, `${where(source, pos)} ${message}`);
}

/** Strips spaces and tabs at the end of `text` back to its last newline (Inja's `{%-`). */
function lstrip(text: string): string {
  let end = text.length;
  while (end > 0 && (text[end - 1] === ' ' || text[end - 1] === '\t')) end--;
  if (end === 0 || text[end - 1] === '\n' || text[end - 1] === '\r') return text.slice(0, end);
  return text;
}

/** Splits a template into text, expression and statement segments, as Inja's lexer does. */
function scan(source: string): Segment[] {
  const segments: Segment[] = [];
  let pos = 0;
  let text = '';
  const flushText = (t: string) => {
    if (t) segments.push({ kind: 'text', text: t });
  };
  while (pos < source.length) {
    // The next opening: `{{`, `{%`, `{#`, or `##` at a line start.
    let open = -1;
    for (let i = pos; i < source.length; i++) {
      const c = source[i];
      if (c === '{' && (source[i + 1] === '{' || source[i + 1] === '%' || source[i + 1] === '#')) {
        open = i;
        break;
      }
      if (c === '#' && source[i + 1] === '#' && (i === 0 || source[i - 1] === '\n')) {
        open = i;
        break;
      }
    }
    if (open === -1) {
      text += source.slice(pos);
      pos = source.length;
      break;
    }
    text += source.slice(pos, open);
    const two = source.slice(open, open + 2);
    const forceLstrip = source[open + 2] === '-';
    if (two === '{#') {
      const close = source.indexOf('#}', open + 2);
      if (close === -1) throw parseError(source, open, 'unterminated comment');
      flushText(forceLstrip ? lstrip(text) : text);
      text = '';
      pos = close + 2;
      if (source[close - 1] === '-') pos = skipAllWhitespace(source, pos);
      continue;
    }
    if (two === '##') {
      flushText(text);
      text = '';
      const { toks, end } = tokenize(source, open + 2, 'line');
      pos = end;
      segments.push({ kind: 'stmt', toks, pos: open });
      continue;
    }
    const kind = two === '{{' ? 'expr' : 'stmt';
    const bodyStart = open + 2 + (forceLstrip || source[open + 2] === '+' ? 1 : 0);
    flushText(forceLstrip ? lstrip(text) : text);
    text = '';
    const { toks, end, trimAfter } = tokenize(source, bodyStart, kind === 'expr' ? '}}' : '%}');
    pos = trimAfter ? skipAllWhitespace(source, end) : end;
    // `{% raw %}`: everything up to `{% endraw %}` is text.
    if (kind === 'stmt' && toks.length === 2 && toks[0]!.kind === 'id' && toks[0]!.text === 'raw') {
      const close = /\{%[-+]?\s*endraw\s*-?%\}/g;
      close.lastIndex = pos;
      const m = close.exec(source);
      if (!m) throw parseError(source, open, "unmatched raw: missing '{% endraw %}'");
      text += source.slice(pos, m.index);
      pos = m.index + m[0].length;
      if (m[0].endsWith('-%}')) pos = skipAllWhitespace(source, pos);
      continue;
    }
    segments.push({ kind, toks, pos: open });
  }
  flushText(text);
  return segments;
}

function skipAllWhitespace(source: string, pos: number): number {
  while (pos < source.length && (source[pos] === ' ' || source[pos] === '\t' || source[pos] === '\n' || source[pos] === '\r')) pos++;
  return pos;
}

const TWO_CHAR_OPS = new Set(['>=', '<=', '==', '!=']);
const ONE_CHAR_OPS = new Set(['+', '-', '*', '/', '^', '%', '.', ',', ':', '(', ')', '[', ']', '{', '}', '>', '<', '=']);

/** Tokens from `start` to the closing delimiter (`}}`, `%}`, or the end of the line for `## `). */
function tokenize(source: string, start: number, close: '}}' | '%}' | 'line'): { toks: Tok[]; end: number; trimAfter: boolean } {
  const toks: Tok[] = [];
  let pos = start;
  // After an operand a `-` is the minus operator; elsewhere it starts a number (Inja's MinusState).
  let afterOperand = false;
  for (;;) {
    while (pos < source.length && (source[pos] === ' ' || source[pos] === '\t' || source[pos] === '\r' || (close !== 'line' && source[pos] === '\n'))) pos++;
    if (pos >= source.length) {
      if (close === 'line') return { toks: [...toks, { kind: 'end', text: '', pos }], end: pos, trimAfter: false };
      throw parseError(source, start, `unterminated ${close === '}}' ? 'expression' : 'statement'}: missing '${close}'`);
    }
    if (close === 'line' && source[pos] === '\n') return { toks: [...toks, { kind: 'end', text: '', pos }], end: pos + 1, trimAfter: false };
    if (close !== 'line') {
      if (source[pos] === '-' && source.startsWith(close, pos + 1)) return { toks: [...toks, { kind: 'end', text: '', pos }], end: pos + 3, trimAfter: true };
      if (source.startsWith(close, pos)) return { toks: [...toks, { kind: 'end', text: '', pos }], end: pos + 2, trimAfter: false };
    }
    const c = source[pos]!;
    const begin = pos;
    if (isAlpha(c) || c === '_' || c === '@' || c === '$') {
      pos++;
      while (pos < source.length && isIdChar(source[pos]!)) pos++;
      toks.push({ kind: 'id', text: source.slice(begin, pos), pos: begin });
      afterOperand = true;
    } else if (isDigit(c) || (c === '-' && !afterOperand)) {
      pos++;
      while (pos < source.length) {
        const d = source[pos]!;
        const prev = source[pos - 1];
        if (isDigit(d) || d === '.' || d === 'e' || d === 'E' || ((d === '+' || d === '-') && (prev === 'e' || prev === 'E'))) pos++;
        else break;
      }
      toks.push({ kind: 'num', text: source.slice(begin, pos), pos: begin });
      afterOperand = true;
    } else if (c === '"') {
      pos++;
      let escape = false;
      for (;;) {
        if (pos >= source.length) throw parseError(source, begin, 'unterminated string');
        const d = source[pos++];
        if (escape) escape = false;
        else if (d === '\\') escape = true;
        else if (d === '"') break;
      }
      toks.push({ kind: 'str', text: source.slice(begin, pos), pos: begin });
      afterOperand = true;
    } else {
      const two = source.slice(pos, pos + 2);
      if (TWO_CHAR_OPS.has(two)) {
        toks.push({ kind: 'op', text: two, pos: begin });
        pos += 2;
      } else if (ONE_CHAR_OPS.has(c)) {
        toks.push({ kind: 'op', text: c, pos: begin });
        pos++;
      } else throw parseError(source, begin, `unexpected character '${c}'`);
      afterOperand = c === ')' || c === ']' || c === '}';
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Values: truthiness, printing, comparison, as Inja (nlohmann::json) defines them.

function isObject(v: Json): v is { [key: string]: Json } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Inja's truthiness: booleans, numbers ≠ 0, non-empty arrays and objects; strings are always true; null false. */
export function truthy(v: Json): boolean {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0;
  if (v === null) return false;
  if (typeof v === 'string') return true;
  if (Array.isArray(v)) return v.length > 0;
  return Object.keys(v).length > 0;
}

/** JSON text with object keys sorted, as nlohmann::json (a `std::map`) prints objects. */
export function dumpJson(v: Json, state?: RenderState): string {
  if (state) charge(state, 1);
  if (v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (Array.isArray(v)) {
    let out = '[';
    for (let i = 0; i < v.length; i++) out += (i ? ',' : '') + dumpJson(v[i]!, state);
    return out + ']';
  }
  const keys = Object.keys(v).sort();
  let out = '{';
  for (let i = 0; i < keys.length; i++) out += (i ? ',' : '') + JSON.stringify(keys[i]) + ':' + dumpJson(v[keys[i]!]!, state);
  return out + '}';
}

/** A string JSON-escaped without its quotes (`escapeCharacters`, `raw_string`). */
export function jsonEscape(s: string): string {
  const quoted = JSON.stringify(s);
  return quoted.slice(1, -1);
}

function typeRank(v: Json): number {
  // nlohmann's order of types: null < boolean < number < object < array < string.
  if (v === null) return 0;
  if (typeof v === 'boolean') return 1;
  if (typeof v === 'number') return 2;
  if (typeof v === 'string') return 5;
  return Array.isArray(v) ? 4 : 3;
}

/** nlohmann's `<`, bounded by the step budget. */
function compare(a: Json, b: Json, s: RenderState): number {
  charge(s, 1);
  const ra = typeRank(a);
  const rb = typeRank(b);
  if (ra !== rb) return ra - rb;
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const c = compare(a[i]!, b[i]!, s);
      if (c) return c;
    }
    return a.length - b.length;
  }
  if (isObject(a) && isObject(b)) return compare(dumpJson(a, s), dumpJson(b, s), s);
  return 0;
}

function equal(a: Json, b: Json, s: RenderState): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  return typeRank(a) === typeRank(b) && compare(a, b, s) === 0;
}

function charge(s: RenderState, n: number): void {
  s.steps -= n;
  if (s.steps < 0) throw new InjaError(InjaCodes.BUDGET, 'template rendering exceeded its step budget (a loop or function over too much data)');
}

function checkString(s: RenderState, v: string): string {
  if (v.length > s.maxChars) throw new InjaError(InjaCodes.BUDGET, `template rendering built a string over ${s.maxChars} characters`);
  return v;
}

function renderError(message: string): InjaError {
  return new InjaError(InjaCodes.RENDER, message);
}

/** `v` for printing with `{{ }}`. */
function printed(v: Json, escape: boolean, s: RenderState): string {
  if (typeof v === 'string') return escape ? jsonEscape(v) : v;
  if (v === null) return '';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  return dumpJson(v, s);
}

/** Own-property read: templates never see a prototype's members. */
function own(obj: Json, key: string): Val {
  if (Array.isArray(obj)) {
    if (!/^(0|[1-9][0-9]*)$/.test(key)) return MISSING;
    const i = Number(key);
    return i < obj.length ? obj[i]! : MISSING;
  }
  if (isObject(obj) && Object.hasOwn(obj, key)) return obj[key]!;
  return MISSING;
}

function walk(root: Json, segments: readonly string[], from = 0): Val {
  let cur: Val = root;
  for (let i = from; i < segments.length; i++) {
    if (cur === MISSING) return MISSING;
    cur = own(cur, segments[i]!);
  }
  return cur;
}

function typeName(v: Json): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v === 'object' ? 'object' : typeof v;
}

function asString(v: Json, fn: string): string {
  if (typeof v !== 'string') throw renderError(`${fn}: expected a string, got ${typeName(v)}`);
  return v;
}
function asNumber(v: Json, fn: string): number {
  if (typeof v !== 'number') throw renderError(`${fn}: expected a number, got ${typeName(v)}`);
  return v;
}
function asInteger(v: Json, fn: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw renderError(`${fn}: expected an integer, got ${typeName(v)}`);
  return v;
}
function asArray(v: Json, fn: string): Json[] {
  if (!Array.isArray(v)) throw renderError(`${fn}: expected an array, got ${typeName(v)}`);
  return v;
}

function asciiCase(s: string, upper: boolean): string {
  return upper ? s.replace(/[a-z]+/g, (m) => m.toUpperCase()) : s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
}

/** Inja's own functions, by name: `[minArgs, maxArgs, implementation]` over evaluated arguments. */
const BUILTINS: Record<string, readonly [number, number, (args: Json[], s: RenderState) => Json]> = {
  at: [
    2,
    2,
    ([o, k]) => {
      const v = typeof k === 'number' ? own(o!, String(k)) : typeof k === 'string' && isObject(o!) ? own(o!, k) : MISSING;
      if (v === MISSING) throw renderError(`at: no element ${dumpJson(k!)}`);
      return v;
    },
  ],
  divisibleBy: [2, 2, ([a, b]) => asInteger(b!, 'divisibleBy') !== 0 && asInteger(a!, 'divisibleBy') % (b as number) === 0],
  even: [1, 1, ([a]) => asInteger(a!, 'even') % 2 === 0],
  odd: [1, 1, ([a]) => asInteger(a!, 'odd') % 2 !== 0],
  existsIn: [2, 2, ([o, k]) => isObject(o!) && Object.hasOwn(o, asString(k!, 'existsIn'))],
  first: [
    1,
    1,
    ([a]) => {
      const arr = asArray(a!, 'first');
      if (!arr.length) throw renderError('first: empty array');
      return arr[0]!;
    },
  ],
  last: [
    1,
    1,
    ([a]) => {
      const arr = asArray(a!, 'last');
      if (!arr.length) throw renderError('last: empty array');
      return arr[arr.length - 1]!;
    },
  ],
  float: [
    1,
    1,
    ([a]) => {
      const n = Number.parseFloat(asString(a!, 'float'));
      if (Number.isNaN(n)) throw renderError(`float: not a number: ${dumpJson(a!)}`);
      return n;
    },
  ],
  int: [
    1,
    1,
    ([a]) => {
      const n = Number.parseInt(asString(a!, 'int'), 10);
      if (Number.isNaN(n)) throw renderError(`int: not a number: ${dumpJson(a!)}`);
      return n;
    },
  ],
  isArray: [1, 1, ([a]) => Array.isArray(a)],
  isBoolean: [1, 1, ([a]) => typeof a === 'boolean'],
  isFloat: [1, 1, ([a]) => typeof a === 'number' && !Number.isInteger(a)],
  isInteger: [1, 1, ([a]) => typeof a === 'number' && Number.isInteger(a)],
  isNumber: [1, 1, ([a]) => typeof a === 'number'],
  isObject: [1, 1, ([a]) => isObject(a!)],
  isString: [1, 1, ([a]) => typeof a === 'string'],
  length: [
    1,
    1,
    ([a]) => {
      if (typeof a === 'string' || Array.isArray(a)) return a.length;
      if (isObject(a!)) return Object.keys(a).length;
      return a === null ? 0 : 1;
    },
  ],
  lower: [1, 1, ([a]) => asciiCase(asString(a!, 'lower'), false)],
  upper: [1, 1, ([a]) => asciiCase(asString(a!, 'upper'), true)],
  max: [
    1,
    1,
    ([a], s) => {
      const arr = asArray(a!, 'max');
      if (!arr.length) return null;
      return arr.reduce((m, v) => (compare(v, m, s) > 0 ? v : m));
    },
  ],
  min: [
    1,
    1,
    ([a], s) => {
      const arr = asArray(a!, 'min');
      if (!arr.length) return null;
      return arr.reduce((m, v) => (compare(v, m, s) < 0 ? v : m));
    },
  ],
  range: [
    1,
    1,
    ([a], s) => {
      const n = asInteger(a!, 'range');
      if (n < 0) throw renderError('range: negative length');
      charge(s, n);
      return Array.from({ length: n }, (_, i) => i);
    },
  ],
  round: [
    2,
    2,
    ([a, p]) => {
      const precision = asInteger(p!, 'round');
      const scale = 10 ** precision;
      return Math.round(asNumber(a!, 'round') * scale) / scale;
    },
  ],
  sort: [
    1,
    1,
    ([a], s) => {
      const arr = asArray(a!, 'sort');
      charge(s, arr.length);
      return [...arr].sort((x, y) => compare(x, y, s));
    },
  ],
  join: [
    2,
    2,
    ([a, sep], s) => {
      const arr = asArray(a!, 'join');
      const separator = asString(sep!, 'join');
      charge(s, arr.length);
      let out = '';
      for (let i = 0; i < arr.length; i++) {
        const v = arr[i]!;
        out += (i ? separator : '') + (typeof v === 'string' ? v : dumpJson(v, s));
        checkString(s, out);
      }
      return out;
    },
  ],
};

// ---------------------------------------------------------------------------------------------
// Parsing into closures.

/** Inja's binary operators and their precedence (`and`/`or` share one, as in Inja 3.4). */
const BINARY: Record<string, number> = { or: 1, and: 1, in: 2, '==': 2, '!=': 2, '>': 2, '>=': 2, '<': 2, '<=': 2, '+': 3, '-': 3, '*': 4, '/': 4, '%': 4, '^': 5, '.': 8 };

class Parser {
  private toks: readonly Tok[] = [];
  private i = 0;
  private depth = 0;
  readonly functions = new Set<string>();
  usesBody = false;
  usesData = false;
  /** Names bound by `for` and `set` (a data name with one of these heads is a local). */
  private readonly locals = new Set<string>(['loop']);
  /** Some `for` or `set` binds locals (else every render shares one empty, frozen locals object). */
  bindsLocals = false;
  private readonly source: string;
  private readonly options: InjaOptions;
  private readonly hostFunctions: ReadonlyMap<string, HostFunction>;

  constructor(source: string, options: InjaOptions) {
    this.source = source;
    this.options = options;
    this.hostFunctions = options.functions ?? new Map();
  }

  private error(pos: number, message: string): InjaError {
    return parseError(this.source, pos, message);
  }

  private enter(pos: number): void {
    if (++this.depth > MAX_NESTING) throw this.error(pos, `nesting deeper than ${MAX_NESTING}`);
  }

  private peek(): Tok {
    return this.toks[this.i]!;
  }
  private next(): Tok {
    return this.toks[this.i++]!;
  }
  private isOp(text: string): boolean {
    const t = this.peek();
    return t.kind === 'op' && t.text === text;
  }
  private expectOp(text: string): void {
    const t = this.next();
    if (t.kind !== 'op' || t.text !== text) throw this.error(t.pos, `expected '${text}', got '${t.text || 'end'}'`);
  }

  /** The segments of a whole template, as one statement list. */
  template(segments: readonly Segment[]): Stmt {
    let k = 0;
    const block = (terminators: readonly string[]): { body: Stmt; end: string; endToks: readonly Tok[]; pos: number } => {
      const stmts: Stmt[] = [];
      while (k < segments.length) {
        const seg = segments[k++]!;
        if (seg.kind === 'text') {
          const text = seg.text;
          stmts.push((_s, out) => {
            out.text += text;
          });
          continue;
        }
        this.toks = seg.toks;
        this.i = 0;
        if (seg.kind === 'expr') {
          const expr = this.expression();
          this.expectEnd();
          const escape = this.options.escapeStrings === true;
          const describe = this.describe(seg.toks);
          stmts.push((s, out) => {
            const text = printed(need(expr(s), describe), escape, s);
            out.text += text;
            if (out.text.length > s.maxChars) throw new InjaError(InjaCodes.BUDGET, `template output over ${s.maxChars} characters`);
          });
          continue;
        }
        const head = this.next();
        if (head.kind !== 'id') throw this.error(head.pos, `expected a statement, got '${head.text}'`);
        if (terminators.includes(head.text)) return { body: sequence(stmts), end: head.text, endToks: seg.toks, pos: seg.pos };
        switch (head.text) {
          case 'if': {
            this.enter(head.pos);
            const cond = this.expression();
            this.expectEnd();
            const branches: { cond: Expr; body: Stmt }[] = [];
            let elseBody: Stmt | undefined;
            let current = cond;
            for (;;) {
              const part = block(['else', 'endif']);
              if (part.end === '') throw this.error(seg.pos, "unmatched if: missing '{% endif %}'");
              if (part.end === 'endif') {
                branches.push({ cond: current, body: part.body });
                break;
              }
              branches.push({ cond: current, body: part.body });
              // `else if expr` or `else`.
              this.toks = part.endToks;
              this.i = 1;
              if (this.peek().kind === 'id' && this.peek().text === 'if') {
                this.next();
                current = this.expression();
                this.expectEnd();
                continue;
              }
              this.expectEnd();
              const last = block(['endif']);
              if (last.end !== 'endif') throw this.error(seg.pos, "unmatched if: missing '{% endif %}'");
              elseBody = last.body;
              break;
            }
            this.depth--;
            const describe = this.describe(seg.toks);
            stmts.push((s, out) => {
              charge(s, 1);
              for (const b of branches) {
                if (truthy(need(b.cond(s), describe))) return b.body(s, out);
              }
              elseBody?.(s, out);
            });
            continue;
          }
          case 'for': {
            this.bindsLocals = true;
            this.enter(head.pos);
            const first = this.next();
            if (first.kind !== 'id') throw this.error(first.pos, `expected a loop variable, got '${first.text}'`);
            let keyName: string | undefined;
            let valueName = first.text;
            if (this.isOp(',')) {
              this.next();
              const second = this.next();
              if (second.kind !== 'id') throw this.error(second.pos, `expected a loop variable, got '${second.text}'`);
              keyName = first.text;
              valueName = second.text;
            }
            const inTok = this.next();
            if (inTok.kind !== 'id' || inTok.text !== 'in') throw this.error(inTok.pos, `expected 'in', got '${inTok.text}'`);
            const iterable = this.expression();
            this.expectEnd();
            // Loop variables are locals inside the loop only: after it, the same name reads the data again.
            const added = [valueName, ...(keyName !== undefined ? [keyName] : [])].filter((n) => !this.locals.has(n));
            for (const n of added) this.locals.add(n);
            const part = block(['endfor']);
            for (const n of added) this.locals.delete(n);
            if (part.end !== 'endfor') throw this.error(seg.pos, "unmatched for: missing '{% endfor %}'");
            this.depth--;
            stmts.push(forLoop(keyName, valueName, iterable, part.body, this.describe(seg.toks)));
            continue;
          }
          case 'set': {
            this.bindsLocals = true;
            const name = this.next();
            if (name.kind !== 'id') throw this.error(name.pos, `expected variable name, got '${name.text}'`);
            this.expectOp('=');
            const value = this.expression();
            this.expectEnd();
            const segmentsOfName = this.segmentsOf(name.text);
            this.locals.add(segmentsOfName[0]!);
            const describe = this.describe(seg.toks);
            stmts.push((s) => {
              charge(s, 1);
              setPath(s.locals, segmentsOfName, need(value(s), describe));
            });
            continue;
          }
          case 'include':
          case 'extends':
          case 'block':
            throw this.error(head.pos, `'${head.text}' is not supported: a transformation template is self-contained`);
          default:
            throw this.error(head.pos, `unknown statement '${head.text}'`);
        }
      }
      return { body: sequence(stmts), end: '', endToks: [], pos: this.source.length };
    };
    const root = block(['endif', 'endfor', 'else']);
    if (root.end) throw this.error(root.pos, `unexpected '${root.end}'`);
    return root.body;
  }

  private describe(toks: readonly Tok[]): string {
    return toks.map((t) => t.text).join(' ').trim();
  }

  private expectEnd(): void {
    const t = this.peek();
    if (t.kind !== 'end') throw this.error(t.pos, `unexpected '${t.text}'`);
  }

  /** A name's path, as Inja turns it into a JSON pointer (`~1` and `~0` are `/` and `~` inside a segment). */
  private segmentsOf(name: string): string[] {
    const parts = this.options.pointerNotation ? name.split('/').filter((p, i) => i > 0 || p !== '') : name.split(/[./]/);
    return parts.map((p) => (p.includes('~') ? p.replace(/~1/g, '/').replace(/~0/g, '~') : p));
  }

  /** An expression up to a closing token. */
  expression(): Expr {
    const t = this.peek();
    if (t.kind === 'end' || (t.kind === 'op' && (t.text === ')' || t.text === ','))) throw this.error(t.pos, 'empty expression');
    return this.binary(0);
  }

  private binary(minPrec: number): Expr {
    const start = this.peek();
    this.enter(start.pos);
    let left = this.operand();
    for (;;) {
      const t = this.peek();
      const isWordOp = t.kind === 'id' && (t.text === 'and' || t.text === 'or' || t.text === 'in');
      if (!(t.kind === 'op' || isWordOp)) break;
      const prec = BINARY[t.text];
      if (prec === undefined || prec < minPrec) break;
      this.next();
      if (t.text === '.') {
        const id = this.next();
        if (id.kind !== 'id') throw this.error(id.pos, `expected a name after '.', got '${id.text}'`);
        const container = left;
        const key = id.text;
        left = (s) => {
          const c = container(s);
          if (c === MISSING) return MISSING;
          const v = own(c, key);
          if (v === MISSING) throw renderError(`could not find element '${key}'`);
          return v;
        };
        continue;
      }
      const right = this.binary(t.text === '^' ? prec : prec + 1);
      left = binaryOp(t.text, left, right, this.describe([start, t]));
    }
    this.depth--;
    return left;
  }

  private operand(): Expr {
    const t = this.next();
    switch (t.kind) {
      case 'num': {
        let value: unknown;
        try {
          value = JSON.parse(t.text);
        } catch {
          throw this.error(t.pos, `invalid number '${t.text}'`);
        }
        const v = value as Json;
        return () => v;
      }
      case 'str': {
        let value: string;
        try {
          value = JSON.parse(t.text) as string;
        } catch {
          throw this.error(t.pos, `invalid string ${t.text}`);
        }
        return () => value;
      }
      case 'op': {
        if (t.text === '(') {
          const inner = this.expression();
          this.expectOp(')');
          return inner;
        }
        if (t.text === '[' || t.text === '{') return this.literal(t);
        throw this.error(t.pos, `unexpected '${t.text}'`);
      }
      case 'id': {
        if (t.text === 'true') return () => true;
        if (t.text === 'false') return () => false;
        if (t.text === 'null') return () => null;
        if (t.text === 'not') {
          const operand = this.binary(5);
          return (s) => {
            charge(s, 1);
            return !truthy(need(operand(s), 'not'));
          };
        }
        if (this.isOp('(')) return this.call(t);
        return this.variable(t);
      }
      default:
        throw this.error(t.pos, 'expected an expression');
    }
  }

  /** `[…]` and `{…}`: constant JSON, as Inja reads them. */
  private literal(open: Tok): Expr {
    let level = 1;
    let last = open;
    while (level > 0) {
      last = this.next();
      if (last.kind === 'end') throw this.error(open.pos, `unterminated '${open.text}'`);
      if (last.kind === 'op' && (last.text === '[' || last.text === '{')) level++;
      if (last.kind === 'op' && (last.text === ']' || last.text === '}')) level--;
    }
    const text = this.source.slice(open.pos, last.pos + 1);
    let value: Json;
    try {
      value = JSON.parse(text) as Json;
    } catch {
      throw this.error(open.pos, `invalid literal ${text.slice(0, 60)}: array and object literals hold constant JSON`);
    }
    return () => value;
  }

  private call(name: Tok): Expr {
    this.expectOp('(');
    const args: Expr[] = [];
    if (!this.isOp(')')) {
      for (;;) {
        args.push(this.expression());
        if (this.isOp(',')) {
          this.next();
          continue;
        }
        break;
      }
    }
    this.expectOp(')');
    const fn = name.text;
    this.functions.add(fn);
    const argc = args.length;
    if (fn === 'default') {
      if (argc !== 2) throw this.error(name.pos, `default takes 2 arguments, got ${argc}`);
      const [test, fallback] = args as [Expr, Expr];
      return (s) => {
        charge(s, 1);
        const v = test(s);
        return v === MISSING ? fallback(s) : v;
      };
    }
    if (fn === 'exists') {
      if (argc !== 1) throw this.error(name.pos, `exists takes 1 argument, got ${argc}`);
      this.usesBody = true;
      this.usesData = true;
      const [arg] = args as [Expr];
      return (s) => {
        charge(s, 1);
        const segments = this.segmentsOf(asString(need(arg(s), 'exists'), 'exists'));
        return walk(s.data, segments) !== MISSING;
      };
    }
    const host = this.hostFunctions.get(fn);
    if (host) {
      if (argc < host.minArgs || argc > host.maxArgs) throw this.error(name.pos, `${fn} takes ${host.minArgs === host.maxArgs ? host.minArgs : `${host.minArgs} to ${host.maxArgs}`} argument${host.maxArgs === 1 ? '' : 's'}, got ${argc}`);
      if (host.usesBody || host.usesData) this.usesBody = true;
      if (host.usesData) this.usesData = true;
      return (s) => {
        charge(s, 1);
        const values = args.map((a) => need(a(s), fn));
        const out = host.call(values, s);
        if (typeof out === 'string') checkString(s, out);
        return out;
      };
    }
    const builtin = BUILTINS[fn];
    if (builtin) {
      const [min, max, impl] = builtin;
      if (argc < min || argc > max) throw this.error(name.pos, `${fn} takes ${min} argument${min === 1 ? '' : 's'}, got ${argc}`);
      return (s) => {
        charge(s, 1);
        const out = impl(
          args.map((a) => need(a(s), fn)),
          s,
        );
        if (typeof out === 'string') checkString(s, out);
        return out;
      };
    }
    throw this.error(name.pos, `unknown function ${fn}`);
  }

  private variable(t: Tok): Expr {
    const segments = this.segmentsOf(t.text);
    const head = segments[0] ?? '';
    const host = this.hostFunctions.get(t.text);
    const builtinNoArgs = host && host.minArgs === 0 ? host : undefined;
    if (!this.locals.has(head) && !this.options.hostNames?.has(head)) {
      this.usesBody = true;
      this.usesData = true;
    }
    if (builtinNoArgs?.usesBody || builtinNoArgs?.usesData) this.usesBody = true;
    if (builtinNoArgs?.usesData) this.usesData = true;
    return (s) => {
      charge(s, 1);
      const local = walk(s.locals, segments);
      if (local !== MISSING) return local;
      const value = walk(s.data, segments);
      if (value !== MISSING) return value;
      // Inja calls a no-argument function written without parentheses (`{{ body }}`).
      if (builtinNoArgs) return builtinNoArgs.call([], s);
      return notFound(t.text);
    };
  }
}

/** Missing values carry their name to the place that needs a value. */
let lastMissing = '';
function notFound(name: string): Val {
  lastMissing = name;
  return MISSING;
}

function need(v: Val, context: string): Json {
  if (v === MISSING) throw renderError(`variable '${lastMissing || context}' not found`);
  return v;
}

function sequence(stmts: readonly Stmt[]): Stmt {
  if (stmts.length === 1) return stmts[0]!;
  return (s, out) => {
    for (const st of stmts) st(s, out);
  };
}

function setPath(target: Record<string, Json>, segments: readonly string[], value: Json): void {
  let cur: Record<string, Json> = target;
  for (let i = 0; i < segments.length - 1; i++) {
    const key = segments[i]!;
    const next = Object.hasOwn(cur, key) ? cur[key] : undefined;
    if (next && isObject(next)) cur = next;
    else {
      const created: Record<string, Json> = Object.create(null) as Record<string, Json>;
      Object.defineProperty(cur, key, { value: created, enumerable: true, writable: true, configurable: true });
      cur = created;
    }
  }
  Object.defineProperty(cur, segments[segments.length - 1]!, { value, enumerable: true, writable: true, configurable: true });
}

function forLoop(keyName: string | undefined, valueName: string, iterable: Expr, body: Stmt, describe: string): Stmt {
  return (s, out) => {
    const source = need(iterable(s), describe);
    let entries: [Json, Json][];
    if (keyName === undefined) {
      if (!Array.isArray(source)) throw renderError(`for ${valueName} in …: object must be an array, got ${typeName(source)}`);
      entries = source.map((v) => [null, v]);
    } else {
      if (!isObject(source)) throw renderError(`for ${keyName}, ${valueName} in …: object must be an object, got ${typeName(source)}`);
      entries = Object.keys(source)
        .sort()
        .map((k) => [k, source[k]!]);
    }
    const locals = s.locals;
    const saved = { loop: Object.hasOwn(locals, 'loop') ? locals.loop : undefined, value: Object.hasOwn(locals, valueName) ? locals[valueName] : undefined, key: keyName !== undefined && Object.hasOwn(locals, keyName) ? locals[keyName] : undefined };
    const parent = saved.loop;
    const n = entries.length;
    for (let index = 0; index < n; index++) {
      charge(s, 1);
      const loop: Record<string, Json> = Object.create(null) as Record<string, Json>;
      loop.index = index;
      loop.index1 = index + 1;
      loop.is_first = index === 0;
      loop.is_last = index === n - 1;
      if (parent !== undefined) loop.parent = parent;
      setPath(locals, ['loop'], loop);
      setPath(locals, [valueName], entries[index]![1]);
      if (keyName !== undefined) setPath(locals, [keyName], entries[index]![0]);
      body(s, out);
    }
    restore(locals, 'loop', saved.loop);
    restore(locals, valueName, saved.value);
    if (keyName !== undefined) restore(locals, keyName, saved.key);
  };
}

function restore(locals: Record<string, Json>, name: string, value: Json | undefined): void {
  if (value === undefined) delete locals[name];
  else setPath(locals, [name], value);
}

function binaryOp(op: string, left: Expr, right: Expr, describe: string): Expr {
  switch (op) {
    case 'and':
      return (s) => {
        charge(s, 1);
        return truthy(need(left(s), describe)) && truthy(need(right(s), describe));
      };
    case 'or':
      return (s) => {
        charge(s, 1);
        return truthy(need(left(s), describe)) || truthy(need(right(s), describe));
      };
    default:
      break;
  }
  const apply = arithmetic(op);
  return (s) => {
    charge(s, 1);
    return apply(need(left(s), describe), need(right(s), describe), s);
  };
}

function arithmetic(op: string): (a: Json, b: Json, s: RenderState) => Json {
  switch (op) {
    case '==':
      return (a, b, s) => equal(a, b, s);
    case '!=':
      return (a, b, s) => !equal(a, b, s);
    case '<':
      return (a, b, s) => compare(a, b, s) < 0;
    case '<=':
      return (a, b, s) => compare(a, b, s) <= 0;
    case '>':
      return (a, b, s) => compare(a, b, s) > 0;
    case '>=':
      return (a, b, s) => compare(a, b, s) >= 0;
    case 'in':
      return (a, b, s) => {
        if (Array.isArray(b)) {
          charge(s, b.length);
          return b.some((v) => equal(a, v, s));
        }
        if (isObject(b)) {
          const values = Object.values(b);
          charge(s, values.length);
          return values.some((v) => equal(a, v, s));
        }
        return equal(a, b, s);
      };
    case '+':
      return (a, b, s) => {
        if (typeof a === 'string' && typeof b === 'string') return checkString(s, a + b);
        return asNumber(a, '+') + asNumber(b, '+');
      };
    case '-':
      return (a, b) => asNumber(a, '-') - asNumber(b, '-');
    case '*':
      return (a, b) => asNumber(a, '*') * asNumber(b, '*');
    case '/':
      return (a, b) => {
        if (asNumber(b, '/') === 0) throw renderError('division by zero');
        return asNumber(a, '/') / (b as number);
      };
    case '%':
      return (a, b) => {
        if (asInteger(b, '%') === 0) throw renderError('modulo by zero');
        return asInteger(a, '%') % (b as number);
      };
    case '^':
      return (a, b) => asNumber(a, '^') ** asInteger(b, '^');
    default:
      throw new InjaError(InjaCodes.TEMPLATE, `unknown operator ${op}`);
  }
}

/** Compiles an Inja template once; throws {@link InjaError} (`GH_TRANSFORM_TEMPLATE`) naming the line and column. */
export function compileInja(source: string, options: InjaOptions = {}): CompiledTemplate {
  const max = options.maxSourceChars ?? DEFAULT_MAX_TEMPLATE_CHARS;
  if (source.length > max) throw new InjaError(InjaCodes.TEMPLATE, `template of ${source.length} characters is over the limit of ${max}`);
  // Inja skips a UTF-8 byte order mark.
  const text = source.startsWith('\uFEFF') ? source.slice(1) : source;
  const parser = new Parser(text, options);
  const body = parser.template(scan(text));
  // A template that is only text renders without touching state.
  const constant = /[{#]/.test(text) ? undefined : text;
  const bindsLocals = parser.bindsLocals;
  return {
    render(state) {
      if (constant !== undefined) return constant;
      const out: Out = { text: '' };
      // `set` and loop variables live for one render, as in Inja.
      state.locals = bindsLocals ? (Object.create(null) as Record<string, Json>) : NO_LOCALS;
      try {
        body(state, out);
      } catch (error) {
        if (error instanceof InjaError) throw error;
        // A stack overflow on hostile data (deeply nested JSON printed or compared) ends this render only.
        if (error instanceof RangeError) throw new InjaError(InjaCodes.BUDGET, `template rendering failed: ${error.message}`);
        throw error;
      }
      return out.text;
    },
    usesBody: parser.usesBody,
    usesData: parser.usesData,
    functions: parser.functions,
  };
}

/** The locals of a template that binds none: lookups find nothing, nothing writes here. */
const NO_LOCALS: Record<string, Json> = Object.freeze(Object.create(null) as Record<string, Json>);

/** A fresh render state. */
export function renderState(data: Json, host: unknown, budget: { steps: number; maxChars: number }): RenderState {
  return { data, locals: Object.create(null) as Record<string, Json>, steps: budget.steps, maxChars: budget.maxChars, host };
}
