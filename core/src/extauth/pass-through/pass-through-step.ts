import type { Logger } from '../../log/logger.ts';
import type { PassThroughAuthSpec } from '../../config/schema/auth-config.ts';
import { forbidden } from '../decision.ts';
import { CheckClient } from '../grpc/check-client.ts';
import type { AuthDecision, AuthStep, CheckRequest } from '../step.ts';

/** Options of {@link PassThroughStep}. */
export interface PassThroughStepOptions {
  name: string;
  logger: Logger;
  /**
   * Per-check deadline (default 1 s). The gateway's own deadline (200 ms by default) bounds
   * the whole chain; this one only stops a hung server from holding a call open longer.
   */
  timeoutMs?: number;
}

/**
 * `passThroughAuth` (SPEC 3.4): forwards the CheckRequest, as the chain has shaped it so
 * far, to the user's own ext_authz server and returns its decision. Unreachable, timed
 * out or failing → 403, like every other auth failure.
 */
export class PassThroughStep implements AuthStep {
  readonly type = 'passThroughAuth';
  readonly name: string;
  private readonly client: CheckClient;
  private readonly logger: Logger;
  private readonly timeoutMs: number;

  constructor(spec: PassThroughAuthSpec, options: PassThroughStepOptions) {
    this.name = options.name;
    this.logger = options.logger;
    this.timeoutMs = options.timeoutMs ?? 1_000;
    this.client = new CheckClient(spec.grpc.address);
  }

  async authorize(request: CheckRequest): Promise<AuthDecision> {
    try {
      return await this.client.check(request, this.timeoutMs);
    } catch (error) {
      const { code, message } = error as { code?: string; message: string };
      this.logger.error({ code, step: this.name, address: this.client.address, config_id: request.attributes.context_extensions.config_id }, `passThroughAuth denied the request: ${message}`);
      return forbidden();
    }
  }

  async close(): Promise<void> {
    this.client.close();
  }
}
