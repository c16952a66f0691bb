import { createSecureContext, type SecureContext } from 'node:tls';
import { lookup } from '../config/lookup.ts';
import type { Resource } from '../config/resource.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { field, type GatewaySpec } from '../config/schema/gateway.ts';
import { KubeDnsResolver, type KubeServiceResolver } from '../proxy/upstream/kube-resolver.ts';
import { hostsOf } from '../proxy/upstream/upstream-cluster.ts';
import { secureContextOptions, tlsMaterial } from '../tls/material.ts';

type TcpGatewaySpec = NonNullable<GatewaySpec['tcpGateway']>;
type TcpHostSpec = NonNullable<TcpGatewaySpec['tcpHosts']>[number];
type Destination = NonNullable<TcpHostSpec['destination']['single']>;

/** One address to dial. */
export interface TcpTarget {
  readonly addr: string;
  readonly port: number;
}

/** How a TCP host treats TLS (its `sslConfig`). */
export type TcpTls =
  /** No sslConfig: bytes are forwarded as they come (TLS or not). */
  | { readonly kind: 'none' }
  /** sslConfig without a certificate: the ClientHello chooses the host by SNI, the encrypted bytes pass through. */
  | { readonly kind: 'passthrough' }
  /** sslConfig with a certificate: the gateway terminates TLS and forwards the plaintext. */
  | { readonly kind: 'terminate'; readonly context: SecureContext; readonly requireClientCert: boolean };

/** One `tcpHosts[]` entry, compiled. */
export interface TcpRoute {
  readonly name: string;
  /** `sslConfig.sniDomains` (lower case; `*.example.com` wildcards); undefined: any name. */
  readonly sniDomains: readonly string[] | undefined;
  readonly tls: TcpTls;
  /** Up to `attempts` addresses to dial in turn for a connection with `servername`; empty: nowhere (the connection closes). */
  targets(servername: string | undefined, attempts: number): TcpTarget[];
  /** Why this host cannot forward (a missing Upstream, an unusable certificate): its connections close. */
  readonly broken: string | undefined;
}

/** A TCP listener's hosts, and how a connection chooses one (docs/tcp-proxy.md). */
export interface TcpRoutes {
  readonly routes: readonly TcpRoute[];
  /** Whether a connection's ClientHello must be read to choose (some host has an sslConfig); otherwise every connection goes to the first host at once. */
  readonly inspectsHello: boolean;
  /**
   * The host for a connection: for TLS (`tls` true), an exact `sniDomains` name, then the
   * longest wildcard, then a host with sslConfig and no `sniDomains`, then one without sslConfig;
   * for other bytes, a host without sslConfig. Undefined: none (the connection closes).
   */
  choose(tls: boolean, servername: string | undefined): TcpRoute | undefined;
}

/** What compiling needs besides the Gateway and its snapshot. */
export interface TcpRoutesOptions {
  readonly kubeResolver?: KubeServiceResolver | undefined;
  /** `--resolve HOST=ADDR`: the address to dial for a host name. */
  readonly resolve?: ((host: string) => string | undefined) | undefined;
}

const DNS = new KubeDnsResolver();

/** Compiles `gw`'s `tcpGateway` against `snapshot`. A host whose Upstream or certificate is missing is compiled as broken (its connections close); the load-time checks warn about it. */
export function compileTcpRoutes(gw: Resource<'Gateway'>, snapshot: ConfigSnapshot, options: TcpRoutesOptions = {}): TcpRoutes {
  const tcp = field<TcpGatewaySpec>(gw.spec, 'tcpGateway');
  const routes = (tcp?.tcpHosts ?? []).map((host) => compileHost(gw, host, snapshot, options.kubeResolver ?? DNS, options.resolve));
  const inspectsHello = routes.some((r) => r.tls.kind !== 'none' || r.sniDomains !== undefined);
  const exact = new Map<string, TcpRoute>();
  const wildcards: { suffix: string; route: TcpRoute }[] = [];
  for (const route of routes) {
    for (const domain of route.sniDomains ?? []) {
      if (domain.startsWith('*.')) wildcards.push({ suffix: domain.slice(1), route });
      else if (!exact.has(domain)) exact.set(domain, route);
    }
  }
  // Longest suffix first: `*.a.example.com` wins over `*.example.com`, as Envoy's server_names do.
  wildcards.sort((a, b) => b.suffix.length - a.suffix.length);
  const anyTls = routes.find((r) => r.tls.kind !== 'none' && r.sniDomains === undefined);
  const plain = routes.find((r) => r.tls.kind === 'none' && r.sniDomains === undefined);
  return {
    routes,
    inspectsHello,
    choose(isTls, servername) {
      if (!inspectsHello) return routes[0];
      if (!isTls) return plain;
      const name = servername?.toLowerCase().replace(/\.$/, '');
      if (name !== undefined) {
        const found = exact.get(name) ?? wildcards.find((w) => name.endsWith(w.suffix) && name.length > w.suffix.length)?.route;
        if (found) return found;
      }
      return anyTls ?? plain;
    },
  };
}

