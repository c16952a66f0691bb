import type { Socket } from 'node:net';

/** What a parser of a connection's first bytes answers: wait until `need` bytes in all have come, or a verdict. */
export type PrefixParse<T> = { readonly kind: 'incomplete'; readonly need: number } | T;

/** How {@link readPrefix} reads one kind of prefix (a ClientHello, a PROXY header). */
export interface PrefixReader<T> {
  /** Parses every byte read so far, from the first. */
  parse(bytes: Buffer): PrefixParse<T>;
  /** The parser's verdict on `bytes` (all the bytes read); the reader's listeners and timer are gone. */
  done(verdict: T, bytes: Buffer): void;
  /** No verdict within the time bound; the reader's listeners are gone (the callee closes the socket). */
  timedOut(): void;
}

/**
 * Reads a connection's first bytes until `reader.parse` gives a verdict. Bounded in time by an
 * absolute timer (the socket's inactivity timeout alone lets a byte a second go on for ever) and
 * linear in the bytes (parsed again only once the bytes it asked for are there, so a prefix
 * trickled a byte at a time is not re-read per byte). A client gone before a verdict is destroyed:
 * nothing to serve, and an error here must not go unhandled. The one reader behind the TLS
 * listener's ClientHello inspection, the PROXY protocol and the TCP proxy's SNI routing.
 */
export function readPrefix<T extends { readonly kind: string }>(socket: Socket, timeoutMs: number, reader: PrefixReader<T>): void {
  const chunks: Buffer[] = [];
  let seen = 0;
  let need = 1;
  const stop = (): void => {
    clearTimeout(timer);
    socket.removeListener('data', onData);
    socket.removeListener('end', onGone);
    socket.removeListener('error', onGone);
    socket.removeListener('close', stop);
  };
  const timer = setTimeout(() => {
    stop();
    reader.timedOut();
  }, timeoutMs);
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk);
    seen += chunk.length;
    if (seen < need) return;
    const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, seen);
    chunks.length = 0;
    chunks.push(bytes);
    const verdict = reader.parse(bytes);
    if (verdict.kind === 'incomplete') {
      need = (verdict as { need: number }).need;
      return;
    }
    stop();
    reader.done(verdict as T, bytes);
  };
  const onGone = (): void => {
    stop();
    socket.destroy();
  };
  socket.on('data', onData);
  socket.on('end', onGone);
  socket.on('error', onGone);
  socket.once('close', stop);
}
