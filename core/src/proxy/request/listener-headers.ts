/**
 * Headers a listener's connection manager adds on its own (Gloo's `httpConnectionManagerSettings`,
 * as Envoy's HTTP connection manager applies them): `serverName` with `serverHeaderTransformation`
 * for the `server` response header, and `via` for requests and responses.
 */
export interface ListenerHeaders {
  /** The `server` header of every response: its value, and whether it replaces an upstream's (`overwrite`) or only fills its absence. */
  readonly server?: { readonly name: string; readonly mode: 'overwrite' | 'append-if-absent' } | undefined;
  /** Appended to the `via` header of every request sent upstream and every response. */
  readonly via?: string | undefined;
}

const TRANSFORMATIONS = ['OVERWRITE', 'APPEND_IF_ABSENT', 'PASS_THROUGH'] as const;

/**
 * The listener headers of an `httpConnectionManagerSettings` object (schema-checked), or undefined
 * when it sets none. `PASS_THROUGH` leaves `server` alone (an upstream's goes out unchanged, the
 * gateway's own answers carry none), as Envoy does.
 */
export function listenerHeadersOf(hcm: Readonly<Record<string, unknown>> | undefined): ListenerHeaders | undefined {
  const name = hcm?.serverName;
  const via = hcm?.via;
  const raw = hcm?.serverHeaderTransformation;
  const transformation = typeof raw === 'number' ? TRANSFORMATIONS[raw] : raw;
  const server = typeof name === 'string' && name !== '' && transformation !== 'PASS_THROUGH' ? { name, mode: transformation === 'APPEND_IF_ABSENT' ? ('append-if-absent' as const) : ('overwrite' as const) } : undefined;
  const out: { server?: ListenerHeaders['server']; via?: string } = {};
  if (server) out.server = server;
  if (typeof via === 'string' && via !== '') out.via = via;
  return out.server || out.via ? out : undefined;
}

/** What every response of the listener carries, as a flat `[name, value, …]` list (the gateway's own answers take it whole). */
export function responseListOf(headers: ListenerHeaders): string[] {
  const out: string[] = [];
  if (headers.server) out.push('server', headers.server.name);
  if (headers.via) out.push('via', headers.via);
  return out;
}

/** The request's `via` with the listener's appended (RFC 9110 7.6.3: each hop adds its own). */
export function withVia(existing: string | string[] | undefined, via: string): string {
  if (existing === undefined || existing === '') return via;
  return `${Array.isArray(existing) ? existing.join(', ') : existing}, ${via}`;
}

/**
 * A forwarded response's headers with the listener's `server` appended after the upstream's:
 * keeps the last `server` (`overwrite`) or the first (`append-if-absent`), so exactly one goes out.
 */
export function settleServer(flat: string[], mode: 'overwrite' | 'append-if-absent'): void {
  let first = -1;
  let last = -1;
  let count = 0;
  for (let i = 0; i < flat.length; i += 2) {
    if (flat[i] !== 'server') continue;
    if (first === -1) first = i;
    last = i;
    count++;
  }
  if (count < 2) return;
  const keep = mode === 'overwrite' ? last : first;
  for (let i = flat.length - 2; i >= 0; i -= 2) if (flat[i] === 'server' && i !== keep) flat.splice(i, 2);
}
