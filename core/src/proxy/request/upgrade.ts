import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ErrorCodes } from '../../errors.ts';
import type { RequestContext } from '../context.ts';
import { HOP_BY_HOP } from './header-ops.ts';
import { sendLocalReply } from './local-reply.ts';
import type { UpstreamCluster } from '../upstream/upstream-cluster.ts';

/** What the listener's `upgrade` event handed over, kept on the request while it goes through routing and auth. */
export interface PendingUpgrade {
  readonly socket: Duplex;
  readonly head: Buffer;
  /** The client's `Upgrade` value (e.g. `websocket`), read before hop-by-hop headers are dropped. */
  readonly protocol: string;
  /** 101 once the tunnel is up (the access log's status). */
  status?: number;
}

export const UPGRADE = Symbol('gatehouse.upgrade');

/** The pending upgrade of `req`, if the request came through the listener's `upgrade` event. */
export function pendingUpgrade(req: IncomingMessage): PendingUpgrade | undefined {
  return (req as IncomingMessage & { [UPGRADE]?: PendingUpgrade })[UPGRADE];
}

/** Limits of an upgraded connection (a WebSocket). */
export interface UpgradeLimits {
  /** No bytes either way for this long: both sides are closed (default 5 min, Envoy's stream idle timeout). */
  idleTimeoutMs: number;
  /** The tunnel is closed after this long whatever it does; 0 = no limit (default). */
  maxDurationMs: number;
}

export const DEFAULT_UPGRADE_LIMITS: UpgradeLimits = { idleTimeoutMs: 300_000, maxDurationMs: 0 };

/**
 * Proxies an HTTP/1.1 Upgrade (WebSocket) after routing and auth allowed it (SPEC 3.2.1): the
 * request goes to an upstream host with its `Connection: upgrade` and `Upgrade` restored;
 * on 101 the upstream's handshake answer goes to the client and bytes flow both ways until
 * either side closes (which closes the other), the idle timeout or the maximum duration.
 * An upstream that refuses the upgrade or cannot be reached: 502 / 503, on the client's socket.
 * `res` is the listener's ServerResponse on the client's socket, for those answers; `done`
 * runs once when the connection is over (the access log line).
 */
export function forwardUpgrade(req: IncomingMessage, res: ServerResponse, pending: PendingUpgrade, ctx: RequestContext, cluster: UpstreamCluster, path: string, limits: UpgradeLimits, done: () => void): void {
  const client = pending.socket;
  const host = cluster.pick();
  ctx.upstream = host.origin;
  ctx.cluster = cluster.name;
  const headers: string[] = [];
  for (const [name, value] of Object.entries(ctx.headers)) {
    // `expect` as on any request (./forward.ts): answered here, and undici refuses it.
    if (value === undefined || HOP_BY_HOP.has(name) || name === 'expect') continue;
    if (Array.isArray(value)) for (const v of value) headers.push(name, v);
    else headers.push(name, value);
  }
  headers.push('x-forwarded-for', req.socket.remoteAddress ?? '', 'x-forwarded-proto', (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http');
  host.dispatcher
    .upgrade({ path, method: req.method ?? 'GET', headers, protocol: pending.protocol })
    .then(
      ({ headers: answer, socket: upstream }) => {
        if (client.destroyed) {
          upstream.destroy();
          return done();
        }
        // The 101 goes straight onto the client's socket: the ServerResponse is done with.
        res.detachSocket(client as never);
        pending.status = 101;
        let head = 'HTTP/1.1 101 Switching Protocols\r\n';
        for (const [name, value] of Object.entries(answer)) {
          for (const v of Array.isArray(value) ? value : [value]) if (v !== undefined && !/[\r\n]/.test(String(v))) head += `${name}: ${v}\r\n`;
        }
        client.write(`${head}\r\n`);
        if (pending.head.length > 0) upstream.write(pending.head);
        tunnel(client, upstream, limits, done);
      },
      (error: Error & { code?: string }) => {
        if (client.destroyed) return done();
        const refused = error.code === 'UND_ERR_SOCKET' || /upgrade/i.test(error.message);
        if (refused) sendLocalReply(res, 502, ErrorCodes.UPSTREAM_UNAVAILABLE, `the upstream did not accept the ${pending.protocol} upgrade (${error.message})`, ctx.responseHeaders);
        else sendLocalReply(res, 503, ErrorCodes.UPSTREAM_UNAVAILABLE, `upstream connect error (${error.code ?? error.message})`, ctx.responseHeaders);
      },
    );
}

/** Pipes both ways; whichever side ends or fails closes the other; idle and duration limits apply. */
function tunnel(client: Duplex, upstream: Duplex, limits: UpgradeLimits, done: () => void): void {
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  const close = () => {
    if (closed) return;
    closed = true;
    clearTimeout(timer);
    client.destroy();
    upstream.destroy();
    done();
  };
  // Small frames (chat, echoes) go out at once: Nagle's wait on one leg would add a round trip per message.
  for (const socket of [client, upstream]) (socket as Duplex & { setNoDelay?: (on: boolean) => void }).setNoDelay?.(true);
  for (const [from, to] of [
    [client, upstream],
    [upstream, client],
  ] as const) {
    from.on('error', close);
    from.on('close', close);
    from.on('end', close);
    from.pipe(to, { end: false });
    if (limits.idleTimeoutMs > 0) (from as Duplex & { setTimeout?: (ms: number, cb: () => void) => void }).setTimeout?.(limits.idleTimeoutMs, close);
  }
  if (limits.maxDurationMs > 0) timer = setTimeout(close, limits.maxDurationMs);
}
