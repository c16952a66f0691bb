import { compileAccessLogFilter, type FilterNotes } from '../log/access-filter.ts';
import { compileJsonFormat, compileStringFormat, FormatError, type FormatNotes } from '../log/access-format.ts';
import { ConfigCodes, type Diagnostic, type PathSegment } from '../config/diagnostic.ts';
import type { Resource } from '../config/resource.ts';
import type { GatewaySpec } from '../config/schema/gateway.ts';
import type { CheckContext } from '../config/check-context.ts';
import { checkListenerTracing } from '../tracing/checks.ts';

/** Gloo's default `proxyNames` (gateway.proto). */
export const DEFAULT_PROXY_NAME = 'gateway-proxy';

/** The proxies a Gateway is for; Gloo turns camelCase names into kebab-case. */
export function proxyNamesOf(spec: GatewaySpec): string[] {
  const names = spec.proxyNames;
  return names?.length ? names.map((n) => n.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)) : [DEFAULT_PROXY_NAME];
}

/** `address:port` a Gateway binds (Gloo's defaults: `::`, no default port; Gatehouse: `0.0.0.0`, 8080). */
export function bindOf(spec: GatewaySpec): { address: string; port: number } {
  const address = spec.bindAddress;
  return { address: address === undefined || address === '' || address === '::' ? '0.0.0.0' : address, port: spec.bindPort ?? 8080 };
}

/**
 * Load-time checks of a Gateway (docs/gateway.md): access-log format strings compile (an unknown
 * operator rejects the Gateway, with the field path, and the last accepted version keeps
 * serving); Envoy operators without a value here are Warnings naming them; two Gateways of one
 * proxy cannot bind one address and port. The Gloo fields accepted but not applied are marked
 * `Ignored` in the schema (config/schema/gateway.ts): the store's generic check warns about them.
 */
export function checkGateway(resource: Resource<'Gateway'>, ctx: CheckContext): Diagnostic[] {
  const out: Diagnostic[] = [];
  // config/resource.ts's SpecOf has no Gateway entry yet (it maps the kind to never).
  const spec = resource.spec;

  spec.options?.accessLoggingService?.accessLog?.forEach((log, i) => {
    if (log.filter !== undefined) {
      const notes: FilterNotes = { errors: [], warnings: [] };
      const filterAt: PathSegment[] = ['spec', 'options', 'accessLoggingService', 'accessLog', i, 'filter'];
      compileAccessLogFilter(log.filter, filterAt, notes);
      for (const e of notes.errors) out.push(ctx.at(e.path, ConfigCodes.INVALID, `bad access log filter: ${e.message}`));
      for (const w of notes.warnings) out.push(ctx.at(w.path, ConfigCodes.IGNORED, w.message, 'warning'));
    }
    const sink = log.fileSink;
    if (!sink) return;
    const sinkAt: PathSegment[] = ['spec', 'options', 'accessLoggingService', 'accessLog', i, 'fileSink'];
    const { stringFormat, jsonFormat } = sink;
    if (stringFormat !== undefined && jsonFormat !== undefined) {
      out.push(ctx.at(sinkAt, ConfigCodes.INVALID, 'give stringFormat or jsonFormat, not both'));
      return;
    }
    const notes: FormatNotes = { unsupported: [] };
    try {
      if (jsonFormat !== undefined) compileJsonFormat(jsonFormat, notes);
      else if (stringFormat !== undefined) compileStringFormat(stringFormat, notes);
    } catch (error) {
      if (!(error instanceof FormatError)) throw error;
      const inner = (error as FormatError & { path?: PathSegment[] }).path ?? [];
      out.push(ctx.at([...sinkAt, jsonFormat !== undefined ? 'jsonFormat' : 'stringFormat', ...inner], ConfigCodes.BAD_ACCESS_LOG_FORMAT, `bad access log format: ${error.message}`));
      return;
    }
    if (notes.unsupported.length) {
      out.push(ctx.at(sinkAt, ConfigCodes.IGNORED, `these Envoy operators have no value in Gatehouse and print "-": ${notes.unsupported.map((n) => `%${n}%`).join(', ')}`, 'warning'));
    }
  });

  const http = spec.httpGateway;
  const escaped = http?.options?.httpConnectionManagerSettings?.pathWithEscapedSlashesAction;
  if (escaped === 'UNESCAPE_AND_REDIRECT' || escaped === 3) {
    out.push(ctx.at(['spec', 'httpGateway', 'options', 'httpConnectionManagerSettings', 'pathWithEscapedSlashesAction'], ConfigCodes.IGNORED, 'UNESCAPE_AND_REDIRECT is served as UNESCAPE_AND_FORWARD (no redirect is sent)', 'warning'));
  }

  // Proto names are JSON names by now (config/proto-names.ts).
  const hcm = http?.options?.httpConnectionManagerSettings;
  if (hcm?.serverHeaderTransformation !== undefined && hcm.serverName === undefined) {
    // Envoy names itself "envoy" then; Gatehouse adds no server header of its own without a name.
    out.push(ctx.at(['spec', 'httpGateway', 'options', 'httpConnectionManagerSettings', 'serverHeaderTransformation'], ConfigCodes.IGNORED, 'serverHeaderTransformation applies to serverName: without one, responses keep the upstream\'s server header and the gateway\'s own carry none', 'warning'));
  }

  out.push(...checkListenerTracing(resource, ctx));

  // Referenced VirtualServices that are not served: the listener serves the others (Gloo reports them too).
  http?.virtualServices?.forEach((ref, i) => {
    if (!ctx.resources.has(`VirtualService/${ref.namespace ?? resource.namespace}/${ref.name}`)) {
      out.push(ctx.at(['spec', 'httpGateway', 'virtualServices', i], ConfigCodes.MISSING_REF, `references VirtualService ${ref.namespace ?? resource.namespace}/${ref.name}, which does not exist or is not accepted: the listener serves the others`, 'warning'));
    }
  });

  out.push(...checkTcpGateway(resource, ctx));

  // One listener per address and port and proxy: a second Gateway binding the same one is rejected.
  const bind = bindOf(spec);
  const proxies = new Set(proxyNamesOf(spec));
  for (const other of ctx.resources.values()) {
    if (other.kind !== 'Gateway' || other.key === resource.key) continue;
    const otherSpec = (other as Resource<'Gateway'>).spec;
    const otherBind = bindOf(otherSpec);
    if (otherBind.port !== bind.port || otherBind.address !== bind.address || bind.port === 0) continue;
    if (!proxyNamesOf(otherSpec).some((p) => proxies.has(p))) continue;
    out.push(ctx.at(['spec', 'bindPort'], ConfigCodes.LISTENER_CONFLICT, `${bind.address}:${bind.port} is already bound by Gateway ${other.namespace}/${other.name} for the same proxy`));
  }
  return out;
}

