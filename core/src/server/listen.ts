import { readPrefix } from './read-prefix.ts';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { createSecureServer, type Http2Server, type Http2Session } from 'node:http2';
import type { SecureContext, TLSSocket } from 'node:tls';
import { bindTlsConnection, DEFAULT_TLS_POLICY, PROTOCOL_ORDER, type TlsContexts, type TlsHost, type TlsTable } from './tls-contexts.ts';
import { MAX_CLIENT_HELLO_BYTES, parseClientHello } from './client-hello.ts';
import { readFileSync } from 'node:fs';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { metrics } from '../admin/metrics.ts';
import { createH2cServer, DEFAULT_HTTP2_LIMITS, http2Settings, isHttp2Request, upgradeDecision, trackSessions, type Http2Limits, H2C_PREFACE } from './http2.ts';
import { onClientError } from './client-error.ts';
import { inheritProxyAddresses, readProxyHeader, type ProxyProtocolPolicy } from './proxy-protocol.ts';

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
  /**
   * Connections open at once from one client address; more are closed on accept, so one client
   * cannot hold the whole {@link maxConnections} budget. Undefined: a quarter of `maxConnections`.
   */
  maxConnectionsPerClient?: number | undefined;
  /** Header fields of an HTTP/1.1 request; more are answered 431 (Envoy's `max_headers_count`). HTTP/2: {@link Http2Limits.maxHeaderListPairs}. */
  maxRequestHeaders: number;
  /** HTTP/2 limits (streams, header list size, rapid-reset protection): ./http2.ts. */
  http2: Http2Limits;
  /** A kept-alive HTTP/1.1 connection with no request is closed after this long (Envoy's `idle_timeout`; default 65 s). */
  keepAliveTimeoutMs?: number | undefined;
  /** Bytes of a request's header block (Envoy's `max_request_headers_kb`); undefined: Node's default (16 KiB) for HTTP/1.1, {@link Http2Limits.maxHeaderListSize} for HTTP/2. */
  maxRequestHeaderBytes?: number | undefined;
  /** Read a PROXY protocol header first and take its client address (./proxy-protocol.ts); undefined: not read. */
  proxyProtocol?: ProxyProtocolPolicy | undefined;
}

export const DEFAULT_LISTENER_LIMITS: ListenerLimits = Object.freeze({
  requestHeadersTimeoutMs: 10_000,
  requestTimeoutMs: 300_000,
  idleTimeoutMs: 300_000,
  maxConnections: defaultMaxConnections(),
  maxRequestHeaders: 100,
  http2: DEFAULT_HTTP2_LIMITS,
});

/** The per-client connection cap of `l`: the configured one, or a quarter of the listener's cap. */
export function maxConnectionsPerClient(l: Pick<ListenerLimits, 'maxConnections' | 'maxConnectionsPerClient'>): number {
  return l.maxConnectionsPerClient ?? Math.max(1, Math.floor(l.maxConnections / 4));
}

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

/** `limits` over the defaults; a header count limit applies to HTTP/2 too (plus its 4 pseudo-headers). */
function limitsOf(limits: Partial<ListenerLimits>): ListenerLimits {
  const l = { ...DEFAULT_LISTENER_LIMITS, ...limits };
  if (limits.maxRequestHeaders !== undefined && limits.http2?.maxHeaderListPairs === undefined) l.http2 = { ...l.http2, maxHeaderListPairs: limits.maxRequestHeaders + 4 };
  if (limits.maxRequestHeaderBytes !== undefined && limits.http2?.maxHeaderListSize === undefined) l.http2 = { ...l.http2, maxHeaderListSize: limits.maxRequestHeaderBytes };
  return l;
}

/** Marks a socket that has carried a request, so its idle timer is set once. */
const SERVING = Symbol('gatehouse.serving');

/**
 * Node's HTTP/1.1 server settings for `limits`. Set as properties after construction: the
 * HTTP/2 secure server (which serves HTTP/1.1 too) ignores most of them as constructor options,
 * which left `Upgrade: h2c` over TLS tunnelled (issue 29 finding 18) and its timeout checks at 30 s.
 */
