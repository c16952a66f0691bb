import { readPrefix } from './read-prefix.ts';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { metrics } from '../admin/metrics.ts';
import type { Logger } from '../log/logger.ts';
import { MAX_CLIENT_HELLO_BYTES, parseClientHello } from './client-hello.ts';
import { readProxyHeader, type ProxyProtocolPolicy } from './proxy-protocol.ts';
import type { TcpRoute, TcpRoutes, TcpTarget } from './tcp-routes.ts';

/** A TCP proxy listener's settings (Gateway `tcpGateway.options`, `useProxyProto`, the process's limits). */
export interface TcpListenerSettings {
  /** `namespace/name` of the Gateway (metrics, logs). */
  readonly gateway: string;
  readonly address: string;
  readonly port: number;
  readonly proxyProtocol?: ProxyProtocolPolicy | undefined;
  /** Connections open at once (`options.connectionLimit.maxActiveConnections`, else the process's `--max-connections`). */
  readonly maxConnections: number;
  /** No bytes either way for this long closes both sides (`tcpProxySettings.idleTimeout`; Envoy's default 1 h). */
  readonly idleTimeoutMs: number;
  /** Time for a PROXY header and a ClientHello to arrive, and for a terminated handshake (the process's request headers timeout). */
  readonly helloTimeoutMs: number;
  /** Upstream addresses tried for a connection (`tcpProxySettings.maxConnectAttempts`, default 1). */
  readonly maxConnectAttempts: number;
  /** Time for one upstream connect (Envoy's cluster default, 5 s). */
  readonly connectTimeoutMs: number;
}

/** Envoy's tcp_proxy idle timeout default. */
export const DEFAULT_TCP_IDLE_TIMEOUT_MS = 3_600_000;
export const DEFAULT_TCP_CONNECT_TIMEOUT_MS = 5_000;

type Result = 'proxied' | 'no_route' | 'connect_failure' | 'tls_handshake' | 'hello_invalid' | 'hello_timeout' | 'connection_limit';

/**
 * A TCP proxy listener (Gloo's `tcpGateway`, Envoy's `tcp_proxy`; docs/tcp-proxy.md): each
 * connection is matched to a TCP host (by the SNI of its ClientHello when a host has an
 * sslConfig, read without consuming it), then piped both ways to an upstream address, with
 * backpressure, half-close (a FIN is passed on and the other direction keeps flowing), an idle
 * timeout and a connection cap. TLS is passed through untouched, or terminated when the host's
 * sslConfig has a certificate. Routes change in place with {@link update}; open connections keep
 * the upstream they have.
 */
export class TcpProxyListener {
  private routes: TcpRoutes;
  private readonly settings: TcpListenerSettings;
  private readonly server: Server;
  private readonly open = new Set<Socket>();

  private constructor(routes: TcpRoutes, settings: TcpListenerSettings) {
    this.routes = routes;
    this.settings = settings;
    // Half-open on both sides: a client's FIN is passed upstream and the answer still comes back.
    this.server = createServer({ allowHalfOpen: true }, (socket) => this.accept(socket));
    this.server.maxConnections = settings.maxConnections;
    this.server.on('drop', () => this.count('-', 'connection_limit'));
  }

  /** Binds a listener (`reusePort`: beside the one it replaces, or another worker's). */
  static async listen(routes: TcpRoutes, settings: TcpListenerSettings, logger: Logger, bind: { reusePort?: boolean } = {}): Promise<TcpProxyListener> {
    const listener = new TcpProxyListener(routes, settings);
    await new Promise<void>((resolve, reject) => {
      listener.server.once('error', reject);
      listener.server.listen({ port: settings.port, host: settings.address, ...(bind.reusePort ? { reusePort: true } : {}) }, () => {
        listener.server.off('error', reject);
        resolve();
      });
    });
    // An accept error after binding (EMFILE) must not go unhandled.
    listener.server.on('error', (error) => logger.error({ err: error, code: 'GH_TCP_PROXY', gateway: settings.gateway }, 'TCP proxy listener error'));
    return listener;
  }

  /** The port bound. */
  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** New connections use `routes` from now on. */
  update(routes: TcpRoutes): void {
    this.routes = routes;
  }

