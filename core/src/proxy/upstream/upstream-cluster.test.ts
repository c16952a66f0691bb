import type { Pool } from 'undici';
import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from '../../config/manifest.ts';
import type { Resource } from '../../config/resource.ts';
import { ConfigStore } from '../../config/store.ts';
import { EJECTION_MS, UpstreamCluster, UpstreamRegistry, isConnectFailure } from './upstream-cluster.ts';
import { KubeDnsResolver } from './kube-resolver.ts';

function upstreamResource(name: string, ports: number[], extra: object = {}): Resource<'Upstream'> {
  const manifest = { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: ports.map((port) => ({ addr: '127.0.0.1', port })) }, ...extra } };
  const snapshot = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' }).load(parseManifests(`${name}.yaml`, stringify(manifest)).documents);
  return snapshot.resources.get(`Upstream/default/${name}`) as Resource<'Upstream'>;
}

const hosts = (...ports: number[]) => ports.map((port) => ({ addr: '127.0.0.1', port }));

describe('UpstreamCluster', () => {
  test('picks hosts round-robin', async () => {
    const cluster = new UpstreamCluster('c', hosts(1, 2, 3));
    expect([1, 2, 3, 4, 5, 6].map(() => cluster.pick().port)).toEqual([1, 2, 3, 1, 2, 3]);
    await cluster.close();
  });

  test('skips an ejected host until its ejection ends (passive health)', async () => {
    const cluster = new UpstreamCluster('c', hosts(1, 2));
    const now = 1_000_000;
    cluster.eject(cluster.hosts[0]!, now);
    expect([0, 1, 2, 3].map(() => cluster.pick(now + 1).port)).toEqual([2, 2, 2, 2]);
    // Back in rotation once the ejection is over.
    const later = now + EJECTION_MS;
    expect(new Set([0, 1, 2, 3].map(() => cluster.pick(later).port))).toEqual(new Set([1, 2]));
    await cluster.close();
  });

  test('when every host is ejected, all are tried again (panic mode) rather than none', async () => {
    const cluster = new UpstreamCluster('c', hosts(1, 2));
    const now = 1_000_000;
    for (const h of cluster.hosts) cluster.eject(h, now);
    expect(new Set([0, 1, 2, 3].map(() => cluster.pick(now + 1).port))).toEqual(new Set([1, 2]));
    await cluster.close();
  });

  test('origins: http by default, https with TLS, IPv6 in brackets, --resolve applied to the dialled address only', async () => {
    const plain = new UpstreamCluster('c', [{ addr: 'svc.local', port: 80 }], { resolve: (h) => (h === 'svc.local' ? '10.0.0.9' : undefined) });
    expect(plain.hosts[0]).toMatchObject({ addr: 'svc.local', origin: 'http://10.0.0.9:80' });
    const tls = new UpstreamCluster('c', [{ addr: '::1', port: 443 }], { tls: true });
    expect(tls.hosts[0]!.origin).toBe('https://[::1]:443');
    await Promise.all([plain.close(), tls.close()]);
  });
});

describe('isConnectFailure', () => {
  test.each([
    ['ECONNREFUSED', true],
    ['UND_ERR_CONNECT_TIMEOUT', true],
    ['ENOTFOUND', true],
    ['ECONNRESET', false],
    ['UND_ERR_SOCKET', false],
    ['UND_ERR_HEADERS_TIMEOUT', false],
  ])('%s → %s', (code, expected) => {
    expect(isConnectFailure(Object.assign(new Error('x'), { code }))).toBe(expected);
  });

  test('errors without a code are not connect failures', () => {
    expect(isConnectFailure(new Error('x'))).toBe(false);
    expect(isConnectFailure(null)).toBe(false);
  });
});

