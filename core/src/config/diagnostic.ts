/** A problem found in configuration, precise enough to fix without reading code. */
export interface Diagnostic {
  /** Stable code, e.g. `GH_CONFIG_UNKNOWN_FIELD`. */
  readonly code: string;
  readonly message: string;
  /** `error` rejects the resource; `warning` accepts it with status Warning. */
  readonly severity: 'error' | 'warning';
  readonly file?: string;
  readonly line?: number;
  /** `Kind namespace/name`. */
  readonly resource?: string;
  /** Field path inside the resource, e.g. `spec.virtualHost.routes[0].matchers[0].regex`. */
  readonly path?: string;
}

/** `file:line: Kind ns/name: path: message [code]`: the form `gatehouse validate` prints. */
export function formatDiagnostic(d: Diagnostic): string {
  const where = d.file ? `${d.file}${d.line ? `:${d.line}` : ''}: ` : '';
  const resource = d.resource ? `${d.resource}: ` : '';
  const path = d.path ? `${d.path}: ` : '';
  return `${where}${d.severity}: ${resource}${path}${d.message} [${d.code}]`;
}

/** Longest diagnostic message kept (status, logs, `admin:/config`): a message may quote a field of any size. */
export const MAX_DIAGNOSTIC_CHARS = 2048;

/** `d` with its message, path and resource cut to a bound (the same object when within it). */
export function boundDiagnostic(d: Diagnostic): Diagnostic {
  const cut = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max)}… [${text.length - max} more characters]`);
  if (d.message.length <= MAX_DIAGNOSTIC_CHARS && (d.path?.length ?? 0) <= 512 && (d.resource?.length ?? 0) <= 512) return d;
  return { ...d, message: cut(d.message, MAX_DIAGNOSTIC_CHARS), ...(d.path !== undefined ? { path: cut(d.path, 512) } : {}), ...(d.resource !== undefined ? { resource: cut(d.resource, 512) } : {}) };
}

export type PathSegment = string | number;

/** `['spec','routes',0,'name']` → `spec.routes[0].name`. */
export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else out += out ? `.${segment}` : segment;
  }
  return out;
}

/** Config diagnostic codes (stable). */
export const ConfigCodes = {
  PARSE: 'GH_CONFIG_PARSE',
  /** A document too large, too deep, self-referencing, or with too many aliases (SPEC 2.4; issue 17). */
  LIMITS: 'GH_CONFIG_LIMITS',
  NOT_A_RESOURCE: 'GH_CONFIG_NOT_A_RESOURCE',
  UNKNOWN_KIND: 'GH_CONFIG_UNKNOWN_KIND',
  API_VERSION: 'GH_CONFIG_API_VERSION',
  UNKNOWN_FIELD: 'GH_CONFIG_UNKNOWN_FIELD',
  SCHEMA: 'GH_CONFIG_SCHEMA',
  DUPLICATE: 'GH_CONFIG_DUPLICATE',
  MISSING_REF: 'GH_CONFIG_MISSING_REF',
  REJECTED_REF: 'GH_CONFIG_REJECTED_REF',
  /** A reference to a Secret of another namespace that does not grant the referring one (docs/tenancy.md). */
  CROSS_NAMESPACE_REF: 'GH_CONFIG_CROSS_NAMESPACE_REF',
  DOMAIN_CONFLICT: 'GH_CONFIG_DOMAIN_CONFLICT',
  /** A Gateway access-log format string with an unknown command operator or bad syntax (docs/gateway.md). */
  BAD_ACCESS_LOG_FORMAT: 'GH_CONFIG_BAD_ACCESS_LOG_FORMAT',
  /** Two Gateways of the same proxy bind the same address and port. */
  LISTENER_CONFLICT: 'GH_CONFIG_LISTENER_CONFLICT',
  BAD_DOMAIN: 'GH_CONFIG_BAD_DOMAIN',
  BAD_REGEX: 'GH_CONFIG_BAD_REGEX',
  /** A VirtualService's sslConfig certificate or key that cannot be loaded (unreadable, bad PEM, a key that does not match). */
  BAD_TLS: 'GH_CONFIG_BAD_TLS',
  /** A field Gatehouse accepts but does not honour, or honours differently (warning). */
  IGNORED: 'GH_CONFIG_IGNORED',
  INVALID: 'GH_CONFIG_INVALID',
  /** Reloading the configuration failed (log line); the last configuration keeps serving. */
  RELOAD: 'GH_CONFIG_RELOAD',
  /** A delegateAction whose routes break Gloo's rules (a non-prefix delegating matcher, a child route outside the prefix). */
  DELEGATION: 'GH_CONFIG_DELEGATION',
  /** RouteTables that delegate to each other in a loop. */
  DELEGATION_CYCLE: 'GH_CONFIG_DELEGATION_CYCLE',
  /** A delegation chain deeper than GATEHOUSE_MAX_DELEGATION_DEPTH, or routes expanding past GATEHOUSE_MAX_ROUTES_PER_VIRTUAL_HOST. */
  DELEGATION_LIMIT: 'GH_CONFIG_DELEGATION_LIMIT',
  READ: 'GH_CONFIG_READ',
} as const;
