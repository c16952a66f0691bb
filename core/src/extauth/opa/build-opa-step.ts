/**
 * Builds `opaAuth` / `opaServerAuth` steps; imported on first use, so processes without OPA steps
 * never load the Wasm runtime.
 */
import type { AuthStepSpec } from '../../config/schema/auth-config.ts';
import { GatehouseError } from '../../errors.ts';
import type { StepBuildOptions } from '../build-step.ts';
import { ExtAuthCodes } from '../codes.ts';
import type { AuthStep } from '../step.ts';
import { compileOpaWasm, MAX_REGO_BYTES } from './opa-wasm.ts';
import { OpaAuthStep, OpaServerAuthStep, opaDataUrl } from './opa-step.ts';

/** Builds the OPA step of `spec` (which holds `opaAuth` or `opaServerAuth`). */
export async function buildOpaStep(spec: AuthStepSpec, name: string, at: (...path: (string | number)[]) => string, options: StepBuildOptions): Promise<AuthStep> {
  if (spec.opaServerAuth) {
    const server = spec.opaServerAuth;
    const url = opaDataUrl(server.serverAddr, server.package, server.ruleName);
    if (!url) throw new GatehouseError(ExtAuthCodes.STEP_BUILD, `${at('opaServerAuth')}: serverAddr must be host:port or an http(s) URL, package dot-separated Rego names, ruleName slash-separated names`);
    const fast = server.options?.fastInputConversion ?? false;
    return new OpaServerAuthStep(url, { name, fastInputConversion: fast, ...(options.resolveHost ? { resolveHost: options.resolveHost } : {}) });
  }
  const opa = spec.opaAuth!;
  const modules: Record<string, string> = {};
  let bytes = 0;
  for (const [i, ref] of (opa.modules ?? []).entries()) {
    const namespace = ref.namespace ?? options.namespace ?? 'default';
    const data = options.resolveConfigMap?.({ name: ref.name, namespace });
    if (!data) throw new GatehouseError(ExtAuthCodes.STEP_BUILD, `${at('opaAuth', 'modules', i)}: ConfigMap ${namespace}/${ref.name} is not served`);
    for (const [key, source] of Object.entries(data)) {
      modules[`${namespace}.${ref.name}.${key}`] = source;
      bytes += Buffer.byteLength(source);
    }
  }
  if (bytes > MAX_REGO_BYTES) throw new GatehouseError(ExtAuthCodes.STEP_BUILD, `${at('opaAuth', 'modules')}: more than ${MAX_REGO_BYTES} bytes of Rego`);
  try {
    const policy = await compileOpaWasm(modules, opa.query);
    const fast = opa.options?.fastInputConversion ?? false;
    return new OpaAuthStep(policy, { name, fastInputConversion: fast });
  } catch (error) {
    throw new GatehouseError(ExtAuthCodes.STEP_BUILD, `${at('opaAuth')}: ${(error as Error).message}`, { cause: error });
  }
}
