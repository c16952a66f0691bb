import { RE2JS } from 're2js';
import { re2Problem } from '../regex/re2.ts';
import { compileMatchers, type RequestLine } from '../proxy/routing/route-matcher.ts';
import type { MatcherSpec } from '../config/schema/virtual-service.ts';
import { compileInja, dumpJson, InjaCodes, InjaError, jsonEscape, renderState, type CompiledTemplate, type HostFunction, type Json, type RenderState } from './inja.ts';
import type { ExtractionSpec, RequestResponseTransformationsSpec, TransformationSpec, TransformationStagesSpec, TransformationTemplateSpec, TransformationsSpec, TransformHeaderMatcherSpec } from './schema.ts';

/**
 * Gloo's transformations (docs/transformations.md), compiled once at load: every Inja template,
 * extractor regex (RE2) and matcher is built here, and the request path only runs closures.
 * The engine works on plain messages ({@link TransformRequest}, {@link TransformResponse}); the
 * proxy filter that buffers bodies and applies the result is wired separately, and buffers a
 * body only when {@link CompiledTransformation.needsBody} says a template reads it.
 */

/** Bounds on one transformation (docs/transformations.md, "Limits"). */
export interface TransformLimits {
  /** Largest body a transformation buffers (Envoy's per-connection buffer limit, 1 MiB): larger is 413. */
  readonly maxBodyBytes: number;
  /** Render steps for all templates of one transformation of one message. */
  readonly maxRenderSteps: number;
  /** Longest string a template may print or build. */
  readonly maxOutputChars: number;
  /**
   * Longest source an extractor regex runs over (a body; headers are short). RE2 is linear, but
   * re2js extracting capture groups costs ~0.4 µs a character (200 KB: ~90 ms), so big bodies get
   * a 400 instead of holding the event loop.
   */
  readonly maxRegexInputChars: number;
}

/** The defaults of {@link TransformLimits}. */
export const DEFAULT_TRANSFORM_LIMITS: TransformLimits = { maxBodyBytes: 1024 * 1024, maxRenderSteps: 1_000_000, maxOutputChars: 4 * 1024 * 1024, maxRegexInputChars: 128 * 1024 };

/** Stable codes of transformation errors, at load and per message. */
export const TransformCodes = {
  /** Configuration the compiler refuses (with its field path). */
  INVALID: 'GH_TRANSFORM_INVALID',
  /** A template that does not parse. */
  TEMPLATE: InjaCodes.TEMPLATE,
  /** Rendering failed: 400, as Envoy-Gloo answers. */
  RENDER: InjaCodes.RENDER,
  /** Rendering exceeded its budget: 400. */
  BUDGET: InjaCodes.BUDGET,
  /** The body is not JSON and the template parses it (`parseBodyBehavior: ParseAsJson`): 400. */
  BAD_JSON: 'GH_TRANSFORM_BAD_JSON',
  /** The body is over `maxBodyBytes`: 413. */
  BODY_TOO_LARGE: 'GH_TRANSFORM_BODY_TOO_LARGE',
} as const;

/** A configuration error: `path` is the field path below the transformation's own path. */
export class TransformConfigError extends Error {
  override name = 'TransformConfigError';
  readonly code: string;
  readonly path: string;
  constructor(code: string, path: string, message: string) {
    super(`${path}: ${message}`);
    this.code = code;
    this.path = path;
  }
}

/** Headers as Node gives them: lowercase names. */
export type HeaderRecord = Record<string, string | string[] | undefined>;

/** A request to transform. `body` is needed only when {@link CompiledTransformation.needsBody}. */
export interface TransformRequest {
  readonly method: string;
  /** Path with the query string. */
  readonly path: string;
  readonly scheme?: string;
  readonly headers: HeaderRecord;
  readonly body?: string | Buffer | undefined;
  /** Envoy dynamic metadata by namespace, for `dynamic_metadata()`. */
  readonly dynamicMetadata?: Readonly<Record<string, Readonly<Record<string, Json>>>>;
}

/** A response to transform; `request` is the request as the upstream received it (for `request_header()`). */
export interface TransformResponse {
  readonly status: number;
  readonly headers: HeaderRecord;
  readonly body?: string | Buffer | undefined;
  /** Envoy's response code details (local replies), for `responseCodeDetails` matchers. */
  readonly codeDetails?: string;
  readonly dynamicMetadata?: Readonly<Record<string, Readonly<Record<string, Json>>>>;
}

/** What a transformation produced: the new message, the new body when it changed, dynamic metadata. */
export interface TransformResult<M> {
  readonly ok: true;
  readonly message: M;
  /** The new body (undefined: unchanged). `content-length` in `message.headers` already matches it. */
  readonly body: Buffer | undefined;
  /** `dynamicMetadataValues`, by namespace (default `io.solo.transformation`). */
  readonly dynamicMetadata: Record<string, Record<string, Json>>;
  /** `spanTransformer.name`, rendered. */
  readonly spanName: string | undefined;
}

/** A transformation that failed on this message: answer `status` (400 or 413) with body `bad request` / `payload too large`. */
export interface TransformFailure {
  readonly ok: false;
  readonly status: 400 | 413;
  readonly code: string;
  /** Detail for the log (never sent to the client). */
  readonly message: string;
}

export type TransformOutcome<M> = TransformResult<M> | TransformFailure;

/** The request as transformed: method, path, headers (fresh object). */
export interface TransformedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string | string[]>;
}

/** The response as transformed. */
export interface TransformedResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[]>;
}

/** One compiled `Transformation`. */
export interface CompiledTransformation {
  /** True when applying it reads the body: the filter must buffer (up to `maxBodyBytes`) first. */
  readonly needsBody: boolean;
  /** True when it may change the body. */
  readonly changesBody: boolean;
  /** `logRequestResponseInfo`: the filter logs the message before and after (debug level; it may hold secrets). */
  readonly logRequestResponseInfo: boolean;
  /** Accepted but not fully honoured (functions that always render empty here), with field paths: `validate` shows them as warnings. */
  readonly warnings: readonly TransformWarning[];
  transformRequest(request: TransformRequest): TransformOutcome<TransformedRequest>;
  /** `request` supplies `request_header()`. */
  transformResponse(response: TransformResponse, request?: TransformRequest): TransformOutcome<TransformedResponse>;
}

/** A field Gatehouse accepts but honours differently (a configuration warning). */
export interface TransformWarning {
  readonly path: string;
  readonly message: string;
}

/** Functions Gloo documents whose data Gatehouse does not have: they render '' (and warn at load). */
const UNMODELLED_FUNCTIONS: Record<string, string> = {
  data_source: "Gloo's API configures no data sources",
  cluster_metadata: 'Gatehouse Upstreams carry no Envoy cluster metadata',
  clusterMetadata: 'Gatehouse Upstreams carry no Envoy cluster metadata',
  host_metadata: 'Gatehouse endpoints carry no Envoy endpoint metadata',
};

