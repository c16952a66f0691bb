import { hostname } from 'node:os';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AccessEntry } from './access-log.ts';
import { bytes, ClockBytes, LineEncoder } from './line-encoder.ts';

/**
 * Envoy's access-log format strings (`%REQ(X)%`, `%RESPONSE_CODE%`, …), as Gloo's
 * `accessLoggingService.accessLog[].fileSink` takes them (`stringFormat`, `jsonFormat`). A format
 * is compiled once, at config load, in two steps ({@link CompiledLine}): when a response ends,
 * each operator reads its value into a flat queue (the request and response are not kept); later,
 * a run of lines is encoded from those values straight into bytes, literal text copied as bytes
 * made at load, numbers and the start time written as digits, as the default JSON line is.
 */

/** One access-log line's inputs: the entry, stamped with when it was written. */
export interface FormatInput {
  readonly entry: AccessEntry;
  /** When the response finished (ms since the epoch). */
  readonly endMs: number;
}

/** A value an operator reads for a line: text, a number, or nothing (printed `-`). */
export type FormatValue = string | number | undefined;

/**
 * A compiled format as the access log runs it: `capture` when the response ends, `encode` when
 * the line is written (in a run of lines, so the encoder stays hot).
 */
export interface CompiledLine {
  /** Values one line reads. */
  readonly width: number;
  /** Whether a value reads when the response ended (the caller passes `Date.now()` then, else 0). */
  readonly needsTime: boolean;
  /** Appends the line's `width` values, read from the entry now, to `values`. */
  capture(entry: AccessEntry, endMs: number, values: FormatValue[]): void;
  /** Writes the line whose values start at `values[at]`. */
  encode(values: readonly FormatValue[], at: number, out: LineEncoder): void;
}

/**
 * A compiled format: a line of text (string formats end with what the format ends with), and
 * the same format as the access log runs it (`compiled`).
 */
export type LineFormatter = ((input: FormatInput) => string) & { readonly compiled: CompiledLine };

/** Why a format string cannot be compiled: the operator, and its offset in the string. */
export class FormatError extends Error {
  readonly offset: number;
  constructor(message: string, offset: number) {
    super(message);
    this.offset = offset;
    this.name = 'FormatError';
  }
}

/** What a compiled format found that is Envoy's but not served by Gatehouse (rendered `-`). */
export interface FormatNotes {
  /** Envoy operators that always print `-` here (named in a Warning). */
  readonly unsupported: string[];
}

/** Envoy's default format when a file sink gives none (docs: "Default format string"). */
export const ENVOY_DEFAULT_FORMAT =
  '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"\n';

/** An operator's reader: its value for a line, read when the response ends (`endMs`). */
type Read = (entry: AccessEntry, endMs: number) => FormatValue;

/** How an operator's value is written: as text (`-` when missing), or a start time (ms) in ISO 8601 or a strftime pattern. */
const TEXT = 0;
const ISO_TIME = 1;
const STRFTIME = 2;

/** A compiled operator. `constant`: its value is known at load (folded into the literal text of a string format). */
interface Operator {
  readonly read: Read;
  readonly kind: typeof TEXT | typeof ISO_TIME | typeof STRFTIME;
  /** STRFTIME: the pattern's compiled writer. */
  readonly strftime?: ((ms: number) => string) | undefined;
  readonly constant?: boolean;
}

const textOperator = (read: Read): Operator => ({ read, kind: TEXT });
const constantOperator = (value: FormatValue): Operator => ({ read: () => value, kind: TEXT, constant: true });

/** The operator's value as the text a line shows (the start time formatted). */
function textReader(op: Operator): Read {
  if (op.kind === TEXT) return op.read;
  const read = op.read;
  if (op.kind === STRFTIME) {
    const strftime = op.strftime!;
    return (entry, endMs) => strftime(read(entry, endMs) as number);
  }
  // ISO 8601 with the part up to the second made once per second.
  let second = -1;
  let prefix = '';
  return (entry, endMs) => {
    const ms = read(entry, endMs) as number;
    const s = Math.floor(ms / 1000);
    if (s !== second) {
      second = s;
      prefix = new Date(s * 1000).toISOString().slice(0, 20);
    }
    return `${prefix}${String(ms - s * 1000).padStart(3, '0')}Z`;
  };
}

