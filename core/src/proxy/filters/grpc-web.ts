import { PassThrough, Readable, Transform, type TransformCallback } from 'node:stream';
import { encodeGrpcMessage, GRPC_WEB_REPLY_TYPE, grpcStatusOf } from '../request/grpc.ts';
import type { FilterRequest, HttpFilter, HttpFilterFactory } from './http-filter.ts';
import { FilterStage } from './http-filter.ts';

/**
 * gRPC-Web (grpc/doc/PROTOCOL-WEB.md), as Envoy's grpc_web filter bridges it and Gloo turns it on
 * for every HTTP Gateway unless `httpGateway.options.grpcWeb.disable`: a request with
 * `application/grpc-web[+proto|+json]` or `application/grpc-web-text[+proto]` (base64) goes
 * upstream as gRPC over HTTP/2 (`te: trailers`, the body decoded as it streams), and the answer
 * comes back as gRPC-Web: its trailers become the body's last frame (flag 0x80), base64 again for
 * the text variant. Only routes whose upstreams speak HTTP/2 get the filter (gRPC needs it), so
 * other routes keep running without a chain.
 */

/** Stable code of a request whose base64 body does not decode. */
export const GRPC_WEB_BAD_BODY = 'GH_GRPC_WEB_BAD_REQUEST';

interface CallState {
  /** The answer is base64 (`application/grpc-web-text`). */
  readonly text: boolean;
  /** `+proto`, `+json`, or '' after `grpc-web`. */
  readonly suffix: string;
}

const STATE = 'grpc-web';

/** The parts of a gRPC-Web content type, or undefined for anything else. */
export function parseGrpcWebType(contentType: string): { text: boolean; suffix: string } | undefined {
  const semi = contentType.indexOf(';');
  const type = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  if (type === 'application/grpc-web-text' || type === 'application/grpc-web-text+proto') return { text: true, suffix: type.slice('application/grpc-web-text'.length) };
  if (type === 'application/grpc-web') return { text: false, suffix: '' };
  if (type.startsWith('application/grpc-web+') && type.length > 'application/grpc-web+'.length) return { text: false, suffix: type.slice('application/grpc-web'.length) };
  return undefined;
}

/** A complete base64 run: 4-character groups, padding only at the end of a group. */
const BASE64_GROUPS = /^(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)*$/;

/**
 * Decodes a base64 request body as it streams. gRPC-Web clients may send each message padded on
 * its own, so padding may end any group, not only the last; whitespace and any other character
 * are refused, as is a body that ends mid-group (the stream errors, and the upstream request is
 * cancelled with it).
 */
export class Base64Decoder extends Transform {
  private carry = '';

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    const text = this.carry + chunk.toString('latin1');
    const whole = text.length - (text.length % 4);
    this.carry = text.slice(whole);
    if (whole === 0) return done();
    const run = text.slice(0, whole);
    if (!BASE64_GROUPS.test(run)) return done(new Error('gRPC-Web text body is not base64'));
    // Decoded run by run between paddings: Node's decoder would stop at the first '='.
    let from = 0;
    for (let i = 3; i < run.length; i += 4) {
      if (run.charCodeAt(i) === 0x3d && i + 1 < run.length) {
        this.push(Buffer.from(run.slice(from, i + 1), 'base64'));
        from = i + 1;
      }
    }
    this.push(Buffer.from(run.slice(from), 'base64'));
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.carry.length !== 0) return done(new Error('gRPC-Web text body ends inside a base64 group'));
    done();
  }
}

/**
 * A gRPC-Web text request's body, decoded: it starts reading the request only when the
 * destination reads it, so a later filter that buffers the body (`bufferPerRoute`) reads the
 * client's bytes first (and puts them back) instead of racing the decoder for them.
 */
export class DecodedBody extends Readable {
  private readonly source: Readable;
  private decoder: Base64Decoder | undefined;

  constructor(source: Readable) {
    super();
    this.source = source;
  }

  override _read(): void {
    if (this.decoder) {
      this.decoder.resume();
      return;
    }
    const decoder = (this.decoder = new Base64Decoder());
    decoder.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) decoder.pause();
    });
    decoder.once('end', () => this.push(null));
    decoder.once('error', (error) => this.destroy(error));
    this.source.once('error', (error) => decoder.destroy(error));
    this.source.pipe(decoder);
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    if (this.decoder) {
      this.source.unpipe(this.decoder);
      this.decoder.destroy();
    }
    done(error);
  }
}

/** Encodes a response body as one base64 stream (3-byte groups; the rest padded at the end). */
export class Base64Encoder extends Transform {
  private carry: Buffer = Buffer.alloc(0);

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    const bytes = this.carry.length === 0 ? chunk : Buffer.concat([this.carry, chunk]);
    const whole = bytes.length - (bytes.length % 3);
    this.carry = bytes.subarray(whole);
    if (whole > 0) this.push(bytes.subarray(0, whole).toString('base64'), 'latin1');
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.carry.length > 0) this.push(this.carry.toString('base64'), 'latin1');
    done();
  }
}

