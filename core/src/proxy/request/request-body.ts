import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCodes } from '../../errors.ts';
import { isGrpcCall, sendLocalReply } from './local-reply.ts';

/** The first bytes of a request body, read for the auth check (SPEC 5.3 "Request body"). */
export interface BufferedBody {
  /** The bytes auth sees: at most `maxBytes`. */
  readonly forAuth: Buffer;
  /** Auth sees only the first `maxBytes` of a larger body (allowPartialMessage). */
  readonly partial: boolean;
  /** The body's size when known: the declared content-length, or what was read of a complete body. */
  readonly size: number | undefined;
}

/** Why buffering stopped without a body: too large (→ 413) or the client went away. */
export type BufferFailure = 'too-large' | 'aborted';

/**
 * How long the gateway keeps reading (and discarding) the body of a request it refused with
 * 413, so that the client, still sending, gets to read the answer instead of a connection
 * reset; then the connection is closed. Envoy's `delayed_close_timeout` default.
 */
export const LINGER_MS = 1_000;

/**
 * Reads the body up to `maxBytes` (Envoy's `with_request_body`) and resolves with what auth
 * gets, or a failure. A declared `content-length` over the limit fails at once unless partial
 * bodies are allowed; an undeclared (chunked) one fails when its bytes pass the limit.
 *
 * The bytes read are put back at the front of the request stream (`unshift`, before its
 * `end` could be emitted), so every destination reads the request exactly as if it had never
 * been touched: the whole body, byte for byte, the rest streaming from the socket. At most
 * `maxBytes` plus one socket read are held in memory; with `allowPartial` reading stops there
 * and the rest stays in the socket (backpressure) until the destination reads it.
 */
export function bufferRequestBody(req: IncomingMessage, maxBytes: number, allowPartial: boolean): Promise<BufferedBody | BufferFailure> {
  const declared = declaredLength(req);
  if (!allowPartial && declared !== undefined && declared > maxBytes) return Promise.resolve('too-large');
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (result: BufferedBody | BufferFailure, putBack?: Buffer): void => {
      req.off('readable', onReadable);
      req.off('close', onClose);
      req.off('error', onError);
      req.off('aborted', onError);
      // Synchronously, in the same callback that saw the last chunk: `end` is only emitted
      // on a later tick, and never while bytes are buffered.
      if (putBack && putBack.length > 0) req.unshift(putBack);
      resolve(result);
    };
    const onReadable = (): void => {
      let chunk: Buffer | null;
      while (size <= maxBytes && (chunk = req.read() as Buffer | null) !== null) {
        chunks.push(chunk);
        size += chunk.length;
      }
      if (size > maxBytes) {
        if (!allowPartial) return settle('too-large');
        const all = Buffer.concat(chunks, size);
        return settle({ forAuth: all.subarray(0, maxBytes), partial: true, size: declared }, all);
      }
      if (bodyComplete(req)) {
        const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
        settle({ forAuth: all, partial: false, size: declared ?? size }, all);
      }
    };
    // A client that leaves mid-body: drop what was read, call nobody. (An HTTP/2 stream reset
    // also ends the request stream, as if the body were whole: 'aborted' comes first.)
    const onClose = (): void => {
      if (!bodyComplete(req)) settle('aborted');
    };
    const onError = (): void => settle('aborted');
    req.on('readable', onReadable);
    req.once('close', onClose);
    req.once('error', onError);
    req.once('aborted', onError);
  });
}

/**
 * Answers 413 `GH_BODY_TOO_LARGE` to a request whose body is over the limit, in a way the
 * client can read: the answer (headers and body, content-length framed) goes out at once, but
 * the response is only ended once the rest of the request body has been read and discarded,
 * or, when the body is still arriving after {@link LINGER_MS}, the connection is closed (Envoy's
 * delayed close). Ending it at once would let Node close the socket (the client may have sent
 * `connection: close`) with request bytes unread, and the client, still writing, would get a
 * reset in place of the 413.
 */
export function refuseTooLarge(req: IncomingMessage, res: ServerResponse, message: string, extraHeaders: readonly string[] = [], lingerMs = LINGER_MS, code: string = ErrorCodes.BODY_TOO_LARGE): void {
  if (isGrpcCall(res)) {
    // A gRPC client reads only a gRPC status: RESOURCE_EXHAUSTED, trailers-only. Its stream
    // ends there (HTTP/2 resets just that stream); the rest of the body is discarded.
    sendLocalReply(res, 413, code, message, extraHeaders);
    req.resume();
    return;
  }
  const body = `${message}\n`;
  res.writeHead(413, ['content-type', 'text/plain; charset=utf-8', 'content-length', String(Buffer.byteLength(body)), 'x-gatehouse-error', code, ...extraHeaders]);
  if (bodyComplete(req)) {
    res.end(body);
    return;
  }
  res.write(body);
  const timer = setTimeout(() => req.socket.destroy(), lingerMs);
  const done = (): void => {
    clearTimeout(timer);
    if (!res.writableEnded && !res.destroyed) res.end();
  };
  req.once('end', done);
  req.once('close', done);
  req.resume();
}

/**
 * Once the answer is finished, whatever of the body no one read is discarded, as Node does
 * for a request it was never asked to read (it does not for one already read from): else the
 * rest of a partial body left unread by a denial or a failed upstream would stall the
 * keep-alive connection until its idle timeout.
 */
export function drainAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  res.once('finish', () => {
    if (!req.readableEnded) req.resume();
  });
}

/**
 * Whether the whole body has arrived (and the end not yet been read past): HTTP/1.1's parser
 * says so with `complete`, set at the end of the message, before `end`. Node's HTTP/2 request
 * sets `complete` only once `end` was emitted, which never happens while the bytes read are
 * held back for auth (so such requests were never answered), and also for a reset stream: there
 * the stream's own end of data tells, unless the client aborted.
 */
export function bodyComplete(req: IncomingMessage): boolean {
  // By its stream, not httpVersionMajor: an HTTP/1.1 request line may say HTTP/2.0.
  const stream = (req as IncomingMessage & { stream?: { readableEnded: boolean } }).stream;
  if (stream === undefined) return req.complete;
  return !req.aborted && stream.readableEnded;
}

/** The request's `content-length` as a number (undefined: none, or not a valid length). */
export function declaredLength(req: IncomingMessage): number | undefined {
  const value = req.headers['content-length'];
  if (value === undefined) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/**
 * Whether a request carries a body: HTTP/1.1 says so with a content-length above 0 or a
 * transfer-encoding; an HTTP/2 request has one unless its header block ended the stream (its
 * content-length is optional, and gRPC clients send none).
 */
export function hasRequestBody(req: IncomingMessage, headers: IncomingHttpHeaders = req.headers): boolean {
  // HTTP/2 by its stream, not by httpVersionMajor: an HTTP/1.1 request line may say HTTP/2.0
  // (reading `.stream` of such a request threw, once per request, into the process guard).
  const stream = (req as IncomingMessage & { stream?: { endAfterHeaders: boolean } }).stream;
  if (stream !== undefined) return !stream.endAfterHeaders;
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
