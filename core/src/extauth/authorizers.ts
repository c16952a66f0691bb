import { metrics } from '../admin/metrics.ts';
import type { Logger } from '../log/logger.ts';
import type { Authorizer } from './authorizer.ts';
import type { CallerToken } from './caller-token.ts';
import { ExtAuthCodes } from './codes.ts';
import { allow, forbidden } from './decision.ts';
import type { AuthEngine } from './engine.ts';
import { CheckClient, GATEWAY_CHANNEL } from './grpc/check-client.ts';
import { sanitizeDecision, type SanitizeReport } from './sanitize-decision.ts';
import type { AuthDecision, CheckRequest } from './step.ts';

const latencyOk = metrics.extAuthLatency.labels('ok');
const latencyError = metrics.extAuthLatency.labels('error');

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

  /** Throws `GH_BAD_ARGUMENT` when `address` is not host:port. `token`: the server's caller token. */
  constructor(address: string, options: AuthorizerOptions & { token?: CallerToken | undefined }) {
    // Keepalive, connect timeout, short backoff and one retry of a check caught by a reconnect (issue 27 item 3).
    this.client = new CheckClient(address, { token: options.token, channel: GATEWAY_CHANNEL });
    this.options = options;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_AUTH_TIMEOUT_MS;
  }

  async check(request: CheckRequest): Promise<AuthDecision> {
    let decision: AuthDecision;
    const started = performance.now();
    try {
      decision = await this.client.check(request, this.timeoutMs);
      latencyOk.observe((performance.now() - started) / 1000);
    } catch (error) {
      latencyError.observe((performance.now() - started) / 1000);
      return failed(this.options, request, error);
    }
    // The server at --extauth-address may be anyone's: its answer is checked like a step's.
    const report: SanitizeReport = { dropped: [] };
    const safe = sanitizeDecision(decision, report);
    if (safe !== decision) {
      this.options.logger.warn({ code: ExtAuthCodes.BAD_DECISION, dropped: report.dropped, reason: report.reason }, 'the auth server answered with headers or a status that cannot be sent; sanitised');
    }
    return safe;
  }

  /** Before the process takes traffic: the channel connected and the codecs warm ({@link CheckClient.warm}); false when not within `timeoutMs`. */
  warm(timeoutMs: number): Promise<boolean> {
    return this.client.warm(timeoutMs);
  }

  async close(): Promise<void> {
    this.client.close();
  }
}

/**
 * The gateway's Authorizer for the embedded auth engine (`gatehouse run`): no
 * serialization, no network; the same timeout and failure mode as over gRPC.
 *
 * The deadline is kept without a timer per check: checks in flight sit in a set that one
 * interval sweeps every `timeoutMs / 10` (a late check fails within 1.1 × the timeout). A
 * `setTimeout` + `Promise.race` per check cost more than the Basic Auth step itself.
 */
export class InProcessAuthorizer implements Authorizer {
  private readonly engine: AuthEngine;
  private readonly options: AuthorizerOptions;
  private readonly timeoutMs: number;
  private readonly inFlight = new Set<PendingCheck>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(engine: AuthEngine, options: AuthorizerOptions) {
    this.engine = engine;
    this.options = options;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_AUTH_TIMEOUT_MS;
  }

  check(request: CheckRequest): Promise<AuthDecision> {
    return new Promise((resolve) => {
      const pending: PendingCheck = { request, resolve, deadline: performance.now() + this.timeoutMs };
      this.inFlight.add(pending);
      this.sweeper ??= setInterval(() => this.sweep(), Math.max(1, this.timeoutMs / 10)).unref();
      this.engine.check(request).then(
        (decision) => this.settle(pending, decision),
        (error: unknown) => this.settle(pending, failed(this.options, request, error)),
      );
    });
  }

  /** The engine belongs to whoever created it; closing the authorizer leaves it running. */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  private settle(pending: PendingCheck, decision: AuthDecision): void {
    // Already answered when the deadline passed first.
    if (this.inFlight.delete(pending)) pending.resolve(decision);
  }

  private sweep(): void {
    if (this.inFlight.size === 0) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
      return;
    }
    const now = performance.now();
    for (const pending of this.inFlight) {
      if (pending.deadline > now) continue;
      const error = Object.assign(new Error(`auth check did not finish within ${this.timeoutMs}ms`), { code: ExtAuthCodes.TIMEOUT });
      this.settle(pending, failed(this.options, pending.request, error));
    }
  }
}

interface PendingCheck {
  readonly request: CheckRequest;
  readonly resolve: (decision: AuthDecision) => void;
  readonly deadline: number;
}
