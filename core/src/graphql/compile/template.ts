import type { IncomingHttpHeaders } from 'node:http';
import { formatJsonPath, getPath, parsePath, PathSyntaxError, type Segment } from './path.ts';

/**
 * Templates (SPEC 3.3): `{$parent.<path>}`, `{$args.<name>[.<path>]}`, `{$headers.<name>}`,
 * `{$body.<path>}`. Parsed once at load time; evaluation only walks the parsed parts.
 */

export type TemplateSource = 'parent' | 'args' | 'headers' | 'body';

/** What a template is evaluated against. */
export interface TemplateScope {
  readonly parent?: unknown;
  readonly args?: Readonly<Record<string, unknown>>;
  readonly headers?: IncomingHttpHeaders;
  readonly body?: unknown;
}

interface Expression {
  readonly source: TemplateSource;
  readonly path: readonly Segment[];
}

/** A template that cannot be used: the message says what to change. */
export class TemplateSyntaxError extends Error {
  override name = 'TemplateSyntaxError';
}

/** Thrown while building a `:path` whose template leaves a path segment empty. */
export class EmptyPathSegmentError extends Error {
  override name = 'EmptyPathSegmentError';
}

/** Thrown while building a `:path` whose template makes a `.` or `..` segment (which would change the path). */
export class DotPathSegmentError extends Error {
  override name = 'DotPathSegmentError';
}

/** `.` and `..`, also percent-encoded (`%2e`, `.%2E`): what URL parsers and servers resolve as dot segments. */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i;

const SOURCES: readonly TemplateSource[] = ['parent', 'args', 'headers', 'body'];

/** A parsed template. Strings without `{$` are constants. */
export class Template {
  readonly text: string;
  /** Literal text and expressions, alternating (literals may be empty). */
  private readonly literals: readonly string[];
  private readonly expressions: readonly Expression[];

  private constructor(text: string, literals: string[], expressions: Expression[]) {
    this.text = text;
    this.literals = literals;
    this.expressions = expressions;
  }

  /** Parses `text`; only the `allowed` sources may appear. Throws {@link TemplateSyntaxError}. */
  static parse(text: string, allowed: readonly TemplateSource[]): Template {
    const literals: string[] = [];
    const expressions: Expression[] = [];
    let literal = '';
    let i = 0;
    while (i < text.length) {
      const start = text.indexOf('{$', i);
      if (start < 0) {
        literal += text.slice(i);
        break;
      }
      literal += text.slice(i, start);
      const end = text.indexOf('}', start);
      if (end < 0) throw new TemplateSyntaxError(`unclosed template at position ${start} in "${text}": add the closing "}"`);
      const inner = text.slice(start + 2, end);
      const match = /^([a-zA-Z]+)(.*)$/s.exec(inner);
      const source = match?.[1] as TemplateSource | undefined;
      if (!source || !SOURCES.includes(source)) {
        throw new TemplateSyntaxError(`unknown template source "{$${inner}}" in "${text}": use one of ${allowed.map((s) => `$${s}`).join(', ')}`);
      }
      if (!allowed.includes(source)) {
        throw new TemplateSyntaxError(`"{$${inner}}" in "${text}": $${source} is not available here; use one of ${allowed.map((s) => `$${s}`).join(', ')}`);
      }
      const rest = match![2]!;
      if (rest !== '' && !rest.startsWith('.') && !rest.startsWith('[')) {
        throw new TemplateSyntaxError(`"{$${inner}}" in "${text}": expected "." or "[" after $${source}`);
      }
      let path: Segment[];
      try {
        path = parsePath(rest);
      } catch (error) {
        if (error instanceof PathSyntaxError) throw new TemplateSyntaxError(`"{$${inner}}" in "${text}": ${error.message}`);
        throw error;
      }
      if (source === 'headers') {
        const first = path[0];
        if (path.length !== 1 || !first || !('key' in first)) {
          throw new TemplateSyntaxError(`"{$${inner}}" in "${text}": write a header as {$headers.<name>}`);
        }
        path = [{ key: first.key.toLowerCase() }];
      }
      literals.push(literal);
      literal = '';
      expressions.push({ source, path });
      i = end + 1;
    }
    literals.push(literal);
    return new Template(text, literals, expressions);
  }

  /** True when the text holds no template. */
  get constant(): boolean {
    return this.expressions.length === 0;
  }

  /** True when the whole string is exactly one template: its value keeps its JSON type. */
  get single(): boolean {
    return this.expressions.length === 1 && this.literals[0] === '' && this.literals[1] === '';
  }

  /** What the template reads: each expression's source and path, for load-time checks. */
  get references(): readonly { readonly source: TemplateSource; readonly path: readonly Segment[] }[] {
    return this.expressions;
  }

  /**
   * For a setter applied to each item of a list result: the same template with the leading
   * `[*]` of its `$body` expressions dropped, so `{$body[*][0]}` reads item `[0]` (Gloo's
   * bookinfo ratings setters); undefined when no `$body` expression starts with `[*]`.
   */
  perItem(): Template | undefined {
    if (!this.expressions.some((e) => e.source === 'body' && e.path[0] !== undefined && 'all' in e.path[0])) return undefined;
    const expressions = this.expressions.map((e) => (e.source === 'body' && e.path[0] !== undefined && 'all' in e.path[0] ? { source: e.source, path: e.path.slice(1) } : e));
    return new Template(this.text, [...this.literals], expressions);
  }

  /** Sources the template reads. */
  get sources(): TemplateSource[] {
    return this.expressions.map((e) => e.source);
  }

