import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/** Node's own answers to a request it could not parse (its `clientError` default), by cause. */
const ANSWERS: Record<string, Buffer> = {};
for (const status of [400, 408, 413, 431]) ANSWERS[status] = Buffer.from(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\n\r\n`, 'ascii');
const STATUS_BY_CODE: Record<string, number> = { HPE_HEADER_OVERFLOW: 431, HPE_CHUNK_EXTENSIONS_OVERFLOW: 413, ERR_HTTP_REQUEST_TIMEOUT: 408 };

/**
 * The HTTP/1.1 listeners' `clientError` handler: Node's default (a 400, 408, 413 or 431 when
 * nothing of an answer was sent yet, then the connection closed), except for bytes after a
 * request that said `Connection: close` (a pipelined request, llhttp's HPE_CLOSED_CONNECTION).
 * There the default wrote its 400 in place of the first request's answer, still on its way
 * from the upstream, and closed: the answer was lost. Now, as nginx and Envoy do, the rest is
 * not read, the first answer goes out in full and Node closes the connection after it.
 */
export function onClientError(error: Error & { code?: string }, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (error.code === 'HPE_CLOSED_CONNECTION' && inFlight && !inFlight.writableEnded) {
    socket.pause();
    return;
  }
  if (socket.writable && !(inFlight as { _headerSent?: boolean } | null | undefined)?._headerSent) socket.write(ANSWERS[STATUS_BY_CODE[error.code ?? ''] ?? 400]!);
  socket.destroy(error);
}
