import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar';
import type { IPodSecurityContext } from 'kubernetes-models/v1/PodSecurityContext';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import type { ISecurityContext } from 'kubernetes-models/v1/SecurityContext';
import type { IService } from 'kubernetes-models/v1/Service';
import type { IVolume } from 'kubernetes-models/v1/Volume';
import type { IVolumeMount } from 'kubernetes-models/v1/VolumeMount';
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';
import type { PodValues, ResolvedValues } from './values.ts';

/** Ports (SPEC 1). */
export const PORTS = { http: 8080, https: 8443, admin: 9901, grpc: 8083, extauthAdmin: 9902 } as const;

const PLUGIN_DIR = '/auth-plugins';
/** Where both Deployments mount the caller token Secret (docs/auth.md#callers). */
const TOKEN_DIR = '/etc/gatehouse/extauth-token';
const CONFIG_DIR = '/etc/gatehouse/config';

/** Hardened defaults for every container: non-root, read-only root, no privileges. */
const CONTAINER_SECURITY: ISecurityContext = {
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};
const POD_SECURITY: IPodSecurityContext = { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001 };

/** The gateway (+ admin) Deployment and its Services. */
export function renderGateway(values: ResolvedValues, labels: (component: string) => Record<string, string>, selector: (component: string) => Record<string, string>): (IDeployment | IService)[] {
  const ns = values.namespace;
  const args = [
    'gateway',
    ...configArgs(values),
    '--port',
    String(PORTS.http),
    '--https-port',
    String(PORTS.https),
    '--admin-port',
    String(PORTS.admin),
    // The kubelet probes the pod IP; the admin Service is ClusterIP only (docs/operations.md).
    '--admin-host',
    '0.0.0.0',
    '--workers',
    values.gateway.workers,
    '--api-group-domain',
    values.apiGroupDomain,
    '--extauth-address',
    // Every extauth pod, looked up again every 2 s (core/src/extauth/grpc/check-client.ts `endpoints`).
    `extauth-headless.${ns}.svc:${PORTS.grpc}`,
    // SIGTERM comes after the preStop sleep: drain within what is left of the grace period.
    '--shutdown-grace',
    `${drainSeconds(values.gateway)}s`,
    ...tokenArgs(values),
    ...values.gateway.extraArgs,
  ];
  const deployment: IDeployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'gateway', namespace: ns, labels: labels('gateway') },
    spec: {
      ...deploymentSpec(values.gateway),
      selector: { matchLabels: selector('gateway') },
      template: {
        metadata: {
          labels: { ...values.gateway.podLabels, ...labels('gateway') },
          annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(PORTS.admin), 'prometheus.io/path': '/metrics', ...values.gateway.podAnnotations },
        },
        spec: {
          serviceAccountName: 'gatehouse-gateway',
          ...podSpec(values.gateway),
          ...pullSecrets(values),
          containers: [
            {
              name: 'gateway',
              image: imageOf(values),
              imagePullPolicy: values.image.pullPolicy,
              args,
              ports: [
                { name: 'http', containerPort: PORTS.http, protocol: 'TCP' },
                { name: 'https', containerPort: PORTS.https, protocol: 'TCP' },
                { name: 'admin', containerPort: PORTS.admin, protocol: 'TCP' },
              ],
              ...(values.config.source === 'kube' || values.gateway.extraEnv.length ? { env: [...(values.config.source === 'kube' ? podEnv() : []), ...(values.gateway.extraEnv as IEnvVar[])] } : {}),
              readinessProbe: { httpGet: { path: '/readyz', port: 'admin' }, periodSeconds: 5 },
              livenessProbe: { httpGet: { path: '/healthz', port: 'admin' }, periodSeconds: 10, failureThreshold: 3 },
              ...lifecycle(values.gateway),
              resources: values.gateway.resources,
              securityContext: containerSecurity(values.gateway),
              volumeMounts: [...configMounts(values), ...tlsMounts(values), ...tokenMounts(values), { name: 'tmp', mountPath: '/tmp' }, ...(values.gateway.extraVolumeMounts as IVolumeMount[])],
            },
          ],
          volumes: [...configVolumes(values), ...tlsVolumes(values), ...tokenVolumes(values), { name: 'tmp', emptyDir: {} }, ...(values.gateway.extraVolumes as IVolume[])],
        },
      },
    },
  };
  const service: IService = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'gateway', namespace: ns, labels: labels('gateway'), ...(Object.keys(values.gateway.serviceAnnotations).length ? { annotations: values.gateway.serviceAnnotations } : {}) },
    spec: {
      type: values.gateway.serviceType,
      ...serviceExtras(values),
      selector: selector('gateway'),
      ports: [
        { name: 'http', port: values.gateway.servicePort, targetPort: 'http', protocol: 'TCP', ...nodePort(values, 'http') },
        // VirtualServices with sslConfig (SPEC 3.2.1).
        { name: 'https', port: 443, targetPort: 'https', protocol: 'TCP', ...nodePort(values, 'https') },
      ],
    },
  };
  const admin: IService = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'gateway-admin', namespace: ns, labels: labels('gateway') },
    spec: { type: 'ClusterIP', selector: selector('gateway'), ports: [{ name: 'admin', port: PORTS.admin, targetPort: 'admin', protocol: 'TCP' }] },
  };
  return [deployment, service, admin];
}