  /** Type-preserving for a single template (missing → null), otherwise string interpolation. */
  value(scope: TemplateScope): unknown {
    if (this.single) {
      const value = lookup(this.expressions[0]!, scope);
      return value === undefined ? null : value;
    }
    return this.string(scope);
  }

  /** String interpolation; `encode` is applied to each substituted value (not to the literal text). */
  string(scope: TemplateScope, encode?: (s: string) => string): string {
    const { literals, expressions } = this;
    if (expressions.length === 0) return literals[0]!;
    let out = literals[0]!;
    for (let i = 0; i < expressions.length; i++) {
      const text = stringify(lookup(expressions[i]!, scope));
      out += (encode ? encode(text) : text) + literals[i + 1]!;
    }
    return out;
  }

  /** True when one of the template's values is missing (null or absent). */
  missing(scope: TemplateScope): boolean {
    for (const e of this.expressions) {
      const value = lookup(e, scope);
      if (value === undefined || value === null) return true;
    }
    return false;
  }

  /**
   * A URL path (with optional query string): substituted values are URL-encoded (`/`, `?`, `#`,
   * `%` included), a substitution that leaves a path segment empty throws
   * {@link EmptyPathSegmentError}, and one that makes a `.` or `..` segment throws
   * {@link DotPathSegmentError}: a value can never change the path's structure.
   */
  urlPath(scope: TemplateScope): string {
    const { literals, expressions } = this;
    if (expressions.length === 0) return literals[0]!;
    let out = literals[0]!;
    let inQuery = out.includes('?');
    for (let i = 0; i < expressions.length; i++) {
      const text = stringify(lookup(expressions[i]!, scope));
      const next = literals[i + 1]!;
      if (!inQuery && text === '' && (out.endsWith('/') || out === '') && (next === '' || next.startsWith('/') || next.startsWith('?'))) {
        throw new EmptyPathSegmentError(`"${this.text}": ${describe(expressions[i]!)} is empty or missing, which leaves an empty path segment`);
      }
      if (!inQuery && text.length <= 2 && text.length > 0 && (text === '.' || text === '..')) {
        // encodeURIComponent leaves dots alone; check the whole segment the value ends up in.
        const start = out.lastIndexOf('/') + 1;
        const end = next.search(/[/?#]/);
        const segment = out.slice(start) + text + (end < 0 ? next : next.slice(0, end));
        if (DOT_SEGMENT.test(segment)) throw new DotPathSegmentError(`"${this.text}": ${describe(expressions[i]!)} is "${text}", which would make a "${segment}" path segment`);
      }
      out += encodeURIComponent(text) + next;
      if (!inQuery && next.includes('?')) inQuery = true;
    }
    return out;
  }
}

function describe(e: Expression): string {
  const path = formatJsonPath(e.path);
  return `{$${e.source}${path ? (path.startsWith('[') ? path : `.${path}`) : ''}}`;
}

function lookup(e: Expression, scope: TemplateScope): unknown {
  switch (e.source) {
    case 'parent':
      return getPath(scope.parent, e.path);
    case 'args':
      return getPath(scope.args, e.path);
    case 'body':
      return getPath(scope.body, e.path);
    case 'headers': {
      const value = scope.headers?.[(e.path[0] as { key: string }).key];
      return Array.isArray(value) ? value.join(', ') : value;
    }
  }
}

/** How a value reads inside interpolated text: strings as-is, missing as empty, objects as JSON. */
export function stringify(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/**
 * A JSON value whose strings may be templates (request bodies, `outgoingMessageJson`).
 * Constant parts are kept as they are; only templated strings are evaluated.
 */
export class JsonTemplate {
  private readonly build: (scope: TemplateScope) => unknown;
  /** True when the value holds no template (it can be serialized once). */
  readonly constant: boolean;
  readonly raw: unknown;

  private constructor(raw: unknown, build: (scope: TemplateScope) => unknown, constant: boolean) {
    this.raw = raw;
    this.build = build;
    this.constant = constant;
  }

  /** Parses every string inside `raw`; errors name the JSON path of the bad string. */
  static parse(raw: unknown, allowed: readonly TemplateSource[]): JsonTemplate {
    const compile = (value: unknown, where: string): { build: (scope: TemplateScope) => unknown; constant: boolean } => {
      if (typeof value === 'string') {
        let t: Template;
        try {
          t = Template.parse(value, allowed);
        } catch (error) {
          throw new TemplateSyntaxError(`${where ? `at ${where}: ` : ''}${(error as Error).message}`);
        }
        if (t.constant) return { build: () => value, constant: true };
        return { build: (scope) => t.value(scope), constant: false };
      }
      if (Array.isArray(value)) {
        const items = value.map((item, i) => compile(item, `${where}[${i}]`));
        if (items.every((i) => i.constant)) return { build: () => value, constant: true };
        return { build: (scope) => items.map((i) => i.build(scope)), constant: false };
      }
      if (value && typeof value === 'object') {
        const entries = Object.entries(value).map(([k, v]) => [k, compile(v, where ? `${where}.${k}` : k)] as const);
        if (entries.every(([, e]) => e.constant)) return { build: () => value, constant: true };
        return {
          build: (scope) => {
            const out: Record<string, unknown> = {};
            for (const [k, e] of entries) out[k] = e.build(scope);
            return out;
          },
          constant: false,
        };
      }
      return { build: () => value, constant: true };
    };
    const { build, constant } = compile(raw, '');
    return new JsonTemplate(raw, build, constant);
  }

  /** The value with every template evaluated. */
  value(scope: TemplateScope): unknown {
    return this.build(scope);
  }
}
