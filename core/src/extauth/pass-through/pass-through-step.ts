import { status as GrpcStatus } from '@grpc/grpc-js';
import type { Logger } from '../../log/logger.ts';
import type { PassThroughAuthSpec } from '../../config/schema/auth-config.ts';
import { durationMs } from '../../config/schema/common.ts';
import { allow, forbidden } from '../decision.ts';
import { CheckClient } from '../grpc/check-client.ts';
import type { AuthDecision, AuthStep, CheckRequest, StepContext } from '../step.ts';
import { toStruct } from './struct.ts';

/** Options of {@link PassThroughStep}. */
export interface PassThroughStepOptions {
  name: string;
  logger: Logger;
  /**
   * Per-check deadline when the step sets no `connectionTimeout` (default 1 s). The gateway's
   * own deadline (200 ms by default) bounds the whole chain; this one only stops a hung server
   * from holding a call open longer.
   */
  timeoutMs?: number;
}

/** `filter_metadata` keys the user's server finds the step's `config` and the chain's State under (Gloo's). */
export const PASS_THROUGH_CONFIG_KEY = 'solo.auth.passthrough.config';
export const PASS_THROUGH_STATE_KEY = 'solo.auth.passthrough';

/** Envoy's retry back-off defaults: 25 ms base, ten times that at most. */
const DEFAULT_BASE_MS = 25;

/**
 * `passThroughAuth.grpc` (Gloo): forwards the CheckRequest, as the chain has shaped it so far
 * and with the pseudo-headers Envoy includes (`:authority`, `:method`, `:path`), to the
 * user's own ext_authz server, and returns its decision. The step's `config` and the chain's
 * State ride in `metadata_context.filter_metadata`. Unreachable servers are retried per
 * `retryPolicy`; unreachable, timed out or failing → 403, or an allow with
 * `failureModeAllow`.
 */
export class PassThroughStep implements AuthStep {
  readonly type = 'passThroughAuth';
  readonly name: string;
  private readonly client: CheckClient;
  private readonly logger: Logger;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly baseMs: number;
  private readonly maxMs: number;
  private readonly failureModeAllow: boolean;
  private readonly config: object | undefined;

  constructor(spec: PassThroughAuthSpec, options: PassThroughStepOptions) {
    const grpc = spec.grpc!;
    this.name = options.name;
    this.logger = options.logger;
    this.timeoutMs = grpc.connectionTimeout ? durationMs(grpc.connectionTimeout) : (options.timeoutMs ?? 1_000);
    this.retries = grpc.retryPolicy ? (grpc.retryPolicy.numRetries ?? 1) : 0;
    this.baseMs = grpc.retryPolicy?.retryBackOff?.baseInterval ? durationMs(grpc.retryPolicy.retryBackOff.baseInterval) : DEFAULT_BASE_MS;
    this.maxMs = grpc.retryPolicy?.retryBackOff?.maxInterval ? durationMs(grpc.retryPolicy.retryBackOff.maxInterval) : 10 * this.baseMs;
    this.failureModeAllow = spec.failureModeAllow === true;
    this.config = spec.config ? toStruct(spec.config) : undefined;
    this.client = new CheckClient(grpc.address, { tls: grpc.tlsConfig !== undefined });
  }

  async authorize(request: CheckRequest, context?: StepContext): Promise<AuthDecision> {
    const forwarded = withPseudoHeaders(request);
    const state = context?.state && Object.keys(context.state).length > 0 ? toStruct(context.state) : undefined;
    const filterMetadata = { ...(this.config ? { [PASS_THROUGH_CONFIG_KEY]: this.config } : {}), ...(state ? { [PASS_THROUGH_STATE_KEY]: state } : {}) };
    const metadataContext = Object.keys(filterMetadata).length > 0 ? { filter_metadata: filterMetadata } : undefined;
    const deadline = Date.now() + this.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.client.check(forwarded, Math.max(1, deadline - Date.now()), metadataContext);
      } catch (error) {
        const { code, message, cause } = error as { code?: string; message: string; cause?: { code?: number } };
        // Only a server that could not be reached is asked again: a timeout or a failing server would only fail again, later.
        const backoff = Math.min(this.maxMs, this.baseMs * 2 ** attempt) * (0.5 + Math.random() / 2);
        if (attempt < this.retries && cause?.code === GrpcStatus.UNAVAILABLE && Date.now() + backoff < deadline) {
          await new Promise((resolve) => setTimeout(resolve, backoff));
          continue;
        }
        const config_id = request.attributes.context_extensions.config_id;
        if (this.failureModeAllow) {
          this.logger.warn({ code, step: this.name, address: this.client.address, config_id, attempts: attempt + 1 }, `passThroughAuth allowed the request (failureModeAllow): ${message}`);
          return allow();
        }
        this.logger.error({ code, step: this.name, address: this.client.address, config_id, attempts: attempt + 1 }, `passThroughAuth denied the request: ${message}`);
        return forbidden();
      }
    }
  }

  async close(): Promise<void> {
    this.client.close();
  }
}

/** The request with Envoy's pseudo-headers, which a server written for Envoy may read (`:path` for routing, say). */
export function withPseudoHeaders(request: CheckRequest): CheckRequest {
  const http = request.attributes.request.http;
  const headers = { ':authority': http.host || http.headers.host || '', ':method': http.method, ':path': http.path, ...http.headers };
  return { ...request, attributes: { ...request.attributes, request: { ...request.attributes.request, http: { ...http, headers } } } };
}