/** The gRPC-Web trailer frame for `trailers` (flag 0x80, length, `name: value\r\n` lines; names lower case). */
export function trailerFrame(trailers: Record<string, string | string[]> | undefined): Buffer {
  let block = '';
  if (trailers) {
    for (const name in trailers) {
      const value = trailers[name]!;
      for (const v of Array.isArray(value) ? value : [value]) block += `${name.toLowerCase()}: ${v}\r\n`;
    }
  }
  const body = Buffer.from(block, 'latin1');
  const frame = Buffer.allocUnsafe(5 + body.length);
  frame[0] = 0x80;
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, 5);
  return frame;
}

function find(headers: readonly string[], name: string): number {
  for (let i = 0; i < headers.length; i += 2) if (headers[i]!.toLowerCase() === name) return i;
  return -1;
}

/** The gRPC-Web filter of one route. */
export function grpcWebHttpFilter(): HttpFilter {
  return {
    name: 'grpc-web',
    stage: FilterStage.grpcWeb,
    onRequest(request: FilterRequest) {
      const headers = request.ctx.headers;
      const type = headers['content-type'];
      // Cheap test first: every other request passes untouched.
      if (typeof type !== 'string' || !type.startsWith('application/grpc-web') || request.method !== 'POST') return undefined;
      const parsed = parseGrpcWebType(type);
      if (!parsed) return undefined;
      const accept = headers.accept;
      const text = parsed.text || (typeof accept === 'string' && accept.toLowerCase().includes('application/grpc-web-text'));
      request.metadata.set(STATE, { text, suffix: parsed.suffix } satisfies CallState);
      // The gateway's own answers to this call (503, 413, denials) are gRPC-Web too (../local-reply.ts).
      (request.req as unknown as Record<symbol, string>)[GRPC_WEB_REPLY_TYPE] = text ? 'application/grpc-web-text+proto' : `application/grpc-web${parsed.suffix}`;
      headers['content-type'] = `application/grpc${parsed.suffix}`;
      headers.te = 'trailers';
      if (parsed.text && request.encodeResponseBody !== undefined) {
        // The decoded body's length is not known ahead: the upstream gets it in HTTP/2 frames
        // (`transfer-encoding` only tells the gateway there is a body; hop-by-hop, never sent).
        delete headers['content-length'];
        headers['transfer-encoding'] = 'chunked';
        const body = new DecodedBody(request.req);
        body.once('error', (error) => request.ctx.logger.warn({ reqId: request.ctx.requestId, code: GRPC_WEB_BAD_BODY, err: { message: error.message } }, 'gRPC-Web text request body does not decode; the upstream call is cancelled'));
        request.requestBodyStream = body;
      }
      return undefined;
    },
    onResponseHeaders(request, status, headers) {
      // gRPC calls that are not gRPC-Web (most on these routes) stop here, allocating nothing.
      if ((request.req as unknown as Record<symbol, string | undefined>)[GRPC_WEB_REPLY_TYPE] === undefined) return;
      const state = request.metadata.get(STATE) as CallState | undefined;
      if (state === undefined) return;
      const at = find(headers, 'content-type');
      const upstreamType = at === -1 ? '' : headers[at + 1]!;
      const grpc = upstreamType.toLowerCase().startsWith('application/grpc');
      const suffix = grpc ? upstreamType.slice('application/grpc'.length).split(';')[0]!.trim() : state.suffix;
      const webType = state.text ? 'application/grpc-web-text+proto' : `application/grpc-web${suffix || state.suffix}`;
      if (at === -1) headers.push('content-type', webType);
      else headers[at + 1] = webType;
      const length = find(headers, 'content-length');
      if (length !== -1) headers.splice(length, 2);
      if (!grpc && find(headers, 'grpc-status') === -1) {
        // Not a gRPC answer (an HTML error page, a proxy's 502): the client gets its HTTP status as
        // a gRPC status in a trailers-only answer, and the body, which it could not parse, is dropped.
        headers.push('grpc-status', String(grpcStatusOf(status)), 'grpc-message', encodeGrpcMessage(`upstream answered HTTP ${status}${upstreamType ? ` (${upstreamType.split(';')[0]})` : ''}, not gRPC`));
        request.encodeResponseBody?.({ stream: new Transform({ transform: (_chunk, _encoding, done) => done() }) });
        return 200;
      }
      // Trailers-only (the status in the headers): nothing follows the headers.
      if (find(headers, 'grpc-status') !== -1 || request.encodeResponseBody === undefined) return;
      const stream = state.text ? new Base64Encoder() : new PassThrough();
      request.encodeResponseBody({
        stream,
        finish(trailers) {
          stream.write(trailerFrame(trailers));
          return undefined;
        },
      });
    },
  };
}

/** On for every route of an HTTP/2 upstream unless the serving Gateway's `grpcWeb.disable` (Gloo's default: on). */
export const grpcWebFilter: HttpFilterFactory = {
  name: 'grpc-web',
  create(context) {
    if ((context.listenerOptions?.grpcWeb as { disable?: boolean } | undefined)?.disable === true) return undefined;
    if (context.upstreamHttp2 !== true) return undefined;
    return grpcWebHttpFilter();
  },
};