/**
 * Envoy command operators that Gatehouse has no value for: accepted (a Gloo config loads
 * unchanged) and printed as `-`, with a Warning naming them.
 */
const ENVOY_ONLY = new Set([
  'REQUEST_HEADERS_BYTES', 'RESPONSE_HEADERS_BYTES', 'RESPONSE_TRAILERS_BYTES', 'UPSTREAM_PROTOCOL', 'RESPONSE_CODE_DETAILS', 'CONNECTION_TERMINATION_DETAILS',
  'UPSTREAM_WIRE_BYTES_SENT', 'UPSTREAM_WIRE_BYTES_RECEIVED', 'UPSTREAM_HEADER_BYTES_SENT', 'UPSTREAM_HEADER_BYTES_RECEIVED', 'DOWNSTREAM_WIRE_BYTES_SENT',
  'DOWNSTREAM_WIRE_BYTES_RECEIVED', 'DOWNSTREAM_HEADER_BYTES_SENT', 'DOWNSTREAM_HEADER_BYTES_RECEIVED', 'REQUEST_DURATION', 'REQUEST_TX_DURATION',
  'RESPONSE_DURATION', 'RESPONSE_TX_DURATION', 'DOWNSTREAM_HANDSHAKE_DURATION', 'ROUNDTRIP_DURATION', 'RESPONSE_FLAGS_LONG', 'UPSTREAM_CLUSTER_RAW',
  'UPSTREAM_LOCAL_ADDRESS', 'UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT', 'UPSTREAM_LOCAL_PORT', 'UPSTREAM_REMOTE_ADDRESS', 'UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT',
  'UPSTREAM_REMOTE_PORT', 'UPSTREAM_REQUEST_ATTEMPT_COUNT', 'UPSTREAM_TRANSPORT_FAILURE_REASON', 'UPSTREAM_CONNECTION_ID', 'DOWNSTREAM_DIRECT_REMOTE_ADDRESS',
  'DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT', 'DOWNSTREAM_DIRECT_REMOTE_PORT', 'DOWNSTREAM_TRANSPORT_FAILURE_REASON', 'CONNECTION_ID', 'GRPC_STATUS',
  'GRPC_STATUS_NUMBER', 'TRAILER', 'DYNAMIC_METADATA', 'CLUSTER_METADATA', 'UPSTREAM_METADATA', 'FILTER_STATE', 'UPSTREAM_FILTER_STATE', 'VIRTUAL_CLUSTER_NAME',
  'LOCAL_REPLY_BODY', 'FILTER_CHAIN_NAME', 'STREAM_ID', 'UNIQUE_ID', 'TRACE_ID', 'CUSTOM_FLAGS', 'DOWNSTREAM_PEER_URI_SAN', 'DOWNSTREAM_PEER_DNS_SAN',
  'DOWNSTREAM_PEER_IP_SAN', 'DOWNSTREAM_LOCAL_URI_SAN', 'DOWNSTREAM_LOCAL_DNS_SAN', 'DOWNSTREAM_LOCAL_IP_SAN', 'DOWNSTREAM_PEER_SUBJECT', 'DOWNSTREAM_PEER_ISSUER',
  'DOWNSTREAM_LOCAL_SUBJECT', 'DOWNSTREAM_TLS_SESSION_ID', 'DOWNSTREAM_TLS_CIPHER', 'DOWNSTREAM_TLS_VERSION', 'DOWNSTREAM_PEER_FINGERPRINT_256',
  'DOWNSTREAM_PEER_FINGERPRINT_1', 'DOWNSTREAM_PEER_SERIAL', 'DOWNSTREAM_PEER_CERT', 'DOWNSTREAM_PEER_CERT_V_START', 'DOWNSTREAM_PEER_CERT_V_END',
  'UPSTREAM_PEER_SUBJECT', 'UPSTREAM_PEER_ISSUER', 'UPSTREAM_TLS_SESSION_ID', 'UPSTREAM_TLS_CIPHER', 'UPSTREAM_TLS_VERSION', 'UPSTREAM_PEER_CERT',
  'UPSTREAM_PEER_URI_SAN', 'UPSTREAM_PEER_DNS_SAN', 'UPSTREAM_PEER_IP_SAN', 'UPSTREAM_LOCAL_URI_SAN', 'UPSTREAM_LOCAL_DNS_SAN', 'UPSTREAM_LOCAL_IP_SAN',
  'ACCESS_LOG_TYPE', 'COMMON_DURATION', 'DOWNSTREAM_TRANSPORT_FAILURE_REASON', 'REQ_WITHOUT_QUERY_RAW', 'QUERY_PARAM', 'PATH',
]);