/**
 * The `extauth` Deployment (gRPC 8083) and Service. Each plugin image runs first as init
 * container `plugin-<key>`: a plugin image built with `--base` (the gatehouse-init image) copies
 * its own compiled-auth-plugins/ into the shared `auth-plugins` emptyDir after checking its tag.
 */
export function renderExtAuth(values: ResolvedValues, labels: (component: string) => Record<string, string>, selector: (component: string) => Record<string, string>): (IDeployment | IService)[] {
  const ns = values.namespace;
  const pluginMount: IVolumeMount = { name: 'auth-plugins', mountPath: PLUGIN_DIR };
  const initContainers = values.plugins.map((plugin): IContainer => ({
    name: plugin.name,
    image: plugin.image,
    imagePullPolicy: plugin.pullPolicy,
    args: ['--rootfs', '/', '--tag', plugin.tag, '--gateway-version', values.gatewayVersion, '--dest', PLUGIN_DIR],
    // gatehouse-init's error (a plugin built for another version) in the pod's status: kubectl describe, gatehouse check.
    terminationMessagePolicy: 'FallbackToLogsOnError',
    securityContext: containerSecurity(values.extauth),
    volumeMounts: [pluginMount],
  }));
  const deployment: IDeployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'extauth', namespace: ns, labels: labels('extauth') },
    spec: {
      ...deploymentSpec(values.extauth),
      selector: { matchLabels: selector('extauth') },
      template: {
        metadata: {
          labels: { ...values.extauth.podLabels, ...labels('extauth') },
          annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(PORTS.extauthAdmin), 'prometheus.io/path': '/metrics', ...values.extauth.podAnnotations },
        },
        spec: {
          serviceAccountName: 'gatehouse-extauth',
          ...podSpec(values.extauth),
          ...pullSecrets(values),
          ...(initContainers.length ? { initContainers } : {}),
          containers: [
            {
              name: 'extauth',
              image: imageOf(values),
              imagePullPolicy: values.image.pullPolicy,
              // isolated-vm (plugin sandboxes) needs --no-node-snapshot on Node 20+.
              env: [{ name: 'NODE_OPTIONS', value: '--no-node-snapshot' }, ...(values.config.source === 'kube' ? podEnv() : []), ...(values.extauth.extraEnv as IEnvVar[])],
              args: [
                'extauth',
                ...configArgs(values),
                '--port',
                String(PORTS.grpc),
                // /metrics, /healthz, /readyz, /configs for Prometheus and `gatehouse check` (pod IP; ClusterIP Service).
                '--admin-port',
                String(PORTS.extauthAdmin),
                '--admin-host',
                '0.0.0.0',
                '--plugin-dir',
                PLUGIN_DIR,
                '--api-group-domain',
                values.apiGroupDomain,
                ...tokenArgs(values),
                ...values.extauth.extraArgs,
              ],
              ports: [
                { name: 'grpc', containerPort: PORTS.grpc, protocol: 'TCP' },
                { name: 'admin', containerPort: PORTS.extauthAdmin, protocol: 'TCP' },
              ],
              readinessProbe: { grpc: { port: PORTS.grpc }, periodSeconds: 5 },
              livenessProbe: { grpc: { port: PORTS.grpc }, periodSeconds: 10, failureThreshold: 3 },
              ...lifecycle(values.extauth),
              resources: values.extauth.resources,
              securityContext: containerSecurity(values.extauth),
              volumeMounts: [{ ...pluginMount, readOnly: true }, ...configMounts(values), ...tokenMounts(values), { name: 'tmp', mountPath: '/tmp' }, ...(values.extauth.extraVolumeMounts as IVolumeMount[])],
            },
          ],
          volumes: [{ name: 'auth-plugins', emptyDir: {} }, ...configVolumes(values), ...tokenVolumes(values), { name: 'tmp', emptyDir: {} }, ...(values.extauth.extraVolumes as IVolume[])],
        },
      },
    },
  };
  const service: IService = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'extauth', namespace: ns, labels: labels('extauth') },
    spec: {
      type: 'ClusterIP',
      selector: selector('extauth'),
      ports: [
        { name: 'grpc', port: PORTS.grpc, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' },
        { name: 'admin', port: PORTS.extauthAdmin, targetPort: 'admin', protocol: 'TCP' },
      ],
    },
  };
  // Headless: its name resolves to every Ready extauth pod, so the gateway holds a connection to
  // each and spreads checks over them; a pod that goes takes only its own connection (a Service
  // address pins the gateway's one connection to one pod, and its loss to a reconnect).
  const headless: IService = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'extauth-headless', namespace: ns, labels: labels('extauth') },
    spec: {
      clusterIP: 'None',
      selector: selector('extauth'),
      ports: [{ name: 'grpc', port: PORTS.grpc, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' }],
    },
  };
  return [deployment, service, headless];
}

