import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { createSecureServer, type Http2Server, type Http2Session } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import { PROTOCOL_ORDER, type TlsContexts } from './tls-contexts.ts';
import { readFileSync } from 'node:fs';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createH2cServer, DEFAULT_HTTP2_LIMITS, http2Settings, isH2cUpgrade, trackSessions, type Http2Limits, H2C_PREFACE } from './http2.ts';
import { onClientError } from './client-error.ts';

const CONNECT_BODY = 'CONNECT is not supported\n';
const CONNECT_REFUSED = `HTTP/1.1 405 Method Not Allowed\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${CONNECT_BODY.length}\r\nx-gatehouse-error: GH_BAD_REQUEST\r\nconnection: close\r\n\r\n${CONNECT_BODY}`;

/**
 * Downstream connection limits, named as Envoy names them (HTTP connection manager and the
 * overload manager). Defaults in {@link DEFAULT_LISTENER_LIMITS}; docs/operations.md lists them.
 */
export interface ListenerLimits {
  /** Time for a connection's request headers to arrive, counted from the connection's first byte wait (`request_headers_timeout`). */
  requestHeadersTimeoutMs: number;
  /** Time for a whole request, body included (`request_timeout`); 0 turns it off. */
  requestTimeoutMs: number;
  /** A connection with a request in flight and no bytes either way for this long is closed (`stream_idle_timeout`). */
  idleTimeoutMs: number;
  /** Connections open at once; more are closed on accept (`max_active_downstream_connections`). */
  maxConnections: number;
  /** HTTP/2 limits (streams, header list size, rapid-reset protection): ./http2.ts. */
  http2: Http2Limits;
}

export const DEFAULT_LISTENER_LIMITS: ListenerLimits = Object.freeze({
  requestHeadersTimeoutMs: 10_000,
  requestTimeoutMs: 300_000,
  idleTimeoutMs: 300_000,
  maxConnections: defaultMaxConnections(),
  http2: DEFAULT_HTTP2_LIMITS,
});

/**
 * Half the process's open-file limit (the other half is left for upstream pools, config files
 * and plugins), at most 50,000: beyond it, new connections are refused instead of starving
 * every socket, the listener's included.
 */
export function defaultMaxConnections(limitsFile = '/proc/self/limits'): number {
  try {
    const line = readFileSync(limitsFile, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = Number(line?.split(/\s{2,}/)[1]);
    if (Number.isFinite(soft) && soft > 0) return Math.max(64, Math.min(50_000, Math.floor(soft / 2)));
  } catch {
    // Not Linux: fall through.
  }
  return 10_000;
}

/** Marks a socket that has carried a request, so its idle timer is set once. */
const SERVING = Symbol('gatehouse.serving');

/** Node's HTTP server options for `limits`. */
function serverOptions(l: ListenerLimits) {
  return {
    keepAliveTimeout: 65_000,
    headersTimeout: l.requestHeadersTimeoutMs,
    requestTimeout: l.requestTimeoutMs,
    // How often Node checks the two timeouts above (its default, 30 s, let them overrun by as much).
    connectionsCheckingInterval: Math.max(250, Math.min(5_000, Math.floor(l.requestHeadersTimeoutMs / 4))),
  };
}

/**
 * Starts the plain listener: HTTP/1.1, and HTTP/2 with prior knowledge (h2c, SPEC 3.2.1) on the
 * same port. A connection whose first bytes are the HTTP/2 preface goes to an h2c server; the
 * rest to Node's HTTP/1.1 server. `Upgrade: h2c` is not taken (RFC 9113 removed it; Envoy does
 * not do it either): such a request is answered over HTTP/1.1. Resolves with the HTTP/1.1 server
 * (the one bound to the port) and the port (0 picks one).
 */
export async function listen(handler: RequestListener, port: number, host: string, limits: Partial<ListenerLimits> = {}, onUpgrade?: UpgradeListener): Promise<{ server: Server; port: number }> {
  const l = { ...DEFAULT_LISTENER_LIMITS, ...limits };
  const server = createServer({ ...serverOptions(l), shouldUpgradeCallback: (req) => onUpgrade !== undefined && !isH2cUpgrade(req) }, handler);
  if (onUpgrade) server.on('upgrade', onUpgrade);
  const h2c = createH2cServer(handler, l);
  SESSIONS.set(server, trackSessions(h2c, l));
  // Node's HTTP/1.1 connection listener is taken off and called only for connections that do
  // not open with the HTTP/2 preface (it reads the socket at once, so it cannot run first).
  const [http1] = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeListener('connection', http1!);
  server.on('connection', (socket: Socket) =>
    sniff(socket, (isH2) => {
      if (!isH2) return http1!.call(server, socket);
      // The first-bytes timer (the headers timeout) gives way to the session's idle timeout.
      socket.setTimeout(0);
      h2c.emit('connection', socket);
    }),
  );
  return serve(server, l, port, host);
}

/** HTTP/2 sessions of each listener, closed with it. */
const SESSIONS = new WeakMap<Server, Set<Http2Session>>();

/**
 * Reads a connection's first bytes and tells whether they open HTTP/2 (the preface starts
 * `PRI * HTTP/2.0`, which no HTTP/1.1 request does), then puts them back for whoever serves it.
 */
function sniff(socket: Socket, route: (isH2: boolean) => void): void {
  let seen: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    seen = seen.length === 0 ? chunk : (Buffer.concat([seen, chunk]) as Buffer);
    const n = Math.min(seen.length, H2C_PREFACE.length);
    const isPrefix = seen.subarray(0, n).equals(H2C_PREFACE.subarray(0, n));
    // Undecided until the bytes so far stop matching, or the whole preface is there.
    if (isPrefix && n < H2C_PREFACE.length) return;
    socket.removeListener('data', onData);
    socket.removeListener('end', onEnd);
    socket.pause();
    socket.unshift(seen);
    route(isPrefix);
    // HTTP/1.1 reads through 'data' events, which pause() held back. An HTTP/2 session takes
    // what is buffered itself on its next tick: flowing now would drop it.
    if (!isPrefix) socket.resume();
  };
  const onEnd = (): void => {
    socket.removeListener('data', onData);
    socket.destroy();
  };
  socket.on('data', onData);
  socket.on('end', onEnd);
}

