import { connectivityState, credentials, makeClientConstructor, Metadata, status as GrpcStatus, type Client, type ChannelOptions, type ServiceError } from '@grpc/grpc-js';
import type { ServiceDefinition } from '@grpc/grpc-js';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { GatehouseError } from '../../errors.ts';
import type { CallerToken } from '../caller-token.ts';
import { ExtAuthCodes } from '../codes.ts';
import type { AuthDecision, CheckRequest } from '../step.ts';
import { checkRequestToMessage, decisionFromMessage, type CheckResponseMessage } from './check-messages.ts';
import { AUTHORIZATION_SERVICE, authorizationPackage } from './protos.ts';

type CheckCallback = (error: ServiceError | null, response?: CheckResponseMessage) => void;
type CallOptions = { deadline: number };
type CheckFn = {
  (request: unknown, options: CallOptions, callback: CheckCallback): void;
  (request: unknown, metadata: Metadata, options: CallOptions, callback: CheckCallback): void;
};

/**
 * How the channel connects and notices a dead peer (issue 27 item 3). gRPC's defaults suit
 * long-lived clients on the open Internet, not a gateway in front of a fail-closed auth server:
 * reconnect backoff grows to 120 s (a pod replaced in 5 s stayed unreachable for minutes) and a
 * connection attempt has no timeout (a SYN to a deleted pod's address is retried by the kernel
 * for ~2 minutes, the Service's NAT pinned to it).
 */
export interface ChannelTuning {
  /** HTTP/2 PING interval; 0: none. Off unless asked: servers such as grpc-go refuse pings more often than every 5 minutes. */
  keepaliveTimeMs?: number;
  /** A PING unanswered this long closes the connection. */
  keepaliveTimeoutMs?: number;
  /** A connection not READY this long after it started is dropped and a new one opened (a new source port, so a Service's NAT picks a live endpoint). */
  connectTimeoutMs?: number;
  initialReconnectBackoffMs?: number;
  maxReconnectBackoffMs?: number;
  /** A check failing with UNAVAILABLE (a reconnect under way) is sent again (up to 3 times), waiting for the connection, within its deadline. */
  retryUnavailable?: boolean;
  /**
   * Spread checks over every address the host name resolves to (round robin over one connection
   * each), looked up again every `refreshMs`. Behind a headless Service that is one connection per
   * auth server pod: a pod that goes away takes only its own connection, and checks go on over
   * the others at once instead of waiting for a reconnect through a Service address (a real
   * cluster's extauth pod deletion timed out 2 checks of 113 at the 200 ms deadline that way).
   * `resolve`: the lookup (default: the system resolver, every address).
   */
  endpoints?: { refreshMs: number; resolve?: (host: string) => Promise<string[]> };
}

/** The gateway's channel to its own `gatehouse extauth` (a grpc-js server, which accepts frequent pings). */
export const GATEWAY_CHANNEL: Required<ChannelTuning> = {
  keepaliveTimeMs: 10_000,
  keepaliveTimeoutMs: 5_000,
  connectTimeoutMs: 1_000,
  initialReconnectBackoffMs: 100,
  maxReconnectBackoffMs: 1_000,
  retryUnavailable: true,
  endpoints: { refreshMs: 2_000 },
};

/** The system resolver's addresses for `host`, IPv4 first. */
async function lookupAll(host: string): Promise<string[]> {
  return (await lookup(host, { all: true, order: 'ipv4first' })).map((a) => a.address);
}

/** A grpc-js target naming `addresses` (one family: IPv4 when there is any) on `port`, or undefined for none. */
export function addressListTarget(addresses: readonly string[], port: number): string | undefined {
  const v4 = addresses.filter((a) => isIP(a) === 4);
  const v6 = addresses.filter((a) => isIP(a) === 6);
  if (v4.length) return `ipv4:${[...new Set(v4)].sort().map((a) => `${a}:${port}`).join(',')}`;
  if (v6.length) return `ipv6:${[...new Set(v6)].sort().map((a) => `[${a}]:${port}`).join(',')}`;
  return undefined;
}

