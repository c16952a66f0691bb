import type { IncomingHttpHeaders, IncomingMessage, RequestListener } from 'node:http';
import { createServer, Http2ServerRequest, Http2ServerResponse, type Http2Server, type Http2Session, type ServerHttp2Stream } from 'node:http2';

/** The first bytes of every HTTP/2 connection (RFC 9113 3.4). */
export const H2C_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/**
 * HTTP/2 limits of the downstream listeners (SPEC 3.2.1), set deliberately rather than left at
 * library defaults; Envoy's edge recommendations are the reference. docs/operations.md lists them.
 */
export interface Http2Limits {
  /** Streams open at once per connection (Envoy edge: 100). */
  maxConcurrentStreams: number;
  /** Bytes of a request's header block, names and values (Envoy's `max_request_headers_kb`: 60 KiB). */
  maxHeaderListSize: number;
  /** Header fields per request, pseudo-headers included (Envoy's `max_headers_count`: 100, plus 4 pseudo-headers). */
  maxHeaderListPairs: number;
  /** Flow-control window of a stream (Envoy edge: 64 KiB), so one slow stream cannot hold much memory. */
  initialWindowSize: number;
  /** Memory an HTTP/2 session may hold in nghttp2's buffers before new streams are refused (MiB). */
  maxSessionMemoryMb: number;
}

export const DEFAULT_HTTP2_LIMITS: Http2Limits = Object.freeze({
  maxConcurrentStreams: 100,
  maxHeaderListSize: 60 * 1024,
  maxHeaderListPairs: 104,
  initialWindowSize: 64 * 1024,
  maxSessionMemoryMb: 10,
});

/** Node's HTTP/2 server options for `limits`, with the gateway's request and response classes. */
export function http2Settings(limits: Http2Limits) {
  return {
    settings: { maxConcurrentStreams: limits.maxConcurrentStreams, maxHeaderListSize: limits.maxHeaderListSize, initialWindowSize: limits.initialWindowSize, enablePush: false },
    maxHeaderListPairs: limits.maxHeaderListPairs,
    maxSessionMemory: limits.maxSessionMemoryMb,
    // Streams refused for going over maxConcurrentStreams before the session is closed (Node's default, made explicit).
    maxSessionRejectedStreams: 100,
    Http2ServerRequest: GatewayHttp2Request,
    Http2ServerResponse: GatewayHttp2Response,
  } as const as Record<string, unknown>;
}

/** The HTTP/2 cleartext (prior knowledge) server the plain listener hands preface connections to; it never listens itself. */
export function createH2cServer(handler: RequestListener, limits: { http2: Http2Limits }): Http2Server {
  return createServer(http2Settings(limits.http2), handler as never);
}

/** Protocols the gateway tunnels after an HTTP/1.1 `Upgrade` (Gloo's default `upgrades`: WebSocket only). */
export const TUNNELLED_UPGRADES: ReadonlySet<string> = new Set(['websocket']);

/**
 * What to do with a request's `Upgrade` header (issue 29 findings 12, 18):
 * - `none`: no Upgrade, or only `h2c` (RFC 7540 3.2, removed by RFC 9113): the request is
 *   answered over HTTP/1.1 as Envoy's codec does, on either listener; `h2c` is never forwarded;
 * - `websocket` (or another of {@link TUNNELLED_UPGRADES}): routed, authorized, then tunnelled,
 *   with `h2c` dropped from the list the upstream sees;
 * - `refused`: any other protocol, or more than one besides `h2c`: answered 403 before routing
 *   (Envoy's answer to an upgrade its route does not allow), so nothing reaches an upstream
 *   that could pick another protocol from the list.
 */
export function upgradeDecision(req: IncomingMessage): { kind: 'none' } | { kind: 'tunnel'; protocol: string } | { kind: 'refused'; protocol: string } {
  const upgrade = req.headers.upgrade;
  if (upgrade === undefined) return { kind: 'none' };
  const protocols: string[] = [];
  for (const token of (Array.isArray(upgrade) ? upgrade.join(',') : upgrade).split(',')) {
    const protocol = token.trim().toLowerCase();
    if (protocol !== '' && protocol !== 'h2c') protocols.push(protocol);
  }
  if (protocols.length === 0) return { kind: 'none' };
  if (protocols.length === 1 && TUNNELLED_UPGRADES.has(protocols[0]!)) return { kind: 'tunnel', protocol: protocols[0]! };
  return { kind: 'refused', protocol: protocols.join(', ') };
}

/** Whether `req` came over HTTP/2 (an HTTP/1.1 request line may say `HTTP/2.0`: that is not HTTP/2). */
export function isHttp2Request(req: IncomingMessage): boolean {
  return (req as unknown) instanceof Http2ServerRequest;
}


/**
 * Follows a server's HTTP/2 sessions for graceful close, and gives each one the listener's
 * timeouts: a session must open its first stream within `requestHeadersTimeoutMs` (a preface
 * and nothing else is a connection that sent no request, as over HTTP/1.1: issue 29 finding 5),
 * then nothing sent either way for `idleTimeoutMs` closes it. Rapid reset (CVE-2023-44487) is
 * refused by nghttp2 itself (1.57+, bundled with Node): a client resetting streams faster than
 * its rate limit (a burst of 1,000, then 33 a second) gets GOAWAY and loses the connection;
 * `maxConcurrentStreams` bounds the work one connection can start at once.
 */
