import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { RequestCounter, RequestHistogram } from './request-metrics.ts';
import { ConfigChannels, type ConfigLoadMessage, type ConfigResultMessage } from '../config/telemetry.ts';

/**
 * Every Gatehouse metric (SPEC 8), in one registry per process. In multi-worker mode the
 * primary aggregates the workers' registries (prom-client's AggregatorRegistry).
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'gatehouse_process_' });

let kubeConnectedProbe: (() => boolean) | undefined;

/** With --kube: how `gatehouse_kube_connected` learns the connection state at each scrape. */
export function setKubeConnectedProbe(probe: (() => boolean) | undefined): void {
  kubeConnectedProbe = probe;
}

export const metrics = {
  // The first five are recorded per request, auth step or resolver call: see request-metrics.ts.
  requests: new RequestCounter({
    name: 'gatehouse_requests_total',
    help: 'Downstream requests by virtual host, route and response status.',
    labelNames: ['virtual_host', 'route', 'status'],
    registry,
  }),
  upstreamLatency: new RequestHistogram({
    name: 'gatehouse_upstream_latency_seconds',
    help: 'Time from sending a request upstream to its response headers.',
    labelNames: ['upstream'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registry,
  }),
  requestDuration: new RequestHistogram({
    name: 'gatehouse_request_duration_seconds',
    help: 'Downstream request duration, from the request to the end of its response (or the client leaving), by virtual host, route and status class (2xx…5xx; "none": no response was sent).',
    labelNames: ['virtual_host', 'route', 'status_class'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registry,
  }),
  authDecisions: new RequestCounter({
    name: 'gatehouse_auth_decisions_total',
    help: 'External auth decisions by AuthConfig, step and result (allow, deny, error).',
    labelNames: ['config', 'step', 'result'],
    registry,
  }),
  graphqlOperations: new RequestCounter({
    name: 'gatehouse_graphql_operations_total',
    help: 'GraphQL operations by GraphQLApi, operation type and result (ok, error; rejected: refused before execution with a 4xx, operation "unknown" when it was never parsed).',
    labelNames: ['api', 'operation', 'result'],
    registry,
  }),
  graphqlOperationDuration: new RequestHistogram({
    name: 'gatehouse_graphql_operation_duration_seconds',
    help: 'GraphQL operation latency by GraphQLApi, operation type, operation name (the first 50 names per API; later ones "other", unnamed "anonymous") and result (ok, error).',
    labelNames: ['api', 'operation', 'operation_name', 'result'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registry,
  }),
  graphqlResolverCalls: new RequestCounter({
    name: 'gatehouse_graphql_resolver_calls_total',
    help: 'Resolver calls by GraphQLApi, resolver and result (ok, error).',
    labelNames: ['api', 'resolver', 'result'],
    registry,
  }),
  configReloads: new Counter({
    name: 'gatehouse_config_reloads_total',
    help: 'Configuration loads by result (ok: nothing rejected, rejected: some resource rejected).',
    labelNames: ['result'] as const,
    registers: [registry],
  }),
  workerRestarts: new Counter({
    name: 'gatehouse_worker_restarts_total',
    help: 'Traffic workers that died and were forked again.',
    registers: [registry],
  }),
  pluginProcessRestarts: new Counter({
    name: 'gatehouse_plugin_process_restarts_total',
    help: 'Plugin processes that died (a crash, their memory bound, a stall) and were started again.',
    registers: [registry],
  }),
  unhandledErrors: new Counter({
    name: 'gatehouse_unhandled_errors_total',
    help: 'Exceptions and rejections no handler caught, by kind (exception, rejection: logged and survived; catastrophe: a plugin isolate V8 lost control of, the process is killed).',
    labelNames: ['kind'] as const,
    registers: [registry],
  }),
  refusedConnections: new Counter({
    name: 'gatehouse_downstream_connections_refused_total',
    help: 'Downstream connections closed by the listener before serving them, by reason (per_client_limit, tls_client_hello, tls_client_hello_timeout, tls_sni_mismatch, tls_client_certificate, tls_version, tls_cipher, proxy_protocol_invalid, proxy_protocol_missing, proxy_protocol_timeout).',
    labelNames: ['reason'] as const,
    registers: [registry],
  }),
  tcpConnections: new Counter({
    name: 'gatehouse_tcp_connections_total',
    help: 'Connections of TCP proxy (tcpGateway) listeners by Gateway, TCP host and result (proxied, no_route, connect_failure, tls_handshake, hello_invalid, hello_timeout, connection_limit; host "-" before one is chosen).',
    labelNames: ['gateway', 'host', 'result'] as const,
    registers: [registry],
  }),
  tcpActiveConnections: new Gauge({
    name: 'gatehouse_tcp_active_connections',
    help: 'Connections open now on TCP proxy (tcpGateway) listeners, by Gateway.',
    labelNames: ['gateway'] as const,
    registers: [registry],
  }),
  tcpBytes: new Counter({
    name: 'gatehouse_tcp_bytes_total',
    help: 'Bytes a TCP proxy (tcpGateway) listener forwarded, by Gateway, TCP host and direction (received: client to upstream; sent: upstream to client), counted when a connection closes.',
    labelNames: ['gateway', 'host', 'direction'] as const,
    registers: [registry],
  }),
  rejectedResources: new Gauge({
    name: 'gatehouse_config_rejected_resources',
    help: 'Resources rejected by the latest configuration load, by kind.',
    labelNames: ['kind'] as const,
    registers: [registry],
  }),
  kubeConnected: new Gauge({
    name: 'gatehouse_kube_connected',
    help: 'With --kube: 1 while every watch on the Kubernetes API is connected, 0 while some reconnects (the last accepted configuration keeps serving).',
    registers: [registry],
    // Read at scrape time: a gauge set on a timer would lag behind /readyz.
    collect() {
      if (kubeConnectedProbe) this.set(kubeConnectedProbe() ? 1 : 0);
    },
  }),
  kubeStatusLeader: new Gauge({
    name: 'gatehouse_kube_status_leader',
    help: 'With --kube: 1 while this replica holds the status Lease and writes resource status.',
    registers: [registry],
  }),
  kubeEvents: new Counter({
    name: 'gatehouse_kube_events_total',
    help: 'Kubernetes Events posted (rejected resources, AuthConfigs whose steps failed to build), by result (ok, error).',
    labelNames: ['result'] as const,
    registers: [registry],
  }),
  authConfigUnavailable: new Gauge({
    name: 'gatehouse_extauth_config_unavailable',
    help: 'extauth: 1 for each AuthConfig whose steps failed to build (its requests are denied), by config (<namespace>.<name>).',
    labelNames: ['config'] as const,
    registers: [registry],
  }),
  extAuthLatency: new RequestHistogram({
    name: 'gatehouse_ext_authz_duration_seconds',
    help: 'Gateway: time of each ext_authz Check call to the auth server, by result (ok, error).',
    labelNames: ['result'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1],
    registry,
  }),
  kubeStatusWrites: new Counter({
    name: 'gatehouse_kube_status_writes_total',
    help: 'Resource status writes to the Kubernetes API, by result (ok, error).',
    labelNames: ['result'] as const,
    registers: [registry],
  }),
  shadowRequests: new Counter({
    name: 'gatehouse_shadow_requests_total',
    help: 'Shadow copies of requests (route shadowing) by shadow Upstream and result (ok, failed, body_too_large, overloaded, abandoned).',
    labelNames: ['upstream', 'result'] as const,
    registers: [registry],
  }),
  hostRewriteInvalid: new Counter({
    name: 'gatehouse_host_rewrite_invalid_total',
    help: 'Host rewrites (hostRewriteHeader, hostRewritePathRegex) whose value was not a valid host: the original Host was sent, by route.',
    labelNames: ['route'] as const,
    registers: [registry],
  }),
};

// The config subsystem publishes its telemetry on diagnostics channels (config/telemetry.ts) instead
// of importing this module; both processes that load configuration import this module first.
ConfigChannels.load.subscribe((message) => {
  const { result, rejectedByKind } = message as ConfigLoadMessage;
  metrics.configReloads.inc({ result });
  for (const [kind, count] of rejectedByKind) metrics.rejectedResources.set({ kind }, count);
});
ConfigChannels.kubeEvent.subscribe((message) => metrics.kubeEvents.inc({ result: (message as ConfigResultMessage).result }));
ConfigChannels.kubeStatusWrite.subscribe((message) => metrics.kubeStatusWrites.inc({ result: (message as ConfigResultMessage).result }));
ConfigChannels.kubeStatusLeader.subscribe((message) => metrics.kubeStatusLeader.set((message as { leading: boolean }).leading ? 1 : 0));
