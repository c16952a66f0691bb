import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from '../log/logger.ts';

/** Per-request state shared by the stages of the request path. */
export interface RequestContext {
  /** `x-request-id`: the client's, or a new UUID. */
  readonly requestId: string;
  /** `performance.now()` when the request arrived. */
  readonly start: number;
  /** `namespace/name` of the matched VirtualService. */
  readonly virtualHost: string;
  /** Route name (its `name`, or `<vs namespace>/<vs name>/<index>`). */
  readonly route: string;
  /**
   * Request headers as the destination must see them: the client's, after auth added
   * or removed headers. Lowercase names.
   */
  readonly headers: IncomingHttpHeaders;
  readonly logger: Logger;
  /** Set by the destination for the access log: which upstream served the request. */
  upstream?: string;
  /** Set with `upstream`: the name of the Upstream cluster it belongs to (`%UPSTREAM_CLUSTER%`). */
  cluster?: string;
  /** The path and query sent upstream, after rewrites (Envoy's `:path` at log time). */
  upstreamPath?: string;
  /**
   * Headers the gateway adds to whatever response this request gets (the route's CORS), as a
   * flat `[name, value, …]` list; they replace an upstream's same-named ones (`cors.replaces`).
   */
  responseHeaders?: readonly string[] | undefined;
  /**
   * The listener's `server` header is in {@link responseHeaders}: a forwarded response keeps it over
   * the upstream's (`overwrite`) or only where the upstream sent none (./request/listener-headers.ts).
   */
  serverHeader?: 'overwrite' | 'append-if-absent' | undefined;
}
