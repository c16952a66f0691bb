import { randomBytes } from 'node:crypto';
import { Document } from 'yaml';
import { renderCrds, type KubeObject } from './crds.ts';
import { renderRbac } from './rbac.ts';
import type { ResolvedValues } from './values.ts';
import { dashboardJson } from './dashboard.ts';
import { renderCallerToken, renderExtAuth, renderGateway, renderPolicies, renderServiceMonitor } from './workloads.ts';

/**
 * Every Kubernetes object of an install (SPEC 6), in apply order: namespace, CRDs, RBAC,
 * configuration, then the gateway and extauth Deployments and Services.
 */
export function renderInstall(values: ResolvedValues, callerToken: string = randomBytes(32).toString('hex')): KubeObject[] {
  const common = { ...crdLabels(values.gatewayVersion), 'app.kubernetes.io/managed-by': 'gatehouse-install' };
  const selector = (component: string) => ({ 'app.kubernetes.io/name': 'gatehouse', 'app.kubernetes.io/component': component });
  const labels = (component: string) => ({ ...common, 'app.kubernetes.io/component': component });
  const objects: KubeObject[] = [];
  // Kept by `helm uninstall` (the resource policy; kubectl ignores it): operators put their own
  // resources and Secrets there (issue 27 item 6).
  if (values.createNamespace) objects.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: values.namespace, labels: common, annotations: { 'helm.sh/resource-policy': 'keep' } } });
  if (values.createCrds) objects.push(...renderCrds(values.apiGroupDomain, common));
  if (values.createRbac) objects.push(...renderRbac(values, labels));
  if (values.config.source === 'configMap' && Object.keys(values.config.configMapData).length > 0) {
    objects.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: values.config.configMapName, namespace: values.namespace, labels: common }, data: values.config.configMapData });
  }
  objects.push(...renderCallerToken(values, labels, callerToken), ...renderGateway(values, labels, selector), ...renderExtAuth(values, labels, selector), ...renderPolicies(values, labels, selector));
  objects.push(...renderServiceMonitor(values, labels));
  if (values.metrics.dashboard.enabled) {
    objects.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'gatehouse-dashboard', namespace: values.namespace, labels: { ...labels('metrics'), ...values.metrics.dashboard.labels } }, data: { 'gatehouse.json': dashboardJson() } });
  }
  return objects;
}

/** The labels of every object of an install, and all the CRDs carry (the Helm chart's crds/ too). */
export function crdLabels(gatewayVersion: string): Record<string, string> {
  return { 'app.kubernetes.io/name': 'gatehouse', 'app.kubernetes.io/version': gatewayVersion };
}

/** The CRDs alone, for `gatehouse install crds` and the Helm chart's crds/ folder. */
export function renderCrdsOnly(apiGroupDomain: string, gatewayVersion: string): KubeObject[] {
  return renderCrds(apiGroupDomain, crdLabels(gatewayVersion));
}

/** Objects as a multi-document YAML stream, as `kubectl apply -f -` reads it. */
export function toYaml(objects: readonly KubeObject[]): string {
  return objects.map((o) => new Document(o).toString({ lineWidth: 0 })).join('---\n');
}