describe('UpstreamRegistry', () => {
  test('reuses the cluster of an unchanged Upstream and builds a new one when its spec changes', async () => {
    const registry = new UpstreamRegistry();
    const v1 = registry.forUpstream(upstreamResource('u', [1]));
    expect(registry.forUpstream(upstreamResource('u', [1]))).toBe(v1);
    const v2 = registry.forUpstream(upstreamResource('u', [2]));
    expect(v2).not.toBe(v1);
    expect(v2.name).toBe('default/u');
    await registry.close();
  });

  test('Kubernetes service destinations are keyed by host and port', async () => {
    const registry = new UpstreamRegistry({ resolve: () => '127.0.0.1' });
    const a = registry.forHost('svc.ns.svc.cluster.local', 80);
    expect(registry.forHost('svc.ns.svc.cluster.local', 80)).toBe(a);
    expect(registry.forHost('svc.ns.svc.cluster.local', 81)).not.toBe(a);
    expect(a.hosts[0]!.origin).toBe('http://127.0.0.1:80');
    await registry.close();
  });

  test('retainOnly closes the clusters no longer used and forgets them', async () => {
    const registry = new UpstreamRegistry();
    const keep = registry.forUpstream(upstreamResource('keep', [1]));
    const drop = registry.forUpstream(upstreamResource('drop', [2]));
    registry.retainOnly(new Set([keep]));
    const pool = (c: UpstreamCluster) => c.hosts[0]!.dispatcher as Pool;
    expect(pool(drop).closed).toBe(true);
    expect(pool(keep).closed).toBe(false);
    // Asked again, the dropped one is rebuilt rather than handed out closed.
    const again = registry.forUpstream(upstreamResource('drop', [2]));
    expect(again).not.toBe(drop);
    expect(pool(again).closed).toBe(false);
    await registry.close();
    expect(pool(keep).closed).toBe(true);
  });

  test('useTls from the Upstream spec makes the cluster dial https', async () => {
    const registry = new UpstreamRegistry();
    const secure = upstreamResource('secure', [8443]);
    const tls = registry.forUpstream({ ...secure, version: 'tls', spec: { static: { ...secure.spec.static!, useTls: true } } });
    expect(tls.hosts[0]!.origin).toBe('https://127.0.0.1:8443');
    await registry.close();
  });

  test('a kube Upstream gets its hosts from the resolver (DNS by default); other hosts from it mean a new cluster', async () => {
    const registry = new UpstreamRegistry();
    const base = upstreamResource('svc', [1]);
    const kube = { ...base, version: 'kube', spec: { kube: { serviceName: 'shop', servicePort: 8080 } } } as Resource<'Upstream'>;
    expect(registry.forUpstream(kube).hosts.map((h) => h.origin)).toEqual(['http://shop.default.svc.cluster.local:8080']);
    expect(registry.forUpstream(kube, undefined, new KubeDnsResolver('corp.internal')).hosts[0]!.addr).toBe('shop.default.svc.corp.internal');
    // The EndpointSlice seam: a resolver returning pods.
    let pods = [{ addr: '10.0.0.1', port: 9000 }];
    const endpoints = { honoursSelector: true, hosts: () => pods };
    const first = registry.forUpstream(kube, undefined, endpoints);
    expect(registry.forUpstream(kube, undefined, endpoints)).toBe(first);
    pods = [{ addr: '10.0.0.1', port: 9000 }, { addr: '10.0.0.2', port: 9000 }];
    const second = registry.forUpstream(kube, undefined, endpoints);
    expect(second).not.toBe(first);
    expect(second.hosts.map((h) => h.origin)).toEqual(['http://10.0.0.1:9000', 'http://10.0.0.2:9000']);
    await registry.close();
  });
});

describe('failover (Gloo, Envoy priorities)', () => {
  test('a lower priority takes requests only while no host above is usable; ejections and outcomes go to the owning priority', async () => {
    const cluster = new UpstreamCluster('c', [{ addr: '10.0.0.1', port: 80 }], {
      outlier: { consecutive5xx: 1, consecutiveGateway: 1, baseEjectionMs: 1000, maxEjectionPercent: 100 },
      failover: [[{ addr: '10.0.1.1', port: 80 }, { addr: '10.0.1.2', port: 80 }], [{ addr: '10.0.2.1', port: 80 }]],
    });
    const now = 1_000_000;
    const primary = cluster.pick(now);
    expect(primary.addr).toBe('10.0.0.1');
    primary.healthy = false;
    // Priority 1 round-robins over its own hosts.
    const firstLevel = new Set([cluster.pick(now).addr, cluster.pick(now).addr]);
    expect(firstLevel).toEqual(new Set(['10.0.1.1', '10.0.1.2']));
    // Ejected through the parent (as forward.ts does): the host of priority 1 is skipped.
    for (const host of [cluster.pick(now), cluster.pick(now)]) cluster.eject(host, now);
    expect(cluster.pick(now).addr).toBe('10.0.2.1');
    // Priority 1 back (ejection over): it takes requests again; the primary back: it takes them all.
    expect(cluster.pick(now + EJECTION_MS + 1).addr).toMatch(/^10\.0\.1\./);
    primary.healthy = true;
    expect(cluster.pick(now).addr).toBe('10.0.0.1');
    // Every priority down: the primary's hosts are tried (Envoy's panic mode).
    primary.healthy = false;
    const low = cluster.pick(now);
    cluster.observe(low, 503, now);
    expect(low.ejectedUntil).toBeGreaterThan(now);
    expect(cluster.pick(now).addr).toBe('10.0.0.1');
    await cluster.close();
  });

  test('an Upstream\'s failover localities become its priorities, endpoints of a priority together', async () => {
    const registry = new UpstreamRegistry();
    // Hosts on 127.0.0.x: upstreamResource's static host is 127.0.0.1.
    const upstream = upstreamResource('u', [80], { failover: { prioritizedLocalities: [{ localityEndpoints: [{ locality: { region: 'us-east-1' }, lbEndpoints: [{ address: '127.0.0.2', port: 81 }] }, { lbEndpoints: [{ address: '127.0.0.3', port: 82 }] }] }] } });
    const cluster = registry.forUpstream(upstream);
    cluster.hosts[0]!.healthy = false;
    expect(new Set([cluster.pick().origin, cluster.pick().origin])).toEqual(new Set(['http://127.0.0.2:81', 'http://127.0.0.3:82']));
    await registry.close();
  });
});
