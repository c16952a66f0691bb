import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { hostname } from 'node:os';
import type { HeaderManipulationSpec } from '../../config/schema/virtual-service.ts';

/** What Envoy's dynamic header values read (`%REQ(x)%`, `%DOWNSTREAM_REMOTE_ADDRESS%`…). */
export interface HeaderValueSource {
  readonly req: IncomingMessage;
  /** The request's headers as the gateway forwards them (after auth). */
  readonly headers: IncomingHttpHeaders;
  /** `performance.now()` when the request arrived. */
  readonly start: number;
}

/** One header to add: a constant, or a value rendered per request from Envoy's variables. */
export interface HeaderToAdd {
  readonly name: string;
  readonly value: string;
  readonly render: ((source: HeaderValueSource) => string) | undefined;
  readonly append: boolean;
}

/** Headers to add (in order) and remove, compiled from `headerManipulation`. */
export interface HeaderOps {
  readonly add: readonly HeaderToAdd[];
  readonly remove: ReadonlySet<string>;
}

/** The value of `add` for one request. */
export function headerValue(add: HeaderToAdd, source: HeaderValueSource): string {
  return add.render ? add.render(source) : add.value;
}

const VARIABLE = /%([A-Z_]+)(?:\(([^)]*)\))?%|%%/g;

/**
 * The subset of Envoy's header variables Gatehouse renders (docs/virtual-service.md); any other
 * `%NAME%` is refused at load. `%%` is a literal `%`.
 */
const VARIABLES: Record<string, (source: HeaderValueSource, arg: string | undefined) => string> = {
  DOWNSTREAM_REMOTE_ADDRESS: ({ req }) => addressOf(req.socket.remoteAddress, req.socket.remotePort),
  DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT: ({ req }) => req.socket.remoteAddress ?? '',
  DOWNSTREAM_LOCAL_ADDRESS: ({ req }) => addressOf(req.socket.localAddress, req.socket.localPort),
  DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT: ({ req }) => req.socket.localAddress ?? '',
  REQ: ({ headers }, name) => {
    const value = headers[(name ?? '').toLowerCase()];
    return Array.isArray(value) ? value.join(',') : (value ?? '');
  },
  START_TIME: ({ start }) => new Date(performance.timeOrigin + start).toISOString(),
  PROTOCOL: ({ req }) => `HTTP/${req.httpVersion}`,
  HOSTNAME: () => hostname(),
};

function addressOf(address: string | undefined, port: number | undefined): string {
  if (!address) return '';
  return address.includes(':') ? `[${address}]:${port ?? 0}` : `${address}:${port ?? 0}`;
}

/**
 * Parses a header value with Envoy's `%VARIABLE%` forms: a constant when it has none, a
 * renderer otherwise. Throws naming a variable Gatehouse does not render (or `%REQ%` without a
 * header name).
 */
export function parseHeaderValue(text: string): { value: string; render: ((source: HeaderValueSource) => string) | undefined } {
  if (!text.includes('%')) return { value: text, render: undefined };
  const parts: (string | ((source: HeaderValueSource) => string))[] = [];
  let last = 0;
  for (const match of text.matchAll(VARIABLE)) {
    if (match.index > last) parts.push(text.slice(last, match.index));
    last = match.index + match[0].length;
    if (match[0] === '%%') {
      parts.push('%');
      continue;
    }
    const [, name, arg] = match;
    const variable = VARIABLES[name!];
    if (!variable) throw new Error(`header variable %${name}% is not supported; use ${Object.keys(VARIABLES).map((v) => `%${v}${v === 'REQ' ? '(name)' : ''}%`).join(', ')} or %% for a literal %`);
    if (name === 'REQ' && !arg) throw new Error('%REQ(name)% needs a header name');
    parts.push((source) => variable(source, arg));
  }
  if (last < text.length) parts.push(text.slice(last));
  if (parts.every((p) => typeof p === 'string')) return { value: parts.join(''), render: undefined };
  return { value: text, render: (source) => parts.map((p) => (typeof p === 'string' ? p : p(source))).join('') };
}

export const NO_HEADER_OPS: HeaderOps = { add: [], remove: new Set() };

/** Merges virtual-host then route manipulation: the route's operations run last and win. */
export function compileHeaderOps(
  specs: readonly (HeaderManipulationSpec | undefined)[],
  direction: 'request' | 'response',
  secret: (ref: { name: string; namespace?: string }) => { spec: { data: Record<string, string> } } | undefined = () => undefined,
): HeaderOps {
  const add: HeaderOps['add'][number][] = [];
  const remove = new Set<string>();
  for (const spec of specs) {
    if (!spec) continue;
    const toAdd = direction === 'request' ? spec.requestHeadersToAdd : spec.responseHeadersToAdd;
    const toRemove = direction === 'request' ? spec.requestHeadersToRemove : spec.responseHeadersToRemove;
    for (const name of toRemove ?? []) remove.add(name.toLowerCase());
    // Gloo's HeaderValueOption.append defaults to true.
    for (const h of toAdd ?? []) {
      const append = h.append !== false;
      if (h.headerSecretRef) {
        // Gloo: every key of the Secret becomes a header, its value the header's (constant, never rendered).
        for (const [key, value] of Object.entries(secret(h.headerSecretRef)?.spec.data ?? {})) add.push({ name: key.toLowerCase(), value, render: undefined, append });
        continue;
      }
      let parsed: ReturnType<typeof parseHeaderValue>;
      try {
        parsed = parseHeaderValue(h.header!.value);
      } catch {
        // Load-time checks refuse it; never render a half-understood template.
        parsed = { value: h.header!.value, render: undefined };
      }
      add.push({ name: h.header!.key.toLowerCase(), value: parsed.value, render: parsed.render, append });
    }
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