/** Compile-time options. */
export interface CompileOptions {
  /** Which message the transformation applies to: pseudo-headers and `spanTransformer` depend on it. */
  readonly side: 'request' | 'response';
  /** Field path of the transformation, for errors. */
  readonly path: string;
  /** `stagedTransformations.escapeCharacters`: the default for templates that do not set theirs. */
  readonly escapeCharacters?: boolean | undefined;
  /** `stagedTransformations.logRequestResponseInfo`: overrides each transformation's own setting when set. */
  readonly logRequestResponseInfo?: boolean | undefined;
  readonly limits?: Partial<TransformLimits>;
  /** The environment `env()` reads (default `process.env`, read once at compile time, as Envoy-Gloo does). */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

const DEFAULT_METADATA_NAMESPACE = 'io.solo.transformation';
const REQUEST_PSEUDO = new Set([':path', ':method', ':authority', ':scheme']);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;
const BAD_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** The message a template is rendered against (the host context of Gloo's functions); one per message, methods instead of closures. */
class Host {
  readonly #w: Working;
  readonly #requestHeaders: HeaderRecord | undefined;
  readonly #body: string;
  readonly #data: Json;
  readonly extractions: ReadonlyMap<string, string>;
  readonly dynamicMetadata: Readonly<Record<string, Readonly<Record<string, Json>>>> | undefined;
  constructor(w: Working, requestHeaders: HeaderRecord | undefined, body: string, data: Json, extractions: ReadonlyMap<string, string>, dynamicMetadata: Host['dynamicMetadata']) {
    this.#w = w;
    this.#requestHeaders = requestHeaders;
    this.#body = body;
    this.#data = data;
    this.extractions = extractions;
    this.dynamicMetadata = dynamicMetadata;
  }
  /** The message's headers, pseudo-headers included. */
  header(name: string): string {
    return getHeader(this.#w, name);
  }
  requestHeader(name: string): string {
    const headers = this.#requestHeaders;
    if (!headers) return '';
    return name === ':authority' ? firstValue(headers.host) : firstValue(Object.hasOwn(headers, name) ? headers[name] : undefined);
  }
  body(): string {
    return this.#body;
  }
  context(): Json {
    return this.#data;
  }
}

/** No extractors: one shared empty map. */
const NO_EXTRACTIONS: ReadonlyMap<string, string> = new Map();
/** No `dynamicMetadataValues`: one shared empty result (readers only iterate it). */
const NO_METADATA: Record<string, Record<string, Json>> = Object.freeze({}) as Record<string, Record<string, Json>>;

function host(s: RenderState): Host {
  return s.host as Host;
}

function str(v: Json, fn: string): string {
  if (typeof v !== 'string') throw new InjaError(InjaCodes.RENDER, `${fn}: expected a string argument`);
  return v;
}

/** Base64 as Envoy decodes it: invalid input decodes to ''. */
function base64Decode(input: string, url: boolean): string {
  const valid = url ? /^[A-Za-z0-9_-]*={0,2}$/ : /^[A-Za-z0-9+/]*={0,2}$/;
  if (!valid.test(input) || (!url && input.length % 4 !== 0)) return '';
  return Buffer.from(input, url ? 'base64url' : 'base64').toString('latin1');
}

function wordCount(v: Json, s: RenderState): number {
  // Iterative, so a deeply nested body cannot overflow the stack.
  let total = 0;
  const stack: Json[] = [v];
  while (stack.length) {
    const cur = stack.pop()!;
    s.steps -= 1;
    if (s.steps < 0) throw new InjaError(InjaCodes.BUDGET, 'template rendering exceeded its step budget (word_count)');
    if (typeof cur === 'string') total += wordsIn(cur);
    else if (typeof cur === 'number' || typeof cur === 'boolean') total += 1;
    else if (Array.isArray(cur)) stack.push(...cur);
    else if (cur !== null) {
      for (const [k, value] of Object.entries(cur)) {
        total += wordsIn(k);
        stack.push(value);
      }
    }
  }
  return total;
}

function wordsIn(text: string): number {
  const words = text.trim().split(/[ \t\n\v\f\r]+/);
  return words.length === 1 && words[0] === '' ? 0 : words.length;
}

/** Gloo's template functions (envoy-gloo's `inja_transformer.cc`), bound per compiled template for `replace_with_random`. */
function glooFunctions(env: Readonly<Record<string, string | undefined>>): Map<string, HostFunction> {
  // Envoy-Gloo draws one random string per pattern per transformation and keeps it.
  const randomByPattern = new Map<string, string>();
  const fns: [string, HostFunction][] = [
    ['header', { minArgs: 1, maxArgs: 1, call: ([name], s) => host(s).header(str(name!, 'header').toLowerCase()) }],
    ['request_header', { minArgs: 1, maxArgs: 1, call: ([name], s) => host(s).requestHeader(str(name!, 'request_header').toLowerCase()) }],
    [
      'extraction',
      {
        minArgs: 1,
        maxArgs: 1,
        call: ([name], s) => host(s).extractions.get(str(name!, 'extraction')) ?? '',
      },
    ],
    ['body', { minArgs: 0, maxArgs: 0, usesBody: true, call: (_a, s) => host(s).body() }],
    ['context', { minArgs: 0, maxArgs: 0, usesData: true, call: (_a, s) => host(s).context() }],
    ['env', { minArgs: 1, maxArgs: 1, call: ([name]) => env[str(name!, 'env')] ?? '' }],
    ['base64_encode', { minArgs: 1, maxArgs: 1, call: ([v]) => Buffer.from(str(v!, 'base64_encode'), 'latin1').toString('base64') }],
    ['base64url_encode', { minArgs: 1, maxArgs: 1, call: ([v]) => Buffer.from(str(v!, 'base64url_encode'), 'latin1').toString('base64url') }],
    ['base64_decode', { minArgs: 1, maxArgs: 1, call: ([v]) => base64Decode(str(v!, 'base64_decode'), false) }],
    ['base64url_decode', { minArgs: 1, maxArgs: 1, call: ([v]) => base64Decode(str(v!, 'base64url_decode'), true) }],
    [
      'substring',
      {
        minArgs: 2,
        maxArgs: 3,
        call: ([input, start, length]) => {
          const text = str(input!, 'substring');
          if (typeof start !== 'number' || !Number.isInteger(start)) return '';
          let len = -1;
          if (length !== undefined) {
            if (typeof length !== 'number' || !Number.isInteger(length)) return '';
            len = length;
          }
          if (start < 0 || start >= text.length) return '';
          if (len <= 0 || start + len > text.length) return text.slice(start);
          return text.slice(start, start + len);
        },
      },
    ],
    ['trim', { minArgs: 1, maxArgs: 1, call: ([v]) => str(v!, 'trim').replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, '') }],
    [
      'replace_with_random',
      {
        minArgs: 2,
        maxArgs: 2,
        call: ([input, pattern]) => {
          const text = str(input!, 'replace_with_random');
          const p = str(pattern!, 'replace_with_random');
          if (p === '') return text;
          let random = randomByPattern.get(p);
          if (random === undefined) {
            random = crypto.getRandomValues(Buffer.alloc(16)).toString('base64').replace(/=+$/, '');
            if (randomByPattern.size < 1000) randomByPattern.set(p, random);
          }
          return text.split(p).join(random);
        },
      },
    ],
    [
      'raw_string',
      {
        minArgs: 1,
        maxArgs: 1,
        call: ([v]) => jsonEscape(str(v!, 'raw_string')),
      },
    ],
    ['word_count', { minArgs: 1, maxArgs: 1, call: ([v], s) => wordCount(v!, s) }],
    // Gloo's API has no data sources: the function exists, and finds nothing.
    ['data_source', { minArgs: 1, maxArgs: 1, call: () => '' }],
    [
      'dynamic_metadata',
      {
        minArgs: 1,
        maxArgs: 2,
        call: ([keyArg, filter], s) => {
          let key = keyArg;
          const ns = host(s).dynamicMetadata?.[typeof filter === 'string' ? unicode(filter) : DEFAULT_METADATA_NAMESPACE];
          if (!ns || typeof key !== 'string') return '';
          key = unicode(key);
          let cur: Json | undefined = Object.hasOwn(ns, key) ? ns[key] : undefined;
          if (cur === undefined) {
            // Envoy splits the key into a path on ':'.
            cur = ns as unknown as Json;
            for (const part of key.split(':')) {
              if (cur && typeof cur === 'object' && !Array.isArray(cur) && Object.hasOwn(cur, part)) cur = (cur as Record<string, Json>)[part];
              else return '';
            }
          }
          if (cur === undefined || cur === null) return '';
          if (typeof cur === 'boolean') return cur ? 'true' : 'false';
          return jsonBytes(typeof cur === 'object' ? dumpJson(cur) : cur);
        },
      },
    ],
    // Cluster and endpoint metadata are not modelled by Gatehouse: empty, as Envoy-Gloo returns without them.
    ['cluster_metadata', { minArgs: 1, maxArgs: 2, call: () => '' }],
    ['host_metadata', { minArgs: 1, maxArgs: 2, call: () => '' }],
    ['clusterMetadata', { minArgs: 1, maxArgs: 1, call: () => '' }],
  ];
  return new Map(fns);
}

/** One compiled extractor. */
interface Extractor {
  readonly name: string;
  readonly body: boolean;
  readonly header: string | undefined;
  run(source: string): string;
}

function compileExtractor(name: string, spec: ExtractionSpec, path: string): Extractor {
  if ((spec.header === undefined) === (spec.body === undefined)) throw new TransformConfigError(TransformCodes.INVALID, path, 'an extractor needs exactly one source: header or body');
  const problem = re2Problem(spec.regex);
  if (problem) throw new TransformConfigError(TransformCodes.INVALID, `${path}.regex`, problem);
  // Regexes run over byte strings (as std::regex in Envoy-Gloo): the pattern is matched as its UTF-8 bytes.
  const re = RE2JS.compile(utf8Bytes(spec.regex));
  const group = spec.subgroup ?? 0;
  if (group > re.groupCount()) throw new TransformConfigError(TransformCodes.INVALID, `${path}.subgroup`, `group ${group} requested for a regex with only ${re.groupCount()} groups`);
  const mode = spec.mode === 1 || spec.mode === 'SINGLE_REPLACE' ? 'SINGLE_REPLACE' : spec.mode === 2 || spec.mode === 'REPLACE_ALL' ? 'REPLACE_ALL' : 'EXTRACT';
  const replacement = spec.replacementText === undefined ? undefined : utf8Bytes(spec.replacementText);
  if (mode === 'EXTRACT' && replacement !== undefined) throw new TransformConfigError(TransformCodes.INVALID, `${path}.replacementText`, 'replacementText is only for SINGLE_REPLACE and REPLACE_ALL modes');
  if (mode !== 'EXTRACT' && replacement === undefined) throw new TransformConfigError(TransformCodes.INVALID, `${path}.replacementText`, `${mode} mode needs replacementText`);
  if (mode === 'REPLACE_ALL' && group !== 0) throw new TransformConfigError(TransformCodes.INVALID, `${path}.subgroup`, 'REPLACE_ALL mode replaces whole matches: subgroup must not be set');
  const base = { name, body: spec.body !== undefined, header: spec.header?.toLowerCase() };
  if (mode === 'EXTRACT') {
    return {
      ...base,
      run(source) {
        // The match test alone is cheaper than extracting groups: most non-matching sources stop here.
        if (!re.testExact(source)) return '';
        const m = re.matcher(source);
        if (!m.matches()) return '';
        return m.group(group) ?? '';
      },
    };
  }
  if (mode === 'SINGLE_REPLACE') {
    const text = replacement!;
    return {
      ...base,
      run(source) {
        const m = re.matcher(source);
        // The regex must match the whole source; otherwise the source is returned unchanged.
        if (!m.matches()) return source;
        const start = m.start(group);
        const end = m.end(group);
        if (start < 0) return source;
        return source.slice(0, start) + text + source.slice(end);
      },
    };
  }
  // REPLACE_ALL: ECMAScript format strings ($n, $&, $$), as std::regex_replace reads them; empty matches are skipped.
  const render = formatReplacement(replacement!);
  return {
    ...base,
    run(source) {
      return re.matcher(source).replaceAll((...args: unknown[]) => {
        const whole = args[0] as string;
        return whole === '' ? '' : render(args as (string | undefined)[]);
      });
    },
  };
}

function formatReplacement(format: string): (groups: readonly (string | undefined)[]) => string {
  const parts: (string | number)[] = [];
  let literal = '';
  for (let i = 0; i < format.length; i++) {
    const c = format[i]!;
    const next = format[i + 1];
    if (c === '$' && next === '$') {
      literal += '$';
      i++;
    } else if (c === '$' && next === '&') {
      parts.push(literal, 0);
      literal = '';
      i++;
    } else if (c === '$' && next !== undefined && next >= '0' && next <= '9') {
      let digits = next;
      if (format[i + 2] !== undefined && format[i + 2]! >= '0' && format[i + 2]! <= '9') digits += format[i + 2];
      parts.push(literal, Number(digits));
      literal = '';
      i += digits.length;
    } else literal += c;
  }
  parts.push(literal);
  return (groups) => parts.map((p) => (typeof p === 'number' ? (groups[p] ?? '') : p)).join('');
}

/** A header name Gloo accepts on this side: lowercase token, or the side's pseudo-headers. */
function checkHeaderName(name: string, side: 'request' | 'response', path: string): string {
  const lower = name.toLowerCase();
  if (lower.startsWith(':')) {
    if (side === 'request' ? !REQUEST_PSEUDO.has(lower) : lower !== ':status') throw new TransformConfigError(TransformCodes.INVALID, path, `${side} transformations cannot set the pseudo-header ${name} (request: ${[...REQUEST_PSEUDO].join(', ')}; response: :status)`);
    return lower;
  }
  if (!HEADER_NAME.test(lower)) throw new TransformConfigError(TransformCodes.INVALID, path, `"${name}" is not a valid header name`);
  return lower;
}

function template(text: string, path: string, options: Parameters<typeof compileInja>[1]): CompiledTemplate {
  try {
    return compileInja(utf8Bytes(text), options);
  } catch (error) {
    if (error instanceof InjaError) throw new TransformConfigError(error.code, `${path}.text`, error.message);
    throw error;
  }
}

function firstValue(v: string | string[] | undefined): string {
  if (v === undefined) return '';
  return Array.isArray(v) ? (v[0] ?? '') : v;
}

function copyHeaders(headers: HeaderRecord): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  for (const key of Object.keys(headers)) {
    const v = headers[key];
    if (v !== undefined) out[key] = Array.isArray(v) ? [...v] : v;
  }
  return out;
}

function bodyBytes(body: string | Buffer | undefined): number {
  if (body === undefined) return 0;
  return typeof body === 'string' ? Buffer.byteLength(body) : body.length;
}

/*
 * Strings inside the engine are byte strings (one character per byte, code points 0-255), as
 * Envoy's headers and nlohmann's strings are bytes: header values arrive that way from Node
 * (latin1), bodies and configuration text are turned into their UTF-8 bytes, and `length`,
 * `substring` and regexes count bytes as in Envoy-Gloo. Output goes back as bytes on the wire, and
 * as Unicode text where JavaScript consumers read it (dynamic metadata, span names).
 */

/** Unicode text as its UTF-8 byte string. */
export function utf8Bytes(text: string): string {
  // ASCII (the common case) is its own byte string.
  return /^[\x00-\x7f]*$/.test(text) ? text : Buffer.from(text, 'utf8').toString('latin1');
}

/** A byte string for the wire: characters above 0xFF (only from JSON \\u escapes) become their UTF-8 bytes. */
function wire(bytes: string): string {
  return /[^\x00-\xff]/.test(bytes) ? bytes.replace(/[^\x00-\xff]+/g, (m) => Buffer.from(m, 'utf8').toString('latin1')) : bytes;
}

/** A byte string as Unicode text (UTF-8 decoded). */
function unicode(bytes: string): string {
  return /^[\x00-\x7f]*$/.test(bytes) ? bytes : Buffer.from(wire(bytes), 'latin1').toString('utf8');
}

/** The body as a byte string. */
function bodyText(body: string | Buffer | undefined): string {
  if (body === undefined) return '';
  return typeof body === 'string' ? utf8Bytes(body) : body.toString('latin1');
}

/**
 * Parses a JSON byte string. JSON escapes of U+0080 to U+00FF become their UTF-8 bytes first
 * (JSON.parse would make them one byte each); higher escapes are encoded on output by {@link wire}.
 */
function parseJsonBytes(bytes: string): Json {
  const source = bytes.includes('\\u00') ? bytes.replace(/\\(\\|u00[89a-fA-F][0-9a-fA-F])/g, (m, e: string) => (e === '\\' ? m : Buffer.from(String.fromCharCode(Number.parseInt(e.slice(1), 16)), 'utf8').toString('latin1'))) : bytes;
  return JSON.parse(source) as Json;
}

/** Unicode values (dynamic metadata from other filters) as byte strings. */
function jsonBytes(v: Json): Json {
  if (typeof v === 'string') return utf8Bytes(v);
  if (Array.isArray(v)) return v.map(jsonBytes);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [utf8Bytes(k), jsonBytes(x)]));
  return v;
}

