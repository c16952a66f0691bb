import type { ServiceEndpoints } from '../../config/source/kube.ts';

/**
 * Where the hosts of a Kubernetes service come from, for `kube` Upstreams and
 * `routeAction.single.kube` destinations. Today: cluster DNS (`<name>.<namespace>.svc.<domain>`,
 * one host that kube-proxy spreads over the pods). The seam for EndpointSlices (`--kube`):
 * a resolver returning pod addresses and target ports, and honouring `selector`; the
 * UpstreamRegistry keys clusters by the hosts returned, so a route table compiled after the
 * endpoints changed gets a cluster with the new hosts, and the old one drains.
 */
export interface KubeService {
  readonly name: string;
  readonly namespace: string;
  /** The service port (not the pods' target port). */
  readonly port: number;
  /** Pods with these labels only (Gloo's kube Upstream `selector`). */
  readonly selector?: Readonly<Record<string, string>> | undefined;
}

export interface KubeServiceResolver {
  /** The hosts to dial for a service port now. */
  hosts(service: KubeService): readonly { readonly addr: string; readonly port: number }[];
  /** Whether `selector` narrows the hosts (DNS cannot: a warning says so at load). */
  readonly honoursSelector: boolean;
}

/** Cluster DNS: the service's name under the cluster domain (`--kube-cluster-domain`; `--resolve` maps it in tests). */
export class KubeDnsResolver implements KubeServiceResolver {
  readonly honoursSelector = false;
  private readonly clusterDomain: string;

  constructor(clusterDomain = 'cluster.local') {
    this.clusterDomain = clusterDomain;
  }

  hosts(service: KubeService): { addr: string; port: number }[] {
    return [{ addr: `${service.name}.${service.namespace}.svc.${this.clusterDomain}`, port: service.port }];
  }
}

/**
 * EndpointSlices (`--kube`): a service port's ready pod addresses with their target ports, as
 * the kube source last saw them. A service it does not know (another namespace than those
 * watched) falls back to DNS; a known service with no ready endpoint has no hosts (503).
 */
export class EndpointSliceResolver implements KubeServiceResolver {
  // Pod labels are not watched: a selector cannot narrow (warned at load, as with DNS).
  readonly honoursSelector = false;
  private readonly endpoints: ReadonlyMap<string, ServiceEndpoints>;
  private readonly fallback: KubeServiceResolver;

  constructor(endpoints: ReadonlyMap<string, ServiceEndpoints>, fallback: KubeServiceResolver) {
    this.endpoints = endpoints;
    this.fallback = fallback;
  }

  hosts(service: KubeService): { addr: string; port: number }[] {
    const known = this.endpoints.get(`${service.namespace}/${service.name}`);
    if (!known) return [...this.fallback.hosts(service)];
    const portName = known.ports[String(service.port)];
    if (portName === undefined) return [];
    const out: { addr: string; port: number }[] = [];
    for (const endpoint of known.endpoints) {
      const port = endpoint.ports[portName];
      if (port !== undefined) out.push({ addr: endpoint.addr, port });
    }
    // A stable order: equal endpoints give an equal cluster key (no needless new pools).
    return out.sort((a, b) => (a.addr < b.addr ? -1 : a.addr > b.addr ? 1 : a.port - b.port));
  }
}
