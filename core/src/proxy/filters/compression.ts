import { constants, createBrotliCompress, createGzip } from 'node:zlib';
import type { FilterRequest, HttpFilter, HttpFilterFactory } from './http-filter.ts';
import { FilterStage } from './http-filter.ts';

/**
 * Response compression, as Gloo configures Envoy's compressor filter with the Gateway's
 * `httpGateway.options.gzip` (gzip.proto): every upstream response of the listener's routes whose
 * client accepts it and whose type, size and headers allow it is compressed as it streams
 * (Node's zlib; never held whole). Gatehouse adds brotli: the client's `Accept-Encoding`
 * q-values pick `br` or `gzip` (docs/compression.md).
 */

/** Gloo's default `contentType` list (gzip.proto). */
export const DEFAULT_CONTENT_TYPES: readonly string[] = ['application/javascript', 'application/json', 'application/xhtml+xml', 'image/svg+xml', 'text/css', 'text/html', 'text/plain', 'text/xml'];

/** The compression a client gets. */
export type Coding = 'gzip' | 'br';

/** `gzip` as compiled once per listener. */
export interface CompressionPlan {
  readonly contentTypes: ReadonlySet<string>;
  readonly minLength: number;
  readonly disableOnEtag: boolean;
  readonly removeAcceptEncoding: boolean;
  readonly gzip: { level: number; memLevel: number; windowBits: number; strategy: number };
  readonly brotliQuality: number;
  readonly brotliWindow: number;
}

const LEVELS: Record<string, number> = { DEFAULT: constants.Z_DEFAULT_COMPRESSION, BEST: constants.Z_BEST_COMPRESSION, SPEED: constants.Z_BEST_SPEED };
const LEVEL_NAMES = ['DEFAULT', 'BEST', 'SPEED'];
const STRATEGIES: Record<string, number> = { DEFAULT: constants.Z_DEFAULT_STRATEGY, FILTERED: constants.Z_FILTERED, HUFFMAN: constants.Z_HUFFMAN_ONLY, RLE: constants.Z_RLE };
const STRATEGY_NAMES = ['DEFAULT', 'FILTERED', 'HUFFMAN', 'RLE'];
/** Brotli quality for each `compressionLevel`: 11 costs too much CPU for a proxy streaming responses. */
const BROTLI_QUALITY: Record<string, number> = { DEFAULT: 4, BEST: 9, SPEED: 1 };

/** Compiles Gloo's `gzip` message (numbers of its enums accepted, as protojson does). */
export function compressionPlan(gzip: Readonly<Record<string, unknown>>): CompressionPlan {
  const levelValue = gzip.compressionLevel;
  const level = typeof levelValue === 'number' ? (LEVEL_NAMES[levelValue] ?? 'DEFAULT') : typeof levelValue === 'string' ? levelValue : 'DEFAULT';
  const strategyValue = gzip.compressionStrategy;
  const strategy = typeof strategyValue === 'number' ? (STRATEGY_NAMES[strategyValue] ?? 'DEFAULT') : typeof strategyValue === 'string' ? strategyValue : 'DEFAULT';
  const types = gzip.contentType as string[] | undefined;
  // Envoy's defaults for the compressor: memory level 5, window 12 bits (4 KB), minimum 30 bytes.
  const windowBits = typeof gzip.windowBits === 'number' ? gzip.windowBits : 12;
  return {
    contentTypes: new Set((types?.length ? types : DEFAULT_CONTENT_TYPES).map((t) => mediaType(t))),
    minLength: typeof gzip.contentLength === 'number' ? gzip.contentLength : 30,
    disableOnEtag: gzip.disableOnEtagHeader === true,
    removeAcceptEncoding: gzip.removeAcceptEncodingHeader === true,
    gzip: { level: LEVELS[level] ?? constants.Z_DEFAULT_COMPRESSION, memLevel: typeof gzip.memoryLevel === 'number' ? gzip.memoryLevel : 5, windowBits, strategy: STRATEGIES[strategy] ?? constants.Z_DEFAULT_STRATEGY },
    brotliQuality: BROTLI_QUALITY[level] ?? 4,
    // Brotli's window is 10–24 bits; gzip's setting, where it is in range, bounds its memory alike.
    brotliWindow: Math.max(10, windowBits),
  };
}

/** The media type of a `content-type` value: lower case, parameters dropped. */
function mediaType(value: string): string {
  const semi = value.indexOf(';');
  return (semi === -1 ? value : value.slice(0, semi)).trim().toLowerCase();
}

/**
 * The coding a client's `Accept-Encoding` prefers among gzip and br (RFC 9110 12.5.3): the
 * highest q-value wins, `*` stands for codings it does not name, q=0 refuses; a tie goes to br
 * (smaller at the same CPU). Undefined: no compression for this client.
 */
export function chooseCoding(acceptEncoding: string | undefined): Coding | undefined {
  if (!acceptEncoding) return undefined;
  let gzip: number | undefined;
  let br: number | undefined;
  let star: number | undefined;
  for (const part of acceptEncoding.split(',')) {
    const semi = part.indexOf(';');
    const name = (semi === -1 ? part : part.slice(0, semi)).trim().toLowerCase();
    let q = 1;
    if (semi !== -1) {
      const m = /(?:^|;)\s*q\s*=\s*([0-9.]+)/i.exec(part.slice(semi));
      if (m) {
        q = Number(m[1]);
        if (!Number.isFinite(q) || q < 0 || q > 1) continue;
      }
    }
    if (name === 'gzip' || name === 'x-gzip') gzip = Math.max(gzip ?? 0, q);
    else if (name === 'br') br = Math.max(br ?? 0, q);
    else if (name === '*') star = Math.max(star ?? 0, q);
  }
  const g = gzip ?? star ?? 0;
  const b = br ?? star ?? 0;
  if (g <= 0 && b <= 0) return undefined;
  return b >= g ? 'br' : 'gzip';
}

