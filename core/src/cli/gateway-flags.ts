import { ErrorCodes, GatehouseError } from '../errors.ts';
import { fileCallerToken, fixedCallerToken, type CallerToken } from '../extauth/caller-token.ts';
import { CROSS_NAMESPACE_SECRETS_MODES, SECRET_REFERENCE_ANNOTATION, type CrossNamespaceSecrets } from '../config/secret-grants.ts';
import { DEFAULT_API_GROUP_DOMAIN } from '../config/schema/kinds.ts';
import { durationMs } from '../config/schema/common.ts';
import { parseWorkers, type GatewayProcessOptions } from '../server/gateway-process.ts';
import type { PathNormalization } from '../proxy/routing/normalize-path.ts';
import { DEFAULT_LISTENER_LIMITS, type ListenerLimits } from '../server/listen.ts';

/** The HTTPS listener's port when `--https-port` is not given (bound only while a VirtualService has sslConfig). */
export const DEFAULT_HTTPS_PORT = 8443;
import { portValue, requiredValue, type FlagDef, type FlagValues } from './flags.ts';

/** The Kubernetes config source (SPEC 2.1), for every command that reads configuration. */
export const KUBE_FLAGS: readonly FlagDef[] = [
  { name: 'kube', type: 'boolean', description: 'read configuration from the Kubernetes API (CRDs, Secrets, EndpointSlices) instead of --config-dir' },
  { name: 'kubeconfig', type: 'string', description: 'kubeconfig file for --kube (default: in-cluster, then $KUBECONFIG or ~/.kube/config)' },
  { name: 'namespace', type: 'string', multiple: true, description: 'with --kube: a namespace to watch (repeatable; default all)' },
];

/** `--cross-namespace-secrets` (docs/tenancy.md), shared by every command that loads configuration. */
export const SECRET_FLAGS: readonly FlagDef[] = [
  { name: 'cross-namespace-secrets', type: 'string', default: 'granted', description: `references to a Secret of another namespace: granted (the Secret's ${SECRET_REFERENCE_ANNOTATION} annotation names the namespace) | none | any` },
];

