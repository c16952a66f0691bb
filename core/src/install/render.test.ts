import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import type { IPolicyRule } from 'kubernetes-models/rbac.authorization.k8s.io/v1/PolicyRule';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret, type ISecret } from 'kubernetes-models/v1/Secret';
import { Service, type IService } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { GATEWAY_VERSION } from '../version.ts';
import type { KubeObject } from './crds.ts';
import { renderInstall, toYaml } from './render.ts';
import { InstallCodes, resolveValues } from './values.ts';

/** Kubernetes' own models (generated from the upstream OpenAPI definitions), by apiVersion/kind. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/ServiceAccount': ServiceAccount,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'apiextensions.k8s.io/v1/CustomResourceDefinition': CustomResourceDefinition,
};

function validateAll(objects: readonly unknown[]): void {
  for (const object of objects) {
    const o = object as { apiVersion: string; kind: string; metadata: { name: string } };
    const Model = MODELS[`${o.apiVersion}/${o.kind}`];
    expect(Model, `no model for ${o.apiVersion}/${o.kind}`).toBeDefined();
    expect(() => new Model!(o as never).validate(), `${o.kind}/${o.metadata.name}`).not.toThrow();
  }
}

const find = <T>(objects: KubeObject[], kind: string, name: string, namespace?: string) =>
  objects.find((o) => o.kind === kind && o.metadata?.name === name && (namespace === undefined || o.metadata?.namespace === namespace)) as T;

const withPlugins = {
  namespace: 'auth',
  image: { registry: 'registry.example.com/gatehouse' },
  global: {
    extensions: {
      extAuth: {
        plugins: {
          RequiredHeader: { image: { repository: 'plugins/required-header', tag: GATEWAY_VERSION, pullPolicy: 'Always' } },
          'geo-ip': { image: { registry: 'other.example.com', repository: 'acme/geo-ip' } },
        },
      },
    },
  },
};

describe('renderInstall', () => {
  it('authenticates callers of the ext_authz port by default: a random caller token Secret both Deployments mount and pass as --extauth-token-file', () => {
    const objects = renderInstall(resolveValues({}, GATEWAY_VERSION));
    const token = Buffer.from(find<ISecret>(objects, 'Secret', 'extauth-caller-token').data!.token!, 'base64').toString();
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    expect(Buffer.from(find<ISecret>(renderInstall(resolveValues({}, GATEWAY_VERSION)), 'Secret', 'extauth-caller-token').data!.token!, 'base64').toString()).not.toBe(token);
    for (const name of ['gateway', 'extauth']) {
      const pod = find<IDeployment>(objects, 'Deployment', name).spec!.template.spec!;
      expect(pod.containers[0]!.args).toEqual(expect.arrayContaining(['--extauth-token-file', '/etc/gatehouse/extauth-token/token']));
      expect(pod.containers[0]!.volumeMounts).toContainEqual({ name: 'caller-token', mountPath: '/etc/gatehouse/extauth-token', readOnly: true });
      expect(pod.volumes).toContainEqual({ name: 'caller-token', secret: { secretName: 'extauth-caller-token', defaultMode: 0o440, items: [{ key: 'token', path: 'token' }] } });
    }
    // A Secret of one's own: nothing generated, the same mounts.
    const own = renderInstall(resolveValues({ extauth: { callerToken: { existingSecret: 'my-token' } } }, GATEWAY_VERSION));
    expect(own.filter((o) => o.kind === 'Secret')).toEqual([]);
    expect(find<IDeployment>(own, 'Deployment', 'extauth').spec!.template.spec!.volumes).toContainEqual(expect.objectContaining({ secret: expect.objectContaining({ secretName: 'my-token' }) }));
    // Turned off: no token anywhere.
    const off = renderInstall(resolveValues({ extauth: { callerToken: { enabled: false } } }, GATEWAY_VERSION));
    expect(off.filter((o) => o.kind === 'Secret')).toEqual([]);
    expect(find<IDeployment>(off, 'Deployment', 'gateway').spec!.template.spec!.containers[0]!.args).not.toContain('--extauth-token-file');
  });

  it('renders namespace, CRDs, service accounts, gateway and extauth, all valid Kubernetes objects', () => {
    const objects = renderInstall(resolveValues({}, GATEWAY_VERSION));
    expect(objects.map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual([
      'Namespace/gatehouse-system',
      'CustomResourceDefinition/upstreams.gatehouse.gatehouse.dev',
      'CustomResourceDefinition/upstreamgroups.gatehouse.gatehouse.dev',
      'CustomResourceDefinition/authconfigs.enterprise.gatehouse.dev',
      'CustomResourceDefinition/graphqlapis.graphql.gatehouse.dev',
      'CustomResourceDefinition/routetables.gateway.gatehouse.dev',
      'CustomResourceDefinition/virtualservices.gateway.gatehouse.dev',
      'CustomResourceDefinition/gateways.gateway.gatehouse.dev',
      'CustomResourceDefinition/ratelimitconfigs.ratelimit.gatehouse.dev',
      'CustomResourceDefinition/virtualhostoptions.gateway.gatehouse.dev',
      'CustomResourceDefinition/routeoptions.gateway.gatehouse.dev',
      // The kube source (the default) reads the API server: roles for both.
      'ServiceAccount/gatehouse-gateway',
      'ClusterRole/gatehouse:gatehouse-system:gateway',
      'ClusterRoleBinding/gatehouse:gatehouse-system:gateway',
      'Role/gatehouse:gateway:leases',
      'RoleBinding/gatehouse:gateway:leases',
      'ServiceAccount/gatehouse-extauth',
      'ClusterRole/gatehouse:gatehouse-system:extauth',
      'ClusterRoleBinding/gatehouse:gatehouse-system:extauth',
      'Secret/extauth-caller-token',
      'Deployment/gateway',
      'Service/gateway',
      'Service/gateway-admin',
      'Deployment/extauth',
      'Service/extauth',
      'Service/extauth-headless',
      'PodDisruptionBudget/extauth',
    ]);
    validateAll(objects);
    const gateway = find<IDeployment>(objects, 'Deployment', 'gateway').spec!.template.spec!.containers[0]!;
    expect(gateway.image).toBe(`ghcr.io/gatehouse/gatehouse:${GATEWAY_VERSION}`);
    expect(gateway.args).toEqual(expect.arrayContaining(['gateway', '--extauth-address', 'extauth-headless.gatehouse-system.svc:8083', '--kube']));
    expect(gateway.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'admin' });
  });

  it('defaults for operators (issue 27): the kube source, extauth twice behind a PDB, preStop then drain, requests, the namespace kept by helm uninstall', () => {
    const objects = renderInstall(resolveValues({}, GATEWAY_VERSION));
    validateAll(objects);
    expect(find<{ metadata: { annotations: Record<string, string> } }>(objects, 'Namespace', 'gatehouse-system').metadata.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
    const gateway = find<IDeployment>(objects, 'Deployment', 'gateway');
    const extauth = find<IDeployment>(objects, 'Deployment', 'extauth');
    expect(gateway.spec!.replicas).toBe(1);
    expect(extauth.spec!.replicas).toBe(2);
    expect(find<{ spec: unknown }>(objects, 'PodDisruptionBudget', 'extauth').spec).toEqual({ maxUnavailable: 1, selector: { matchLabels: { 'app.kubernetes.io/name': 'gatehouse', 'app.kubernetes.io/component': 'extauth' } } });
    expect(objects.filter((o) => o.kind === 'PodDisruptionBudget' || o.kind === 'HorizontalPodAutoscaler').map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual(['PodDisruptionBudget/extauth']);
    for (const d of [gateway, extauth]) {
      const pod = d.spec!.template.spec!;
      expect(pod.terminationGracePeriodSeconds).toBe(40);
      expect(pod.containers[0]!.lifecycle).toEqual({ preStop: { sleep: { seconds: 5 } } });
      expect(pod.containers[0]!.resources?.requests).toEqual(expect.objectContaining({ cpu: '100m' }));
      expect(pod.containers[0]!.args).toContain('--kube');
    }
    // 40 s grace - 5 s preStop - 5 s to exit.
    const args = gateway.spec!.template.spec!.containers[0]!.args!;
    expect(args[args.indexOf('--shutdown-grace') + 1]).toBe('30s');
  });

  it('pod knobs: HPA instead of replicas, security context overrides key by key, resources merged over the default requests, service settings by type', () => {
    const values = resolveValues(
      {
        gateway: {
          autoscaling: { enabled: true, maxReplicas: 4 },
          containerSecurityContext: { readOnlyRootFilesystem: false },
          terminationGracePeriodSeconds: 8,
          preStopSleepSeconds: 5,
          service: { type: 'ClusterIP', externalTrafficPolicy: 'Local', nodePorts: { http: 30080 } },
        },
        extauth: { resources: { limits: { memory: '1Gi' } }, podLabels: { 'app.kubernetes.io/component': 'spoof', team: 'auth' }, pdb: { create: false } },
      },
      GATEWAY_VERSION,
    );
    const objects = renderInstall(values);
    validateAll(objects);
    const gateway = find<IDeployment>(objects, 'Deployment', 'gateway');
    expect(gateway.spec!.replicas).toBeUndefined();
    expect(find<{ spec: Record<string, unknown> }>(objects, 'HorizontalPodAutoscaler', 'gateway').spec).toMatchObject({ minReplicas: 1, maxReplicas: 4, scaleTargetRef: { kind: 'Deployment', name: 'gateway' } });
    const container = gateway.spec!.template.spec!.containers[0]!;
    expect(container.securityContext).toMatchObject({ readOnlyRootFilesystem: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] } });
    // The drain never gets less than 1 s.
    expect(container.args![container.args!.indexOf('--shutdown-grace') + 1]).toBe('1s');
    // A ClusterIP Service takes neither.
    const service = find<IService>(objects, 'Service', 'gateway').spec!;
    expect(service.externalTrafficPolicy).toBeUndefined();
    expect(service.ports!.every((p) => p.nodePort === undefined)).toBe(true);
    const extauth = find<IDeployment>(objects, 'Deployment', 'extauth').spec!.template;
    expect(extauth.spec!.containers[0]!.resources).toEqual({ requests: { cpu: '100m', memory: '192Mi' }, limits: { memory: '1Gi' } });
    // podLabels never replace the labels the selector matches.
    expect(extauth.metadata!.labels).toMatchObject({ 'app.kubernetes.io/component': 'extauth', team: 'auth' });
    expect(objects.some((o) => o.kind === 'PodDisruptionBudget')).toBe(false);
    expect(renderInstall(resolveValues({ extauth: { resources: { requests: null } } }, GATEWAY_VERSION)).length).toBeGreaterThan(0);
    const noRequests = find<IDeployment>(renderInstall(resolveValues({ extauth: { resources: { requests: null } } }, GATEWAY_VERSION)), 'Deployment', 'extauth');
    expect(noRequests.spec!.template.spec!.containers[0]!.resources).toEqual({});
  });

  it('metrics: a ServiceMonitor on both admin ports and the dashboard ConfigMap, when asked; the dashboard JSON parses and queries our metrics', () => {
    expect(renderInstall(resolveValues({}, GATEWAY_VERSION)).filter((o) => o.kind === 'ServiceMonitor' || o.metadata?.name === 'gatehouse-dashboard')).toEqual([]);
    const objects = renderInstall(resolveValues({ metrics: { serviceMonitor: { enabled: true }, dashboard: { enabled: true } } }, GATEWAY_VERSION));
    const monitor = find<{ spec: { endpoints: unknown[]; selector: unknown } }>(objects, 'ServiceMonitor', 'gatehouse');
    expect(monitor.spec.endpoints).toEqual([{ port: 'admin', path: '/metrics', interval: '30s' }]);
    const dashboard = find<{ metadata: { labels: Record<string, string> }; data: Record<string, string> }>(objects, 'ConfigMap', 'gatehouse-dashboard');
    expect(dashboard.metadata.labels.grafana_dashboard).toBe('1');
    const model = JSON.parse(dashboard.data['gatehouse.json']!) as { panels: { targets: { expr: string }[] }[] };
    const exprs = model.panels.flatMap((p) => p.targets.map((t) => t.expr)).join('\n');
    for (const metric of ['gatehouse_requests_total', 'gatehouse_auth_decisions_total', 'gatehouse_ext_authz_duration_seconds_bucket', 'gatehouse_extauth_config_unavailable']) expect(exprs).toContain(metric);
  });

  it('refuses a PDB with both bounds and an HPA whose minimum is above its maximum, naming the path', () => {
    expect(() => resolveValues({ extauth: { pdb: { minAvailable: 1, maxUnavailable: '50%' } } }, GATEWAY_VERSION)).toThrow(/extauth\.pdb: set minAvailable or maxUnavailable, not both/);
    expect(() => resolveValues({ gateway: { autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 2 } } }, GATEWAY_VERSION)).toThrow(/gateway\.autoscaling: minReplicas 3 is more than maxReplicas 2/);
    expect(() => resolveValues({ extauth: { pdb: { maxUnavailable: '5 %' } } }, GATEWAY_VERSION)).toThrow(/extauth\.pdb\.maxUnavailable/);
  });

  it('runs extauth on gRPC 8083 behind a Service named extauth', () => {
    const objects = renderInstall(resolveValues({}, GATEWAY_VERSION));
    const extauth = find<IDeployment>(objects, 'Deployment', 'extauth');
    const container = extauth.spec!.template.spec!.containers[0]!;
    expect(container.ports).toEqual([{ name: 'grpc', containerPort: 8083, protocol: 'TCP' }, { name: 'admin', containerPort: 9902, protocol: 'TCP' }]);
    expect(container.args?.slice(0, 1)).toEqual(['extauth']);
    expect(container.readinessProbe?.grpc).toEqual({ port: 8083 });
    expect(extauth.spec!.template.spec!.initContainers).toBeUndefined();
    expect(find<IService>(objects, 'Service', 'extauth').spec!.ports).toEqual([
      { name: 'grpc', port: 8083, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' },
      // The admin API (issue 27 item 7): /metrics, /healthz, /readyz, /configs.
      { name: 'admin', port: 9902, targetPort: 'admin', protocol: 'TCP' },
    ]);
    // The gateway's address: the headless Service, one connection per Ready extauth pod.
    expect(find<IService>(objects, 'Service', 'extauth-headless').spec).toEqual({
      clusterIP: 'None',
      selector: extauth.spec!.selector.matchLabels,
      ports: [{ name: 'grpc', port: 8083, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' }],
    });
    expect(container.args).toEqual(expect.arrayContaining(['--admin-port', '9902', '--admin-host', '0.0.0.0']));
    expect(extauth.spec!.template.metadata!.annotations).toMatchObject({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9902' });
  });

  it('adds one init container plugin-<key> per plugin image, sharing the auth-plugins emptyDir with extauth', () => {
    const objects = renderInstall(resolveValues(withPlugins, GATEWAY_VERSION));
    validateAll(objects);
    const pod = find<IDeployment>(objects, 'Deployment', 'extauth').spec!.template.spec!;
    expect(pod.initContainers!.map((c) => [c.name, c.image, c.imagePullPolicy])).toEqual([
      ['plugin-required-header', `registry.example.com/gatehouse/plugins/required-header:${GATEWAY_VERSION}`, 'Always'],
      ['plugin-geo-ip', `other.example.com/acme/geo-ip:${GATEWAY_VERSION}`, 'IfNotPresent'],
    ]);
    for (const init of pod.initContainers!) {
      expect(init.volumeMounts).toEqual([{ name: 'auth-plugins', mountPath: '/auth-plugins' }]);
      expect(init.args).toEqual(['--rootfs', '/', '--tag', GATEWAY_VERSION, '--gateway-version', GATEWAY_VERSION, '--dest', '/auth-plugins']);
    }
    expect(pod.volumes).toContainEqual({ name: 'auth-plugins', emptyDir: {} });
    expect(pod.containers[0]!.volumeMounts).toContainEqual({ name: 'auth-plugins', mountPath: '/auth-plugins', readOnly: true });
    expect(pod.containers[0]!.args).toEqual(expect.arrayContaining(['--plugin-dir', '/auth-plugins']));
  });

  it('creates the ConfigMap only when asked', () => {
    expect(renderInstall(resolveValues({}, GATEWAY_VERSION)).filter((o) => o.kind === 'ConfigMap')).toEqual([]);
    const inline = renderInstall(resolveValues({ config: { source: 'configMap', configMap: { name: 'routes', data: { 'a.yaml': 'kind: Upstream' } } } }, GATEWAY_VERSION));
    validateAll(inline);
    expect(find<{ data: Record<string, string> }>(inline, 'ConfigMap', 'routes').data).toEqual({ 'a.yaml': 'kind: Upstream' });
    const args = find<IDeployment>(inline, 'Deployment', 'gateway').spec!.template.spec!.containers[0]!.args!;
    expect(args).toEqual(expect.arrayContaining(['--config-dir']));
  });

  it('config.source kube: --kube in both Deployments, no config volume, the pod name and namespace from the downward API', () => {
    const objects = renderInstall(resolveValues({ config: { source: 'kube' } }, GATEWAY_VERSION));
    validateAll(objects);
    expect(objects.filter((o) => o.kind === 'ConfigMap')).toEqual([]);
    const downward = [
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    ];
    for (const name of ['gateway', 'extauth']) {
      const pod = find<IDeployment>(objects, 'Deployment', name).spec!.template.spec!;
      const container = pod.containers[0]!;
      expect(container.args!.slice(0, 2)).toEqual([name, '--kube']);
      expect(container.args).not.toContain('--config-dir');
      expect(container.args).not.toContain('--namespace');
      expect(container.env).toEqual(expect.arrayContaining(downward));
      expect(pod.volumes!.map((v) => v.name)).not.toContain('config');
      expect(container.volumeMounts!.map((m) => m.name)).not.toContain('config');
    }
    const namespaced = renderInstall(resolveValues({ config: { source: 'kube', kube: { namespaces: ['team-a', 'team-b'] } } }, GATEWAY_VERSION));
    const args = find<IDeployment>(namespaced, 'Deployment', 'gateway').spec!.template.spec!.containers[0]!.args!;
    expect(args.slice(0, 6)).toEqual(['gateway', '--kube', '--namespace', 'team-a', '--namespace', 'team-b']);
    expect(find<IDeployment>(namespaced, 'Deployment', 'extauth').spec!.template.spec!.containers[0]!.args!.slice(0, 6)).toEqual(['extauth', '--kube', '--namespace', 'team-a', '--namespace', 'team-b']);
  });

  it('config.source kube, all namespaces: a ClusterRole per component for both API group families, Secrets, ConfigMaps, Services, EndpointSlices; status and Leases for the gateway only', () => {
    const objects = renderInstall(resolveValues({ namespace: 'edge', apiGroupDomain: 'example.org', config: { source: 'kube' } }, GATEWAY_VERSION));
    validateAll(objects);
    const rbac = objects.filter((o) => o.apiVersion.startsWith('rbac.') || o.kind === 'ServiceAccount');
    expect(rbac.map((o) => `${o.kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name}`)).toEqual([
      'ServiceAccount/edge/gatehouse-gateway',
      'ClusterRole//gatehouse:edge:gateway',
      'ClusterRoleBinding//gatehouse:edge:gateway',
      'Role/edge/gatehouse:gateway:leases',
      'RoleBinding/edge/gatehouse:gateway:leases',
      'ServiceAccount/edge/gatehouse-extauth',
      'ClusterRole//gatehouse:edge:extauth',
      'ClusterRoleBinding//gatehouse:edge:extauth',
    ]);
    const rulesOf = (component: string) => find<{ rules: IPolicyRule[] }>(objects, 'ClusterRole', `gatehouse:edge:${component}`).rules;
    /** Whether some rule of `component` grants `verb` on `resource` in `group`. */
    const grants = (component: string, group: string, resource: string, verb: string) =>
      rulesOf(component).some((r) => r.apiGroups!.includes(group) && r.resources!.includes(resource) && r.verbs.includes(verb));
    const allows = (group: string, resource: string, verb: string) => grants('gateway', group, resource, verb);
    const families = [
      ['gatehouse.example.org', 'gloo.solo.io', ['upstreams', 'upstreamgroups']],
      ['enterprise.example.org', 'enterprise.gloo.solo.io', ['authconfigs']],
      ['graphql.example.org', 'graphql.gloo.solo.io', ['graphqlapis']],
      ['gateway.example.org', 'gateway.solo.io', ['routetables', 'virtualservices', 'gateways']],
    ] as const;
    for (const [ours, gloo, plurals] of families) {
      for (const group of [ours, gloo]) {
        for (const plural of plurals) {
          for (const verb of ['get', 'list', 'watch']) expect(allows(group, plural, verb), `${verb} ${plural}.${group}`).toBe(true);
          for (const verb of ['get', 'update', 'patch']) expect(allows(group, `${plural}/status`, verb), `${verb} ${plural}/status.${group}`).toBe(true);
          for (const verb of ['create', 'update', 'delete']) expect(allows(group, plural, verb), `no ${verb} on ${plural}.${group}`).toBe(false);
          // extauth reads the same, and patches only AuthConfigs' status (its build results; issue 27 item 1).
          for (const verb of ['get', 'list', 'watch']) expect(grants('extauth', group, plural, verb), `extauth ${verb} ${plural}.${group}`).toBe(true);
          expect(grants('extauth', group, `${plural}/status`, 'patch'), `extauth patch ${plural}/status.${group}`).toBe(plural === 'authconfigs');
          expect(grants('extauth', group, `${plural}/status`, 'update'), `extauth update ${plural}/status.${group}`).toBe(false);
        }
      }
    }
    for (const resource of ['secrets', 'configmaps', 'services']) for (const verb of ['get', 'list', 'watch']) expect(allows('', resource, verb), `${verb} ${resource}`).toBe(true);
    for (const verb of ['get', 'list', 'watch']) expect(allows('discovery.k8s.io', 'endpointslices', verb)).toBe(true);
    expect(allows('', 'secrets', 'update')).toBe(false);
    expect(find<{ rules: IPolicyRule[] }>(objects, 'Role', 'gatehouse:gateway:leases').rules).toEqual([{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] }]);
    const binding = find<{ roleRef: unknown; subjects: unknown }>(objects, 'ClusterRoleBinding', 'gatehouse:edge:extauth');
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'gatehouse:edge:extauth' });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'gatehouse-extauth', namespace: 'edge' }]);
    for (const component of ['gateway', 'extauth']) expect(grants(component, 'events.k8s.io', 'events', 'create'), `${component} creates Events`).toBe(true);
    const withoutStatus = (rules: IPolicyRule[]) => rules.filter((r) => !r.resources!.some((resource) => resource.endsWith('/status')));
    expect(withoutStatus(rulesOf('extauth'))).toEqual(withoutStatus(rulesOf('gateway')));
  });

  it('config.source kube with namespaces: a Role and RoleBinding in each watched namespace instead of a ClusterRole', () => {
    const objects = renderInstall(resolveValues({ config: { source: 'kube', kube: { namespaces: ['team-a', 'team-b'] } } }, GATEWAY_VERSION));
    validateAll(objects);
    expect(objects.filter((o) => o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding')).toEqual([]);
    const all = renderInstall(resolveValues({ config: { source: 'kube' } }, GATEWAY_VERSION));
    for (const component of ['gateway', 'extauth']) {
      const name = `gatehouse:gatehouse-system:${component}`;
      for (const ns of ['team-a', 'team-b']) {
        expect(find<{ rules: IPolicyRule[] }>(objects, 'Role', name, ns).rules).toEqual(find<{ rules: IPolicyRule[] }>(all, 'ClusterRole', name).rules);
        const binding = find<{ roleRef: unknown; subjects: unknown }>(objects, 'RoleBinding', name, ns);
        expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name });
        expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: `gatehouse-${component}`, namespace: 'gatehouse-system' }]);
      }
    }
    expect(find(objects, 'Role', 'gatehouse:gateway:leases', 'gatehouse-system')).toBeDefined();
    expect(find(objects, 'Role', 'gatehouse:extauth:leases')).toBeUndefined();
    expect(() => resolveValues({ config: { source: 'kube', kube: { namespaces: ['a', 'a'] } } }, GATEWAY_VERSION)).toThrow(/config\.kube\.namespaces/);
    expect(() => resolveValues({ config: { source: 'etcd' } }, GATEWAY_VERSION)).toThrow(/config\.source/);
  });

  it('mounts gateway.tlsSecrets read-only into the gateway container, at /etc/gatehouse/tls/<name> by default', () => {
    const objects = renderInstall(resolveValues({ gateway: { tlsSecrets: [{ name: 'shop-tls' }, { name: 'api.example.com', mountPath: '/certs/api' }] } }, GATEWAY_VERSION));
    validateAll(objects);
    const pod = find<IDeployment>(objects, 'Deployment', 'gateway').spec!.template.spec!;
    expect(pod.containers[0]!.volumeMounts).toEqual(expect.arrayContaining([
      { name: 'tls-0', mountPath: '/etc/gatehouse/tls/shop-tls', readOnly: true },
      { name: 'tls-1', mountPath: '/certs/api', readOnly: true },
    ]));
    expect(pod.volumes).toEqual(expect.arrayContaining([
      { name: 'tls-0', secret: { secretName: 'shop-tls', defaultMode: 0o440 } },
      { name: 'tls-1', secret: { secretName: 'api.example.com', defaultMode: 0o440 } },
    ]));
    // The HTTPS listener stays wired: container port 8443, Service port 443.
    expect(pod.containers[0]!.args).toEqual(expect.arrayContaining(['--https-port', '8443']));
    expect(find<IService>(objects, 'Service', 'gateway').spec!.ports).toContainEqual({ name: 'https', port: 443, targetPort: 'https', protocol: 'TCP' });
    const extauth = find<IDeployment>(objects, 'Deployment', 'extauth').spec!.template.spec!;
    expect(extauth.volumes!.map((v) => v.name)).not.toContain('tls-0');
    expect(() => resolveValues({ gateway: { tlsSecrets: [{ name: 'a', mountPath: '/x' }, { name: 'b', mountPath: '/x' }] } }, GATEWAY_VERSION)).toThrow(
      expect.objectContaining({ code: InstallCodes.VALUES_INVALID, message: expect.stringContaining('gateway.tlsSecrets.1: mount path /x is already used by gateway.tlsSecrets.0') }),
    );
    expect(() => resolveValues({ gateway: { tlsSecrets: [{ name: 'a', mountPath: 'relative' }] } }, GATEWAY_VERSION)).toThrow(/gateway\.tlsSecrets\.0\.mountPath/);
  });

  it('serialises to YAML that reads back as the same objects', () => {
    const objects = renderInstall(resolveValues(withPlugins, GATEWAY_VERSION));
    const back = parseAllDocuments(toYaml(objects)).map((d) => d.toJS());
    expect(back).toEqual(JSON.parse(JSON.stringify(objects)));
  });
});

