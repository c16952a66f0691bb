import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ResponseBodyEncoder } from './http-filter.ts';

type Trailers = Record<string, string | string[]> | undefined;

/**
 * An upstream response body on its way to the client through the encoders filters asked for
 * (`FilterRequest.encodeResponseBody`: compression, gRPC-Web framing). It streams: what the
 * upstream sends is written into the first encoder, each encoder's output into the next, the
 * last one's into the response; every hop pauses while the next is full, so a slow client
 * pauses the upstream (the caller pauses it while {@link EncodedBody.write} returns false and
 * resumes it on `drain`, exactly as for a plain response). Nothing holds the whole body.
 */
export class EncodedBody {
  private readonly streams: readonly Duplex[];
  private readonly encoders: readonly ResponseBodyEncoder[];
  private readonly res: ServerResponse;
  private failed = false;

  /** `onError`: an encoder failed (the response is cut; the caller stops the upstream). */
  constructor(encoders: readonly ResponseBodyEncoder[], res: ServerResponse, onError: (error: Error) => void) {
    this.encoders = encoders;
    this.res = res;
    const streams = (this.streams = encoders.map((e) => e.stream));
    const fail = (error: Error) => {
      if (this.failed) return;
      this.failed = true;
      this.destroy();
      res.destroy();
      onError(error);
    };
    for (let i = 0; i < streams.length; i++) {
      const from = streams[i]!;
      from.on('error', fail);
      const to = streams[i + 1];
      if (to) {
        from.on('data', (chunk: Buffer) => {
          if (to.write(chunk)) return;
          from.pause();
          to.once('drain', () => from.resume());
        });
      } else {
        from.on('data', (chunk: Buffer) => {
          if (res.destroyed || res.write(chunk)) return;
          from.pause();
          res.once('drain', () => from.resume());
        });
      }
    }
    // A client that leaves (or a response cut by a stall) frees the encoders (zlib's memory) at once.
    res.once('close', () => {
      if (!res.writableEnded) this.destroy();
    });
  }

  /** Writes an upstream chunk; false: pause the upstream until `drain`. */
  write(chunk: Buffer): boolean {
    return this.streams[0]!.write(chunk);
  }

  once(event: 'drain', listener: () => void): this {
    this.streams[0]!.once(event, listener);
    return this;
  }

  /**
   * The upstream body is complete: each encoder in turn is finished (it may write its last bytes:
   * gRPC-Web's trailer frame) and ended, and the response ends with what trailers are left.
   */
  end(trailers: Trailers): void {
    this.endAt(0, trailers);
  }

  private endAt(i: number, trailers: Trailers): void {
    if (this.failed || this.res.destroyed) return;
    const encoder = this.encoders[i];
    if (!encoder) {
      if (trailers && Object.keys(trailers).length > 0) this.res.addTrailers(trailers);
      this.res.end();
      return;
    }
    const left = encoder.finish ? encoder.finish(trailers) : trailers;
    const stream = this.streams[i]!;
    stream.once('end', () => this.endAt(i + 1, left));
    stream.end();
  }

  /** Stops every encoder (their buffers are freed). */
  destroy(): void {
    for (const s of this.streams) if (!s.destroyed) s.destroy();
  }
}
