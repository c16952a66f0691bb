import { ConfigCodes, type Diagnostic } from '../diagnostic.ts';
import type { Resource } from '../resource.ts';
import type { CheckContext } from '../check-context.ts';

/**
 * Gloo Upstream fields accepted but not (fully) honoured say so with a warning naming the field,
 * never silently; a gRPC health check needs HTTP/2.
 */
export function checkUpstreamFields(resource: Resource<'Upstream'>, ctx: CheckContext): Diagnostic[] {
  const out: Diagnostic[] = [];
  const spec = resource.spec;
  const warn = (path: (string | number)[], message: string) => out.push(ctx.at(['spec', ...path], ConfigCodes.IGNORED, message, 'warning'));
  if (spec.kube?.selector && Object.keys(spec.kube.selector).length > 0) {
    warn(['kube', 'selector'], 'selector is not applied: the service is reached through cluster DNS, so every pod behind it gets traffic (Gloo picks the matching pods from the endpoints)');
  }
  spec.healthChecks?.forEach((check, i) => {
    // gRPC runs over HTTP/2: Envoy refuses a gRPC health check on a cluster without it too.
    if (check.grpcHealthCheck && !spec.useHttp2) out.push(ctx.at(['spec', 'healthChecks', i, 'grpcHealthCheck'], ConfigCodes.INVALID, 'a gRPC health check needs useHttp2: true (gRPC runs over HTTP/2)'));
  });
  spec.healthChecks?.forEach((check, i) => {
    if (check.noTrafficInterval !== undefined) warn(['healthChecks', i, 'noTrafficInterval'], 'noTrafficInterval is not applied: hosts are checked every interval whether or not they get traffic');
    if (check.reuseConnection === false) warn(['healthChecks', i, 'reuseConnection'], "reuseConnection: false is not applied: checks go over the host's pooled connections");
  });
  if (spec.ignoreHealthOnHostRemoval === false) {
    warn(['ignoreHealthOnHostRemoval'], 'ignoreHealthOnHostRemoval: false is not applied: a host removed from the Upstream stops getting traffic at once, healthy or not');
  }
  const connection = spec.connectionConfig;
  const keepalive = connection?.tcpKeepalive;
  for (const field of ['keepaliveProbes', 'keepaliveInterval'] as const) {
    if (keepalive?.[field] !== undefined) {
      warn(['connectionConfig', 'tcpKeepalive', field], `${field} is not applied: Node sets only the idle time before the first probe (keepaliveTime); the probe count and interval stay the operating system's (net.ipv4.tcp_keepalive_probes / tcp_keepalive_intvl)`);
    }
  }
  if (connection?.perConnectionBufferLimitBytes !== undefined) {
    warn(['connectionConfig', 'perConnectionBufferLimitBytes'], "perConnectionBufferLimitBytes is not applied: bodies are never buffered whole here; they stream with backpressure, bounded by Node's socket buffers (64 KiB high-water marks), so the limit has nothing to bound");
  }
  const http = connection?.commonHttpProtocolOptions;
  if (http?.headersWithUnderscoresAction !== undefined) {
    warn(['connectionConfig', 'commonHttpProtocolOptions', 'headersWithUnderscoresAction'], 'headersWithUnderscoresAction has no effect on an Upstream (Envoy applies it to client requests only); client headers with "_" are dropped by the gateway by default');
  }
  const http1 = connection?.http1ProtocolOptions;
  if (http1?.enableTrailers === false) {
    warn(['connectionConfig', 'http1ProtocolOptions', 'enableTrailers'], 'enableTrailers: false is not applied: trailers are always passed on (Envoy drops HTTP/1 trailers unless enabled)');
  }
  for (const field of ['properCaseHeaderKeyFormat', 'preserveCaseHeaderKeyFormat', 'overrideStreamErrorOnInvalidHttpMessage'] as const) {
    if (http1?.[field] !== undefined) {
      const why = field === 'overrideStreamErrorOnInvalidHttpMessage' ? 'an invalid HTTP/1 message from the upstream always closes its connection' : 'header names are sent upstream in lower case';
      warn(['connectionConfig', 'http1ProtocolOptions', field], `${field} is not applied: ${why}`);
    }
  }
  if (spec.useHttp2 && http1 !== undefined) {
    warn(['connectionConfig', 'http1ProtocolOptions'], 'http1ProtocolOptions has no effect: the Upstream speaks HTTP/2 (useHttp2)');
  }
  return out;
}