/** Index of header `name` (lower case) in a flat list, or -1. */
function find(headers: readonly string[], name: string): number {
  for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() === name) return i;
  return -1;
}

function valueOf(headers: readonly string[], name: string): string | undefined {
  const i = find(headers, name);
  return i === -1 ? undefined : headers[i + 1];
}

function removeAll(headers: string[], name: string): void {
  for (let i = headers.length - 2; i >= 0; i -= 2) if (headers[i]!.toLowerCase() === name) headers.splice(i, 2);
}

/** Whether a response of this kind may be compressed at all (before the client's choice), as Envoy's compressor decides. */
export function compressible(plan: CompressionPlan, method: string, status: number, headers: readonly string[]): boolean {
  if (method === 'HEAD' || status < 200 || status === 204 || status === 206 || status === 304) return false;
  if (find(headers, 'content-range') !== -1) return false;
  const encoding = valueOf(headers, 'content-encoding');
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') return false;
  const cacheControl = valueOf(headers, 'cache-control');
  if (cacheControl !== undefined && /(^|,)\s*no-transform\s*(,|$)/i.test(cacheControl)) return false;
  // Envoy compresses a response without a content-type; with one, its media type must be listed.
  const type = valueOf(headers, 'content-type');
  if (type !== undefined && !plan.contentTypes.has(mediaType(type))) return false;
  const length = valueOf(headers, 'content-length');
  if (length !== undefined && Number(length) < plan.minLength) return false;
  if (plan.disableOnEtag && find(headers, 'etag') !== -1) return false;
  return true;
}

/** Adds `accept-encoding` to the response's `Vary` unless it is there (or `*`). */
function addVary(headers: string[]): void {
  const i = find(headers, 'vary');
  if (i === -1) {
    headers.push('vary', 'accept-encoding');
    return;
  }
  const value = headers[i + 1]!;
  if (/(^|,)\s*(accept-encoding|\*)\s*(,|$)/i.test(value)) return;
  headers[i + 1] = value.trim() === '' ? 'accept-encoding' : `${value}, accept-encoding`;
}

const CODING = 'compression';

/** The compression filter of one route (on a listener whose Gateway sets `gzip`). */
export function compressionHttpFilter(plan: CompressionPlan): HttpFilter {
  return {
    name: 'compression',
    stage: FilterStage.compression,
    onRequest(request: FilterRequest) {
      const accept = request.ctx.headers['accept-encoding'];
      const coding = chooseCoding(Array.isArray(accept) ? accept.join(',') : accept);
      if (coding !== undefined) request.metadata.set(CODING, coding);
      // Envoy: so that the upstream does not compress the response before the filter does.
      if (plan.removeAcceptEncoding) delete request.ctx.headers['accept-encoding'];
      return undefined;
    },
    onResponseHeaders: encodeIfAllowed,
    // Envoy's compressor sees direct responses too (the Gloo gzip guide compresses one).
    onDirectResponse: encodeIfAllowed,
  };

  function encodeIfAllowed(request: FilterRequest, status: number, headers: string[]): void {
    if (!compressible(plan, request.method, status, headers)) return;
    // A cache must key this response on the request's Accept-Encoding whichever coding this client got.
    addVary(headers);
    const coding = request.metadata.get(CODING) as Coding | undefined;
    if (coding === undefined || request.encodeResponseBody === undefined) return;
    const etag = valueOf(headers, 'etag');
    // A strong validator names these exact bytes, which compression changes; a weak one stays (Envoy).
    if (etag !== undefined && !etag.trimStart().startsWith('W/')) removeAll(headers, 'etag');
    const length = valueOf(headers, 'content-length');
    removeAll(headers, 'content-length');
    removeAll(headers, 'content-encoding');
    headers.push('content-encoding', coding);
    if (coding === 'gzip') {
      request.encodeResponseBody({ stream: createGzip(plan.gzip) });
    } else {
      const type = valueOf(headers, 'content-type');
      const params: Record<number, number> = {
        [constants.BROTLI_PARAM_QUALITY]: plan.brotliQuality,
        [constants.BROTLI_PARAM_LGWIN]: plan.brotliWindow,
        [constants.BROTLI_PARAM_MODE]: type !== undefined && !mediaType(type).startsWith('image/') ? constants.BROTLI_MODE_TEXT : constants.BROTLI_MODE_GENERIC,
      };
      if (length !== undefined && Number(length) > 0) params[constants.BROTLI_PARAM_SIZE_HINT] = Number(length);
      request.encodeResponseBody({ stream: createBrotliCompress({ params }) });
    }
  }
}

/** `httpGateway.options.gzip` of the Gateway serving the route: every route of that listener compresses. */
export const compressionFilter: HttpFilterFactory = {
  name: 'compression',
  create(context) {
    const gzip = context.listenerOptions?.gzip as Readonly<Record<string, unknown>> | undefined;
    if (gzip === undefined || gzip === null) return undefined;
    // GraphQL answers and redirects do not pass the response hooks (./README.md); direct responses do (`onDirectResponse`).
    if (context.destinationKind !== 'upstream' && context.destinationKind !== 'weighted' && context.destinationKind !== 'direct') return undefined;
    return compressionHttpFilter(compressionPlan(gzip));
  },
};