/** Places `value` at the dotted `name` inside `root` (Envoy-Gloo's non-advanced extractor placement); own properties only. */
function place(root: Json, name: string, value: Json): Json {
  let base: Json = root === null ? (Object.create(null) as Record<string, Json>) : root;
  if (typeof base !== 'object' || Array.isArray(base)) throw new InjaError(InjaCodes.RENDER, `cannot place extractor '${name}' into a JSON body that is not an object`);
  const parts = name.split('.');
  let cur = base as Record<string, Json>;
  for (let i = 0; i < parts.length - 1; i++) {
    const key = parts[i]!;
    let next: Json | undefined = Object.hasOwn(cur, key) ? cur[key] : undefined;
    if (next === undefined || next === null) {
      next = Object.create(null) as Record<string, Json>;
      Object.defineProperty(cur, key, { value: next, enumerable: true, writable: true, configurable: true });
    }
    if (typeof next !== 'object' || Array.isArray(next)) throw new InjaError(InjaCodes.RENDER, `cannot place extractor '${name}': '${key}' is not an object`);
    cur = next as Record<string, Json>;
  }
  Object.defineProperty(cur, parts[parts.length - 1]!, { value, enumerable: true, writable: true, configurable: true });
  return base;
}

/** The working state of one message while a transformation runs. */
interface Working {
  headers: Record<string, string | string[]>;
  /**
   * Pseudo-headers (`:path`, `:method`, `:scheme` or `:status`; `:authority` is `host`). A plain
   * object: no name starting with ':' is a member of Object.prototype.
   */
  pseudo: Record<string, string>;
}

