import { credentials, makeClientConstructor, Metadata, status as GrpcStatus, type Client, type ServiceError } from '@grpc/grpc-js';
import type { ServiceDefinition } from '@grpc/grpc-js';
import { GatehouseError } from '../../errors.ts';
import type { CallerToken } from '../caller-token.ts';
import { ExtAuthCodes } from '../codes.ts';
import type { AuthDecision, CheckRequest } from '../step.ts';
import { checkRequestToMessage, decisionFromMessage, type CheckResponseMessage } from './check-messages.ts';
import { AUTHORIZATION_SERVICE, authorizationPackage } from './protos.ts';

type CheckCallback = (error: ServiceError | null, response?: CheckResponseMessage) => void;
type CheckFn = {
  (request: unknown, options: { deadline: number }, callback: CheckCallback): void;
  (request: unknown, metadata: Metadata, options: { deadline: number }, callback: CheckCallback): void;
};

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
  private readonly client: Client;
  private readonly call: CheckFn;

  private readonly token: CallerToken | undefined;
  private metadata: { token: string; value: Metadata } | undefined;

  /**
   * `tls`: verify the server against the default trust store (`GRPC_DEFAULT_SSL_ROOTS_FILE_PATH` when set).
   * `token`: sent as `authorization: Bearer <token>` metadata (the server's caller token).
   */
  constructor(address: string, options: { tls?: boolean; token?: CallerToken | undefined } = {}) {
    if (!parseAddress(address)) throw new GatehouseError('GH_BAD_ARGUMENT', `ext_authz address "${address}" must be host:port, e.g. 127.0.0.1:8083`);
    this.address = address;
    Constructor ??= makeClientConstructor(authorizationPackage()[AUTHORIZATION_SERVICE] as ServiceDefinition, 'Authorization') as unknown as typeof Constructor;
    this.client = new Constructor!(address, options.tls ? credentials.createSsl() : credentials.createInsecure());
    this.call = (this.client as unknown as { Check: CheckFn }).Check.bind(this.client);
    this.token = options.token;
    // Connect now rather than on the first check, whose 200 ms budget a TCP + HTTP/2
    // handshake to a cold server can eat.
    this.client.getChannel().getConnectivityState(true);
  }

  /**
   * `metadataContext`: the request's `attributes.metadata_context` (filter_metadata Structs).
   * Rejects with a GatehouseError whose `cause` is the gRPC error (its `code` tells transport
   * failures, UNAVAILABLE, from others).
   */
  check(request: CheckRequest, timeoutMs: number, metadataContext?: object): Promise<AuthDecision> {
    let message = checkRequestToMessage(request);
    if (metadataContext) message = { ...message, attributes: { ...message.attributes, metadata_context: metadataContext } } as typeof message;
    return new Promise((resolve, reject) => {
      const callback = (error: ServiceError | null, response?: CheckResponseMessage): void => {
        if (!error) return resolve(decisionFromMessage(response ?? {}));
        const timedOut = error.code === GrpcStatus.DEADLINE_EXCEEDED;
        reject(
          new GatehouseError(
            timedOut ? ExtAuthCodes.TIMEOUT : ExtAuthCodes.UNAVAILABLE,
            timedOut ? `ext_authz server ${this.address} did not answer within ${timeoutMs}ms` : `ext_authz server ${this.address} failed: ${error.details || error.message}`,
            { cause: error },
          ),
        );
      };
      const metadata = this.callMetadata();
      if (metadata) this.call(message, metadata, { deadline: Date.now() + timeoutMs }, callback);
      else this.call(message, { deadline: Date.now() + timeoutMs }, callback);
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

  close(): void {
    this.client.close();
  }
}