describe('resolveValues', () => {
  it('refuses a plugin tag that is not the gateway version, naming both', () => {
    const values = { global: { extensions: { extAuth: { plugins: { old: { image: { repository: 'p/old', tag: '0.0.1' } } } } } } };
    expect(() => resolveValues(values, '1.2.3')).toThrow(expect.objectContaining({ code: InstallCodes.PLUGIN_TAG, message: expect.stringContaining('global.extensions.extAuth.plugins.old.image.tag 0.0.1 does not match gateway version 1.2.3') }));
  });

  it('names unknown keys and wrong types with their path', () => {
    expect(() => resolveValues({ gateway: { replica: 2 } }, '1')).toThrow(expect.objectContaining({ code: InstallCodes.VALUES_INVALID, message: expect.stringContaining('gateway.replica: unknown key') }));
    expect(() => resolveValues({ gateway: { replicas: 'two' } }, '1')).toThrow(expect.objectContaining({ message: expect.stringContaining('gateway.replicas') }));
    expect(() => resolveValues({ global: { extensions: { extAuth: { plugins: { p: { image: {} } } } } } }, '1')).toThrow(/plugins\.p\.image\.repository is required/);
    expect(() => resolveValues({ global: { extensions: { extAuth: { plugins: { 'Bad Key!': { image: { repository: 'x' } } } } } } }, '1')).toThrow(/container name/);
  });
});

