// Type-only imports (erased at run time): the rendered objects are checked against Kubernetes'
// own API types at compile time, and validated with kubernetes-models in the tests.
import type { ICustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import type { IJSONSchemaProps } from 'kubernetes-models/apiextensions.k8s.io/v1/JSONSchemaProps';
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import type { IClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import type { IRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import type { IRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { INamespace } from 'kubernetes-models/v1/Namespace';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import type { IService } from 'kubernetes-models/v1/Service';
import type { IServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { CRD_KINDS as KINDS, CRD_KIND_NAMES as KIND_NAMES, type CrdKind as Kind } from '../config/schema/kinds.ts';
import { toStructural } from './structural-schema.ts';
import type { ServiceMonitorObject } from './workloads.ts';

/** A Kubernetes object of an install. */
export type KubeObject = INamespace | ICustomResourceDefinition | IServiceAccount | IClusterRole | IClusterRoleBinding | IRole | IRoleBinding | IConfigMap | ISecret | IDeployment | IService | IPodDisruptionBudget | IHorizontalPodAutoscaler | ServiceMonitorObject;

/** The API group of a kind under a group domain (SPEC 2.2), e.g. `gateway.gatehouse.dev`. */
export function groupOf(kind: Kind, domain: string): string {
  return `${KINDS[kind].group}.${domain}`;
}

/** `kubectl get vs`: Gloo Edge's short names, so that its operators' habits work here. */
export const SHORT_NAMES: Record<Kind, string[]> = {
  Upstream: ['us'],
  UpstreamGroup: ['ug'],
  AuthConfig: ['ac'],
  GraphQLApi: ['gql'],
  RouteTable: ['rt'],
  VirtualService: ['vs'],
  RateLimitConfig: ['rlc'],
  VirtualHostOption: ['vho', 'vhopts'],
  RouteOption: ['rto', 'rtopts'],
  Gateway: ['gw'],
};

/** `kubectl get` columns: the status the gateway writes (kube-status.ts), then the age. */
const PRINTER_COLUMNS = [
  { name: 'State', type: 'string', jsonPath: '.status.state', description: 'Accepted, Warning or Rejected' },
  { name: 'Serving', type: 'string', jsonPath: '.status.serving', description: 'what the gateway serves: current, last-accepted or none' },
  { name: 'Reason', type: 'string', jsonPath: '.status.reason', description: 'why it is not Accepted', priority: 1 },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
];

/**
 * One apiextensions.k8s.io/v1 CRD per resource kind, generated from the same schemas the
 * gateway validates with (SPEC 2.1), with the status subresource the controller writes.
 */
export function renderCrds(domain: string, labels: Record<string, string>): ICustomResourceDefinition[] {
  return KIND_NAMES.map((kind) => {
    const { version, plural, spec } = KINDS[kind];
    const group = groupOf(kind, domain);
    return {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `${plural}.${group}`, labels },
      spec: {
        group,
        names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase(), shortNames: SHORT_NAMES[kind], categories: ['gatehouse'] },
        scope: 'Namespaced',
        versions: [
          {
            name: version,
            served: true,
            storage: true,
            subresources: { status: {} },
            additionalPrinterColumns: PRINTER_COLUMNS,
            schema: {
              openAPIV3Schema: {
                type: 'object',
                description: `Gatehouse ${kind} (${group}/${version}).`,
                required: ['spec'],
                properties: {
                  apiVersion: { type: 'string' },
                  kind: { type: 'string' },
                  metadata: { type: 'object' },
                  spec: toStructural(spec) as IJSONSchemaProps,
                  status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                },
              },
            },
          },
        ],
      },
    };
  });
}
