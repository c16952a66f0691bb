import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar';
import type { IPodSecurityContext } from 'kubernetes-models/v1/PodSecurityContext';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import type { ISecurityContext } from 'kubernetes-models/v1/SecurityContext';
import type { IService } from 'kubernetes-models/v1/Service';
import type { IVolume } from 'kubernetes-models/v1/Volume';
import type { IVolumeMount } from 'kubernetes-models/v1/VolumeMount';
import type { ResolvedValues } from './values.ts';

/** Ports (SPEC 1). */
export const PORTS = { http: 8080, https: 8443, admin: 9901, grpc: 8083 } as const;

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
    `extauth.${ns}.svc:${PORTS.grpc}`,
    ...tokenArgs(values),
    ...values.gateway.extraArgs,
  ];
  const deployment: IDeployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'gateway', namespace: ns, labels: labels('gateway') },
    spec: {
      replicas: values.gateway.replicas,
      selector: { matchLabels: selector('gateway') },
      template: {
        metadata: { labels: labels('gateway'), annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(PORTS.admin), 'prometheus.io/path': '/metrics' } },
        spec: {
          serviceAccountName: 'gatehouse-gateway',
          securityContext: POD_SECURITY,
          ...pullSecrets(values),
          // SIGTERM drains in-flight requests (SPEC 8); leave it the default shutdown grace plus margin.
          terminationGracePeriodSeconds: 40,
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
              ...(values.config.source === 'kube' ? { env: podEnv() } : {}),
              readinessProbe: { httpGet: { path: '/readyz', port: 'admin' }, periodSeconds: 5 },
              livenessProbe: { httpGet: { path: '/healthz', port: 'admin' }, periodSeconds: 10, failureThreshold: 3 },
              resources: values.gateway.resources,
              securityContext: CONTAINER_SECURITY,
              volumeMounts: [...configMounts(values), ...tlsMounts(values), ...tokenMounts(values), { name: 'tmp', mountPath: '/tmp' }],
            },
          ],
          volumes: [...configVolumes(values), ...tlsVolumes(values), ...tokenVolumes(values), { name: 'tmp', emptyDir: {} }],
        },
      },
    },
  };
  const service: IService = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'gateway', namespace: ns, labels: labels('gateway'), ...(Object.keys(values.gateway.serviceAnnotations).length ? { annotations: values.gateway.serviceAnnotations } : {}) },
    spec: { type: values.gateway.serviceType, selector: selector('gateway'), ports: [
        { name: 'http', port: values.gateway.servicePort, targetPort: 'http', protocol: 'TCP' },
        // VirtualServices with sslConfig (SPEC 3.2.1).
        { name: 'https', port: 443, targetPort: 'https', protocol: 'TCP' },
      ] },
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
    securityContext: CONTAINER_SECURITY,
    volumeMounts: [pluginMount],
  }));
  const deployment: IDeployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'extauth', namespace: ns, labels: labels('extauth') },
    spec: {
      replicas: values.extauth.replicas,
      selector: { matchLabels: selector('extauth') },
      template: {
        metadata: { labels: labels('extauth') },
        spec: {
          serviceAccountName: 'gatehouse-extauth',
          securityContext: POD_SECURITY,
          ...pullSecrets(values),
          ...(initContainers.length ? { initContainers } : {}),
          containers: [
            {
              name: 'extauth',
              image: imageOf(values),
              imagePullPolicy: values.image.pullPolicy,
              // isolated-vm (plugin sandboxes) needs --no-node-snapshot on Node 20+.
              env: [{ name: 'NODE_OPTIONS', value: '--no-node-snapshot' }, ...(values.config.source === 'kube' ? podEnv() : [])],
              args: ['extauth', ...configArgs(values), '--port', String(PORTS.grpc), '--plugin-dir', PLUGIN_DIR, '--api-group-domain', values.apiGroupDomain, ...tokenArgs(values), ...values.extauth.extraArgs],
              ports: [{ name: 'grpc', containerPort: PORTS.grpc, protocol: 'TCP' }],
              readinessProbe: { grpc: { port: PORTS.grpc }, periodSeconds: 5 },
              livenessProbe: { grpc: { port: PORTS.grpc }, periodSeconds: 10, failureThreshold: 3 },
              resources: values.extauth.resources,
              securityContext: CONTAINER_SECURITY,
              volumeMounts: [{ ...pluginMount, readOnly: true }, ...configMounts(values), ...tokenMounts(values), { name: 'tmp', mountPath: '/tmp' }],
            },
          ],
          volumes: [{ name: 'auth-plugins', emptyDir: {} }, ...configVolumes(values), ...tokenVolumes(values), { name: 'tmp', emptyDir: {} }],
        },
      },
    },
  };
  const service: IService = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'extauth', namespace: ns, labels: labels('extauth') },
    spec: { type: 'ClusterIP', selector: selector('extauth'), ports: [{ name: 'grpc', port: PORTS.grpc, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' }] },
  };
  return [deployment, service];
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