function applyHttp1Settings(server: Server, l: ListenerLimits, onUpgrade: UpgradeListener | undefined): void {
  server.keepAliveTimeout = l.keepAliveTimeoutMs ?? 65_000;
  server.headersTimeout = l.requestHeadersTimeoutMs;
  server.requestTimeout = l.requestTimeoutMs;
  // One more than the limit, so a request over it is seen (and answered 431 by the gateway) without parsing thousands.
  server.maxHeadersCount = l.maxRequestHeaders + 1;
  // Only upgrades the gateway may tunnel (or must refuse) take the upgrade path; `h2c` is served over HTTP/1.1.
  (server as Server & { shouldUpgradeCallback: (req: IncomingMessage) => boolean }).shouldUpgradeCallback = (req) => onUpgrade !== undefined && upgradeDecision(req).kind !== 'none';
}

/** Node's HTTP server options for `limits` (what only the constructor reads). */
function serverOptions(l: ListenerLimits) {
  return {
    // How often Node checks the headers and request timeouts (its default, 30 s, let them overrun by as much).
    connectionsCheckingInterval: Math.max(250, Math.min(5_000, Math.floor(l.requestHeadersTimeoutMs / 4))),
    // Over it, Node answers 431 itself.
    ...(l.maxRequestHeaderBytes !== undefined ? { maxHeaderSize: l.maxRequestHeaderBytes } : {}),
  };
}

/**
 * Starts the plain listener: HTTP/1.1, and HTTP/2 with prior knowledge (h2c, SPEC 3.2.1) on the
 * same port. A connection whose first bytes are the HTTP/2 preface goes to an h2c server; the
 * rest to Node's HTTP/1.1 server. `Upgrade: h2c` is not taken (RFC 9113 removed it; Envoy does
 * not do it either): such a request is answered over HTTP/1.1. Resolves with the HTTP/1.1 server
 * (the one bound to the port) and the port (0 picks one).
 */
export async function listen(handler: RequestListener, port: number, host: string, limits: Partial<ListenerLimits> = {}, onUpgrade?: UpgradeListener, bind: BindOptions = {}): Promise<{ server: Server; port: number }> {
  const l = limitsOf(limits);
  const server = createServer(serverOptions(l), handler);
  applyHttp1Settings(server, l, onUpgrade);
  if (onUpgrade) server.on('upgrade', onUpgrade);
  const h2c = createH2cServer(handler, l);
  SESSIONS.set(server, trackSessions(h2c, l));
  // Node's HTTP/1.1 connection listener is taken off and called only for connections that do
  // not open with the HTTP/2 preface (it reads the socket at once, so it cannot run first).
  const [http1] = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeListener('connection', http1!);
  const admit = clientAdmission(l);
  onConnection(server, l, admit, (socket) =>
    sniff(socket, (isH2) => {
      if (!isH2) return http1!.call(server, socket);
      // The session's own timers take over (./http2.ts: first stream, then idle).
      socket.setTimeout(0);
      closeOnEnd(socket);
      h2c.emit('connection', socket);
    }),
  );
  return serve(server, l, port, host, bind, admit);
}

/**
 * Runs `serveConnection` on each accepted connection: at once, or, on a PROXY protocol
 * listener, once its header is read (./proxy-protocol.ts); the per-client cap then counts the
 * client address the header names, not the load balancer's.
 */
function onConnection(server: Server, l: ListenerLimits, admit: (socket: Socket) => boolean, serveConnection: (socket: Socket) => void): void {
  const policy = l.proxyProtocol;
  server.on('connection', (socket: Socket) => {
    // Already refused (the per-client cap in serve()): nothing to read.
    if (socket.destroyed) return;
    if (!policy) return serveConnection(socket);
    readProxyHeader(socket, policy, l.requestHeadersTimeoutMs, () => {
      if (!admit(socket)) return;
      serveConnection(socket);
      // Paused by the header reader; the next reader is attached now.
      socket.resume();
    });
  });
}

/** How a listener binds its port. */
export interface BindOptions {
  /**
   * SO_REUSEPORT (SPEC 8): every worker binds the port with its own socket and the kernel spreads
   * new connections over them; in a cluster worker this also bypasses the primary, which then
   * holds no listening socket at all.
   */
  reusePort?: boolean;
  /**
   * The server this one replaces on the same address and port: the new server accepts on its
   * listening socket, and the old one keeps only its open connections (closed gracefully by its
   * owner). Closing the old socket instead would reset the connections the kernel had queued on
   * it (with SO_REUSEPORT, new connections are spread over both sockets until one closes).
   */
  takeOver?: Server | undefined;
}

/**
 * An HTTP/2 connection the client closed its side of is closed (Envoy does the same): Node's
 * session did not notice the FIN, and such sockets stayed in CLOSE-WAIT, counting against the
 * connection caps (issue 29 finding 5).
 */