/** The PodDisruptionBudgets and HorizontalPodAutoscalers of both Deployments, where enabled. */
export function renderPolicies(values: ResolvedValues, labels: (component: string) => Record<string, string>, selector: (component: string) => Record<string, string>): (IPodDisruptionBudget | IHorizontalPodAutoscaler)[] {
  const out: (IPodDisruptionBudget | IHorizontalPodAutoscaler)[] = [];
  for (const component of ['gateway', 'extauth'] as const) {
    const pod = values[component];
    const metadata = { name: component, namespace: values.namespace, labels: labels(component) };
    if (pod.pdb.create) {
      // Neither bound given: one pod at a time may go (a drain, a node upgrade), never all.
      const bound = pod.pdb.minAvailable !== undefined ? { minAvailable: pod.pdb.minAvailable } : { maxUnavailable: pod.pdb.maxUnavailable ?? 1 };
      out.push({ apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', metadata, spec: { ...bound, selector: { matchLabels: selector(component) } } });
    }
    const a = pod.autoscaling;
    if (a.enabled) {
      const target = (name: 'cpu' | 'memory', averageUtilization: number | undefined) =>
        averageUtilization === undefined ? [] : [{ type: 'Resource', resource: { name, target: { type: 'Utilization', averageUtilization } } }];
      out.push({
        apiVersion: 'autoscaling/v2',
        kind: 'HorizontalPodAutoscaler',
        metadata,
        spec: {
          scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: component },
          minReplicas: a.minReplicas,
          maxReplicas: a.maxReplicas,
          metrics: [...target('cpu', a.targetCPUUtilizationPercentage), ...target('memory', a.targetMemoryUtilizationPercentage)],
        },
      });
    }
  }
  return out;
}

/**
 * `metrics.serviceMonitor.enabled`: a prometheus-operator ServiceMonitor scraping both admin ports
 * (the gateway-admin and extauth Services' `admin` port).
 */
export function renderServiceMonitor(values: ResolvedValues, labels: (component: string) => Record<string, string>): ServiceMonitorObject[] {
  const m = values.metrics.serviceMonitor;
  if (!m.enabled) return [];
  return [
    {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'ServiceMonitor',
      metadata: { name: 'gatehouse', namespace: values.namespace, labels: { ...labels('metrics'), ...m.labels } },
      spec: {
        selector: { matchLabels: { 'app.kubernetes.io/name': 'gatehouse' } },
        namespaceSelector: { matchNames: [values.namespace] },
        endpoints: [{ port: 'admin', path: '/metrics', interval: m.interval }],
      },
    },
  ];
}

/** A ServiceMonitor (monitoring.coreos.com/v1): not in kubernetes-models. */
export interface ServiceMonitorObject {
  apiVersion: 'monitoring.coreos.com/v1';
  kind: 'ServiceMonitor';
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  spec: Record<string, unknown>;
}

/** replicas (unless an HPA owns them) and the rollout strategy. */
function deploymentSpec(pod: PodValues): { replicas?: number; strategy?: Record<string, unknown> } {
  return { ...(pod.autoscaling.enabled ? {} : { replicas: pod.replicas }), ...(Object.keys(pod.updateStrategy).length ? { strategy: pod.updateStrategy } : {}) };
}

/** The scheduling and shutdown fields of a pod, the empty ones left out. */
function podSpec(pod: PodValues): Partial<IPodSpec> {
  return {
    securityContext: { ...POD_SECURITY, ...pod.podSecurityContext },
    terminationGracePeriodSeconds: pod.terminationGracePeriodSeconds,
    ...(Object.keys(pod.nodeSelector).length ? { nodeSelector: pod.nodeSelector } : {}),
    ...(pod.tolerations.length ? { tolerations: pod.tolerations } : {}),
    ...(Object.keys(pod.affinity).length ? { affinity: pod.affinity } : {}),
    ...(pod.topologySpreadConstraints.length ? { topologySpreadConstraints: pod.topologySpreadConstraints } : {}),
    ...(pod.priorityClassName ? { priorityClassName: pod.priorityClassName } : {}),
  } as Partial<IPodSpec>;
}

/** The hardened container defaults with the overrides of containerSecurityContext, key by key. */
function containerSecurity(pod: PodValues): ISecurityContext {
  return { ...CONTAINER_SECURITY, ...pod.containerSecurityContext };
}

/**
 * preStop sleeps (the kubelet's own sleep action: the image needs no shell) while the endpoint
 * leaves every Service's rules; only then does SIGTERM start the drain (SPEC 8).
 */
function lifecycle(pod: PodValues): Pick<IContainer, 'lifecycle'> {
  return pod.preStopSleepSeconds > 0 ? { lifecycle: { preStop: { sleep: { seconds: pod.preStopSleepSeconds } } } } : {};
}

/** What is left for the drain after the preStop sleep, with 5 s for the exit itself. */
export function drainSeconds(pod: PodValues): number {
  return Math.max(1, pod.terminationGracePeriodSeconds - pod.preStopSleepSeconds - 5);
}

function serviceExtras(values: ResolvedValues): Record<string, unknown> {
  const e = values.gateway.serviceExtras;
  // These fields are refused on a ClusterIP Service; LoadBalancer ones only matter on a LoadBalancer.
  const external = values.gateway.serviceType !== 'ClusterIP';
  const lb = values.gateway.serviceType === 'LoadBalancer';
  return {
    ...(external && e.externalTrafficPolicy ? { externalTrafficPolicy: e.externalTrafficPolicy } : {}),
    ...(lb && e.loadBalancerIP ? { loadBalancerIP: e.loadBalancerIP } : {}),
    ...(lb && e.loadBalancerClass ? { loadBalancerClass: e.loadBalancerClass } : {}),
    ...(lb && e.loadBalancerSourceRanges.length ? { loadBalancerSourceRanges: e.loadBalancerSourceRanges } : {}),
  };
}

function nodePort(values: ResolvedValues, port: 'http' | 'https'): { nodePort?: number } {
  const n = values.gateway.serviceExtras.nodePorts[port];
  return values.gateway.serviceType !== 'ClusterIP' && n !== undefined ? { nodePort: n } : {};
}

/**
 * The ext_authz caller token Secret (docs/auth.md#callers), when the install generates it:
 * `token` is 32 random bytes as hex. Rendering again makes a new one; both Deployments read
 * the mounted file again while running, so applying it rotates the token without a restart.
 */
export function renderCallerToken(values: ResolvedValues, labels: (component: string) => Record<string, string>, token: string): ISecret[] {
  if (!values.extauth.callerToken.create) return [];
  return [{ apiVersion: 'v1', kind: 'Secret', metadata: { name: values.extauth.callerToken.secretName, namespace: values.namespace, labels: labels('extauth') }, type: 'Opaque', data: { token: Buffer.from(token).toString('base64') } }];
}

function tokenArgs(values: ResolvedValues): string[] {
  return values.extauth.callerToken.enabled ? ['--extauth-token-file', `${TOKEN_DIR}/token`] : [];
}

function tokenMounts(values: ResolvedValues): IVolumeMount[] {
  return values.extauth.callerToken.enabled ? [{ name: 'caller-token', mountPath: TOKEN_DIR, readOnly: true }] : [];
}

function tokenVolumes(values: ResolvedValues): IVolume[] {
  // 0440: readable by the pod's group (fsGroup) only.
  return values.extauth.callerToken.enabled ? [{ name: 'caller-token', secret: { secretName: values.extauth.callerToken.secretName, defaultMode: 0o440, items: [{ key: 'token', path: 'token' }] } }] : [];
}

function imageOf(values: ResolvedValues): string {
  return `${values.image.registry}/${values.image.repository}:${values.image.tag}`;
}

function pullSecrets(values: ResolvedValues): { imagePullSecrets?: { name: string }[] } {
  return values.imagePullSecrets.length ? { imagePullSecrets: values.imagePullSecrets.map((name) => ({ name })) } : {};
}

/** `--kube` reads the API server with the pod's service account (in-cluster config); no namespaces: all. */
function configArgs(values: ResolvedValues): string[] {
  if (values.config.source === 'kube') return ['--kube', ...values.config.namespaces.flatMap((ns) => ['--namespace', ns])];
  return ['--config-dir', CONFIG_DIR];
}

function configMounts(values: ResolvedValues): IVolumeMount[] {
  return values.config.source === 'kube' ? [] : [{ name: 'config', mountPath: CONFIG_DIR, readOnly: true }];
}

function configVolumes(values: ResolvedValues): IVolume[] {
  // Optional: the pods start (with no resources) before the ConfigMap is created.
  return values.config.source === 'kube' ? [] : [{ name: 'config', configMap: { name: values.config.configMapName, optional: true } }];
}

/** The kube source's Lease holder identity and namespace, from the downward API. */
function podEnv(): IEnvVar[] {
  return [
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
  ];
}

// kubernetes.io/tls Secrets for sslConfig.sslFiles (sslConfig.secretRef is read through the config source instead).
function tlsMounts(values: ResolvedValues): IVolumeMount[] {
  return values.gateway.tlsSecrets.map((t, i) => ({ name: `tls-${i}`, mountPath: t.mountPath, readOnly: true }));
}

function tlsVolumes(values: ResolvedValues): IVolume[] {
  // 0440: the keys readable by the pod's group (fsGroup) only, not world-readable.
  return values.gateway.tlsSecrets.map((t, i) => ({ name: `tls-${i}`, secret: { secretName: t.name, defaultMode: 0o440 } }));
}
