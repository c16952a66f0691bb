/**
 * Rego in the plugin sandbox: a policy compiled to WebAssembly by the real `opa` binary
 * (`opa build -t wasm -e <entrypoint>`), evaluated per request by OPA's own JavaScript SDK
 * (`@open-policy-agent/opa-wasm`, bundled into the plugin) on the sandbox's WebAssembly. The
 * input is Gloo's OPA input (`check_request`, `http_request`, `state`); the decision Gloo's rule
 * (the entrypoint's value is `true`, or an array whose first element is `true`).
 */
import { loadPolicy, type LoadedPolicy } from '@open-policy-agent/opa-wasm';
import { AuthorizedResponse, DeniedResponse, type AuthorizationRequest, type AuthorizationResponse, type AuthService, type Context, type ExtAuthPlugin } from '@gatehouse/plugin-sdk';

/** The AuthConfig step's `config`. */
export interface OpaConfig {
  /** `policy.wasm` of the bundle `opa build -t wasm` writes, base64-encoded. */
  PolicyWasm: string;
  /** The entrypoint to evaluate, as given to `opa build -e` (`authz/allow`). */
  Entrypoint: string;
  /** The policy's `data` document. */
  Data: Record<string, unknown>;
  /** Wasm pages (64 KiB) the policy's memory may grow to; it counts against the step's memoryLimitMb. */
  MaxMemoryPages: number;
  /** Log every decision with its input (`OPA decision`, info): for debugging a policy, and for the tests. */
  LogDecisions: boolean;
}

/** Gloo's OPA input for a request (core/src/extauth/opa/opa-input.ts): bytes as base64, as proto3 JSON has them. */
export function opaInput(request: AuthorizationRequest): Record<string, unknown> {
  const check = request.CheckRequest as unknown as { attributes: { request: { http: Record<string, unknown> } } };
  const http = { ...check.attributes.request.http };
  if (http.raw_body instanceof Uint8Array) http.raw_body = base64(http.raw_body);
  const checkRequest = { ...check, attributes: { ...check.attributes, request: { ...check.attributes.request, http } } };
  return { check_request: checkRequest, http_request: http, state: request.State ?? {} };
}

function base64(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** Gloo's rule: allowed when the value is `true`, or an array whose first element is `true`. */
export function allowedBy(value: unknown): boolean {
  return value === true || (Array.isArray(value) && value[0] === true);
}

class OpaService implements AuthService {
  private policy: LoadedPolicy | undefined;
  private readonly config: OpaConfig;

  constructor(config: OpaConfig) {
    if (!config.PolicyWasm) throw new Error('config.PolicyWasm is required: the base64 of policy.wasm from `opa build -t wasm`');
    if (!config.Entrypoint) throw new Error('config.Entrypoint is required: the entrypoint given to `opa build -e`');
    this.config = config;
  }

  async Start(ctx: Context): Promise<void> {
    const bytes = Uint8Array.from(atob(this.config.PolicyWasm), (c) => c.charCodeAt(0));
    // A maximum leaves the rest of the step's Wasm budget free (a memory without one reserves it all).
    this.policy = await loadPolicy(bytes, { initial: 2, maximum: this.config.MaxMemoryPages });
    this.policy.setData(this.config.Data);
    ctx.logger.info('OPA policy loaded', { entrypoint: this.config.Entrypoint, bytes: bytes.byteLength, entrypoints: Object.keys(this.policy.entrypoints) });
  }

  Authorize(ctx: Context, request: AuthorizationRequest): AuthorizationResponse {
    const input = opaInput(request);
    const results = this.policy!.evaluate(input, this.config.Entrypoint) as { result?: unknown }[];
    const value = results[0]?.result;
    if (this.config.LogDecisions) ctx.logger.info('OPA decision', { input, allowed: allowedBy(value) });
    if (allowedBy(value)) return AuthorizedResponse();
    ctx.logger.debug('denied by the policy', { entrypoint: this.config.Entrypoint, value: value ?? null });
    return DeniedResponse(403);
  }
}

export const Opa: ExtAuthPlugin = {
  NewConfigInstance: (): OpaConfig => ({ PolicyWasm: '', Entrypoint: '', Data: {}, MaxMemoryPages: 512, LogDecisions: false }),
  GetAuthService: (_ctx, config) => new OpaService(config as OpaConfig),
};