function getHeader(w: Working, name: string): string {
  if (name.startsWith(':')) return name === ':authority' ? firstValue(w.headers.host) : (w.pseudo[name] ?? '');
  return Object.hasOwn(w.headers, name) ? firstValue(w.headers[name]) : '';
}

function removeHeader(w: Working, name: string): void {
  if (name === ':authority') delete w.headers.host;
  else if (name.startsWith(':')) w.pseudo[name] = '';
  else delete w.headers[name];
}

function addHeader(w: Working, name: string, rendered: string): void {
  const value = wire(rendered);
  if (BAD_HEADER_VALUE.test(value)) throw new InjaError(InjaCodes.RENDER, `header ${name}: the rendered value has characters not allowed in a header`);
  if (name === ':authority') {
    w.headers.host = value;
    return;
  }
  if (name.startsWith(':')) {
    w.pseudo[name] = value;
    return;
  }
  const existing = Object.hasOwn(w.headers, name) ? w.headers[name] : undefined;
  if (existing === undefined) w.headers[name] = value;
  else w.headers[name] = Array.isArray(existing) ? [...existing, value] : [existing, value];
}

/** Compiles one `Transformation` (a template or a header-body transform). Throws {@link TransformConfigError}. */
export function compileTransformation(spec: TransformationSpec, options: CompileOptions): CompiledTransformation {
  const limits = { ...DEFAULT_TRANSFORM_LIMITS, ...options.limits };
  const path = options.path;
  if (spec.transformationTemplate && spec.headerBodyTransform) throw new TransformConfigError(TransformCodes.INVALID, path, 'set one of transformationTemplate and headerBodyTransform');
  const log = options.logRequestResponseInfo ?? spec.logRequestResponseInfo === true;
  if (spec.headerBodyTransform) return { ...headerBody(spec.headerBodyTransform.addRequestMetadata === true, options.side, limits), logRequestResponseInfo: log };
  if (!spec.transformationTemplate) return { ...identity(), logRequestResponseInfo: log };
  return { ...compileTemplate(spec.transformationTemplate, { ...options, path: `${path}.transformationTemplate` }, limits), logRequestResponseInfo: log };
}

