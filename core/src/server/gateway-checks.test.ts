import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from '../config/manifest.ts';
import { resourceChecks } from '../resource-checks.ts';
import { ConfigStore } from '../config/store.ts';
import type { Resource } from '../config/resource.ts';
import { gatewaysFor, planOf, snapshotFor } from './gateway-listeners.ts';

const gateway = (name: string, spec: object, apiVersion = 'gateway.solo.io/v1') => ({ apiVersion, kind: 'Gateway', metadata: { name, namespace: 'gloo-system' }, spec });
const vs = (name: string, namespace: string, labels: Record<string, string>, extra: object = {}) => ({
  apiVersion: 'gateway.solo.io/v1',
  kind: 'VirtualService',
  metadata: { name, namespace, labels },
  spec: { virtualHost: { domains: [`${name}.${namespace}.test`], routes: [{ matchers: [{ prefix: '/' }], directResponseAction: { status: 200 } }] }, ...extra },
});

async function load(objects: object[]) {
  const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev', checks: await resourceChecks(['Gateway']) });
  const parsed = parseManifests('gw.yaml', objects.map((o) => stringify(o)).join('---\n'));
  return store.load(parsed.documents, parsed.diagnostics);
}

describe('Gateway checks', () => {
  test("Gloo's JSON and proto field names load; an unknown field is an error with its path", async () => {
    const snapshot = await load([
      gateway('camel', { bindAddress: '::', bindPort: 8080, httpGateway: { virtualServiceNamespaces: ['*'] }, proxyNames: ['gateway-proxy'] }),
      gateway('proto', { bind_address: '::', bind_port: 8081, http_gateway: { virtual_service_namespaces: ['*'] }, proxy_names: ['gateway-proxy'] }),
      gateway('typo', { bindPort: 8082, httpGateway: { virtualServiceSelectors: { a: 'b' } } }),
    ]);
    const state = (name: string) => snapshot.statuses.find((s) => s.name === name);
    expect(state('camel')?.state).toBe('Accepted');
    expect(state('proto')?.state).toBe('Accepted');
    expect(state('typo')?.state).toBe('Rejected');
    expect(state('typo')?.reasons.map((r) => r.path)).toContain('spec.httpGateway.virtualServiceSelectors');
    // The proto spelling is the same resource: renamed to JSON names, so every check and the listener read one spelling.
    const specOf = (name: string) => [...snapshot.resources.values()].find((r) => r.name === name)!.spec;
    expect(specOf('proto')).toEqual({ bindAddress: '::', bindPort: 8081, httpGateway: { virtualServiceNamespaces: ['*'] }, proxyNames: ['gateway-proxy'] });
    expect(planOf(gatewaysFor(snapshot, 'gateway-proxy').find((g) => g.name === 'proto')!, {})).toMatchObject({ address: '0.0.0.0', port: 8081 });
  });

  test('a snake_case Gateway: honoured settings apply, fields not applied are Warnings at their JSON-name path, both spellings of one field are an error', async () => {
    const snapshot = await load([
      gateway('snake', {
        bind_port: 8090,
        use_proxy_proto: true,
        hybrid_gateway: {},
        options: { access_logging_service: { access_log: [{ file_sink: { path: '/dev/stdout', json_format: { code: '%RESPONSE_CODE%' } }, grpc_service: { log_name: 'x' } }] } },
        http_gateway: { options: { grpc_web: {}, http_connection_manager_settings: { server_name: 'gh', xff_num_trusted_hops: 1, max_request_headers_kb: 16, path_with_escaped_slashes_action: 'REJECT_REQUEST' } } },
      }),
      gateway('twice', { bindPort: 8091, bind_port: 8092 }),
    ]);
    const status = snapshot.statuses.find((s) => s.name === 'snake')!;
    expect(status.state).toBe('Warning');
    expect(status.reasons.map((r) => [r.path, r.message]).sort()).toEqual(
      [
        ['spec.hybridGateway', 'hybridGateway is not applied: Gatehouse binds HTTP and TCP gateways only: this Gateway binds no listener'],
        ['spec.options.accessLoggingService.accessLog[0].grpcService', 'grpcService is not applied: gRPC access log services are not sent to (fileSink is written)'],
        ['spec.httpGateway.options.httpConnectionManagerSettings.xffNumTrustedHops', 'xffNumTrustedHops is not applied: this connection-manager setting is not applied by Gatehouse (docs/gateway.md lists those it honours)'],
      ].sort(),
    );
    expect(status.reasons.every((r) => r.severity === 'warning' && r.code === 'GH_CONFIG_IGNORED')).toBe(true);
    // A hybridGateway binds nothing; the settings of an HTTP one written in snake_case are applied.
    expect(gatewaysFor(snapshot, 'gateway-proxy').map((g) => g.name)).not.toContain('snake');
    const plain = await load([gateway('snake', { bind_port: 8090, options: { access_logging_service: { access_log: [{ file_sink: { path: '/dev/stdout', json_format: { code: '%RESPONSE_CODE%' } } }] } }, http_gateway: { options: { http_connection_manager_settings: { server_name: 'gh', server_header_transformation: 'APPEND_IF_ABSENT', max_request_headers_kb: 16, path_with_escaped_slashes_action: 'REJECT_REQUEST' } } } })]);
    expect(plain.statuses.find((s) => s.name === 'snake')?.state).toBe('Accepted');
    const plan = planOf(gatewaysFor(plain, 'gateway-proxy')[0]!, {});
    expect([plan.port, plan.limits.maxRequestHeaderBytes, plan.paths, plan.sinks?.map((s) => [s.path, s.source]), plan.headers]).toEqual([8090, 16 * 1024, { escapedSlashes: 'reject' }, [['/dev/stdout', '{"code":"%RESPONSE_CODE%"}']], { server: { name: 'gh', mode: 'append-if-absent' } }]);
    const twice = snapshot.statuses.find((s) => s.name === 'twice')!;
    expect(twice.state).toBe('Rejected');
    expect(twice.reasons.map((r) => r.path)).toEqual(['spec.bind_port']);
  });

  test('every Gloo field accepted but not honoured is a Warning naming it', async () => {
    const snapshot = await load([
      gateway('gw', {
        bindPort: 8080,
        useProxyProto: true,
        options: { socketOptions: [], accessLoggingService: { accessLog: [{ grpcService: { logName: 'x', staticClusterName: 'als' } }, { fileSink: { path: '/dev/stdout', stringFormat: '%DURATION%' }, filter: { traceableFilter: {} } }] } },
        httpGateway: { options: { gzip: {}, httpConnectionManagerSettings: { via: 'gh', xffNumTrustedHops: 1, requestTimeout: '5s', max_headers_count: 10 } } },
      }),
    ]);
    const status = snapshot.statuses.find((s) => s.name === 'gw')!;
    expect(status.state).toBe('Warning');
    expect(status.reasons.map((r) => r.path).sort()).toEqual(
      [
        'spec.options.socketOptions',
        'spec.options.accessLoggingService.accessLog[0].grpcService',
        'spec.options.accessLoggingService.accessLog[1].filter.traceableFilter',
        'spec.httpGateway.options.httpConnectionManagerSettings.xffNumTrustedHops',
      ].sort(),
    );
    expect(status.reasons.every((r) => r.severity === 'warning' && r.code === 'GH_CONFIG_IGNORED')).toBe(true);
    expect(planOf(gatewaysFor(snapshot, 'gateway-proxy')[0]!, {}).headers).toEqual({ via: 'gh' });
    // useProxyProto is honoured (docs/proxy-protocol.md); the process's --proxy-protocol never reaches a Gateway listener.
    expect(planOf(gatewaysFor(snapshot, 'gateway-proxy')[0]!, { proxyProtocol: { allowWithout: true } }).limits.proxyProtocol).toEqual({});
  });

  test('serverHeaderTransformation without serverName is a Warning; a server name or via that could split a response is refused', async () => {
    const snapshot = await load([
      gateway('alone', { bindPort: 8080, httpGateway: { options: { httpConnectionManagerSettings: { serverHeaderTransformation: 'OVERWRITE' } } } }),
      gateway('split', { bindPort: 8081, httpGateway: { options: { httpConnectionManagerSettings: { serverName: 'gh\r\nset-cookie: a=1', via: 'x\ny' } } } }),
    ]);
    const alone = snapshot.statuses.find((s) => s.name === 'alone')!;
    expect(alone.reasons.map((r) => [r.severity, r.path])).toEqual([['warning', 'spec.httpGateway.options.httpConnectionManagerSettings.serverHeaderTransformation']]);
    const split = snapshot.statuses.find((s) => s.name === 'split')!;
    expect(split.state).toBe('Rejected');
    expect(split.reasons.map((r) => r.path).sort()).toEqual(['spec.httpGateway.options.httpConnectionManagerSettings.serverName', 'spec.httpGateway.options.httpConnectionManagerSettings.via']);
  });

  test('a bad format string rejects the Gateway with the path of the format (JSON formats: of the key)', async () => {
    const snapshot = await load([
      gateway('text', { bindPort: 8080, options: { access_logging_service: { access_log: [{ file_sink: { path: '/dev/stdout', string_format: '%REQ(:METHOD)% %BOGUS%' } }] } } }),
      gateway('json', { bindPort: 8081, options: { accessLoggingService: { accessLog: [{ fileSink: { path: '/dev/stdout', jsonFormat: { a: { b: '%NOPE%' } } } }] } } }),
      gateway('both', { bindPort: 8082, options: { accessLoggingService: { accessLog: [{ fileSink: { path: '/dev/stdout', jsonFormat: {}, stringFormat: 'x' } }] } } }),
    ]);
    const reasons = (name: string) => snapshot.statuses.find((s) => s.name === name)!.reasons.filter((r) => r.severity === 'error');
    // Proto names are renamed to JSON names before validation (config/proto-names.ts): the path is the JSON names'.
    expect(reasons('text').map((r) => [r.code, r.path])).toEqual([['GH_CONFIG_BAD_ACCESS_LOG_FORMAT', 'spec.options.accessLoggingService.accessLog[0].fileSink.stringFormat']]);
    expect(reasons('text')[0]!.message).toContain('%BOGUS%');
    expect(reasons('json').map((r) => r.path)).toEqual(['spec.options.accessLoggingService.accessLog[0].fileSink.jsonFormat.a.b']);
    expect(reasons('both').map((r) => r.code)).toEqual(['GH_CONFIG_INVALID']);
  });

  test('access log filters: a malformed one rejects the Gateway with its path; proto names are taken; a runtimeKey is warned', async () => {
    const sink = { fileSink: { path: '/dev/stdout' } };
    const snapshot = await load([
      gateway('bad-op', { bindPort: 8080, options: { accessLoggingService: { accessLog: [{ ...sink, filter: { statusCodeFilter: { comparison: { op: 'GT', value: { defaultValue: 400 } } } } }] } } }),
      gateway('unknown', { bindPort: 8081, options: { accessLoggingService: { accessLog: [{ ...sink, filter: { orFilter: { filters: [{ notHealthCheckFilter: {} }, { bogusFilter: {} }] } } }] } } }),
      gateway('proto', { bindPort: 8082, options: { access_logging_service: { access_log: [{ file_sink: { path: '/dev/stdout' }, filter: { status_code_filter: { comparison: { op: 'GE', value: { default_value: 400, runtime_key: 'k' } } } } }] } } }),
    ]);
    const status = (name: string) => snapshot.statuses.find((s) => s.name === name)!;
    expect(status('bad-op').reasons.map((r) => [r.code, r.path])).toEqual([['GH_CONFIG_INVALID', 'spec.options.accessLoggingService.accessLog[0].filter.statusCodeFilter.comparison.op']]);
    expect(status('unknown').reasons.map((r) => r.path)).toEqual(['spec.options.accessLoggingService.accessLog[0].filter.orFilter.filters[1].bogusFilter']);
    expect(status('proto').state).toBe('Warning');
    expect(status('proto').reasons.map((r) => [r.code, r.path])).toEqual([['GH_CONFIG_IGNORED', 'spec.options.accessLoggingService.accessLog[0].filter.statusCodeFilter.comparison.value.runtimeKey']]);
    const filter = planOf(gatewaysFor(snapshot, 'gateway-proxy').find((g) => g.name === 'proto')!, {}).sinks![0]!.filter!;
    expect([filter({ status: 200 } as never), filter({ status: 404 } as never)]).toEqual([false, true]);
  });

  test('two Gateways of one proxy on one address and port: the later is rejected; other proxies may share it', async () => {
    const snapshot = await load([gateway('first', { bindPort: 8080 }), gateway('second', { bindPort: 8080, bindAddress: '0.0.0.0' }), gateway('other-proxy', { bindPort: 8080, proxyNames: ['publicGw'] })]);
    const state = (name: string) => snapshot.statuses.find((s) => s.name === name);
    expect(state('first')?.state).toBe('Accepted');
    expect(state('second')?.reasons.map((r) => r.code)).toEqual(['GH_CONFIG_LISTENER_CONFLICT']);
    expect(state('other-proxy')?.state).toBe('Accepted');
    // camelCase proxy names become kebab-case, as in Gloo.
    expect(gatewaysFor(snapshot, 'public-gw').map((g) => g.name)).toEqual(['other-proxy']);
  });
});