/** Operators that take `(ARG)` (and an optional `:MAX_LENGTH`). */
const WITH_ARGUMENT = new Set(['REQ', 'RESP', 'REQ_WITHOUT_QUERY', 'START_TIME', 'ENVIRONMENT', 'TRAILER', 'DYNAMIC_METADATA', 'CLUSTER_METADATA', 'UPSTREAM_METADATA', 'FILTER_STATE', 'UPSTREAM_FILTER_STATE', 'QUERY_PARAM', 'PATH', 'GRPC_STATUS', 'DOWNSTREAM_PEER_CERT_V_START', 'DOWNSTREAM_PEER_CERT_V_END', 'COMMON_DURATION']);

/** Compiles an Envoy `string_format`; throws {@link FormatError} on what Envoy would refuse too. */
export function compileStringFormat(format: string, notes: FormatNotes = { unsupported: [] }): LineFormatter {
  // Literal text between operators (constants folded in), as bytes made once: literals[i] precedes operator i.
  const literals: Buffer[] = [];
  const operators: Operator[] = [];
  let literal = '';
  for (const part of parseFormat(format, notes)) {
    if (typeof part === 'string') literal += part;
    else if (part.constant) literal += text(part.read(undefined as never, 0));
    else {
      literals.push(bytes(literal));
      literal = '';
      operators.push(part);
    }
  }
  literals.push(bytes(literal));
  const width = operators.length;
  const reads = operators.map((op) => op.read);
  const kinds = operators.map((op) => op.kind);
  const strftimes = operators.map((op) => op.strftime);
  const clock = new ClockBytes();
  const compiled: CompiledLine = {
    width,
    needsTime: operators.some((op) => op.kind !== TEXT),
    capture(entry, endMs, values) {
      for (let i = 0; i < width; i++) values.push(reads[i]!(entry, endMs));
    },
    encode(values, at, out) {
      out.copy(literals[0]!);
      for (let i = 0; i < width; i++) {
        const value = values[at + i];
        const kind = kinds[i];
        if (kind === TEXT) {
          if (typeof value === 'number') number(out, value);
          else if (value === undefined || value === '') out.copy(DASH);
          else out.text(value);
        } else if (kind === ISO_TIME) clock.encode(out, value as number);
        else out.text(strftimes[i]!(value as number));
        out.copy(literals[i + 1]!);
      }
    },
  };
  return lineFormatter(compiled);
}

const DASH = bytes('-');

/** A number as `String(n)` writes it (non-negative integers as digits, without a string). */
function number(out: LineEncoder, n: number): void {
  if (Number.isSafeInteger(n) && n >= 0) out.integer(n);
  else out.ascii(String(n));
}

/** A formatter that writes one line as a string (tests, `gatehouse` checks): capture and encode at once. */
function lineFormatter(compiled: CompiledLine): LineFormatter {
  const out = new LineEncoder();
  const values: FormatValue[] = [];
  const formatter = (input: FormatInput) => {
    values.length = 0;
    compiled.capture(input.entry, input.endMs, values);
    compiled.encode(values, 0, out.reset());
    return out.line().toString('utf8');
  };
  return Object.assign(formatter, { compiled });
}

/**
 * Compiles a `json_format` (a protobuf Struct): every string value is a format string of its
 * own; a value that is exactly one operator keeps its type (numbers stay numbers, as Envoy does);
 * nested objects nest. One JSON object per line, made when the response ends (its one value).
 */
export function compileJsonFormat(format: Record<string, unknown>, notes: FormatNotes = { unsupported: [] }, path: (string | number)[] = []): LineFormatter {
  const build = compileJsonValue(format, notes, path) as Read;
  return lineFormatter({
    width: 1,
    needsTime: true,
    capture(entry, endMs, values) {
      values.push(`${JSON.stringify(build(entry, endMs))}\n`);
    },
    encode(values, at, out) {
      out.text(values[at] as string);
    },
  });
}

