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