/** The value of `--cross-namespace-secrets`. */
export function crossNamespaceSecretsValue(values: FlagValues): CrossNamespaceSecrets {
  const value = String(values['cross-namespace-secrets'] ?? 'granted');
  if (!(CROSS_NAMESPACE_SECRETS_MODES as readonly string[]).includes(value)) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--cross-namespace-secrets must be granted, none or any, got "${value}"`);
  return value as CrossNamespaceSecrets;
}

/**
 * The ext_authz caller token (docs/auth.md#callers): the server (`extauth`, `run`) requires it
 * of Check callers, the client (`gateway`) sends it. From a file (a mounted Secret) or the
 * environment; a command-line value would show in `ps`.
 */
export const EXTAUTH_TOKEN_FLAGS: readonly FlagDef[] = [
  { name: 'extauth-token-file', type: 'string', description: 'file holding the ext_authz caller token (authorization: Bearer metadata); the server requires it, the gateway sends it' },
  { name: 'extauth-token', type: 'string', description: 'the ext_authz caller token itself (prefer the environment variable or --extauth-token-file)' },
];

/** The caller token from {@link EXTAUTH_TOKEN_FLAGS}, or undefined when neither is set. */
export function extAuthToken(values: FlagValues): CallerToken | undefined {
  const file = values['extauth-token-file'];
  const token = values['extauth-token'];
  const hasFile = typeof file === 'string' && file !== '';
  const hasToken = typeof token === 'string' && token !== '';
  if (hasFile && hasToken) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, '--extauth-token and --extauth-token-file both give the caller token: give one');
  if (hasFile) return fileCallerToken(file);
  return hasToken ? fixedCallerToken(token) : undefined;
}

/** `--kube` and its flags, or undefined; with neither --kube nor --config-dir, a clear error. */
export function kubeFlagValues(values: FlagValues): { kubeconfig?: string | undefined; namespaces: string[] } | undefined {
  if (values.kube !== true) {
    requiredValue(values, 'config-dir');
    return undefined;
  }
  if (typeof values['config-dir'] === 'string' && values['config-dir'] !== '') throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, '--kube and --config-dir are two config sources: give one');
  return { kubeconfig: (values.kubeconfig as string | undefined) || undefined, namespaces: ((values.namespace as string[] | undefined) ?? []).filter((n) => n !== '') };
}

/** Flags shared by `gatehouse run` and `gatehouse gateway`. */
export const GATEWAY_FLAGS: readonly FlagDef[] = [
  { name: 'config-dir', type: 'string', description: 'directory of manifests, read recursively and watched' },
  ...KUBE_FLAGS,
  ...SECRET_FLAGS,
  { name: 'port', type: 'string', default: '8080', description: 'traffic port (0 picks a free port)' },
  { name: 'https-port', type: 'string', description: 'HTTPS port for VirtualServices with sslConfig (0 picks a free port); given, the listener always binds; not given, it binds 8443 only while a VirtualService has sslConfig' },
  { name: 'admin-port', type: 'string', default: '9901', description: 'admin port: /healthz /readyz /metrics /config' },
  { name: 'host', type: 'string', default: '0.0.0.0', description: 'address to bind' },
  { name: 'admin-host', type: 'string', default: '127.0.0.1', description: 'address the admin API binds (0.0.0.0 exposes /config and /metrics to the network)' },
  { name: 'normalize-path', type: 'string', default: 'true', description: 'RFC 3986 path normalisation before routing and auth (true|false)' },
  { name: 'merge-slashes', type: 'string', default: 'true', description: 'merge runs of "/" in the path (true|false)' },
  { name: 'escaped-slashes', type: 'string', default: 'reject', description: '%2F, %5C and "\\" in a path: reject (400) | unescape | keep' },
  { name: 'workers', type: 'string', default: '1', description: 'traffic worker processes: N or auto (one per core)' },
  { name: 'proxy-name', type: 'string', default: 'gateway-proxy', description: "this gateway's proxy name: Gateway resources whose proxyNames hold it define the listeners (docs/gateway.md)" },
  { name: 'api-group-domain', type: 'string', default: DEFAULT_API_GROUP_DOMAIN, description: 'domain of the API groups (graphql.DOMAIN/v1beta1, …)' },
  { name: 'kube-cluster-domain', type: 'string', default: 'cluster.local', description: 'Kubernetes cluster domain for kube destinations' },
  { name: 'resolve', type: 'string', multiple: true, description: 'HOST=ADDR: dial ADDR for upstream HOST (repeatable)' },
  { name: 'access-log', type: 'string', default: 'true', description: 'one JSON access log line per request (true|false)' },
  { name: 'request-headers-timeout', type: 'string', default: '10s', description: 'time for request headers to arrive; also closes connections that send nothing (Envoy request_headers_timeout)' },
  { name: 'request-timeout', type: 'string', default: '5m', description: 'time for a whole request, body included; 0 turns it off (Envoy request_timeout)' },
  { name: 'idle-timeout', type: 'string', default: '5m', description: 'a request with no bytes either way for this long is cut (Envoy stream_idle_timeout)' },
  { name: 'max-connections', type: 'string', default: 'auto', description: 'downstream connections open at once; auto = half the open-file limit (Envoy max_active_downstream_connections)' },
  { name: 'max-connections-per-client', type: 'string', default: 'auto', description: 'downstream connections open at once from one client address; auto = a quarter of --max-connections' },
  { name: 'proxy-protocol', type: 'string', default: 'false', description: 'the --port/--https-port listeners read a PROXY protocol v1/v2 header first and take its client address: true (required) | optional (connections without one are served too) | false (docs/proxy-protocol.md)' },
  { name: 'max-request-headers', type: 'string', default: '100', description: 'header fields per request; more get 431 (Envoy max_headers_count)' },
  { name: 'max-pending-requests', type: 'string', default: '1024', description: 'requests waiting for a connection per upstream host; more get 503 (Envoy max_pending_requests)' },
  { name: 'watchdog', type: 'string', default: '10s', description: 'kill (for restart) a traffic process whose event loop is stalled this long; 0 turns it off' },
  { name: 'shutdown-grace', type: 'string', default: '30s', description: 'how long SIGTERM waits for in-flight requests' },
];

/** The process options that come from flags (everything but the logger and the parts). */
export type GatewayFlagValues = Omit<GatewayProcessOptions, 'logger' | 'parts'>;

export function gatewayFlagValues(values: FlagValues): GatewayFlagValues {
  const resolve = new Map<string, string>();
  for (const entry of (values.resolve as string[] | undefined) ?? []) {
    const [host, addr] = entry.split('=');
    if (!host || !addr) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--resolve takes HOST=ADDR, got "${entry}"`);
    resolve.set(host.toLowerCase(), addr);
  }
  let workers: number;
  try {
    workers = parseWorkers(values.workers as string);
  } catch (error) {
    throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, (error as Error).message);
  }
  const kube = kubeFlagValues(values);
  return {
    configDir: kube ? '' : requiredValue(values, 'config-dir'),
    kube,
    port: portValue(values, 'port'),
    ...(values['https-port'] === undefined ? { httpsPort: DEFAULT_HTTPS_PORT, httpsOnDemand: true } : { httpsPort: portValue(values, 'https-port') }),
    adminPort: portValue(values, 'admin-port'),
    host: values.host as string,
    adminHost: values['admin-host'] as string,
    paths: pathNormalization(values),
    workers,
    proxyName: values['proxy-name'] as string,
    apiGroupDomain: values['api-group-domain'] as string,
    crossNamespaceSecrets: crossNamespaceSecretsValue(values),
    kubeClusterDomain: values['kube-cluster-domain'] as string,
    resolve,
    accessLog: !/^(0|false|no|off)$/i.test(String(values['access-log'])),
    shutdownGraceMs: duration(values, 'shutdown-grace'),
    limits: {
      requestHeadersTimeoutMs: duration(values, 'request-headers-timeout'),
      requestTimeoutMs: String(values['request-timeout']) === '0' ? 0 : duration(values, 'request-timeout'),
      idleTimeoutMs: duration(values, 'idle-timeout'),
      maxConnections: values['max-connections'] === 'auto' ? DEFAULT_LISTENER_LIMITS.maxConnections : positiveInteger(values, 'max-connections'),
      ...(values['max-connections-per-client'] === 'auto' ? {} : { maxConnectionsPerClient: positiveInteger(values, 'max-connections-per-client') }),
      maxRequestHeaders: positiveInteger(values, 'max-request-headers'),
      ...proxyProtocolValue(values),
    },
    maxPendingRequests: positiveInteger(values, 'max-pending-requests'),
    watchdogMs: String(values.watchdog) === '0' ? 0 : duration(values, 'watchdog'),
  };
}