  /** Stops accepting; open connections get `graceMs` to finish, then are cut. */
  async close(graceMs: number): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    const deadline = setTimeout(() => {
      for (const socket of this.open) socket.destroy();
    }, graceMs);
    try {
      await closed;
    } finally {
      clearTimeout(deadline);
    }
  }

  private count(host: string, result: Result): void {
    metrics.tcpConnections.inc({ gateway: this.settings.gateway, host, result });
  }

  private accept(socket: Socket): void {
    const { gateway, proxyProtocol, helloTimeoutMs } = this.settings;
    this.open.add(socket);
    metrics.tcpActiveConnections.inc({ gateway });
    // Every error ends in a close (below); none may go unhandled (SPEC 4.1).
    socket.on('error', () => socket.destroy());
    socket.once('close', () => {
      this.open.delete(socket);
      metrics.tcpActiveConnections.dec({ gateway });
    });
    // Until it is piped: a backstop for silence. The PROXY header and ClientHello readers have their
    // own absolute bound of helloTimeoutMs and count why they close; this one must not fire first
    // (it did under load, and the silent connections went uncounted as hello timeouts).
    socket.setTimeout(2 * helloTimeoutMs, () => socket.destroy());
    const routes = this.routes;
    const route = () => (routes.inspectsHello ? this.inspect(socket, routes) : this.forward(socket, routes.choose(false, undefined), undefined));
    if (!proxyProtocol) return route();
    readProxyHeader(socket, proxyProtocol, helloTimeoutMs, () => {
      route();
      // Paused by the header reader: the hello reader is attached now (forward() pipes, which resumes).
      if (routes.inspectsHello) socket.resume();
    });
  }

  /** Reads the ClientHello without consuming it (bounded in bytes and time) and forwards by its SNI. */
  private inspect(socket: Socket, routes: TcpRoutes): void {
    readPrefix(socket, this.settings.helloTimeoutMs, {
      parse: (bytes) => parseClientHello(bytes, MAX_CLIENT_HELLO_BYTES),
      timedOut: () => {
        this.count('-', 'hello_timeout');
        socket.destroy();
      },
      done: (hello, bytes) => {
        // Not TLS from its first byte: a plain-TCP host may take it; a broken hello is refused.
        if (hello.kind === 'invalid' && bytes[0] === 22) {
          this.count('-', 'hello_invalid');
          socket.destroy();
          return;
        }
        const servername = hello.kind === 'hello' ? hello.servername : undefined;
        socket.pause();
        if (bytes.length) socket.unshift(bytes);
        this.forward(socket, routes.choose(hello.kind === 'hello', servername), servername);
      },
    });
  }

  /** Connects `route`'s upstream and pipes (terminating TLS first when the host says so). */
  private forward(socket: Socket, route: TcpRoute | undefined, servername: string | undefined): void {
    if (!route || route.broken) {
      // A broken host was logged once when compiled (GatewayListeners); per connection it is only counted.
      this.count(route?.name ?? '-', 'no_route');
      socket.destroy();
      return;
    }
    if (route.tls.kind !== 'terminate') return this.dial(socket, socket, route, servername);
    const { context, requireClientCert } = route.tls;
    // The TLS socket takes over the connection and reads the ClientHello that was put back first.
    const tls = new TLSSocket(socket, { isServer: true, secureContext: context, requestCert: requireClientCert, rejectUnauthorized: requireClientCert });
    const handshake = setTimeout(() => fail(), this.settings.helloTimeoutMs);
    let secure = false;
    const fail = (): void => {
      clearTimeout(handshake);
      this.count(route.name, 'tls_handshake');
      tls.destroy();
      socket.destroy();
    };
    // For the connection's whole life (an alert while the upstream is dialled included): never unhandled.
    tls.on('error', () => {
      if (!secure) return fail();
      tls.destroy();
      socket.destroy();
    });
    tls.once('secure', () => {
      secure = true;
      clearTimeout(handshake);
      // OpenSSL refused a missing certificate already; one not signed by the root CA is seen here
      // (what tls.Server does for its own sockets: Node verifies after the handshake, not in it).
      if (requireClientCert && !verified(tls)) return fail();
      this.dial(socket, tls, route, servername);
    });
  }

  /** Dials the route's addresses in turn (up to `maxConnectAttempts`), then pipes `client` and the upstream both ways. */
  private dial(raw: Socket, client: Socket, route: TcpRoute, servername: string | undefined): void {
    const { gateway, connectTimeoutMs, idleTimeoutMs } = this.settings;
    const targets = route.targets(servername, this.settings.maxConnectAttempts);
    // Held until the upstream answers: bytes wait in the socket (its buffer, then the kernel's).
    client.pause();
    // Connect timeouts bound the wait from here (a server-speaks-first protocol has a silent client).
    raw.setTimeout(0);
    let pending: Socket | undefined;
    // The client left while connecting.
    const onGone = (): void => {
      pending?.destroy();
    };
    client.once('close', onGone);
    const attempt = (i: number): void => {
      const target: TcpTarget | undefined = targets[i];
      if (!target || client.destroyed) {
        client.removeListener('close', onGone);
        if (!client.destroyed) this.count(route.name, targets.length ? 'connect_failure' : 'no_route');
        // Closed cleanly: whatever the gateway owes the client is flushed, then the FIN.
        client.end();
        client.destroySoon();
        return;
      }
      const upstream = connect({ host: target.addr, port: target.port, allowHalfOpen: true });
      pending = upstream;
      upstream.setNoDelay(true);
      const onFail = (): void => {
        upstream.destroy();
        attempt(i + 1);
      };
      upstream.setTimeout(connectTimeoutMs, onFail);
      upstream.once('error', onFail);
      upstream.once('connect', () => {
        upstream.removeListener('error', onFail);
        client.removeListener('close', onGone);
        upstream.setTimeout(0);
        this.count(route.name, 'proxied');
        this.pipe(client, upstream, route.name, gateway, idleTimeoutMs);
      });
    };
    attempt(0);
  }

  private pipe(client: Socket, upstream: Socket, host: string, gateway: string, idleTimeoutMs: number): void {
    const close = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
    // One side gone for good: the other gets what is already queued for it, then closes.
    client.once('close', () => upstream.destroySoon());
    upstream.once('close', () => client.destroySoon());
    // Inactivity on either socket (reads and writes both count) closes both.
    client.setTimeout(idleTimeoutMs, close);
    upstream.setTimeout(idleTimeoutMs, close);
    upstream.once('close', () => {
      metrics.tcpBytes.inc({ gateway, host, direction: 'received' }, upstream.bytesWritten);
      metrics.tcpBytes.inc({ gateway, host, direction: 'sent' }, upstream.bytesRead);
    });
    // pipe(): backpressure both ways, and a FIN (end) passed on as end() (half-close).
    client.pipe(upstream);
    upstream.pipe(client);
  }
}

/** Whether a server-side TLS socket's client certificate verified against its context's CA (a socket Node cannot tell about: no). */
function verified(tls: TLSSocket): boolean {
  const handle = (tls as unknown as { _handle?: { verifyError?: () => Error | null } })._handle;
  if (typeof handle?.verifyError !== 'function') return false;
  return handle.verifyError() === null && Object.keys(tls.getPeerCertificate()).length > 0;
}