function identity(): CompiledTransformation {
  return {
    logRequestResponseInfo: false,
    warnings: [],
    needsBody: false,
    changesBody: false,
    transformRequest: (r) => ({ ok: true, message: { method: r.method, path: r.path, headers: copyHeaders(r.headers) }, body: undefined, dynamicMetadata: {}, spanName: undefined }),
    transformResponse: (r) => ({ ok: true, message: { status: r.status, headers: copyHeaders(r.headers) }, body: undefined, dynamicMetadata: {}, spanName: undefined }),
  };
}

function tooLarge(limits: TransformLimits, bytes: number): TransformFailure {
  return { ok: false, status: 413, code: TransformCodes.BODY_TOO_LARGE, message: `body of ${bytes} bytes is over the transformation limit of ${limits.maxBodyBytes}` };
}

function failure(error: unknown): TransformFailure {
  if (error instanceof InjaError) return { ok: false, status: 400, code: error.code, message: error.message };
  // A stack overflow on hostile data (a deeply nested body printed or merged) ends this message only.
  if (error instanceof RangeError) return { ok: false, status: 400, code: TransformCodes.BUDGET, message: `transformation failed on deeply nested data: ${error.message}` };
  throw error;
}

function headerBody(addRequestMetadata: boolean, side: 'request' | 'response', limits: TransformLimits): CompiledTransformation {
  const build = (headers: HeaderRecord, pseudo: [string, string][], body: string | Buffer | undefined, request?: { method: string; path: string }) => {
    const out: Record<string, Json> = {};
    if (bodyBytes(body) > 0) out.body = bodyText(body);
    const single: Record<string, string> = {};
    const multi: Record<string, string[]> = {};
    const entries: [string, string][] = [...pseudo];
    for (const [k, v] of Object.entries(headers)) {
      if (v === undefined) continue;
      for (const one of Array.isArray(v) ? v : [v]) entries.push([k, one]);
    }
    for (const [k, v] of entries) {
      const previous = Object.hasOwn(single, k) ? single[k] : undefined;
      single[k] = v;
      if (addRequestMetadata && previous) (multi[k] ??= [previous]).push(v);
    }
    out.headers = single;
    if (addRequestMetadata && request) {
      const q = request.path.indexOf('?');
      const query = q === -1 ? '' : request.path.slice(q + 1);
      out.multiValueHeaders = multi;
      out.queryString = query;
      out.httpMethod = request.method;
      out.path = q === -1 ? request.path : request.path.slice(0, q);
      const params: Record<string, string> = {};
      const multiParams: Record<string, string[]> = {};
      for (const pair of query.split('&')) {
        if (!pair) continue;
        const eq = pair.indexOf('=');
        const k = eq === -1 ? pair : pair.slice(0, eq);
        const v = eq === -1 ? '' : pair.slice(eq + 1);
        const previous = Object.hasOwn(params, k) ? params[k] : undefined;
        params[k] = v;
        if (previous) (multiParams[k] ??= [previous]).push(v);
      }
      out.queryStringParameters = params;
      out.multiValueQueryStringParameters = multiParams;
    }
    return Buffer.from(wire(dumpJson(out)), 'latin1');
  };
  const finish = (headers: Record<string, string | string[]>, body: Buffer) => {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(body.length);
  };
  return {
    logRequestResponseInfo: false,
    warnings: [],
    needsBody: true,
    changesBody: true,
    transformRequest(r) {
      if (bodyBytes(r.body) > limits.maxBodyBytes) return tooLarge(limits, bodyBytes(r.body));
      const pseudo: [string, string][] = [
        [':authority', firstValue(r.headers.host)],
        [':path', r.path],
        [':method', r.method],
        [':scheme', r.scheme ?? 'http'],
      ];
      const headers = copyHeaders(r.headers);
      const body = build(
        Object.fromEntries(Object.entries(r.headers).filter(([k]) => k !== 'host')),
        pseudo,
        r.body,
        side === 'request' ? r : undefined,
      );
      finish(headers, body);
      return { ok: true, message: { method: r.method, path: r.path, headers }, body, dynamicMetadata: {}, spanName: undefined };
    },
    transformResponse(r) {
      if (bodyBytes(r.body) > limits.maxBodyBytes) return tooLarge(limits, bodyBytes(r.body));
      const headers = copyHeaders(r.headers);
      const body = build(r.headers, [[':status', String(r.status)]], r.body);
      finish(headers, body);
      return { ok: true, message: { status: r.status, headers }, body, dynamicMetadata: {}, spanName: undefined };
    },
  };
}

