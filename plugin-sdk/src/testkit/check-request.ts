import type { CheckRequest } from '../contract/types.ts';

/** The parts of a request a test usually cares about; everything has a default. */
export interface CheckRequestInit {
  method?: string;
  /** Path with query string. Default `/`. */
  path?: string;
  /** Default `example.com`. */
  host?: string;
  scheme?: string;
  /** Any case; stored lowercase as the gateway sends them. */
  headers?: Record<string, string>;
  body?: string;
  /** Default: `config_id: default.test`, `source_type: route`, `source_name: test`. */
  contextExtensions?: Record<string, string>;
  /** The downstream peer's address (`attributes.source.address.socket_address`), as the gateway sets it. */
  clientAddress?: string;
  /** Its port; default 40000 when `clientAddress` is set. */
  clientPort?: number;
}

/** A CheckRequest shaped exactly like the one the gateway sends (SPEC 4 step 2). */
export function checkRequest(init: CheckRequestInit = {}): CheckRequest {
  const host = init.host ?? 'example.com';
  const headers: Record<string, string> = { host };
  for (const [name, value] of Object.entries(init.headers ?? {})) headers[name.toLowerCase()] = value;
  const path = init.path ?? '/';
  const query = path.includes('?') ? path.slice(path.indexOf('?') + 1) : undefined;
  return {
    attributes: {
      ...(init.clientAddress === undefined ? {} : { source: { address: { socket_address: { address: init.clientAddress, port_value: init.clientPort ?? 40000 } } } }),
      request: {
        http: {
          method: init.method ?? 'GET',
          path,
          host,
          scheme: init.scheme ?? 'http',
          headers,
          protocol: 'HTTP/1.1',
          ...(query === undefined ? {} : { query }),
          ...(init.body === undefined ? {} : { body: init.body }),
        },
      },
      context_extensions: init.contextExtensions ?? { config_id: 'default.test', source_type: 'route', source_name: 'test' },
    },
  };
}

/** A CheckRequest as given, or built from an init object. */
export function toCheckRequest(request: CheckRequest | CheckRequestInit | undefined): CheckRequest {
  if (request && 'attributes' in request) return request;
  return checkRequest(request);
}