/** Attempts after the first that a check failing with UNAVAILABLE gets, within its deadline. */
const MAX_UNAVAILABLE_RETRIES = 3;

/** Any other ext_authz server (passThrough steps): bounded backoff and connect timeout, no pings, no retry. */
export const DEFAULT_CHANNEL: ChannelTuning = { connectTimeoutMs: 5_000, initialReconnectBackoffMs: 250, maxReconnectBackoffMs: 5_000 };

let Constructor: (new (address: string, creds: ReturnType<typeof credentials.createInsecure>, options?: object) => Client) | undefined;

/** Checks that `address` is `host:port` (an IPv6 host in brackets). */
export function parseAddress(address: string): { host: string; port: number } | undefined {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:\s[\]]+):([0-9]{1,5})$/.exec(address);
  const port = match ? Number(match[2]) : NaN;
  if (!match || port < 1 || port > 65535) return undefined;
  return { host: match[1]!, port };
}

/**
 * A plain-text gRPC client of an ext_authz v3 server (`envoy.service.auth.v3.Authorization/Check`).
 * `check` resolves with the decoded decision, or rejects with `GH_EXTAUTH_TIMEOUT` /
 * `GH_EXTAUTH_UNAVAILABLE`; callers choose how to fail.
 */
export class CheckClient {
  readonly address: string;
  private client: Client;
  private call: CheckFn;
  private readonly makeClient: () => Client;
  private readonly tuning: ChannelTuning;
  private connectTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** The grpc-js target in use: the address as given, or the list of its host's addresses. */
  private target: string;
  private refreshTimer: NodeJS.Timeout | undefined;
  /** A channel to a new address list, connecting before it takes over. */
  private next: Client | undefined;
  /** Channels dropped by the connect timeout (tests and logs). */
  reconnects = 0;
  /** Channels replaced because the host's addresses changed (tests and logs). */
  endpointChanges = 0;

  private readonly token: CallerToken | undefined;
  private metadata: { token: string; value: Metadata } | undefined;