function compileTemplate(spec: TransformationTemplateSpec, options: CompileOptions, limits: TransformLimits): CompiledTransformation {
  const path = options.path;
  const side = options.side;
  const advanced = spec.advancedTemplates === true;
  const escape = spec.escapeCharacters ?? options.escapeCharacters ?? false;
  const env = Object.fromEntries(Object.entries(options.env ?? process.env).map(([k, v]) => [utf8Bytes(k), v === undefined ? undefined : utf8Bytes(v)]));
  const functions = glooFunctions(env);
  const dontParse = spec.parseBodyBehavior === 'DontParse' || spec.parseBodyBehavior === 1;
  const extractors = Object.entries(spec.extractors ?? {}).map(([name, e]) => compileExtractor(name, e, `${path}.extractors.${name}`));
  // In dot notation an extractor's value sits in the data at its dotted name: those heads are filled without the body.
  const hostNames = new Set(advanced ? [] : extractors.map((e) => e.name.split('.')[0]!));
  const injaOptions = { pointerNotation: advanced, escapeStrings: escape, functions, hostNames };
  const warnings: TransformWarning[] = [];
  const compile = (text: string, at: string) => {
    const compiled = template(text, at, injaOptions);
    for (const fn of compiled.functions) {
      const why = UNMODELLED_FUNCTIONS[fn];
      if (why) warnings.push({ path: `${at}.text`, message: `${fn}() always renders an empty string in Gatehouse: ${why}` });
    }
    return compiled;
  };

  const headers = Object.entries(spec.headers ?? {}).map(([name, t]) => ({ name: checkHeaderName(name, side, `${path}.headers.${name}`), template: compile(t.text, `${path}.headers.${name}`) }));
  const toAppend = (spec.headersToAppend ?? []).map((h, i) => ({ name: checkHeaderName(h.key, side, `${path}.headersToAppend[${i}].key`), template: compile(h.value.text, `${path}.headersToAppend[${i}].value`) }));
  const toRemove = (spec.headersToRemove ?? []).map((h, i) => checkHeaderName(h, side, `${path}.headersToRemove[${i}]`));
  const metadata = (spec.dynamicMetadataValues ?? []).map((m, i) => ({ ns: m.metadataNamespace || DEFAULT_METADATA_NAMESPACE, key: m.key, json: m.jsonToProto === true, template: compile(m.value.text, `${path}.dynamicMetadataValues[${i}].value`) }));
  const bodyTemplate = spec.body ? compile(spec.body.text, `${path}.body`) : undefined;
  const mergeExtractors = spec.mergeExtractorsToBody !== undefined;
  let mergeKeys: { key: string; overrideEmpty: boolean; template: CompiledTemplate }[] = [];
  if (spec.mergeJsonKeys) {
    if (dontParse) throw new TransformConfigError(TransformCodes.INVALID, `${path}.mergeJsonKeys`, 'mergeJsonKeys needs the body parsed as JSON (parseBodyBehavior: ParseAsJson)');
    if (advanced) throw new TransformConfigError(TransformCodes.INVALID, `${path}.mergeJsonKeys`, 'mergeJsonKeys does not work with advancedTemplates');
    mergeKeys = Object.entries(spec.mergeJsonKeys.jsonKeys ?? {}).map(([key, t]) => {
      if (key.includes('.')) throw new TransformConfigError(TransformCodes.INVALID, `${path}.mergeJsonKeys.jsonKeys.${key}`, `invalid key name for mergeJsonKeys: "${key}" (no dots)`);
      return { key, overrideEmpty: t.overrideEmpty === true, template: compile(t.tmpl?.text ?? '', `${path}.mergeJsonKeys.jsonKeys.${key}.tmpl`) };
    });
  }
  let spanName: CompiledTemplate | undefined;
  if (spec.spanTransformer?.name) {
    if (side === 'response') throw new TransformConfigError(TransformCodes.INVALID, `${path}.spanTransformer`, 'spanTransformer applies to request transformations only');
    spanName = compile(spec.spanTransformer.name.text, `${path}.spanTransformer.name`);
  }

  const templates = [...headers.map((h) => h.template), ...toAppend.map((h) => h.template), ...metadata.map((m) => m.template), ...mergeKeys.map((m) => m.template), ...(bodyTemplate ? [bodyTemplate] : []), ...(spanName ? [spanName] : [])];
  const passthrough = spec.passthrough !== undefined;
  // Buffer only for what reads the body: a template's data or body()/context(), a body extractor, or a new body built from the old one.
  const readsBody = templates.some((t) => t.usesBody) || extractors.some((e) => e.body) || mergeExtractors || mergeKeys.length > 0;
  const needsBody = !passthrough && readsBody;
  // The parsed JSON is needed when a template reads data names or context(), or the body is rebuilt
  // from it; `body()` alone reads the text (Envoy-Gloo parses whenever it buffers: docs/transformations.md).
  const parseJson = !dontParse && (templates.some((t) => t.usesData) || mergeExtractors || mergeKeys.length > 0);
  const ignoreParseError = spec.ignoreErrorOnParse === true;
  const changesBody = bodyTemplate !== undefined || mergeExtractors || mergeKeys.length > 0;

  const run = (w: Working, rawBody: string | Buffer | undefined, requestHeaders: HeaderRecord | undefined, dynamicMetadata: TransformRequest['dynamicMetadata']) => {
    const bodyString = needsBody ? bodyText(rawBody) : '';
    let data: Json = null;
    if (parseJson && bodyString.length > 0) {
      try {
        data = parseJsonBytes(bodyString);
      } catch (error) {
        if (!ignoreParseError) throw new InjaError(TransformCodes.BAD_JSON, `the body is not JSON (${(error as Error).message}); set parseBodyBehavior: DontParse or ignoreErrorOnParse: true to accept it`);
      }
    }
    const extractions = extractors.length === 0 ? NO_EXTRACTIONS : new Map<string, string>();
    for (const e of extractors) {
      const source = e.body ? bodyString : getHeader(w, e.header!);
      if (source.length > limits.maxRegexInputChars) throw new InjaError(InjaCodes.BUDGET, `extractor ${e.name}: its source of ${source.length} characters is over the regex input limit of ${limits.maxRegexInputChars}`);
      // A header that is absent extracts '' (Envoy-Gloo), without running the regex.
      const value = !e.body && source === '' && !headerPresent(w, e.header!) ? '' : e.run(source);
      (extractions as Map<string, string>).set(e.name, value);
      if (!advanced) data = place(data, e.name, value);
    }
    const h = new Host(w, requestHeaders, bodyString, data, extractions, dynamicMetadata);
    // Envoy-Gloo renders against the data when it is an object, and against {} otherwise.
    const renderData: Json = data !== null && typeof data === 'object' && !Array.isArray(data) ? data : {};
    const state = renderState(renderData, h, { steps: limits.maxRenderSteps, maxChars: limits.maxOutputChars });
    let newBody: string | undefined;
    if (bodyTemplate) newBody = bodyTemplate.render(state);
    else if (mergeExtractors) newBody = dumpJson(data ?? {}, state);
    else if (mergeKeys.length > 0) {
      let merged: Json = data ?? {};
      for (const m of mergeKeys) {
        const rendered = m.template.render(state);
        if (rendered.length > 0 || m.overrideEmpty) {
          let value: Json;
          try {
            value = parseJsonBytes(rendered);
          } catch {
            throw new InjaError(InjaCodes.RENDER, `mergeJsonKeys ${m.key}: the rendered value is not JSON`);
          }
          merged = place(merged, m.key, value);
        }
      }
      newBody = dumpJson(merged, state);
    }
    const meta: Record<string, Record<string, Json>> = metadata.length === 0 ? NO_METADATA : {};
    for (const m of metadata) {
      const out = m.template.render(state);
      if (out === '') continue;
      // Metadata is read by JavaScript (the access log): Unicode text, not bytes.
      let value: Json = unicode(out);
      if (m.json) {
        try {
          value = JSON.parse(value) as Json;
        } catch {
          // Not JSON: kept as the string (Envoy-Gloo).
        }
      }
      (meta[m.ns] ??= {})[m.key] = value;
    }
    for (const hdr of headers) {
      const out = hdr.template.render(state);
      removeHeader(w, hdr.name);
      if (out !== '') addHeader(w, hdr.name, out);
    }
    for (const name of toRemove) removeHeader(w, name);
    for (const hdr of toAppend) {
      const out = hdr.template.render(state);
      if (out !== '') addHeader(w, hdr.name, out);
    }
    const rendered = spanName?.render(state);
    const span = rendered === undefined ? undefined : unicode(rendered);
    let body: Buffer | undefined;
    if (newBody !== undefined) {
      body = Buffer.from(wire(newBody), 'latin1');
      if (body.length > limits.maxBodyBytes) throw new InjaError(InjaCodes.BUDGET, `the new body of ${body.length} bytes is over the limit of ${limits.maxBodyBytes}`);
      w.headers['content-length'] = String(body.length);
    }
    return { body, meta, span };
  };

  return {
    logRequestResponseInfo: false,
    warnings,
    needsBody,
    changesBody,
    transformRequest(r) {
      if (needsBody && bodyBytes(r.body) > limits.maxBodyBytes) return tooLarge(limits, bodyBytes(r.body));
      const w: Working = { headers: copyHeaders(r.headers), pseudo: { ':path': r.path, ':method': r.method, ':scheme': r.scheme ?? 'http' } };
      try {
        // request_header() in a request transformation reads the request's headers (as Envoy-Gloo).
        const { body, meta, span } = run(w, r.body, r.headers, r.dynamicMetadata);
        const method = w.pseudo[':method']!;
        const newPath = w.pseudo[':path']!;
        if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(method)) throw new InjaError(InjaCodes.RENDER, `:method: "${method.slice(0, 40)}" is not an HTTP method`);
        if (!newPath.startsWith('/') || BAD_HEADER_VALUE.test(newPath) || newPath.includes(' ')) throw new InjaError(InjaCodes.RENDER, `:path: "${newPath.slice(0, 80)}" is not a request path`);
        return { ok: true, message: { method, path: newPath, headers: w.headers }, body, dynamicMetadata: meta, spanName: span };
      } catch (error) {
        return failure(error);
      }
    },
    transformResponse(r, request) {
      if (needsBody && bodyBytes(r.body) > limits.maxBodyBytes) return tooLarge(limits, bodyBytes(r.body));
      const w: Working = { headers: copyHeaders(r.headers), pseudo: { ':status': String(r.status) } };
      try {
        const { body, meta } = run(w, r.body, request?.headers, r.dynamicMetadata);
        const statusText = w.pseudo[':status']!;
        if (!/^[1-5][0-9][0-9]$/.test(statusText)) throw new InjaError(InjaCodes.RENDER, `:status: "${statusText.slice(0, 40)}" is not an HTTP status (100-599)`);
        return { ok: true, message: { status: Number(statusText), headers: w.headers }, body, dynamicMetadata: meta, spanName: undefined };
      } catch (error) {
        return failure(error);
      }
    },
  };
}