describe('VirtualService selection', () => {
  test("Gloo's order: references, else labels and expressions, else all; within the namespaces; ssl Gateways take sslConfig VirtualServices", async () => {
    const snapshot = await load([
      vs('a', 'team1', { app: 'shop', tier: '1' }),
      vs('b', 'team1', { app: 'blog' }),
      vs('c', 'team2', { app: 'shop', tier: '3' }),
      vs('s', 'team2', { app: 'shop' }, { sslConfig: { sslFiles: { tlsCert: '/nonexistent.crt', tlsKey: '/nonexistent.key' } } }),
      gateway('refs', { bindPort: 1, httpGateway: { virtualServices: [{ name: 'b', namespace: 'team1' }, { name: 'gone', namespace: 'team1' }] } }),
      gateway('labels', { bindPort: 2, httpGateway: { virtualServiceSelector: { app: 'shop' } } }),
      gateway('expr', { bindPort: 3, httpGateway: { virtualServiceExpressions: { expressions: [{ key: 'tier', operator: 'GreaterThan', values: ['2'] }] } } }),
      gateway('ns', { bindPort: 4, httpGateway: { virtualServiceNamespaces: ['team1'] } }),
      gateway('all', { bindPort: 5 }),
      gateway('tls', { bindPort: 6, ssl: true, httpGateway: { virtualServiceSelector: { app: 'shop' } } }),
    ]);
    const served = (name: string) => {
      const gw = gatewaysFor(snapshot, 'gateway-proxy').find((g) => g.name === name)! as Resource<'Gateway'>;
      const scoped = snapshotFor(snapshot, planOf(gw, {}));
      return [...scoped.resources.values()].filter((r) => r.kind === 'VirtualService').map((r) => `${r.namespace}/${r.name}`).sort();
    };
    expect(served('refs')).toEqual(['team1/b']);
    expect(snapshot.statuses.find((s) => s.name === 'refs')?.reasons.map((r) => r.code)).toEqual(['GH_CONFIG_MISSING_REF']);
    expect(served('labels')).toEqual(['team1/a', 'team2/c']);
    expect(served('expr')).toEqual(['team2/c']);
    expect(served('ns')).toEqual(['team1/a', 'team1/b']);
    expect(served('all')).toEqual(['team1/a', 'team1/b', 'team2/c']);
    // `s` is rejected here (its certificate files do not exist): the ssl filter is asked directly.
    const plan = (name: string) => planOf(gatewaysFor(snapshot, 'gateway-proxy').find((g) => g.name === name)!, {});
    const withTls = { kind: 'VirtualService', namespace: 'team2', name: 's', labels: { app: 'shop' }, spec: { sslConfig: {} } } as unknown as Resource<'VirtualService'>;
    const withoutTls = { ...withTls, spec: {} } as unknown as Resource<'VirtualService'>;
    expect([plan('tls').selects(withTls), plan('tls').selects(withoutTls)]).toEqual([true, false]);
    expect([plan('labels').selects(withTls), plan('labels').selects(withoutTls)]).toEqual([false, true]);
  });

  test('connection-manager settings become listener limits and path settings', async () => {
    const snapshot = await load([gateway('gw', { bindPort: 1, httpGateway: { options: { httpConnectionManagerSettings: { requestTimeout: '5s', request_headers_timeout: '2s', streamIdleTimeout: '1m', idleTimeout: '30s', maxHeadersCount: 50, maxRequestHeadersKb: 32, mergeSlashes: false, pathWithEscapedSlashesAction: 'KEEP_UNCHANGED' } } } })]);
    const plan = planOf(gatewaysFor(snapshot, 'gateway-proxy')[0]!, { maxConnections: 10 });
    expect(plan.limits).toEqual({ maxConnections: 10, requestTimeoutMs: 5_000, requestHeadersTimeoutMs: 2_000, idleTimeoutMs: 60_000, keepAliveTimeoutMs: 30_000, maxRequestHeaders: 50, maxRequestHeaderBytes: 32 * 1024 });
    expect(plan.paths).toEqual({ mergeSlashes: false, escapedSlashes: 'keep' });
    expect([plan.address, plan.port, plan.ssl, plan.sinks]).toEqual(['0.0.0.0', 1, false, undefined]);
  });
});
