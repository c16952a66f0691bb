/**
 * The auth plugin contract (SPEC 5.2). Go-style names are kept on purpose so plugins
 * ported from Gloo's Go plugin API read the same. Type-only: no runtime dependencies.
 */

/** Envoy `config.core.v3.Address` as JSON (the socket form). */
export interface SocketAddressJson {
  socket_address?: { address?: string; port_value?: number };
}

/** Envoy ext_authz v3 `CheckRequest` as JSON with proto field names. Header names are lowercase. */
export interface CheckRequest {
  attributes: {
    /**
     * The downstream peer: the client, or the last proxy in front of the gateway. Set by the
     * gateway (and by Envoy) as `address.socket_address.{address, port_value}`; IPv4 clients of a
     * dual-stack listener may appear as `::ffff:a.b.c.d`. `x-forwarded-for` is only a header.
     * Typed `unknown` as it crosses the wire; read it with `ClientAddress(CheckRequest)`, or as a {@link SocketAddressJson}.
     */
    source?: { address?: unknown };
    destination?: { address?: unknown };
    request: {
      http: {
        id?: string;
        method: string;
        /** Path including the query string. */
        path: string;
        host: string;
        scheme: string;
        headers: Record<string, string>;
        query?: string;
        protocol?: string;
        /** The body as UTF-8, when the route asks for it (`requestBody`, without `packAsBytes`). */
        body?: string;
        /**
         * The body as bytes (`requestBody.packAsBytes`, or Envoy's `pack_as_bytes`): base64 in the
         * JSON on the wire; plugins receive a `Uint8Array`.
         */
        raw_body?: string | Uint8Array;
        /** The body's size in bytes when known (Envoy sets it from content-length). */
        size?: string;
      };
    };
    /** Set by the gateway: `config_id` (`<namespace>.<name>`), `source_type`, `source_name`. */
    context_extensions: Record<string, string>;
    /**
     * Envoy's dynamic metadata of earlier filters, by filter name: `envoy.filters.http.jwt_authn`
     * holds the claims the JWT filter verified, by provider name (absent when no filter left any).
     */
    metadata_context?: { filter_metadata?: Record<string, Record<string, unknown>> };
  };
}

/** What `Authorize` receives. */
export interface AuthorizationRequest {
  CheckRequest: CheckRequest;
  /**
   * State shared along one request's auth chain (Gloo's `AuthorizationRequest.State`): what the
   * previous allowing step returned as `State`, or `{}` for the first step. A copy: changing it
   * does nothing until returned.
   */
  State: Record<string, unknown>;
}

/** Envoy `HeaderValueOption` as JSON: a header to add to the upstream request (ok) or the denial (denied). */
export interface HeaderValueOption {
  header: { key: string; value: string };
  /** Append to an existing value instead of overwriting it (default false). */
  append?: boolean;
}

/** Envoy ext_authz v3 `CheckResponse` as JSON with proto field names. */
export interface CheckResponse {
  /** gRPC status: code 0 (OK) allows; any other code denies. */
  status: { code: number; message?: string };
  /** Used when allowed. */
  ok_response?: {
    headers?: HeaderValueOption[];
    /** Header names to remove from the upstream request. */
    headers_to_remove?: string[];
  };
  /** Used when denied; absent means 403 with an empty body. */
  denied_response?: {
    status?: { code: number };
    headers?: HeaderValueOption[];
    body?: string;
  };
}

/** What `Authorize` returns; build it with the helpers (`AuthorizedResponse()`, …). */
export interface AuthorizationResponse {
  CheckResponse: CheckResponse;
  /** An allowing step's state for the next step of the chain (a JSON object, at most 64 KiB). */
  State?: Record<string, unknown>;
  /** Who was authenticated: `UserID` is set as `x-user-id` on the upstream request, as Basic Auth does. */
  UserInfo?: { UserID?: string };
}

/** The host's logger: lines go to the auth server's JSON log, tagged with the plugin. */
export interface PluginLogger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/**
 * The step's key/value store (SPEC 5.3): shared by the isolates of one step in one auth-server
 * process and kept across isolate rebuilds; bounded (least recently used entries go first).
 * Values are JSON copies. Per process, not per cluster.
 */
export interface PluginStore {
  /** A copy of the value, or undefined when absent or expired. */
  get(key: string): unknown;
  /** Stores a JSON-serialisable value; `ttlMs` makes it expire. */
  set(key: string, value: unknown, options?: { ttlMs?: number }): void;
  /** Removes a key; true when it was there. */
  delete(key: string): boolean;
}

/** Passed to every plugin call. The sandbox offers nothing else from the host. */
export interface Context {
  readonly logger: PluginLogger;
  /** The step's `pluginAuth.secretRefs`, by name: the Secret values (never logged by the host). */
  readonly secrets: Readonly<Record<string, string>>;
  /** The step's store; absent outside the auth server (e.g. a test kit without one). */
  readonly store?: PluginStore;
}

/** A started auth service: `Start` once, then `Authorize` per request. */
export interface AuthService {
  Start(ctx: Context): void | Promise<void>;
  Authorize(ctx: Context, request: AuthorizationRequest): AuthorizationResponse | Promise<AuthorizationResponse>;
}

/** What a plugin module exports under its symbol name (default: the plugin name). */
export interface ExtAuthPlugin {
  /** A default config object; the step's `config` is decoded onto it (like Go's `json.Unmarshal`). */
  NewConfigInstance(ctx: Context): unknown | Promise<unknown>;
  GetAuthService(ctx: Context, config: unknown): AuthService | Promise<AuthService>;
}
