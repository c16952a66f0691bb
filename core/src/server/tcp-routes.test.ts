import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from '../config/manifest.ts';
import { resourceChecks } from '../resource-checks.ts';
import { ConfigStore } from '../config/store.ts';
import type { Resource } from '../config/resource.ts';
import { gatewaysFor, proxyProtocolOf, tcpGatewaysFor, tcpSettingsOf } from './gateway-listeners.ts';
import { compileTcpRoutes } from './tcp-routes.ts';

const gateway = (name: string, spec: object) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'Gateway', metadata: { name, namespace: 'gloo-system' }, spec });
const upstream = (name: string, port: number) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name, namespace: 'gloo-system' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }, { addr: '127.0.0.2', port }] } } });
const host = (name: string, upstreamName: string, sslConfig?: object) => ({ name, destination: { single: { upstream: { name: upstreamName } } }, ...(sslConfig ? { sslConfig } : {}) });

async function load(objects: object[]) {
  const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev', checks: await resourceChecks(['Gateway']) });
  const parsed = parseManifests('gw.yaml', objects.map((o) => stringify(o)).join('---\n'));
  return store.load(parsed.documents, parsed.diagnostics);
}

describe('tcpGateway checks', () => {
  test("Gloo's TCP guide Gateway loads as is (proto names too) and is a TCP listener, not an HTTP one", async () => {
    const snapshot = await load([
      upstream('gloo-system-tcp-echo-1025', 1025),
      gateway('tcp', { bindAddress: '::', bindPort: 8000, tcpGateway: { tcpHosts: [{ name: 'one', destination: { single: { upstream: { name: 'gloo-system-tcp-echo-1025', namespace: 'gloo-system' } } } }] }, useProxyProto: false }),
      gateway('snake', { bind_port: 8001, tcp_gateway: { tcp_hosts: [{ name: 'one', destination: { upstream_group: { name: 'g' } } }], options: { tcp_proxy_settings: { max_connect_attempts: 3, idle_timeout: '90s' }, connection_limit: { max_active_connections: 7 } } } }),
      { apiVersion: 'gloo.solo.io/v1', kind: 'UpstreamGroup', metadata: { name: 'g', namespace: 'gloo-system' }, spec: { destinations: [{ weight: 1, destination: { upstream: { name: 'gloo-system-tcp-echo-1025' } } }] } },
    ]);
    expect(snapshot.statuses.filter((s) => s.kind === 'Gateway').map((s) => [s.name, s.state, s.reasons]).sort()).toEqual([
      ['snake', 'Accepted', []],
      ['tcp', 'Accepted', []],
    ]);
    expect(gatewaysFor(snapshot, 'gateway-proxy')).toEqual([]);
    const tcp = tcpGatewaysFor(snapshot, 'gateway-proxy');
    expect(tcp.map((g) => g.name)).toEqual(['snake', 'tcp']);
    expect(tcpSettingsOf(tcp[0]!, { maxConnections: 100, requestHeadersTimeoutMs: 2_000 })).toMatchObject({ port: 8001, maxConnections: 7, idleTimeoutMs: 90_000, maxConnectAttempts: 3, helloTimeoutMs: 2_000, proxyProtocol: undefined });
    expect(tcpSettingsOf(tcp[1]!, { maxConnections: 100 })).toMatchObject({ address: '0.0.0.0', port: 8000, maxConnections: 100, idleTimeoutMs: 3_600_000, maxConnectAttempts: 1 });
    // Round robin over the Upstream's hosts; `attempts` addresses for retries.
    const routes = compileTcpRoutes(tcp[1]!, snapshot);
    expect(routes.inspectsHello).toBe(false);
    const route = routes.choose(false, undefined)!;
    expect([route.targets(undefined, 2), route.targets(undefined, 1)]).toEqual([
      [
        { addr: '127.0.0.1', port: 1025 },
        { addr: '127.0.0.2', port: 1025 },
      ],
      [{ addr: '127.0.0.2', port: 1025 }],
    ]);
  });

  test('a missing Upstream or Secret rejects the Gateway with the path; duplicate SNI names and two catch-alls are errors', async () => {
    const snapshot = await load([
      upstream('u', 1),
      gateway('missing', { bindPort: 9000, tcpGateway: { tcpHosts: [host('a', 'nope'), host('b', 'u', { sniDomains: ['b.test'], secretRef: { name: 'no-secret' } })] } }),
      gateway('dupes', { bindPort: 9001, tcpGateway: { tcpHosts: [host('a', 'u', { sniDomains: ['x.test'] }), host('b', 'u', { sniDomains: ['X.test.'] }), host('c', 'u'), host('d', 'u'), host('e', 'u', { sniDomains: [] }), host('f', 'u', { oneWayTls: true })] } }),
      gateway('both', { bindPort: 9002, httpGateway: {}, tcpGateway: { tcpHosts: [{ name: 'a', destination: { single: { upstream: { name: 'u' } }, forwardSniClusterName: {} } }] } }),
    ]);
    const reasons = (name: string) => snapshot.statuses.find((s) => s.name === name)!.reasons.map((r) => [r.severity, r.path]);
    expect(reasons('missing')).toEqual([
      ['error', 'spec.tcpGateway.tcpHosts[0].destination.single.upstream'],
      ['error', 'spec.tcpGateway.tcpHosts[1].sslConfig.secretRef'],
    ]);
    expect(reasons('dupes')).toEqual([
      ['error', 'spec.tcpGateway.tcpHosts[1].sslConfig.sniDomains[0]'],
      ['error', 'spec.tcpGateway.tcpHosts[3]'],
      ['error', 'spec.tcpGateway.tcpHosts[5]'],
    ]);
    expect(reasons('both')).toEqual([
      ['error', 'spec.tcpGateway'],
      ['error', 'spec.tcpGateway.tcpHosts[0].destination'],
    ]);
  });
});

