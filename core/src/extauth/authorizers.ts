import { metrics } from '../admin/metrics.ts';
import type { Logger } from '../log/logger.ts';
import type { Authorizer } from './authorizer.ts';
import { ExtAuthCodes } from './codes.ts';
import { allow, forbidden } from './decision.ts';
import type { AuthEngine } from './engine.ts';
import { CheckClient } from './grpc/check-client.ts';
import type { AuthDecision, CheckRequest } from './step.ts';

/** Envoy's ext_authz default timeout (SPEC 4 step 2). */
export const DEFAULT_AUTH_TIMEOUT_MS = 200;

/** How an Authorizer fails. */
export interface AuthorizerOptions {
  logger: Logger;
  /** Per-check deadline (default 200 ms). */
  timeoutMs?: number;
  /** Allow instead of deny when the auth server fails (Envoy's `failure_mode_allow`; default false: fail closed). */
  failureModeAllow?: boolean;
}

function failed(options: AuthorizerOptions, request: CheckRequest, error: unknown): AuthDecision {
  const { code, message } = error as { code?: string; message: string };
  const configId = request.attributes.context_extensions.config_id ?? '';
  metrics.authDecisions.labels(configId, '', 'error').inc();
  const allowed = options.failureModeAllow === true;
  options.logger.error({ code, config_id: configId, failure_mode_allow: allowed }, `external auth failed, request ${allowed ? 'allowed (failureModeAllow)' : 'denied'}: ${message}`);
  return allowed ? allow() : forbidden();
}

/**
 * The gateway's Authorizer for a separate `gatehouse extauth` process
 * (`gatehouse gateway --extauth-address host:port`): unreachable, timed out or failing → 403.
 */
export class GrpcAuthorizer implements Authorizer {
  private readonly client: CheckClient;
  private readonly options: AuthorizerOptions;
  private readonly timeoutMs: number;

  /** Throws `GH_BAD_ARGUMENT` when `address` is not host:port. */
  constructor(address: string, options: AuthorizerOptions) {
    this.client = new CheckClient(address);
    this.options = options;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_AUTH_TIMEOUT_MS;
  }

  async check(request: CheckRequest): Promise<AuthDecision> {
    try {
      return await this.client.check(request, this.timeoutMs);
    } catch (error) {
      return failed(this.options, request, error);
    }
  }

  async close(): Promise<void> {
    this.client.close();
  }
}

/**
 * The gateway's Authorizer for the embedded auth engine (`gatehouse run`): no
 * serialization, no network; the same timeout and failure mode as over gRPC.
 */
export class InProcessAuthorizer implements Authorizer {
  private readonly engine: AuthEngine;
  private readonly options: AuthorizerOptions;
  private readonly timeoutMs: number;

  constructor(engine: AuthEngine, options: AuthorizerOptions) {
    this.engine = engine;
    this.options = options;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_AUTH_TIMEOUT_MS;
  }

  async check(request: CheckRequest): Promise<AuthDecision> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error(`auth check did not finish within ${this.timeoutMs}ms`), { code: ExtAuthCodes.TIMEOUT })), this.timeoutMs);
    });
    try {
      return await Promise.race([this.engine.check(request), timeout]);
    } catch (error) {
      return failed(this.options, request, error);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The engine belongs to whoever created it; closing the authorizer leaves it running. */
  async close(): Promise<void> {}
}