function compileJsonValue(value: unknown, notes: FormatNotes, path: (string | number)[]): unknown {
  if (typeof value === 'string') {
    let parts: (string | Operator)[];
    try {
      parts = parseFormat(value, notes);
    } catch (error) {
      if (error instanceof FormatError) throw Object.assign(error, { path });
      throw error;
    }
    if (parts.length === 1 && typeof parts[0] !== 'string') {
      const only = textReader(parts[0]!);
      // A lone operator keeps its value's type; a missing value is null (Envoy).
      return (entry: AccessEntry, endMs: number) => only(entry, endMs) ?? null;
    }
    const readers = parts.map((part) => (typeof part === 'string' ? part : textReader(part)));
    return (entry: AccessEntry, endMs: number) => {
      let out = '';
      for (const part of readers) out += typeof part === 'string' ? part : text(part(entry, endMs));
      return out;
    };
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const fields = Object.entries(value).map(([key, v]) => [key, compileJsonValue(v, notes, [...path, key])] as const);
    return (entry: AccessEntry, endMs: number) => {
      const out: Record<string, unknown> = {};
      for (const [key, v] of fields) out[key] = typeof v === 'function' ? (v as (e: AccessEntry, t: number) => unknown)(entry, endMs) : v;
      return out;
    };
  }
  // Numbers, booleans, null and lists are written as given.
  return value;
}

const text = (value: string | number | undefined): string => (value === undefined || value === '' ? '-' : String(value));

/**
 * `%NAME%`, `%NAME(ARG)%`, `%NAME(ARG):MAX%` at one position (sticky). Names and arguments are
 * bounded, so a format of any length is parsed in linear time; an argument may hold `)` when
 * what follows it is not `%` or `:digits` (`%START_TIME(%H:%M)%`).
 */
const OPERATOR = /%([A-Z][A-Z0-9_]{0,63})(?:\(((?:[^)]|\)(?!%|:\d)){0,512})\))?(?::(\d{1,9}))?%/y;

/** Splits a format string into literal text and operators. */
function parseFormat(format: string, notes: FormatNotes): (string | Operator)[] {
  const parts: (string | Operator)[] = [];
  let literal = '';
  let i = 0;
  while (i < format.length) {
    const c = format[i]!;
    if (c !== '%') {
      literal += c;
      i++;
      continue;
    }
    // `%%` is a literal percent sign.
    if (format[i + 1] === '%') {
      literal += '%';
      i += 2;
      continue;
    }
    OPERATOR.lastIndex = i;
    const match = OPERATOR.exec(format);
    if (!match) throw new FormatError(`"%" at offset ${i} does not start a command operator (%NAME%, %NAME(ARG)%, or %% for a percent sign)`, i);
    const [whole, name, argument, maxLength] = match as unknown as [string, string, string | undefined, string | undefined];
    if (literal) parts.push(literal);
    literal = '';
    let part = operator(name!, argument, i, notes);
    if (maxLength !== undefined) {
      const max = Number(maxLength);
      const inner = textReader(part);
      const truncated: Read = (entry, endMs) => {
        const v = inner(entry, endMs);
        return typeof v === 'string' && v.length > max ? v.slice(0, max) : v;
      };
      part = part.constant ? constantOperator(truncated(undefined as never, 0)) : textOperator(truncated);
    }
    parts.push(part);
    i += whole.length;
  }
  if (literal) parts.push(literal);
  return parts;
}

