import { CRD_KINDS as KINDS, CRD_KIND_NAMES as KIND_NAMES } from '../config/schema/kinds.ts';
import type { IClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import type { IClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import type { IPolicyRule } from 'kubernetes-models/rbac.authorization.k8s.io/v1/PolicyRule';
import type { IServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { groupOf } from './crds.ts';
import type { ResolvedValues } from './values.ts';

/**
 * Service accounts and cluster roles: each component may read the custom resources it serves
 * and write their status (SPEC 2.1, Kubernetes source); the gateway also reads Services and
 * EndpointSlices for `kube` destinations. Nothing else.
 */
export function renderRbac(values: ResolvedValues, labels: (component: string) => Record<string, string>): (IServiceAccount | IClusterRole | IClusterRoleBinding)[] {
  const ns = values.namespace;
  const resources = (kinds: readonly (keyof typeof KINDS)[]) =>
    kinds.map((kind) => ({ apiGroups: [groupOf(kind, values.apiGroupDomain)], plural: KINDS[kind].plural }));
  const rules = (kinds: readonly (keyof typeof KINDS)[]): IPolicyRule[] => {
    const byGroup = resources(kinds);
    return [
      ...byGroup.map((r) => ({ apiGroups: r.apiGroups, resources: [r.plural], verbs: ['get', 'list', 'watch'] })),
      ...byGroup.map((r) => ({ apiGroups: r.apiGroups, resources: [`${r.plural}/status`], verbs: ['get', 'update', 'patch'] })),
    ];
  };
  const components: { component: string; rules: IPolicyRule[] }[] = [
    {
      component: 'gateway',
      rules: [
        ...rules(KIND_NAMES),
        // ConfigMaps: .proto sources of GraphQLApis (grpcDescriptorRegistry.protoRefsList), read-only.
        { apiGroups: [''], resources: ['services', 'endpoints', 'configmaps'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['get', 'list', 'watch'] },
      ],
    },
    // Secrets named by AuthConfigs (pluginAuth.secretRefs), read-only (SPEC 2.2, 5.3).
    { component: 'extauth', rules: [...rules(['AuthConfig', 'Upstream']), { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch'] }] },
  ];
  return components.flatMap(({ component, rules: list }) => {
    const name = `gatehouse-${component}`;
    const role = `gatehouse:${ns}:${component}`;
    const account: IServiceAccount = { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: ns, labels: labels(component) } };
    const clusterRole: IClusterRole = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: role, labels: labels(component) }, rules: list };
    const binding: IClusterRoleBinding = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: role, labels: labels(component) },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
    };
    return [account, clusterRole, binding];
  });
}