function headerPresent(w: Working, name: string): boolean {
  if (name === ':authority') return w.headers.host !== undefined;
  if (name.startsWith(':')) return w.pseudo[name] !== undefined;
  return Object.hasOwn(w.headers, name) && w.headers[name] !== undefined;
}

// ---------------------------------------------------------------------------------------------
// Stages: which transformation runs for a request and for its response.

/** The request entry chosen for a request in one stage. */
export interface StageSelection {
  readonly request: CompiledTransformation | undefined;
  /** The entry's own response transformation; when absent, {@link CompiledStage.selectResponse} looks at `responseTransforms`. */
  readonly response: CompiledTransformation | undefined;
  readonly clearRouteCache: boolean;
}

/** One stage (`early`, `regular`, `postRouting`). */
export interface CompiledStage {
  /** The first `requestTransforms` entry whose matcher matches (only one runs per stage). */
  selectRequest(request: RequestLine): StageSelection | undefined;
  /** The response transformation: the selected entry's own, or the first matching `responseTransforms` entry. */
  selectResponse(selection: StageSelection | undefined, response: { status: number; headers: HeaderRecord; codeDetails?: string }): CompiledTransformation | undefined;
  /** True when some request transformation of this stage may read the request body. */
  readonly requestMayNeedBody: boolean;
  /** True when some response transformation of this stage may read the response body. */
  readonly responseMayNeedBody: boolean;
  /** True when this stage has a response transformation at all (else responses pass untouched). */
  readonly hasResponse: boolean;
}

/** All stages of a virtual host's or route's transformations. */
export interface CompiledStages {
  readonly early: CompiledStage;
  readonly regular: CompiledStage;
  readonly postRouting: CompiledStage;
  /** `inheritTransformation`: the parent's entries are appended after these. */
  readonly inheritTransformation: boolean;
  /** Warnings of every transformation, with field paths. */
  readonly warnings: readonly TransformWarning[];
}

function headerMatcher(spec: TransformHeaderMatcherSpec, path: string): (status: number, headers: HeaderRecord) => boolean {
  const name = spec.name.toLowerCase();
  let test: (value: string) => boolean = () => true;
  if (spec.value !== undefined) {
    if (spec.regex) {
      const problem = re2Problem(spec.value);
      if (problem) throw new TransformConfigError(TransformCodes.INVALID, `${path}.value`, problem);
      const re = RE2JS.compile(utf8Bytes(spec.value));
      test = (v) => re.testExact(v);
    } else {
      const value = utf8Bytes(spec.value);
      test = (v) => v === value;
    }
  }
  const invert = spec.invertMatch === true;
  return (status, headers) => {
    const raw = name === ':status' ? String(status) : Object.hasOwn(headers, name) ? headers[name] : undefined;
    if (raw === undefined) return invert && spec.value === undefined;
    const value = Array.isArray(raw) ? raw.join(',') : raw;
    return test(value) !== invert;
  };
}

interface StageEntry {
  readonly matches: (request: RequestLine) => boolean;
  readonly selection: StageSelection;
}

interface ResponseEntry {
  readonly matches: (status: number, headers: HeaderRecord, codeDetails: string | undefined) => boolean;
  readonly transformation: CompiledTransformation;
}