function operator(name: string, argument: string | undefined, offset: number, notes: FormatNotes): Operator {
  const needsArgument = (what: string) => {
    if (argument === undefined || argument === '') throw new FormatError(`%${name}% needs ${what} in parentheses, e.g. %${name}(${name === 'START_TIME' ? '%s' : 'X'})%`, offset);
    return argument;
  };
  if (argument !== undefined && !WITH_ARGUMENT.has(name) && !ENVOY_ONLY.has(name)) {
    if (!KNOWN.has(name)) throw new FormatError(`unknown command operator %${name}(…)%`, offset);
    throw new FormatError(`%${name}% takes no argument`, offset);
  }
  switch (name) {
    case 'REQ':
      return textOperator(requestHeader(needsArgument('a header name')));
    case 'REQ_WITHOUT_QUERY': {
      const header = requestHeader(needsArgument('a header name'));
      return textOperator((entry, endMs) => {
        const v = header(entry, endMs);
        if (typeof v !== 'string') return v;
        const q = v.indexOf('?');
        return q === -1 ? v : v.slice(0, q);
      });
    }
    case 'RESP':
      return textOperator(responseHeader(needsArgument('a header name')));
    case 'RESPONSE_CODE':
      return textOperator((entry) => entry.status);
    case 'RESPONSE_FLAGS':
      // Envoy's flags for failures (UF, UT, NR, …): Gatehouse says why in x-gatehouse-error instead.
      return constantOperator(undefined);
    case 'DURATION':
      return textOperator((entry) => Math.round(entry.durationMs));
    case 'START_TIME': {
      // The request's start (ms), formatted when the line is encoded.
      const start: Read = (entry, endMs) => Math.floor(endMs - entry.durationMs);
      if (argument === undefined || argument === '') return { read: start, kind: ISO_TIME };
      return { read: start, kind: STRFTIME, strftime: compileStrftime(argument, offset) };
    }
    case 'PROTOCOL':
      return textOperator((entry) => entry.protocol);
    case 'BYTES_RECEIVED':
      return textOperator((entry) => entry.bytesReceived ?? requestBodyBytes(entry.req));
    case 'BYTES_SENT':
      return textOperator((entry) => entry.bytesSent ?? responseBodyBytes(entry.res));
    case 'UPSTREAM_HOST': {
      // Origins repeat: the last one's host is kept.
      let origin: string | undefined;
      let host: string | undefined;
      return textOperator((entry) => {
        if (entry.upstream !== origin) host = hostOf((origin = entry.upstream));
        return host;
      });
    }
    case 'UPSTREAM_CLUSTER':
      // The Upstream's cluster (`namespace/name`); the origin for destinations that have none.
      return textOperator((entry) => entry.cluster ?? entry.upstream);
    case 'ROUTE_NAME':
      return textOperator((entry) => entry.route);
    case 'VIRTUAL_HOST_NAME':
      return textOperator((entry) => entry.virtualHost);
    case 'DOWNSTREAM_REMOTE_ADDRESS':
      return textOperator((entry) => address(entry.req?.socket.remoteAddress, entry.req?.socket.remotePort));
    case 'DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT':
      return textOperator((entry) => entry.req?.socket.remoteAddress);
    case 'DOWNSTREAM_REMOTE_PORT':
      return textOperator((entry) => entry.req?.socket.remotePort);
    case 'DOWNSTREAM_LOCAL_ADDRESS':
      return textOperator((entry) => address(entry.req?.socket.localAddress, entry.req?.socket.localPort));
    case 'DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT':
      return textOperator((entry) => entry.req?.socket.localAddress);
    case 'DOWNSTREAM_LOCAL_PORT':
      return textOperator((entry) => entry.req?.socket.localPort);
    case 'REQUESTED_SERVER_NAME':
      return textOperator((entry) => (entry.req?.socket as { servername?: string | false } | undefined)?.servername || undefined);
    case 'HOSTNAME':
      return constantOperator(hostname());
    case 'ENVIRONMENT':
      return constantOperator(process.env[needsArgument('an environment variable name')]);
    default:
      if (ENVOY_ONLY.has(name)) {
        if (!notes.unsupported.includes(name)) notes.unsupported.push(name);
        return constantOperator(undefined);
      }
      throw new FormatError(`unknown command operator %${name}%`, offset);
  }
}

/** Operators compiled above (the `default` branch covers {@link ENVOY_ONLY}). */
const KNOWN = new Set(['REQ', 'REQ_WITHOUT_QUERY', 'RESP', 'RESPONSE_CODE', 'RESPONSE_FLAGS', 'DURATION', 'START_TIME', 'PROTOCOL', 'BYTES_RECEIVED', 'BYTES_SENT', 'UPSTREAM_HOST', 'UPSTREAM_CLUSTER', 'ROUTE_NAME', 'VIRTUAL_HOST_NAME', 'DOWNSTREAM_REMOTE_ADDRESS', 'DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT', 'DOWNSTREAM_REMOTE_PORT', 'DOWNSTREAM_LOCAL_ADDRESS', 'DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT', 'DOWNSTREAM_LOCAL_PORT', 'REQUESTED_SERVER_NAME', 'HOSTNAME', 'ENVIRONMENT']);

