import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { UpstreamHost } from './upstream-cluster.ts';

/** Envoy's TcpHealthCheck, decoded: bytes to send, and byte strings expected back, in order. */
export interface TcpHealthCheck {
  readonly send: Buffer | undefined;
  readonly receive: readonly Buffer[];
}

/** Bytes an expected answer is looked for in, at most (a host that streams endlessly fails the check). */
const MAX_RECEIVE_BYTES = 64 * 1024;

/** Envoy's Payload: `text` is hex, `binary` base64 (proto3 JSON bytes). */
export function payloadBytes(payload: { text?: string | undefined; binary?: string | undefined }): Buffer {
  return payload.text !== undefined ? Buffer.from(payload.text, 'hex') : Buffer.from(payload.binary ?? '', 'base64');
}

/**
 * Envoy's TCP health check: a new connection to the host (TLS for a TLS Upstream, its server name
 * sent; the certificate is not verified, the check is about liveness); `send` is written, and the
 * host passes once every `receive` payload has arrived, in order (Envoy's fuzzy match: anything
 * may come between them). With no `receive`, a connection that opens passes. The connection is
 * closed after each check, passed or failed.
 */
export function tcpHealthProbe(host: UpstreamHost, check: TcpHealthCheck, signal: AbortSignal): Promise<boolean> {
  const url = new URL(host.origin);
  const address = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(url.port);
  return new Promise<boolean>((resolve) => {
    let socket: Socket;
    let settled = false;
    const done = (ok: boolean) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      socket.destroy();
      resolve(ok);
    };
    const onAbort = () => done(false);
    const tls = url.protocol === 'https:';
    socket = tls ? tlsConnect({ host: address, port, servername: host.servername ?? address, rejectUnauthorized: false, ALPNProtocols: [] }) : connect({ host: address, port });
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) return done(false);
    socket.once('error', () => done(false));
    socket.once(tls ? 'secureConnect' : 'connect', () => {
      if (check.send && check.send.length > 0) socket.write(check.send);
      if (check.receive.length === 0) return done(true);
      let received = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        if (matchesInOrder(received, check.receive)) return done(true);
        if (received.length > MAX_RECEIVE_BYTES) done(false);
      });
      socket.once('end', () => done(false));
    });
  });
}

/** Whether each payload is found in `data`, each after the previous one. */
export function matchesInOrder(data: Buffer, payloads: readonly Buffer[]): boolean {
  let from = 0;
  for (const payload of payloads) {
    const at = data.indexOf(payload, from);
    if (at === -1) return false;
    from = at + payload.length;
  }
  return true;
}
