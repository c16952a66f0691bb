import type { HostEgress } from '../runtime/host/host-calls.ts';

/** The host's egress (core/src/extauth/plugins/egress.ts), used as is: the same rules in both modes. */
export type EgressLike = HostEgress;

/** Loads the host's Egress for `origins` (the step's `egress` URL entries). */
export async function loadEgress(origins: readonly string[], timeoutMs: number): Promise<EgressLike> {
  let module: { Egress: new (rules: { origin: string }[], limits: { timeoutMs: number }) => EgressLike };
  try {
    module = (await import(EGRESS_MODULE)) as typeof module;
  } catch (error) {
    throw new Error(`the test kit's fetch needs @gatehouse/core (the real plugin host's egress rules): ${(error as Error).message}`, { cause: error });
  }
  const rules = origins.map((origin) => {
    const url = URL.parse(origin);
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw new TypeError(`egress: ${JSON.stringify(origin)} is not an absolute http(s) URL`);
    return { origin: url.origin.toLowerCase() };
  });
  return new module.Egress(rules, { timeoutMs });
}
/** Loaded by name so the SDK has no build-time dependency on @gatehouse/core. */
const EGRESS_MODULE = '@gatehouse/core/extauth/plugins/egress.ts';