describe('gatehouse install render (process)', () => {
  const root = fileURLToPath(new URL('../../..', import.meta.url));
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gh-install-render-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const render = (...args: string[]) => spawnSync(process.execPath, [join(root, 'core/bin/gatehouse.js'), 'install', ...args], { encoding: 'utf8', cwd: root, maxBuffer: 64 * 1024 * 1024 });

  it('prints valid manifests for a values file', async () => {
    const file = join(dir, 'values.yaml');
    await writeFile(file, 'namespace: edge\nglobal:\n  extensions:\n    extAuth:\n      plugins:\n        RequiredHeader:\n          image:\n            repository: plugins/required-header\n');
    const result = render('render', '--values', file);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const objects = parseAllDocuments(result.stdout).map((d) => d.toJS());
    validateAll(objects);
    const extauth = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'extauth') as IDeployment;
    expect(extauth.metadata!.namespace).toBe('edge');
    expect(extauth.spec!.template.spec!.initContainers!.map((c) => c.name)).toEqual(['plugin-required-header']);
  });

  it('exits 1 with the reason on bad values, 2 on usage errors', async () => {
    const file = join(dir, 'bad.yaml');
    await writeFile(file, 'gateway:\n  replcas: 3\n');
    const bad = render('render', '--values', file);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('gateway.replcas: unknown key [GH_INSTALL_VALUES_INVALID]');
    const missing = render('render', '--values', join(dir, 'nope.yaml'));
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain('GH_INSTALL_VALUES_UNREADABLE');
    expect(render('apply').status).toBe(2);
    expect(render('render', '--bogus').status).toBe(2);
  });
});
