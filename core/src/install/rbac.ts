import { CRD_KINDS as KINDS, CRD_KIND_NAMES as KIND_NAMES } from '../config/schema/kinds.ts';
import type { IClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import type { IClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import type { IPolicyRule } from 'kubernetes-models/rbac.authorization.k8s.io/v1/PolicyRule';
import type { IRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import type { IRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import type { IServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { groupOf } from './crds.ts';
import type { ResolvedValues } from './values.ts';

export type RbacObject = IServiceAccount | IClusterRole | IClusterRoleBinding | IRole | IRoleBinding;

const READ = ['get', 'list', 'watch'];
const RBAC_API = 'rbac.authorization.k8s.io/v1';

/**
 * What the kube config source does (SPEC 2.1), for one API group domain: read every custom
 * kind in our groups and in Gloo Edge's (migration), write their status (`writeStatus`: the
 * gateway only), and read the Secrets and ConfigMaps they reference and the Services and
 * EndpointSlices of `kube` destinations. One rule per group, ours then Gloo's, never merged (a
 * domain such as `solo.io` may repeat a group).
 */
export function kubeSourceRules(domain: string, writeStatus: boolean): IPolicyRule[] {
  const authConfigGroups = [groupOf('AuthConfig', domain), KINDS.AuthConfig.glooGroup];
  const groups = (family: (kind: (typeof KIND_NAMES)[number]) => string) => {
    const byGroup = new Map<string, string[]>();
    for (const kind of KIND_NAMES) byGroup.set(family(kind), [...(byGroup.get(family(kind)) ?? []), KINDS[kind].plural]);
    return [...byGroup];
  };
  const all = [...groups((kind) => groupOf(kind, domain)), ...groups((kind) => KINDS[kind].glooGroup)];
  return [
    ...all.map(([group, plurals]) => ({ apiGroups: [group], resources: plurals, verbs: READ })),
    ...(writeStatus
      ? all.map(([group, plurals]) => ({ apiGroups: [group], resources: plurals.map((p) => `${p}/status`), verbs: ['get', 'update', 'patch'] }))
      : // extauth writes its build result into AuthConfigs' status.extauth (a merge patch of that key).
        authConfigGroups.map((group) => ({ apiGroups: [group], resources: ['authconfigs/status'], verbs: ['patch'] }))),
    { apiGroups: [''], resources: ['secrets', 'configmaps', 'services'], verbs: READ },
    { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: READ },
    // Events about rejected resources (gateway) and AuthConfigs whose steps failed to build (extauth).
    { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create'] },
  ];
}

/** One status writer at a time across replicas: a Lease in the install namespace. */
const LEASE_RULES: IPolicyRule[] = [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] }];

/**
 * A service account per component. With the configMap source the pods never call the API
 * server, so that is all; with the kube source each component gets kubeSourceRules: through a
 * ClusterRole when it watches every namespace, else through a Role in each watched namespace
 * (least privilege). The gateway writes status, so it alone gets the status verbs and a Role
 * for the Lease in the install namespace; extauth patches AuthConfigs' status only (its build
 * results). Both post Events.
 */
export function renderRbac(values: ResolvedValues, labels: (component: string) => Record<string, string>): RbacObject[] {
  const ns = values.namespace;
  return ['gateway', 'extauth'].flatMap((component): RbacObject[] => {
    const name = `gatehouse-${component}`;
    const meta = (roleName: string, namespace?: string) => ({ name: roleName, ...(namespace ? { namespace } : {}), labels: labels(component) });
    const account: IServiceAccount = { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(name, ns) };
    if (values.config.source !== 'kube') return [account];
    const subjects = [{ kind: 'ServiceAccount', name, namespace: ns }];
    const role = `gatehouse:${ns}:${component}`;
    const writesStatus = component === 'gateway';
    const rules = kubeSourceRules(values.apiGroupDomain, writesStatus);
    const access: RbacObject[] = values.config.namespaces.length === 0
      ? [
          { apiVersion: RBAC_API, kind: 'ClusterRole', metadata: meta(role), rules },
          { apiVersion: RBAC_API, kind: 'ClusterRoleBinding', metadata: meta(role), roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role }, subjects },
        ]
      : values.config.namespaces.flatMap((watched): RbacObject[] => [
          { apiVersion: RBAC_API, kind: 'Role', metadata: meta(role, watched), rules },
          { apiVersion: RBAC_API, kind: 'RoleBinding', metadata: meta(role, watched), roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role }, subjects },
        ]);
    const lease = `gatehouse:${component}:leases`;
    if (!writesStatus) return [account, ...access];
    return [
      account,
      ...access,
      { apiVersion: RBAC_API, kind: 'Role', metadata: meta(lease, ns), rules: LEASE_RULES },
      { apiVersion: RBAC_API, kind: 'RoleBinding', metadata: meta(lease, ns), roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: lease }, subjects },
    ];
  });
}