export function trackSessions(server: Http2Server, limits: { requestHeadersTimeoutMs: number; idleTimeoutMs: number; http2: Http2Limits }): Set<Http2Session> {
  const sessions = new Set<Http2Session>();
  server.on('session', (session: Http2Session) => {
    sessions.add(session);
    absorbUnsolicitedPingAcks(session);
    const firstStream = setTimeout(() => session.destroy(), limits.requestHeadersTimeoutMs);
    session.once('stream', () => clearTimeout(firstStream));
    session.setTimeout(limits.idleTimeoutMs, () => session.close());
    session.on('error', () => session.destroy());
    session.once('close', () => {
      clearTimeout(firstStream);
      sessions.delete(session);
    });
  });
  // Errors of one session are that session's; never the process's.
  server.on('sessionError', () => {});
  return sessions;
}

/** PINGs of its own a session keeps outstanding, each able to absorb one unsolicited PING ACK (see {@link absorbUnsolicitedPingAcks}). */
const PING_BUDGET = 2;
/** The payload of those PINGs: an ACK carrying another one answered nothing of ours. */
const PING_PAYLOAD = Buffer.from('gatehse!', 'latin1');
/** Re-arming after the client answered our PINGs: at most this often, and only when it opens streams. */
const PING_REARM_MS = 10_000;
/** Re-arming after an unsolicited ACK used one up: at most this often (an ACK flood gets at most as many PINGs back). */
const PING_REARM_UNSOLICITED_MS = 100;

/**
 * Node's HTTP/2 core (node_http2.cc, HandlePingFrame) destroys a session that receives a PING
 * ACK answering no PING of ours ("not going to tolerate such nonsense"), while RFC 9113 6.7
 * makes it no error and nghttp2 and Envoy ignore it (issue 29 finding 7, h2spec 6.7/2). The
 * error reaches JavaScript as `NGHTTP2_ERR_PROTO`, the same code as real protocol errors (a
 * frame on a closed stream, a bad preface), which must still end the session: ignoring the code
 * broke ten h2spec cases. So each session keeps {@link PING_BUDGET} PINGs of its own
 * outstanding, and an ACK, asked for or not, answers one of them instead of being an error.
 * They are sent when the session starts; an ACK with another payload (unsolicited) re-arms at
 * once (at most every 100 ms), answered ones only when the client opens a stream 10 s or more
 * after the last arming: never in reply to our own answered PINGs, so two peers cannot ping
 * each other in a loop. More unsolicited ACKs than the budget within 100 ms close the session,
 * as Node closes it today (only the sender's own connection).
 */
function absorbUnsolicitedPingAcks(session: Http2Session): void {
  let outstanding = 0;
  let lastArmed = 0;
  const arm = (): void => {
    lastArmed = Date.now();
    while (outstanding < PING_BUDGET && !session.closed && !session.destroyed) {
      try {
        if (!session.ping(PING_PAYLOAD, answered)) return;
      } catch {
        // The session is closing: nothing to absorb any more.
        return;
      }
      outstanding++;
    }
  };
  function answered(error: Error | null, _duration: number, payload: Buffer): void {
    outstanding--;
    if (error || payload.equals(PING_PAYLOAD)) return;
    if (Date.now() - lastArmed >= PING_REARM_UNSOLICITED_MS) arm();
  }
  arm();
  session.on('stream', () => {
    if (outstanding < PING_BUDGET && Date.now() - lastArmed >= PING_REARM_MS) arm();
  });
}

const PLAIN = Symbol('gatehouse.plainHeaders');

/**
 * An HTTP/2 request as the gateway reads requests: `headers` without pseudo-headers and with
 * `host` from `:authority` (as HTTP/1.1 has it), so routing, auth and forwarding are one path.
 * `:authority` wins over a `host` header, which is discarded (RFC 9113 8.3.1: "MUST NOT use the
 * Host header field to determine the target URI if :authority is present"; Envoy does the same
 * since 1.28, `http2_discard_host_header`). Refusing a disagreeing pair (a SHOULD) would break
 * real clients: h2load and nghttp send `-H host: …` next to the URL's `:authority`.
 * Node's `method`, `url` and `authority` still read the original header block.
 */
export class GatewayHttp2Request extends Http2ServerRequest {
  declare [PLAIN]: IncomingHttpHeaders;

  constructor(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, options: object, rawHeaders: string[]) {
    super(stream, headers as never, options as never, rawHeaders);
    const plain: IncomingHttpHeaders = {};
    for (const name in headers) {
      if (name.charCodeAt(0) !== 0x3a) plain[name] = headers[name];
    }
    const authority = headers[':authority'];
    if (typeof authority === 'string') plain.host = authority;
    this[PLAIN] = plain;
  }
}
// Accessors over what Node's typings call plain properties.
Object.defineProperty(GatewayHttp2Request.prototype, 'headers', {
  get(this: GatewayHttp2Request) {
    return this[PLAIN];
  },
});

/** An HTTP/2 response that, like Node's HTTP/1.1 one, says when its stream is gone (`destroyed`). */
export class GatewayHttp2Response extends Http2ServerResponse {}
Object.defineProperty(GatewayHttp2Response.prototype, 'destroyed', {
  get(this: GatewayHttp2Response) {
    return this.stream.destroyed;
  },
});
