/**
 * The contract between the auth chain and its steps (Basic Auth, plugins, pass-through).
 * Everything here is plain JSON-safe data so it can cross a gRPC or isolate boundary.
 */

import type { CheckRequest } from '@gatehouse/plugin-sdk';

/**
 * Envoy ext_authz v3 `CheckRequest`, as JSON with proto field names (snake_case), headers
 * lowercase. Defined once, in the plugin contract, since plugins receive exactly this.
 */
export type { CheckRequest };

/** A header to set on the request going upstream (Envoy `HeaderValueOption`). */
export interface HeaderToSet {
  key: string;
  value: string;
  /** Append to an existing value instead of overwriting it (Envoy's `append`, default false here). */
  append?: boolean;
}

/** Outcome of one step, or of a whole chain. */
export type AuthDecision =
  | {
      allowed: true;
      headersToSet: HeaderToSet[];
      headersToRemove: string[];
      state?: Record<string, unknown>;
      /** Headers for the client's response (Envoy `OkHttpResponse.response_headers_to_add`); replace the upstream's unless `append`. */
      responseHeaders?: HeaderToSet[];
    }
  | { allowed: false; status: number; headers: HeaderToSet[]; body: string };

/** The plain deny (403, no headers, no body): a fresh object, since callers may add to it. */
export const forbidden = (): AuthDecision => ({ allowed: false, status: 403, headers: [], body: '' });

/** What a step gets besides the request: the State the previous allowing steps left. */
export interface StepContext {
  readonly state: Record<string, unknown>;
  /** The auth step span's trace context (`traceparent`, `tracestate`), when the check is traced: a plugin's fetches carry it. */
  readonly trace?: Readonly<Record<string, string>> | undefined;
}

/** One built auth step. Built once per AuthConfig version; `authorize` runs per request. */
export interface AuthStep {
  /** `basicAuth`, `pluginAuth` or `passThroughAuth`. */
  readonly type: string;
  /** For logs and metrics: the step's `name`, or `<type>[<index>]`. */
  readonly name: string;
  /** `context.state` is the chain's State so far (Gloo semantics; `{}` for the first step). */
  authorize(request: CheckRequest, context?: StepContext): Promise<AuthDecision>;
  /**
   * Request headers the step may set from what it verified (apiKeyAuth's `headersFromMetadata`):
   * the chain removes them from the client's request before any step runs and from the request
   * going upstream unless a step set them, so a client can never supply them itself.
   */
  readonly ownedHeaders?: readonly string[];
  /** Releases resources (isolates, channels). */
  close?(): Promise<void>;
}
