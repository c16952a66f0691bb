import { compileJsonFormat, compileStringFormat, FormatError, type FormatNotes } from '../log/access-format.ts';
import { ConfigCodes, type Diagnostic, type PathSegment } from '../config/diagnostic.ts';
import type { Resource } from '../config/resource.ts';
import { field, HONOURED_HCM_FIELDS, protoName, type GatewaySpec } from '../config/schema/gateway.ts';
import type { CheckContext } from '../config/check-context.ts';

/** Gloo's default `proxyNames` (gateway.proto). */
export const DEFAULT_PROXY_NAME = 'gateway-proxy';

/** The proxies a Gateway is for; Gloo turns camelCase names into kebab-case. */
export function proxyNamesOf(spec: GatewaySpec): string[] {
  const names = field<string[]>(spec, 'proxyNames');
  return names?.length ? names.map((n) => n.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)) : [DEFAULT_PROXY_NAME];
}

/** `address:port` a Gateway binds (Gloo's defaults: `::`, no default port; Gatehouse: `0.0.0.0`, 8080). */
export function bindOf(spec: GatewaySpec): { address: string; port: number } {
  const address = field<string>(spec, 'bindAddress');
  return { address: address === undefined || address === '' || address === '::' ? '0.0.0.0' : address, port: field<number>(spec, 'bindPort') ?? 8080 };
}

/**
 * Load-time checks of a Gateway (docs/gateway.md): access-log format strings compile (an unknown
 * operator rejects the Gateway, with the field path, and the last accepted version keeps
 * serving); Envoy operators without a value here, and every Gloo field accepted but not
 * honoured, are Warnings naming them; two Gateways of one proxy cannot bind one address and port.
 */
export function checkGateway(resource: Resource<'Gateway'>, ctx: CheckContext): Diagnostic[] {
  const out: Diagnostic[] = [];
  const spec = resource.spec;
  const warn = (path: PathSegment[], message: string) => out.push(ctx.at(['spec', ...path], ConfigCodes.IGNORED, message, 'warning'));
  const key = (object: object | undefined, camel: string): string => (object && camel in object ? camel : protoName(camel));
  const present = (object: object | undefined, camel: string) => field(object, camel) !== undefined;

  for (const name of ['useProxyProto', 'routeOptions']) {
    if (present(spec, name)) warn([key(spec, name)], `${name} is accepted but not applied by Gatehouse`);
  }
  for (const name of ['tcpGateway', 'hybridGateway']) {
    if (present(spec, name)) warn([key(spec, name)], `${name} is not served: Gatehouse binds HTTP gateways only (this Gateway binds no listener)`);
  }

  const options = field<object>(spec, 'options');
  const optionsKey = key(spec, 'options');
  for (const name of ['extensions', 'perConnectionBufferLimitBytes', 'socketOptions', 'proxyProtocol', 'connectionBalanceConfig', 'listenerAccessLoggingService', 'tcpStats']) {
    if (present(options, name)) warn([optionsKey, key(options, name)], `${name} is accepted but not applied by Gatehouse`);
  }
  const als = field<object>(options, 'accessLoggingService');
  const logs = field<object[]>(als, 'accessLog') ?? [];
  logs.forEach((log, i) => {
    const at: PathSegment[] = ['spec', optionsKey, key(options, 'accessLoggingService'), key(als, 'accessLog'), i];
    for (const name of ['grpcService', 'openTelemetryService']) {
      if (present(log, name)) out.push(ctx.at([...at, key(log, name)], ConfigCodes.IGNORED, `${name} access logs are not sent by Gatehouse (fileSink is)`, 'warning'));
    }
    if (present(log, 'filter')) out.push(ctx.at([...at, key(log, 'filter')], ConfigCodes.IGNORED, 'access log filters are not applied: every request is logged', 'warning'));
    const sink = field<object>(log, 'fileSink');
    if (!sink) return;
    const sinkAt = [...at, key(log, 'fileSink')];
    const stringFormat = field<string>(sink, 'stringFormat');
    const jsonFormat = field<Record<string, unknown>>(sink, 'jsonFormat');
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
      const formatKey = jsonFormat !== undefined ? key(sink, 'jsonFormat') : key(sink, 'stringFormat');
      out.push(ctx.at([...sinkAt, formatKey, ...inner], ConfigCodes.BAD_ACCESS_LOG_FORMAT, `bad access log format: ${error.message}`));
      return;
    }
    if (notes.unsupported.length) {
      out.push(ctx.at(sinkAt, ConfigCodes.IGNORED, `these Envoy operators have no value in Gatehouse and print "-": ${notes.unsupported.map((n) => `%${n}%`).join(', ')}`, 'warning'));
    }
  });

  const http = field<object>(spec, 'httpGateway');
  const httpKey = key(spec, 'httpGateway');
  const httpOptions = field<object>(http, 'options');
  const httpOptionsKey = key(http, 'options');
  for (const name of Object.keys(httpOptions ?? {})) {
    if (name === 'httpConnectionManagerSettings' || name === 'http_connection_manager_settings') continue;
    warn([httpKey, httpOptionsKey, name], `${name} is accepted but not applied by Gatehouse`);
  }
  const hcm = field<object>(httpOptions, 'httpConnectionManagerSettings');
  const honoured = new Set<string>(HONOURED_HCM_FIELDS.flatMap((f) => [f, protoName(f)]));
  for (const name of Object.keys(hcm ?? {})) {
    if (!honoured.has(name)) warn([httpKey, httpOptionsKey, key(httpOptions, 'httpConnectionManagerSettings'), name], `${name} is accepted but not applied by Gatehouse (docs/gateway.md lists the connection-manager settings it honours)`);
  }
  const escaped = field<string | number>(hcm, 'pathWithEscapedSlashesAction');
  if (escaped === 'UNESCAPE_AND_REDIRECT' || escaped === 3) {
    warn([httpKey, httpOptionsKey, key(httpOptions, 'httpConnectionManagerSettings'), key(hcm, 'pathWithEscapedSlashesAction')], 'UNESCAPE_AND_REDIRECT is served as UNESCAPE_AND_FORWARD (no redirect is sent)');
  }

  // Referenced VirtualServices that are not served: the listener serves the others (Gloo reports them too).
  field<{ name: string; namespace?: string }[]>(http, 'virtualServices')?.forEach((ref, i) => {
    if (!ctx.resources.has(`VirtualService/${ref.namespace ?? resource.namespace}/${ref.name}`)) {
      out.push(ctx.at(['spec', httpKey, key(http, 'virtualServices'), i], ConfigCodes.MISSING_REF, `references VirtualService ${ref.namespace ?? resource.namespace}/${ref.name}, which does not exist or is not accepted: the listener serves the others`, 'warning'));
    }
  });

  // One listener per address and port and proxy: a second Gateway binding the same one is rejected.
  const bind = bindOf(spec);
  const proxies = new Set(proxyNamesOf(spec));
  for (const other of ctx.resources.values()) {
    if (other.kind !== 'Gateway' || other.key === resource.key) continue;
    const otherSpec = (other as Resource<'Gateway'>).spec;
    const otherBind = bindOf(otherSpec);
    if (otherBind.port !== bind.port || otherBind.address !== bind.address || bind.port === 0) continue;
    if (!proxyNamesOf(otherSpec).some((p) => proxies.has(p))) continue;
    out.push(ctx.at(['spec', key(spec, 'bindPort')], ConfigCodes.LISTENER_CONFLICT, `${bind.address}:${bind.port} is already bound by Gateway ${other.namespace}/${other.name} for the same proxy`));
  }
  return out;
}