function compileHost(gw: Resource<'Gateway'>, host: TcpHostSpec, snapshot: ConfigSnapshot, kube: KubeServiceResolver, resolve: TcpRoutesOptions['resolve']): TcpRoute {
  const ssl = host.sslConfig;
  const sniDomains = ssl?.sniDomains?.length ? ssl.sniDomains.map((d) => d.toLowerCase().replace(/\.$/, '')) : undefined;
  let tls: TcpTls = ssl === undefined ? { kind: 'none' } : { kind: 'passthrough' };
  let broken: string | undefined;
  if (ssl && (ssl.secretRef || ssl.sslFiles)) {
    try {
      // The listener's certificate code reads a VirtualService's sslConfig: a TCP host's has the same fields.
      const owner = { ...gw, kind: 'VirtualService', spec: { sslConfig: ssl } } as unknown as Resource<'VirtualService'>;
      const material = tlsMaterial(owner, (ref) => lookup(snapshot, 'Secret', ref, gw.namespace));
      const requireClientCert = material.ca !== undefined && ssl.oneWayTls !== true;
      tls = { kind: 'terminate', context: createSecureContext(secureContextOptions(owner, material)), requireClientCert };
    } catch (error) {
      broken = `sslConfig: ${(error as Error).message}`;
    }
  }
  const pick = picker(gw, host.destination, snapshot, kube);
  if (typeof pick === 'string') broken ??= pick;
  return {
    name: host.name,
    sniDomains,
    tls,
    broken,
    targets: typeof pick === 'string' ? () => [] : resolve ? (name, attempts) => pick(name, attempts).map((t) => ({ addr: resolve(t.addr.toLowerCase()) ?? t.addr, port: t.port })) : pick,
  };
}

type Picker = (servername: string | undefined, attempts: number) => TcpTarget[];

/** The destination's choice of addresses, or why there is none. */
function picker(gw: Resource<'Gateway'>, action: TcpHostSpec['destination'], snapshot: ConfigSnapshot, kube: KubeServiceResolver): Picker | string {
  if (action.forwardSniClusterName) {
    // Envoy's sni_cluster: the SNI names the cluster; Gloo names an Upstream's cluster `name_namespace`.
    const byCluster = new Map<string, RoundRobin>();
    for (const resource of snapshot.resources.values()) {
      if (resource.kind !== 'Upstream') continue;
      const upstream = resource as Resource<'Upstream'>;
      byCluster.set(`${upstream.name}_${upstream.namespace}`, new RoundRobin(() => hostsOf(upstream, kube)));
    }
    return (servername, attempts) => (servername ? (byCluster.get(servername)?.take(attempts) ?? []) : []);
  }
  const weighted: { weight: number; hosts: RoundRobin }[] = [];
  const add = (weight: number, destination: Destination, namespace: string): string | undefined => {
    if (destination.upstream) {
      const upstream = lookup(snapshot, 'Upstream', destination.upstream, namespace);
      if (!upstream) return `Upstream ${destination.upstream.namespace ?? namespace}/${destination.upstream.name} is not served`;
      weighted.push({ weight, hosts: new RoundRobin(() => hostsOf(upstream, kube)) });
      return undefined;
    }
    const { ref, port } = destination.kube!;
    weighted.push({ weight, hosts: new RoundRobin(() => kube.hosts({ name: ref.name, namespace: ref.namespace ?? namespace, port })) });
    return undefined;
  };
  let problem: string | undefined;
  if (action.single) {
    problem = add(1, action.single, gw.namespace);
  } else if (action.multi) {
    for (const d of action.multi.destinations) if (d.weight > 0) problem ??= add(d.weight, d.destination, gw.namespace);
  } else if (action.upstreamGroup) {
    const group = lookup(snapshot, 'UpstreamGroup', action.upstreamGroup, gw.namespace);
    if (!group) return `UpstreamGroup ${action.upstreamGroup.namespace ?? gw.namespace}/${action.upstreamGroup.name} is not served`;
    for (const d of group.spec.destinations) if (d.weight > 0) problem ??= add(d.weight, d.destination, group.namespace);
  } else {
    return 'the destination names no upstream';
  }
  if (problem) return problem;
  if (weighted.length === 0) return 'every destination has weight 0';
  const total = weighted.reduce((sum, w) => sum + w.weight, 0);
  return (_servername, attempts) => {
    // A destination per connection, by weight; its hosts in turn for the attempts.
    let roll = Math.random() * total;
    const chosen = weighted.find((w) => (roll -= w.weight) < 0) ?? weighted[weighted.length - 1]!;
    return chosen.hosts.take(attempts);
  };
}

/** An Upstream's hosts in round-robin order (read again each time: Kubernetes endpoints change). */
class RoundRobin {
  private next = 0;
  private readonly hosts: () => readonly TcpTarget[];

  constructor(hosts: () => readonly TcpTarget[]) {
    this.hosts = hosts;
  }

  /** Up to `n` hosts, starting with the next in turn. */
  take(n: number): TcpTarget[] {
    const all = this.hosts();
    if (all.length === 0) return [];
    const start = this.next++ % all.length;
    const out: TcpTarget[] = [];
    for (let i = 0; i < Math.min(n, all.length); i++) out.push(all[(start + i) % all.length]!);
    return out;
  }
}