  /**
   * `tls`: verify the server against the default trust store (`GRPC_DEFAULT_SSL_ROOTS_FILE_PATH` when set).
   * `token`: sent as `authorization: Bearer <token>` metadata (the server's caller token).
   */
  constructor(address: string, options: { tls?: boolean; token?: CallerToken | undefined; channel?: ChannelTuning } = {}) {
    if (!parseAddress(address)) throw new GatehouseError('GH_BAD_ARGUMENT', `ext_authz address "${address}" must be host:port, e.g. 127.0.0.1:8083`);
    this.address = address;
    Constructor ??= makeClientConstructor(authorizationPackage()[AUTHORIZATION_SERVICE] as ServiceDefinition, 'Authorization') as unknown as typeof Constructor;
    this.tuning = options.channel ?? DEFAULT_CHANNEL;
    const t = this.tuning;
    const channelOptions: ChannelOptions = {
      ...(t.keepaliveTimeMs ? { 'grpc.keepalive_time_ms': t.keepaliveTimeMs, 'grpc.keepalive_timeout_ms': t.keepaliveTimeoutMs ?? 5_000, 'grpc.keepalive_permit_without_calls': 1 } : {}),
      ...(t.initialReconnectBackoffMs ? { 'grpc.initial_reconnect_backoff_ms': t.initialReconnectBackoffMs } : {}),
      ...(t.maxReconnectBackoffMs ? { 'grpc.max_reconnect_backoff_ms': t.maxReconnectBackoffMs } : {}),
      // Each replacement channel must open its own connection, not share the dropped one's subchannel.
      'grpc.use_local_subchannel_pool': 1,
      // One connection per address, every call on a READY one (with a single address: as pick_first).
      ...(t.endpoints ? { 'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }) } : {}),
    };
    const creds = options.tls ? credentials.createSsl() : credentials.createInsecure();
    this.target = address;
    // TLS names the server by the address's host, whatever list of addresses the channel dials.
    const host = parseAddress(address)!.host;
    const nameOverride = options.tls && this.tuning.endpoints ? { 'grpc.ssl_target_name_override': host, 'grpc.default_authority': address } : {};
    this.makeClient = () => new Constructor!(this.target, creds, { ...channelOptions, ...(this.target === address ? {} : nameOverride) });
    this.client = this.makeClient();
    this.call = (this.client as unknown as { Check: CheckFn }).Check.bind(this.client);
    this.token = options.token;
    this.watch(this.client);
    // Connect now rather than on the first check, whose 200 ms budget a TCP + HTTP/2
    // handshake to a cold server can eat.
    this.client.getChannel().getConnectivityState(true);
    const endpoints = this.tuning.endpoints;
    if (endpoints && isIP(host.replace(/^\[|\]$/g, '')) === 0) {
      const port = parseAddress(address)!.port;
      const refresh = () => void this.refresh(host, port, endpoints.resolve ?? lookupAll);
      refresh();
      this.refreshTimer = setInterval(refresh, endpoints.refreshMs).unref();
    }
  }

  /** The addresses checks go to now (the address as given until its host has been looked up). */
  get currentTarget(): string {
    return this.target;
  }

  /**
   * Looks the host up; when its addresses changed, a channel to the new list connects and then
   * takes over (the old one closes once it is no longer current; calls on it finish). A failed
   * lookup keeps what there is.
   */
  private async refresh(host: string, port: number, resolve: (host: string) => Promise<string[]>): Promise<void> {
    let addresses: string[];
    try {
      addresses = await resolve(host);
    } catch {
      return;
    }
    const target = addressListTarget(addresses, port);
    if (this.closed || target === undefined || target === this.target || this.next) return;
    this.target = target;
    const next = this.makeClient();
    this.next = next;
    // Take over once connected (or after the connect timeout: the old addresses are stale too).
    await new Promise<void>((resolve) => next.waitForReady(Date.now() + (this.tuning.connectTimeoutMs ?? 1_000) * 2, () => resolve()));
    this.next = undefined;
    if (this.closed) {
      next.close();
      return;
    }
    const old = this.client;
    this.client = next;
    this.call = (next as unknown as { Check: CheckFn }).Check.bind(next);
    this.watch(next);
    this.endpointChanges++;
    old.close();
  }

  /**
   * The connect timeout: grpc-js has none, so the channel's state is watched, and a channel
   * CONNECTING for longer than `connectTimeoutMs` is replaced by a fresh one (checks queued on
   * the old one fail UNAVAILABLE and, with `retryUnavailable`, go again on the new one).
   */
  private watch(client: Client): void {
    const timeoutMs = this.tuning.connectTimeoutMs;
    if (!timeoutMs) return;
    const channel = client.getChannel();
    const onState = (): void => {
      if (this.client !== client || this.closed) return;
      const state = channel.getConnectivityState(false);
      if (state === connectivityState.SHUTDOWN) return;
      clearTimeout(this.connectTimer);
      this.connectTimer = undefined;
      if (state === connectivityState.CONNECTING) {
        this.connectTimer = setTimeout(() => {
          if (this.client === client && !this.closed && channel.getConnectivityState(false) === connectivityState.CONNECTING) this.replace();
        }, timeoutMs).unref();
      }
      channel.watchConnectivityState(state, Infinity, onState);
    };
    onState();
  }

  private replace(): void {
    const old = this.client;
    this.reconnects++;
    this.client = this.makeClient();
    this.call = (this.client as unknown as { Check: CheckFn }).Check.bind(this.client);
    this.watch(this.client);
    this.client.getChannel().getConnectivityState(true);
    old.close();
  }

  /**
   * `metadataContext`: the request's `attributes.metadata_context` (filter_metadata Structs).
   * Rejects with a GatehouseError whose `cause` is the gRPC error (its `code` tells transport
   * failures, UNAVAILABLE, from others).
   */
  check(request: CheckRequest, timeoutMs: number, metadataContext?: object): Promise<AuthDecision> {
    let message = checkRequestToMessage(request);
    if (metadataContext) message = { ...message, attributes: { ...message.attributes, metadata_context: metadataContext } } as typeof message;
    const deadline = Date.now() + timeoutMs;
    // W3C trace context as gRPC metadata too (as Envoy sends it), for the server's spans (core/src/tracing).
    const traceparent = request.attributes.request.http.headers.traceparent;
    return new Promise((resolve, reject) => {
      let first: ServiceError | undefined;
      let retries = 0;
      const send = (waitForReady: boolean): void => {
        let metadata = this.callMetadata();
        if (waitForReady) {
          // grpc-js reads wait-for-ready from the metadata's options, not the call options.
          metadata = metadata?.clone() ?? new Metadata();
          metadata.setOptions({ waitForReady: true });
        }
        if (traceparent !== undefined) {
          metadata = metadata?.clone() ?? new Metadata();
          metadata.set('traceparent', traceparent);
        }
        if (metadata) this.call(message, metadata, { deadline }, callback);
        else this.call(message, { deadline }, callback);
      };
      const callback = (error: ServiceError | null, response?: CheckResponseMessage): void => {
        if (!error) return resolve(decisionFromMessage(response ?? {}));
        // UNAVAILABLE: refused, reset, or the channel dropped by the connect timeout; again,
        // waiting for the reconnect, while the deadline leaves room (a check is idempotent). More
        // than once: behind a Service, a retry can reach a pod that is itself shutting down (a real
        // cluster's extauth pod deletion denied 1 request of 99 with a single retry).
        if (retries < MAX_UNAVAILABLE_RETRIES && this.tuning.retryUnavailable && !this.closed && (error.code === GrpcStatus.UNAVAILABLE || error.code === GrpcStatus.CANCELLED) && deadline - Date.now() > 5) {
          first ??= error;
          retries++;
          return send(true);
        }
        // A retry that ran out of time reports why it was needed: the server was unavailable.
        const cause = first && error.code === GrpcStatus.DEADLINE_EXCEEDED ? first : error;
        const timedOut = cause.code === GrpcStatus.DEADLINE_EXCEEDED;
        reject(
          new GatehouseError(
            timedOut ? ExtAuthCodes.TIMEOUT : ExtAuthCodes.UNAVAILABLE,
            timedOut
              ? `ext_authz server ${this.address} did not answer within ${timeoutMs}ms`
              : `ext_authz server ${this.address} failed: ${cause.details || cause.message}${first ? ` (retried ${retries === 1 ? 'once' : `${retries} times`}${cause === first ? ', no reconnect within the deadline' : ''})` : ''}`,
            { cause },
          ),
        );
      };
      send(false);
    });
  }

  /** `authorization: Bearer <token>` with the newest token (one Metadata object while it is the same). */
  private callMetadata(): Metadata | undefined {
    const token = this.token?.accepted()[0];
    if (token === undefined) return undefined;
    if (this.metadata?.token !== token) {
      const value = new Metadata();
      value.set('authorization', `Bearer ${token}`);
      this.metadata = { token, value };
    }
    return this.metadata.value;
  }

  /**
   * Waits (up to `timeoutMs`) until the channel is connected, and runs the Check message
   * encoders and decoders once. A gateway that takes traffic before this fails its first checks
   * closed: a rollout's new pod answered 403 to its first request on a loaded node, the TCP and
   * HTTP/2 handshake plus protobuf's first-use code generation eating the 200 ms budget
   * (issue 27 item 4). Like Envoy's cluster warming before a listener takes traffic.
   * Resolves whether the channel is connected; never rejects.
   */
  warm(timeoutMs: number): Promise<boolean> {
    const definition = (authorizationPackage()[AUTHORIZATION_SERVICE] as ServiceDefinition).Check!;
    const sample = checkRequestToMessage({ attributes: { request: { http: { method: 'GET', path: '/', host: 'warm', scheme: 'http', headers: { host: 'warm' } } }, context_extensions: { config_id: 'warm' } } });
    definition.requestDeserialize(definition.requestSerialize(sample));
    definition.responseDeserialize(definition.responseSerialize({ status: { code: 7 } }));
    return new Promise((resolve) => {
      this.client.waitForReady(Date.now() + timeoutMs, (error) => resolve(!error));
    });
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.connectTimer);
    clearInterval(this.refreshTimer);
    this.next?.close();
    this.client.close();
  }
}