function pathNormalization(values: FlagValues): PathNormalization {
  const escapedSlashes = String(values['escaped-slashes']);
  if (escapedSlashes !== 'reject' && escapedSlashes !== 'unescape' && escapedSlashes !== 'keep') {
    throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--escaped-slashes must be reject, unescape or keep, got "${escapedSlashes}"`);
  }
  return { normalize: flagBool(values, 'normalize-path'), mergeSlashes: flagBool(values, 'merge-slashes'), escapedSlashes };
}

function positiveInteger(values: FlagValues, name: string): number {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 1) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--${name} must be a positive integer, got "${values[name]}"`);
  return n;
}

/** A true|false flag (also 1/0, yes/no, on/off); anything else is a usage error. */
export function flagBool(values: FlagValues, name: string): boolean {
  const value = String(values[name]);
  if (/^(1|true|yes|on)$/i.test(value)) return true;
  if (/^(0|false|no|off)$/i.test(value)) return false;
  throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--${name} must be true or false, got "${value}"`);
}

export function duration(values: FlagValues, name: string): number {
  try {
    return durationMs(String(values[name]));
  } catch {
    throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--${name} must be a duration such as 30s or 200ms, got "${values[name]}"`);
  }
}

/** `--proxy-protocol`: true, optional or false. */
function proxyProtocolValue(values: FlagValues): Pick<ListenerLimits, 'proxyProtocol'> {
  const value = String(values['proxy-protocol']).toLowerCase();
  if (/^(1|true|yes|on)$/.test(value)) return { proxyProtocol: {} };
  if (value === 'optional') return { proxyProtocol: { allowWithout: true } };
  if (/^(0|false|no|off)$/.test(value)) return {};
  throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--proxy-protocol takes true, optional or false, got "${value}"`);
}
