import type { HeaderManipulationSpec } from '../config/schema/virtual-service.ts';

/** Headers to add (in order) and remove, compiled from `headerManipulation`. */
export interface HeaderOps {
  readonly add: readonly { readonly name: string; readonly value: string; readonly append: boolean }[];
  readonly remove: ReadonlySet<string>;
}

export const NO_HEADER_OPS: HeaderOps = { add: [], remove: new Set() };

/** Merges virtual-host then route manipulation: the route's operations run last and win. */
export function compileHeaderOps(
  specs: readonly (HeaderManipulationSpec | undefined)[],
  direction: 'request' | 'response',
): HeaderOps {
  const add: HeaderOps['add'][number][] = [];
  const remove = new Set<string>();
  for (const spec of specs) {
    if (!spec) continue;
    const toAdd = direction === 'request' ? spec.requestHeadersToAdd : spec.responseHeadersToAdd;
    const toRemove = direction === 'request' ? spec.requestHeadersToRemove : spec.responseHeadersToRemove;
    for (const name of toRemove ?? []) remove.add(name.toLowerCase());
    // Gloo's HeaderValueOption.append defaults to true.
    for (const h of toAdd ?? []) add.push({ name: h.header.key.toLowerCase(), value: h.header.value, append: h.append !== false });
  }
  if (add.length === 0 && remove.size === 0) return NO_HEADER_OPS;
  return { add, remove };
}

/**
 * Hop-by-hop headers (RFC 9110 7.6.1), never forwarded in either direction.
 * `proxy-authorization` is deliberately absent: Basic Auth may read it, and an
 * upstream proxy chain may need it.
 */
export const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authenticate']);