function compileStage(spec: RequestResponseTransformationsSpec | undefined, path: string, options: Omit<CompileOptions, 'side' | 'path'>): { entries: StageEntry[]; responses: ResponseEntry[] } {
  const entries: StageEntry[] = (spec?.requestTransforms ?? []).map((entry, i) => {
    const at = `${path}.requestTransforms[${i}]`;
    let matches: (request: RequestLine) => boolean = () => true;
    if (entry.matcher) {
      for (const [j, h] of (entry.matcher.headers ?? []).entries()) {
        if (h.regex && h.value !== undefined) {
          const problem = re2Problem(h.value);
          if (problem) throw new TransformConfigError(TransformCodes.INVALID, `${at}.matcher.headers[${j}].value`, problem);
        }
      }
      if (entry.matcher.regex !== undefined) {
        const problem = re2Problem(entry.matcher.regex);
        if (problem) throw new TransformConfigError(TransformCodes.INVALID, `${at}.matcher.regex`, problem);
      }
      const [compiled] = compileMatchers([entry.matcher as MatcherSpec]);
      matches = (request) => compiled!.matches(request);
    }
    return {
      matches,
      selection: {
        request: entry.requestTransformation ? compileTransformation(entry.requestTransformation, { ...options, side: 'request', path: `${at}.requestTransformation` }) : undefined,
        response: entry.responseTransformation ? compileTransformation(entry.responseTransformation, { ...options, side: 'response', path: `${at}.responseTransformation` }) : undefined,
        clearRouteCache: entry.clearRouteCache === true,
      },
    };
  });
  const responses: ResponseEntry[] = (spec?.responseTransforms ?? []).flatMap((entry, i) => {
    const at = `${path}.responseTransforms[${i}]`;
    if (!entry.responseTransformation) return [];
    const tests = (entry.matchers ?? []).map((m, j) => headerMatcher(m, `${at}.matchers[${j}]`));
    const details = entry.responseCodeDetails;
    return [
      {
        matches: (status: number, headers: HeaderRecord, codeDetails: string | undefined) => tests.every((t) => t(status, headers)) && (details === undefined || details === '' || details === codeDetails),
        transformation: compileTransformation(entry.responseTransformation, { ...options, side: 'response', path: `${at}.responseTransformation` }),
      },
    ];
  });
  return { entries, responses };
}

function stageOf(parts: { entries: StageEntry[]; responses: ResponseEntry[] }): CompiledStage {
  const { entries, responses } = parts;
  return {
    selectRequest(request) {
      for (const e of entries) if (e.matches(request)) return e.selection;
      return undefined;
    },
    selectResponse(selection, response) {
      if (selection?.response) return selection.response;
      for (const r of responses) if (r.matches(response.status, response.headers, response.codeDetails)) return r.transformation;
      return undefined;
    },
    requestMayNeedBody: entries.some((e) => e.selection.request?.needsBody === true),
    responseMayNeedBody: entries.some((e) => e.selection.response?.needsBody === true) || responses.some((r) => r.transformation.needsBody),
    hasResponse: entries.some((e) => e.selection.response !== undefined) || responses.length > 0,
  };
}

/**
 * Compiles `stagedTransformations` and the older `transformations` of one virtual host, route or
 * weighted destination. `transformations` becomes the regular stage's match-all entry, unless
 * `stagedTransformations.regular` is set: Gloo then ignores it (a warning here). Throws {@link TransformConfigError} with the field path.
 */
export function compileStages(input: { stagedTransformations?: TransformationStagesSpec | undefined; transformations?: TransformationsSpec | undefined }, path: string, options: Omit<CompileOptions, 'side' | 'path' | 'escapeCharacters'> = {}): CompiledStages {
  const staged = input.stagedTransformations;
  const shared = { ...options, escapeCharacters: staged?.escapeCharacters, logRequestResponseInfo: staged?.logRequestResponseInfo };
  const early = compileStage(staged?.early, `${path}.stagedTransformations.early`, shared);
  const regular = compileStage(staged?.regular, `${path}.stagedTransformations.regular`, shared);
  const postRouting = compileStage(staged?.postRouting, `${path}.stagedTransformations.postRouting`, shared);
  const legacy = input.transformations;
  const legacyWarnings: TransformWarning[] = [];
  // Gloo translates `transformations` only when `stagedTransformations.regular` is absent.
  if (legacy && staged?.regular) legacyWarnings.push({ path: `${path}.transformations`, message: 'ignored: stagedTransformations.regular is set, and Gloo then ignores transformations' });
  else if (legacy && (legacy.requestTransformation || legacy.responseTransformation)) {
    regular.entries.push({
      matches: () => true,
      selection: {
        request: legacy.requestTransformation ? compileTransformation(legacy.requestTransformation, { ...options, side: 'request', path: `${path}.transformations.requestTransformation` }) : undefined,
        response: legacy.responseTransformation ? compileTransformation(legacy.responseTransformation, { ...options, side: 'response', path: `${path}.transformations.responseTransformation` }) : undefined,
        clearRouteCache: legacy.clearRouteCache === true,
      },
    });
  }
  const warnings = [...legacyWarnings, ...[early, regular, postRouting].flatMap((stage) => [...stage.entries.flatMap((e) => [...(e.selection.request?.warnings ?? []), ...(e.selection.response?.warnings ?? [])]), ...stage.responses.flatMap((r) => r.transformation.warnings)])];
  return { early: stageOf(early), regular: stageOf(regular), postRouting: stageOf(postRouting), inheritTransformation: staged?.inheritTransformation === true, warnings };
}

/**
 * The stages a child (route, weighted destination) runs, given its parent's: a child without
 * transformations inherits the parent's; with its own, the parent's entries are appended after
 * them only when `inheritTransformation` is set (Gloo's inheritance rules).
 */
export function inheritStages(child: CompiledStages | undefined, parent: CompiledStages | undefined): CompiledStages | undefined {
  if (!child) return parent;
  if (!parent || !child.inheritTransformation) return child;
  const chain = (a: CompiledStage, b: CompiledStage): CompiledStage => ({
    selectRequest: (request) => a.selectRequest(request) ?? b.selectRequest(request),
    selectResponse: (selection, response) => a.selectResponse(selection, response) ?? b.selectResponse(selection, response),
    requestMayNeedBody: a.requestMayNeedBody || b.requestMayNeedBody,
    responseMayNeedBody: a.responseMayNeedBody || b.responseMayNeedBody,
    hasResponse: a.hasResponse || b.hasResponse,
  });
  return { early: chain(child.early, parent.early), regular: chain(child.regular, parent.regular), postRouting: chain(child.postRouting, parent.postRouting), inheritTransformation: true, warnings: child.warnings };
}

/** Field-path problems of a transformation configuration (an error, or the warnings when it compiles), for validation. */
export function transformProblems(input: { stagedTransformations?: TransformationStagesSpec | undefined; transformations?: TransformationsSpec | undefined }, path: string): { code: string; path: string; message: string; severity: 'error' | 'warning' }[] {
  try {
    return compileStages(input, path, { env: {} }).warnings.map((w) => ({ code: 'GH_CONFIG_IGNORED', path: w.path, message: w.message, severity: 'warning' as const }));
  } catch (error) {
    if (error instanceof TransformConfigError) return [{ code: error.code, path: error.path, message: error.message.slice(error.path.length + 2), severity: 'error' }];
    throw error;
  }
}