function closeOnEnd(socket: Socket): void {
  socket.once('end', () => socket.destroy());
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
 * Starts the HTTPS listener (SPEC 3.2.1), Envoy's way (`tls_inspector` and one TLS context per
 * filter chain): each connection's ClientHello is read first, without consuming it
 * (./client-hello.ts), and its SNI name chooses the VirtualService whose TLS policy the whole
 * handshake then runs under: its certificate, protocol versions, cipher suites, curves and
 * client-certificate requirement (rebuilt from each snapshot in `contexts`, so certificates and
 * policies change without a restart and without touching open connections). OpenSSL's SNI
 * callback alone can swap only the certificate: versions, suites and curves would be the
 * listener's, and a client offering what only the VirtualService allows was cut off.
 *
 * One Node server serves every policy: the connection's SSL object is made from the chosen
 * policy's SecureContext (see {@link handOver}), so ALPN (`h2`, `http/1.1`), the HTTP/1.1 and
 * HTTP/2 machinery, limits, timeouts and graceful close stay those of a single listener. The
 * connection is bound to that VirtualService (a request for another policy's host: 421). No SNI,
 * or a name nobody claims: the VirtualService without `sniDomains`, if any; otherwise the
 * handshake fails. A ClientHello that is malformed, over {@link MAX_CLIENT_HELLO_BYTES}, or not
 * complete within the headers timeout closes the connection (counted in
 * `gatehouse_downstream_connections_refused_total`).
 */
export async function listenTls(handler: RequestListener, port: number, host: string, contexts: TlsContexts, limits: Partial<ListenerLimits> = {}, onUpgrade?: UpgradeListener, bind: BindOptions = {}): Promise<{ server: Server; port: number }> {
  const l = limitsOf(limits);
  // Node's HTTP/2 secure server answers ALPN `h2` itself and hands `http/1.1` (or no ALPN)
  // connections to its HTTP/1.1 machinery, with the same options, events and timeouts.
  const server = createSecureServer(
    {
      ...serverOptions(l),
      ...http2Settings(l.http2),
      // The server's own context has no certificate: it is used only when no VirtualService claims the connection's name.
      ...DEFAULT_TLS_POLICY,
      allowHTTP1: true,
      // The TLS handshake is part of the time the request headers have (Node's default is 120 s).
      handshakeTimeout: l.requestHeadersTimeoutMs,
      SNICallback(this: unknown, servername: string, callback: (error: Error | null, context?: SecureContext) => void) {
        // The policy was chosen from the ClientHello before OpenSSL read it: the two readings must
        // agree. Both are made in the table of that moment: a snapshot applied since (a rotated
        // Secret) takes effect on the next connection, not halfway through this handshake.
        const chosen = chosenOf(this as TLSSocket);
        const table = chosen?.table ?? contexts.current;
        const named = table.hostFor(servername);
        if (named && named.policy !== chosen?.host?.policy) return callback(new Error(`SNI "${servername}" read differently before the handshake`));
        table.sniCallback(servername, callback);
      },
      // Set per connection from the chosen VirtualService (handOver).
      requestCert: false,
      rejectUnauthorized: false,
    },
    handler as never,
  );
  applyHttp1Settings(server as unknown as Server, l, onUpgrade);
  if (onUpgrade) server.on('upgrade', onUpgrade);
  const tls = server as unknown as TlsServerInternals;
  const ownCredentials = tls._sharedCreds;
  if (ownCredentials === undefined) throw new Error('this Node version keeps no tls.Server _sharedCreds: the per-SNI TLS policy cannot be applied');
  // Node's TLS connection listener is taken off and called once the ClientHello has chosen the policy.
  const [tlsConnection] = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeListener('connection', tlsConnection!);
  const admit = clientAdmission(l);
  onConnection(server as unknown as Server, l, admit, (socket) =>
    sniffClientHello(socket, l.requestHeadersTimeoutMs, (servername) => {
      const table = contexts.current;
      const vhost = table.hostFor(servername);
      (socket as Socket & { [CHOSEN]?: Chosen })[CHOSEN] = { host: vhost, table };
      handOver(tls, tlsConnection!, socket, vhost, ownCredentials);
    }),
  );
  // Before Node's own listener makes the HTTP/1.1 or HTTP/2 connection: a TLS socket reads its
  // addresses from the TCP handle, so it takes the PROXY header's from the raw socket.
  if (l.proxyProtocol) server.prependListener('secureConnection', (socket: TLSSocket) => inheritProxyAddresses(socket, (socket as TLSSocket & { _parent?: Socket })._parent));
  server.on('secureConnection', (socket: TLSSocket) => {
    if (socket.alpnProtocol === 'h2') {
      socket.setTimeout(0);
      closeOnEnd(socket);
    }
    // The connection is bound to the VirtualService its SNI chose (SPEC 3.2.1), in the table its
    // handshake ran under: the gateway answers 421 to a request for another certificate's host on it.
    const chosen = chosenOf(socket);
    const vhost = bindTlsConnection(socket, contexts, chosen?.table);
    // Made under another policy than the one it is bound to (OpenSSL read a name the ClientHello
    // reader did not): not served. A snapshot applied during the handshake is not such a case
    // (both readings use the same table); closing those dropped connections on every rotation.
    const refused = vhost?.policy !== chosen?.host?.policy ? 'tls_sni_mismatch' : vhost && policyViolation(socket, vhost);
    if (refused) {
      metrics.refusedConnections.inc({ reason: refused });
      socket.destroy();
    }
  });
  // A failed handshake (unknown SNI, a bad client certificate) is the client's problem, not an error of ours.
  server.on('tlsClientError', (_error, socket) => socket.destroy());
  const http = server as unknown as Server;
  SESSIONS.set(http, trackSessions(server as unknown as Http2Server, l));
  return serve(http, l, port, host, bind, admit);
}

/** What {@link handOver} changes on Node's `tls.Server` for one synchronous call (public fields, and `_sharedCreds`: the context new connections are made from). */
interface TlsServerInternals {
  _sharedCreds: SecureContext | undefined;
  requestCert: boolean;
}

/** What a connection's ClientHello chose, kept on the raw socket. */
const CHOSEN = Symbol('gatehouse.tlsChosen');

/** The TLS host a ClientHello chose (undefined: none), and the table of certificates it was chosen from. */
interface Chosen {
  readonly host: TlsHost | undefined;
  readonly table: TlsTable;
}

/** What was chosen for a TLS connection before its handshake (undefined: not known). */
function chosenOf(socket: TLSSocket): Chosen | undefined {
  return (socket as TLSSocket & { _parent?: { [CHOSEN]?: Chosen } })._parent?.[CHOSEN];
}

/**
 * Runs Node's TLS connection listener with `vhost`'s SecureContext and client-certificate
 * setting as the server's for that one call. The listener makes the connection's TLS socket
 * (and OpenSSL its SSL object, which copies versions, suites, curves, certificate and verify
 * mode from that context) synchronously, so no other connection can see the swap.
 */
function handOver(server: TlsServerInternals, tlsConnection: (socket: Socket) => void, socket: Socket, vhost: TlsHost | undefined, own: SecureContext): void {
  const requestCert = server.requestCert;
  server._sharedCreds = vhost?.context ?? own;
  server.requestCert = vhost?.requireClientCert ?? false;
  try {
    tlsConnection.call(server, socket);
  } finally {
    server._sharedCreds = own;
    server.requestCert = requestCert;
  }
}

/**
 * Reads a TLS connection's ClientHello (bounded in bytes and in time), puts its bytes back, and
 * passes on its SNI name. Malformed, oversized or unfinished hellos close the connection.
 */
function sniffClientHello(socket: Socket, timeoutMs: number, route: (servername: string | undefined) => void): void {
  const refuse = (reason: 'tls_client_hello' | 'tls_client_hello_timeout'): void => {
    metrics.refusedConnections.inc({ reason });
    socket.destroy();
  };
  readPrefix(socket, timeoutMs, {
    parse: (bytes) => parseClientHello(bytes, MAX_CLIENT_HELLO_BYTES),
    timedOut: () => refuse('tls_client_hello_timeout'),
    done(hello, bytes) {
      if (hello.kind === 'invalid') return refuse('tls_client_hello');
      socket.pause();
      socket.unshift(bytes);
      // The TLS socket takes over the connection's handle and reads what was put back first.
      route(hello.servername);
    },
  });
}

/**
 * Why a TLS connection breaks its VirtualService's policy, or undefined. The handshake already
 * ran under that policy's context; checked again after it, as a second line.
 */
function policyViolation(socket: TLSSocket, host: TlsHost): 'tls_client_certificate' | 'tls_version' | 'tls_cipher' | undefined {
  if (host.requireClientCert && !socket.authorized) return 'tls_client_certificate';
  const version = PROTOCOL_ORDER[socket.getProtocol() ?? ''] ?? 0;
  if (version < host.minVersion || version > host.maxVersion) return 'tls_version';
  if (host.ciphers && version < 13) {
    const cipher = socket.getCipher();
    if (!host.ciphers.has(cipher.name) && !host.ciphers.has(cipher.standardName)) return 'tls_cipher';
  }
  return undefined;
}

/**
 * One client address may hold a share of the connections only (issue 29 finding 5): the
 * function admits a socket (false: refused and destroyed) and counts it until it closes.
 */
function clientAdmission(l: ListenerLimits): (socket: Socket) => boolean {
  const perClient = maxConnectionsPerClient(l);
  const open = new Map<string, number>();
  return (socket) => {
    const address = socket.remoteAddress;
    if (address === undefined) return true;
    const n = (open.get(address) ?? 0) + 1;
    if (n > perClient) {
      metrics.refusedConnections.inc({ reason: 'per_client_limit' });
      socket.destroy();
      return false;
    }
    open.set(address, n);
    socket.once('close', () => {
      const left = open.get(address)! - 1;
      if (left === 0) open.delete(address);
      else open.set(address, left);
    });
    return true;
  };
}

/** The connection limits and timeouts both listeners share, then `listen`. */
async function serve(server: Server, l: ListenerLimits, port: number, host: string, bind: BindOptions, admit: (socket: Socket) => boolean): Promise<{ server: Server; port: number }> {
  server.maxConnections = l.maxConnections;
  // Checked first, so a refused socket never reaches the HTTP/1.1, HTTP/2 or TLS machinery; on a
  // PROXY protocol listener, once the header has named the client (onConnection).
  if (!l.proxyProtocol) server.prependListener('connection', (socket: Socket) => void admit(socket));
  // A request pipelined after `Connection: close` must not cost the first its answer (issue 29).
  server.on('clientError', onClientError);
  // Node's header timeout only starts with the first byte: a connection that never sends one
  // would stay open for ever (1,100 of them exhausted a 1024 fd limit). Until its first request
  // a socket gets the header timeout as an inactivity limit, then the stream idle timeout.
  server.on('connection', (socket: Socket) => {
    if (!socket.destroyed) socket.setTimeout(l.requestHeadersTimeoutMs, () => socket.destroy());
  });
  const serving = (req: IncomingMessage): void => {
    // HTTP/2 streams share their connection: the session's timeouts are set in ./http2.ts.
    if (isHttp2Request(req)) return;
    const socket = req.socket as Socket & { [SERVING]?: true };
    if (socket[SERVING]) return;
    socket[SERVING] = true;
    socket.setTimeout(l.idleTimeoutMs);
  };
  // Run by the request listener itself rather than as a second one: with two listeners, Node's
  // emit copies the listener array on every request.
  const listeners = server.listeners('request') as RequestListener[];
  if (listeners.length === 1) {
    const handle = listeners[0]!;
    server.removeListener('request', handle);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      handle(req, res);
      serving(req);
    });
  } else server.on('request', serving);
  // Without a listener Node drops CONNECT silently; tunnels are not supported, so say so.
  server.on('connect', (_req, socket: Duplex) => {
    socket.on('error', () => {});
    socket.end(CONNECT_REFUSED);
  });
  // Node's net.Server takes over another server's listening handle (`listen(server)`); the old
  // server must then forget it, or closing it would close the socket both now share.
  const previous = bind.takeOver as (Server & { _handle?: unknown }) | undefined;
  const handOver = previous?._handle ? previous : undefined;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const listening = () => {
      server.off('error', reject);
      resolve();
    };
    if (handOver) server.listen(handOver, listening);
    else server.listen({ port, host, ...(bind.reusePort ? { reusePort: true } : {}) }, listening);
  });
  if (handOver) handOver._handle = null;
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

/**
 * Fails like a plain `listen` would when another process listens on `port` (EADDRINUSE): a
 * probe socket without SO_REUSEPORT binds and closes at once. Listeners bound with `reusePort`
 * are probed first, so they never silently share a port with someone else's. Port 0 needs no probe.
 */
export function assertPortFree(port: number, host: string): Promise<void> {
  if (port === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const probe = createNetServer();
    probe.once('error', reject);
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}
