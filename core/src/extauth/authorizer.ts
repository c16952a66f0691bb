import type { AuthDecision, CheckRequest } from './step.ts';

/**
 * What the gateway calls for a route with an effective AuthConfig (SPEC 4 step 2).
 * Implementations: a gRPC ext_authz client (separate `extauth` process) or the
 * in-process auth engine (embedded `gatehouse run`). Either one fails closed:
 * unreachable, timed out or unloadable means a 403 decision, never a throw. Decisions are
 * sendable as they are (core/src/extauth/sanitize-decision.ts has checked them).
 */
export interface Authorizer {
  check(request: CheckRequest): Promise<AuthDecision>;
  close(): Promise<void>;
}