/**
 * A `tcpGateway`'s hosts (docs/tcp-proxy.md): one kind of listener per Gateway; each SNI name,
 * and the catch-all hosts (no sslConfig; sslConfig without sniDomains), once per listener (as
 * Envoy refuses filter chains with the same match). Its Secrets and Upstreams are references
 * the store resolves (config/store.ts referencesOf), as a VirtualService's are.
 */
function checkTcpGateway(resource: Resource<'Gateway'>, ctx: CheckContext): Diagnostic[] {
  const out: Diagnostic[] = [];
  const spec = resource.spec;
  const tcp = spec.tcpGateway;
  if (!tcp) return out;
  if (spec.httpGateway !== undefined) out.push(ctx.at(['spec', 'tcpGateway'], ConfigCodes.INVALID, 'a Gateway is an httpGateway or a tcpGateway, not both'));
  const seen = new Map<string, number>();
  let plain: number | undefined;
  let anyTls: number | undefined;
  tcp.tcpHosts?.forEach((host, i) => {
    const at: PathSegment[] = ['spec', 'tcpGateway', 'tcpHosts', i];
    const ssl = host.sslConfig;
    if (!ssl || !ssl.sniDomains?.length) {
      const which = ssl ? 'an sslConfig without sniDomains' : 'no sslConfig';
      const earlier = ssl ? anyTls : plain;
      if (earlier !== undefined) out.push(ctx.at(at, ConfigCodes.INVALID, `tcpHosts[${earlier}] already has ${which}: only one host of a listener can match every ${ssl ? 'TLS ' : ''}connection`));
      if (ssl) anyTls ??= i;
      else plain ??= i;
    }
    ssl?.sniDomains?.forEach((domain, j) => {
      const name = domain.toLowerCase().replace(/\.$/, '');
      const earlier = seen.get(name);
      if (earlier !== undefined && earlier !== i) out.push(ctx.at([...at, 'sslConfig', 'sniDomains', j], ConfigCodes.INVALID, `SNI name ${domain} is already routed by tcpHosts[${earlier}]`));
      else seen.set(name, i);
    });
    const d = host.destination;
    const kinds = ['single', 'multi', 'upstreamGroup', 'forwardSniClusterName'].filter((k) => (d as Record<string, unknown>)[k] !== undefined);
    if (kinds.length !== 1) out.push(ctx.at([...at, 'destination'], ConfigCodes.INVALID, kinds.length ? `give one of single, multi, upstreamGroup, forwardSniClusterName, not ${kinds.join(' and ')}` : 'give one of single, multi, upstreamGroup, forwardSniClusterName'));
  });
  return out;
}