/**
 * A request header as Envoy sees it when it logs (lowercase `name`): `:method`, `:authority`,
 * `:scheme`; `:path` as sent upstream (after a route's rewrites); `x-envoy-original-path` the
 * client's path when a rewrite changed it (Envoy sets that header then).
 */
export function requestHeaderReader(name: string): (entry: AccessEntry) => string | undefined {
  if (name === ':method') return (entry) => entry.req?.method ?? entry.method;
  if (name === ':path') return (entry) => entry.upstreamPath ?? entry.req?.url ?? entry.path;
  if (name === 'x-envoy-original-path') {
    return (entry) => headerText(entry.req?.headers[name]) ?? (entry.upstreamPath !== undefined && entry.upstreamPath !== entry.req?.url ? entry.req?.url : undefined);
  }
  if (name === ':authority') return (entry) => (entry.req ? headerText(entry.req.headers[':authority'] ?? entry.req.headers.host) : undefined);
  if (name === ':scheme') return (entry) => (entry.req ? ((entry.req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http') : undefined);
  return (entry) => headerText(entry.req?.headers[name]);
}

/** `%REQ(X?Y)%`: header X, else Y, as {@link requestHeaderReader} reads them. */
function requestHeader(argument: string): Read {
  const [first, fallback] = argument.split('?').map((h) => h.trim().toLowerCase()) as [string, string | undefined];
  const a = requestHeaderReader(first);
  const b = fallback ? requestHeaderReader(fallback) : undefined;
  return b ? (entry) => a(entry) ?? b(entry) : a;
}

function responseHeader(argument: string): Read {
  const [first, fallback] = argument.split('?').map((h) => h.trim().toLowerCase()) as [string, string | undefined];
  return (entry) => responseHeaderValue(entry.res, first) ?? (fallback ? responseHeaderValue(entry.res, fallback) : undefined);
}

const headerText = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value.join(',') : value);

/**
 * A header of the response as sent. The proxy writes upstream headers as a raw list (HTTP/1.1:
 * `writeHead(status, list)`; HTTP/2: `stream.respond`), which `getHeader` does not see, so the
 * header block that was sent is read: `_header` (HTTP/1.1) or the stream's `sentHeaders`.
 */
function responseHeaderValue(res: ServerResponse | undefined, name: string): string | undefined {
  if (!res) return undefined;
  const set = res.getHeader(name);
  if (set !== undefined) return Array.isArray(set) ? set.join(',') : String(set);
  const stream = (res as { stream?: { sentHeaders?: Record<string, string | string[]> } }).stream;
  if (stream?.sentHeaders) return headerText(stream.sentHeaders[name]);
  const block = (res as { _header?: string | null })._header;
  return block ? headerInBlock(block, name) : undefined;
}

/**
 * The values of header `name` (lower case) in an HTTP/1.1 header block, joined with `,`: the
 * block is scanned in place, names compared ignoring case, only the values found are sliced.
 */
function headerInBlock(block: string, name: string): string | undefined {
  let found: string | undefined;
  const length = name.length;
  // Past the status line; the block ends with an empty line.
  let start = block.indexOf('\r\n') + 2;
  while (start > 1) {
    const end = block.indexOf('\r\n', start);
    if (end <= start) break;
    if (block.charCodeAt(start + length) === COLON && sameName(block, start, name)) {
      const value = block.slice(start + length + 1, end).trim();
      found = found === undefined ? value : `${found},${value}`;
    }
    start = end + 2;
  }
  return found;
}

const COLON = 0x3a;

/** Whether `block` at `at` holds `name` (lower case), ignoring the case of ASCII letters. */
function sameName(block: string, at: number, name: string): boolean {
  for (let i = 0; i < name.length; i++) {
    const c = block.charCodeAt(at + i);
    if ((c >= 0x41 && c <= 0x5a ? c | 0x20 : c) !== name.charCodeAt(i)) return false;
  }
  return true;
}

/**
 * A response's body bytes from its `content-length`: the length Node took from the headers it
 * wrote (`_contentLength`, set from the header or the body given to `end`), else the header as sent.
 */
function responseBodyBytes(res: ServerResponse | undefined): number | undefined {
  if (!res) return undefined;
  if (res.getHeader('content-length') === undefined) {
    const known = (res as { _contentLength?: unknown })._contentLength;
    if (typeof known === 'number') return known;
  }
  return contentLength(responseHeaderValue(res, 'content-length'));
}

/**
 * A request's body bytes from its headers: `content-length`, else 0 for an HTTP/1.x request
 * without `transfer-encoding` (it has no body, and Envoy prints 0); unknown for a chunked body.
 */
function requestBodyBytes(req: IncomingMessage | undefined): number | undefined {
  if (!req) return undefined;
  const length = contentLength(req.headers['content-length']);
  if (length !== undefined) return length;
  return req.httpVersionMajor === 1 && req.headers['transfer-encoding'] === undefined ? 0 : undefined;
}

function contentLength(value: string | string[] | undefined): number | undefined {
  const n = Number(Array.isArray(value) ? value[0] : value);
  return value !== undefined && Number.isFinite(n) ? n : undefined;
}

/** `http://10.0.0.1:8080` → `10.0.0.1:8080` (Envoy prints the upstream host's address). */
function hostOf(origin: string | undefined): string | undefined {
  if (origin === undefined) return undefined;
  const scheme = origin.indexOf('://');
  return scheme === -1 ? origin : origin.slice(scheme + 3);
}

const address = (ip: string | undefined, port: number | undefined): string | undefined => (ip === undefined ? undefined : ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`);

/**
 * `%START_TIME(...)%`'s strftime subset: `%Y %m %d %H %M %S %z %s %e %b %a %j`, `%f` / `%3f`,
 * `%6f`, `%9f` (fractions of a second), `%%`. Times are UTC (Envoy's too). Others are refused.
 */
function compileStrftime(pattern: string, offset: number): (ms: number) => string {
  const pieces: ((d: Date, ms: number) => string)[] = [];
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c !== '%') {
      pieces.push(() => c);
      continue;
    }
    let spec = pattern[++i];
    let digits = 3;
    if (spec !== undefined && /[1-9]/.test(spec) && pattern[i + 1] === 'f') {
      digits = Number(spec);
      spec = pattern[++i];
    }
    switch (spec) {
      case 'Y': pieces.push((d) => String(d.getUTCFullYear())); break;
      case 'm': pieces.push((d) => pad(d.getUTCMonth() + 1)); break;
      case 'd': pieces.push((d) => pad(d.getUTCDate())); break;
      case 'e': pieces.push((d) => String(d.getUTCDate()).padStart(2, ' ')); break;
      case 'H': pieces.push((d) => pad(d.getUTCHours())); break;
      case 'M': pieces.push((d) => pad(d.getUTCMinutes())); break;
      case 'S': pieces.push((d) => pad(d.getUTCSeconds())); break;
      case 'z': pieces.push(() => '+0000'); break;
      case 'Z': pieces.push(() => 'UTC'); break;
      case 's': pieces.push((_d, ms) => String(Math.floor(ms / 1000))); break;
      case 'b': pieces.push((d) => MONTHS[d.getUTCMonth()]!); break;
      case 'a': pieces.push((d) => DAYS[d.getUTCDay()]!); break;
      case 'j': pieces.push((d) => pad(Math.floor((d.getTime() - Date.UTC(d.getUTCFullYear(), 0, 1)) / 86_400_000) + 1, 3)); break;
      case 'f': {
        const n = digits;
        pieces.push((_d, ms) => {
          const fraction = String(Math.floor((ms % 1000) * 1000)).padStart(6, '0') + '000';
          return fraction.slice(0, n);
        });
        break;
      }
      case '%': pieces.push(() => '%'); break;
      default:
        throw new FormatError(`%START_TIME(…)% does not support the time field "%${spec ?? ''}"`, offset);
    }
  }
  return (ms) => {
    const d = new Date(Math.floor(ms));
    let out = '';
    for (const piece of pieces) out += piece(d, ms);
    return out;
  };
}