/** The `upgrade` event's listener (WebSocket): without one, Node closes such connections. */
export type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/**
 * Starts the HTTPS listener (SPEC 3.2.1): the certificate is chosen per handshake by SNI from
 * `contexts` (rebuilt from each snapshot, so certificates change without a restart). Clients
 * are asked for a certificate; a VirtualService with a root CA then refuses connections whose
 * certificate is missing or does not verify (closed right after the handshake), the others
 * ignore it. Same limits as the HTTP listener; the handshake counts against the headers timeout.
 */
export async function listenTls(handler: RequestListener, port: number, host: string, contexts: TlsContexts, limits: Partial<ListenerLimits> = {}, onUpgrade?: UpgradeListener): Promise<{ server: Server; port: number }> {
  const l = { ...DEFAULT_LISTENER_LIMITS, ...limits };
  // Node's HTTP/2 secure server answers ALPN `h2` itself and hands `http/1.1` (or no ALPN)
  // connections to its HTTP/1.1 machinery, with the same options, events and timeouts.
  const server = createSecureServer(
    {
      ...serverOptions(l),
      ...http2Settings(l.http2),
      allowHTTP1: true,
      SNICallback: contexts.sniCallback,
      requestCert: true,
      rejectUnauthorized: false,
      minVersion: 'TLSv1.2',
    },
    handler as never,
  );
  if (onUpgrade) server.on('upgrade', onUpgrade);
  // No default certificate: a client that sends no SNI fails the handshake, as one naming nobody's domain.
  contexts.onFallback((host) => server.setSecureContext(host?.options ?? {}));
  server.on('secureConnection', (socket: TLSSocket) => {
    if (socket.alpnProtocol === 'h2') socket.setTimeout(0);
    const vhost = contexts.hostFor((socket as TLSSocket & { servername?: string | false }).servername || undefined);
    if (!vhost) return;
    if ((vhost.requireClientCert && !socket.authorized) || (PROTOCOL_ORDER[socket.getProtocol() ?? ''] ?? 0) < vhost.minVersion) socket.destroy();
  });
  // A failed handshake (unknown SNI, a bad client certificate) is the client's problem, not an error of ours.
  server.on('tlsClientError', (_error, socket) => socket.destroy());
  const http = server as unknown as Server;
  SESSIONS.set(http, trackSessions(server as unknown as Http2Server, l));
  return serve(http, l, port, host);
}

/** The connection limits and timeouts both listeners share, then `listen`. */
async function serve(server: Server, l: ListenerLimits, port: number, host: string): Promise<{ server: Server; port: number }> {
  server.maxConnections = l.maxConnections;
  // A request pipelined after `Connection: close` must not cost the first its answer (issue 29).
  server.on('clientError', onClientError);
  // Node's header timeout only starts with the first byte: a connection that never sends one
  // would stay open for ever (1,100 of them exhausted a 1024 fd limit). Until its first request
  // a socket gets the header timeout as an inactivity limit, then the stream idle timeout.
  server.on('connection', (socket: Socket) => {
    socket.setTimeout(l.requestHeadersTimeoutMs, () => socket.destroy());
  });
  server.on('request', (req) => {
    // HTTP/2 streams share their connection: the session's timeouts are set in ./http2.ts.
    if (req.httpVersionMajor === 2) return;
    const socket = req.socket as Socket & { [SERVING]?: true };
    if (socket[SERVING]) return;
    socket[SERVING] = true;
    socket.setTimeout(l.idleTimeoutMs);
  });
  // Without a listener Node drops CONNECT silently; tunnels are not supported, so say so.
  server.on('connect', (_req, socket: Duplex) => {
    socket.on('error', () => {});
    socket.end(CONNECT_REFUSED);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port };
}

/**
 * Graceful stop (SPEC 8): stop accepting, let in-flight requests finish, close idle
 * keep-alive connections at once, and cut whatever is still open after `graceMs`.
 */
export async function closeGracefully(server: Server, graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  // HTTP/2: GOAWAY now (no new streams), open streams finish; whatever is left is cut at the deadline.
  const sessions = SESSIONS.get(server);
  for (const session of sessions ?? []) session.close();
  // Connections that finish a response while closing are not reused (Node sends `connection: close`).
  const idleSweep = setInterval(() => server.closeIdleConnections(), 100);
  const deadline = setTimeout(() => {
    server.closeAllConnections();
    for (const session of sessions ?? []) session.destroy();
  }, graceMs);
  try {
    await closed;
  } finally {
    clearInterval(idleSweep);
    clearTimeout(deadline);
  }
}
