import type { IncomingMessage } from 'node:http';

/** The first bytes of a request body, read for the auth check (SPEC 5.3 "Request body"). */
export interface BufferedBody {
  /** Everything read so far, in order: forwarded first, before the rest of the stream. */
  readonly chunks: Buffer[];
  /** The bytes auth sees: at most `maxBytes`. */
  readonly forAuth: Buffer;
  /** The whole body was read (no rest to stream). */
  readonly complete: boolean;
  /** Auth sees only the first `maxBytes` of a larger body (allowPartialMessage). */
  readonly partial: boolean;
}

/** Why buffering stopped without a body: too large (→ 413) or the client went away. */
export type BufferFailure = 'too-large' | 'aborted';

/**
 * Reads the body up to `maxBytes` (Envoy's `with_request_body`): resolves with what auth gets
 * and what must be forwarded, or a failure. A declared `content-length` over the limit fails
 * at once unless partial bodies are allowed. With `allowPartial`, reading stops (the stream is
 * paused) once `maxBytes` are in: the rest stays in the socket until it is forwarded.
 */
export function bufferRequestBody(req: IncomingMessage, maxBytes: number, allowPartial: boolean): Promise<BufferedBody | BufferFailure> {
  const declared = Number(req.headers['content-length']);
  if (!allowPartial && Number.isFinite(declared) && declared > maxBytes) return Promise.resolve('too-large');
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (result: BufferedBody | BufferFailure): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('aborted', onAborted);
      req.off('error', onAborted);
      resolve(result);
    };
    const whole = (): Buffer => Buffer.concat(chunks, size);
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
      size += chunk.length;
      if (size <= maxBytes) return;
      if (!allowPartial) {
        req.pause();
        return done('too-large');
      }
      req.pause();
      done({ chunks, forAuth: whole().subarray(0, maxBytes), complete: false, partial: true });
    };
    const onEnd = (): void => done({ chunks, forAuth: whole(), complete: true, partial: false });
    const onAborted = (): void => done('aborted');
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('aborted', onAborted);
    req.once('error', onAborted);
  });
}

/** The body to forward: the buffered chunks, then whatever is still in the request stream. */
export async function* replayBody(req: IncomingMessage, body: BufferedBody): AsyncGenerator<Buffer> {
  for (const chunk of body.chunks) yield chunk;
  if (!body.complete) for await (const chunk of req) yield chunk as Buffer;
}