describe('TCP host choice (Envoy filter-chain order)', () => {
  test('exact SNI, then the longest wildcard, then sslConfig without sniDomains, then no sslConfig; plain bytes only to no sslConfig', async () => {
    const snapshot = await load([
      upstream('u', 1),
      gateway('sni', {
        bindPort: 9100,
        tcpGateway: {
          tcpHosts: [host('exact', 'u', { sniDomains: ['api.example.com'] }), host('wide', 'u', { sniDomains: ['*.example.com'] }), host('narrow', 'u', { sniDomains: ['*.eu.example.com'] }), host('any-tls', 'u', { oneWayTls: true }), host('plain', 'u')],
        },
      }),
      gateway('strict', { bindPort: 9101, tcpGateway: { tcpHosts: [host('only', 'u', { sniDomains: ['only.test'] })] } }),
    ]);
    const [sni, strict] = tcpGatewaysFor(snapshot, 'gateway-proxy') as [Resource<'Gateway'>, Resource<'Gateway'>];
    const routes = compileTcpRoutes(sni, snapshot);
    expect(routes.inspectsHello).toBe(true);
    const name = (tls: boolean, servername?: string) => routes.choose(tls, servername)?.name;
    expect(name(true, 'api.example.com')).toBe('exact');
    expect(name(true, 'API.Example.COM.')).toBe('exact');
    expect(name(true, 'www.example.com')).toBe('wide');
    expect(name(true, 'a.eu.example.com')).toBe('narrow');
    // A wildcard needs a label of its own.
    expect(name(true, 'example.com')).toBe('any-tls');
    expect(name(true, 'other.test')).toBe('any-tls');
    expect(name(true, undefined)).toBe('any-tls');
    expect(name(false)).toBe('plain');
    const only = compileTcpRoutes(strict, snapshot);
    expect([only.choose(true, 'only.test')?.name, only.choose(true, 'x.test'), only.choose(true, undefined), only.choose(false, undefined)]).toEqual(['only', undefined, undefined, undefined]);
  });

  test('forwardSniClusterName picks the Upstream whose Gloo cluster name (`name_namespace`) is the SNI', async () => {
    const snapshot = await load([upstream('echo', 7), gateway('fwd', { bindPort: 9200, tcpGateway: { tcpHosts: [{ name: 'f', sslConfig: { sniDomains: ['echo_gloo-system'] }, destination: { forwardSniClusterName: {} } }] } })]);
    const route = compileTcpRoutes(tcpGatewaysFor(snapshot, 'gateway-proxy')[0]!, snapshot).choose(true, 'echo_gloo-system')!;
    expect(route.targets('echo_gloo-system', 1)).toEqual([{ addr: '127.0.0.1', port: 7 }]);
    expect(route.targets('nope_gloo-system', 1)).toEqual([]);
    expect(route.targets(undefined, 1)).toEqual([]);
  });

  test('PROXY protocol settings: options.proxyProtocol over useProxyProto', () => {
    expect(proxyProtocolOf({ useProxyProto: true })).toEqual({});
    expect(proxyProtocolOf({ useProxyProto: false })).toBeUndefined();
    expect(proxyProtocolOf({})).toBeUndefined();
    expect(proxyProtocolOf({ options: { proxyProtocol: {} } })).toEqual({});
    expect(proxyProtocolOf({ useProxyProto: false, options: { proxyProtocol: { allowRequestsWithoutProxyProtocol: true } } })).toEqual({ allowWithout: true });
  });
});
