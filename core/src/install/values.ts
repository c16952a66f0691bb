import { readFile } from 'node:fs/promises';
import Type from 'typebox';
import Schema from 'typebox/schema';
import { parseAllDocuments } from 'yaml';
import { DEFAULT_API_GROUP_DOMAIN } from '../config/schema/kinds.ts';
import { GatehouseError } from '../errors.ts';

/** Install error codes (stable). */
export const InstallCodes = {
  /** The values file cannot be read or parsed. */
  VALUES_UNREADABLE: 'GH_INSTALL_VALUES_UNREADABLE',
  /** A value has the wrong type, an unknown key, or breaks a rule (path in the message). */
  VALUES_INVALID: 'GH_INSTALL_VALUES_INVALID',
  /** A plugin image tag is not the gateway version. */
  PLUGIN_TAG: 'GH_INSTALL_PLUGIN_TAG',
} as const;

const Strict = <P extends Type.TProperties>(properties: P) => Type.Object(properties, { additionalProperties: false });
const DnsLabel = Type.String({ pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 });
/** A Secret's name: a DNS subdomain. */
const DnsSubdomain = Type.String({ pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$', maxLength: 253 });

/** An image as Helm charts write it: `registry/repository:tag`. */
const Image = Strict({
  registry: Type.Optional(Type.String({ minLength: 1 })),
  repository: Type.Optional(Type.String({ minLength: 1 })),
  tag: Type.Optional(Type.String({ minLength: 1 })),
  pullPolicy: Type.Optional(Type.Union([Type.Literal('Always'), Type.Literal('IfNotPresent'), Type.Literal('Never')])),
});

const Resources = Type.Record(Type.String(), Type.Unknown());
/** A Kubernetes object or list passed through as written (the API server checks it on apply). */
const KubeObject = Type.Record(Type.String(), Type.Unknown());
const KubeList = Type.Array(KubeObject);
const StringMap = Type.Record(Type.String(), Type.String());
const Port = Type.Integer({ minimum: 1, maximum: 65535 });
/** A PodDisruptionBudget bound: a count or a percentage ("50%"). */
const IntOrPercent = Type.Union([Type.Integer({ minimum: 0 }), Type.String({ pattern: '^[0-9]+%$' })]);

const Service = Strict({
  type: Type.Optional(Type.Union([Type.Literal('ClusterIP'), Type.Literal('NodePort'), Type.Literal('LoadBalancer')])),
  port: Type.Optional(Port),
  annotations: Type.Optional(StringMap),
  // NodePort/LoadBalancer only (Bitnami's names): Local keeps the client address and skips the second hop.
  externalTrafficPolicy: Type.Optional(Type.Union([Type.Literal('Cluster'), Type.Literal('Local')])),
  nodePorts: Type.Optional(Strict({ http: Type.Optional(Port), https: Type.Optional(Port) })),
  loadBalancerIP: Type.Optional(Type.String({ minLength: 1 })),
  loadBalancerClass: Type.Optional(Type.String({ minLength: 1 })),
  loadBalancerSourceRanges: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
});

/**
 * The pod knobs both Deployments take, under the names of Bitnami's charts (Envoy Gateway's and
 * Gloo's mean the same): scheduling, metadata, extra env/volumes, security context overrides
 * (merged key by key over the hardened defaults), rollout, shutdown, PDB, HPA.
 */
const podKnobs = {
  replicas: Type.Optional(Type.Integer({ minimum: 0 })),
  resources: Type.Optional(Resources),
  extraArgs: Type.Optional(Type.Array(Type.String())),
  extraEnv: Type.Optional(KubeList),
  extraVolumes: Type.Optional(KubeList),
  extraVolumeMounts: Type.Optional(KubeList),
  podAnnotations: Type.Optional(StringMap),
  podLabels: Type.Optional(StringMap),
  nodeSelector: Type.Optional(StringMap),
  tolerations: Type.Optional(KubeList),
  affinity: Type.Optional(KubeObject),
  topologySpreadConstraints: Type.Optional(KubeList),
  priorityClassName: Type.Optional(Type.String()),
  podSecurityContext: Type.Optional(KubeObject),
  containerSecurityContext: Type.Optional(KubeObject),
  updateStrategy: Type.Optional(KubeObject),
  terminationGracePeriodSeconds: Type.Optional(Type.Integer({ minimum: 1 })),
  // The pod leaves the Service's endpoints while it sleeps, before SIGTERM starts the drain.
  preStopSleepSeconds: Type.Optional(Type.Integer({ minimum: 0 })),
  pdb: Type.Optional(Strict({ create: Type.Optional(Type.Boolean()), minAvailable: Type.Optional(IntOrPercent), maxUnavailable: Type.Optional(IntOrPercent) })),
  autoscaling: Type.Optional(
    Strict({
      enabled: Type.Optional(Type.Boolean()),
      minReplicas: Type.Optional(Type.Integer({ minimum: 1 })),
      maxReplicas: Type.Optional(Type.Integer({ minimum: 1 })),
      targetCPUUtilizationPercentage: Type.Optional(Type.Integer({ minimum: 1 })),
      targetMemoryUtilizationPercentage: Type.Optional(Type.Integer({ minimum: 1 })),
    }),
  ),
};

/** The values file of `gatehouse install render` (documented in docs/deployment.md). */
export const ValuesSchema = Strict({
  namespace: Type.Optional(DnsLabel),
  createNamespace: Type.Optional(Type.Boolean()),
  apiGroupDomain: Type.Optional(Type.String({ minLength: 1 })),
  crds: Type.Optional(Strict({ create: Type.Optional(Type.Boolean()) })),
  rbac: Type.Optional(Strict({ create: Type.Optional(Type.Boolean()) })),
  image: Type.Optional(Image),
  imagePullSecrets: Type.Optional(Type.Array(DnsLabel)),
  config: Type.Optional(
    Strict({
      source: Type.Optional(Type.Union([Type.Literal('configMap'), Type.Literal('kube')])),
      configMap: Type.Optional(Strict({ name: Type.Optional(DnsLabel), data: Type.Optional(Type.Record(Type.String(), Type.String())) })),
      // Empty: every namespace (a ClusterRole); else one --namespace and one Role each.
      kube: Type.Optional(Strict({ namespaces: Type.Optional(Type.Array(DnsLabel, { uniqueItems: true })) })),
    }),
  ),
  gateway: Type.Optional(
    Strict({
      ...podKnobs,
      workers: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Literal('auto')])),
      service: Type.Optional(Service),
      // kubernetes.io/tls Secrets mounted read-only for VirtualServices' sslConfig.sslFiles.
      tlsSecrets: Type.Optional(Type.Array(Strict({ name: DnsSubdomain, mountPath: Type.Optional(Type.String({ pattern: '^/' })) }))),
    }),
  ),
  extauth: Type.Optional(
    Strict({
      ...podKnobs,
      // The ext_authz caller token (docs/auth.md#callers): on by default; a Secret of yours (key `token`) instead of a generated one.
      callerToken: Type.Optional(Strict({ enabled: Type.Optional(Type.Boolean()), existingSecret: Type.Optional(DnsSubdomain) })),
    }),
  ),
  // Prometheus: a ServiceMonitor (prometheus-operator) and the Grafana dashboard as a ConfigMap (Grafana's sidecar label).
  metrics: Type.Optional(
    Strict({
      serviceMonitor: Type.Optional(Strict({ enabled: Type.Optional(Type.Boolean()), interval: Type.Optional(Type.String({ pattern: '^[0-9]+(ms|s|m)$' })), labels: Type.Optional(StringMap) })),
      dashboard: Type.Optional(Strict({ enabled: Type.Optional(Type.Boolean()), labels: Type.Optional(StringMap) })),
    }),
  ),
  global: Type.Optional(
    Strict({
      extensions: Type.Optional(
        Strict({
          extAuth: Type.Optional(
            Strict({
              plugins: Type.Optional(Type.Record(Type.String({ minLength: 1 }), Strict({ image: Image }))),
            }),
          ),
        }),
      ),
    }),
  ),
});
export type Values = Type.Static<typeof ValuesSchema>;

const check = Schema.Compile(ValuesSchema);

/** Values with every default filled in: what the renderer reads. */
type PullPolicy = 'Always' | 'IfNotPresent' | 'Never';

export interface ResolvedValues {
  namespace: string;
  createNamespace: boolean;
  apiGroupDomain: string;
  createCrds: boolean;
  createRbac: boolean;
  gatewayVersion: string;
  image: { registry: string; repository: string; tag: string; pullPolicy: PullPolicy };
  imagePullSecrets: string[];
  /** `namespaces` (kube source): empty means all. */
  config: { source: 'configMap' | 'kube'; configMapName: string; configMapData: Record<string, string>; namespaces: string[] };
  gateway: PodValues & {
    workers: string;
    serviceType: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
    servicePort: number;
    serviceAnnotations: Record<string, string>;
    /** externalTrafficPolicy, nodePorts, loadBalancer*: only those given. */
    serviceExtras: { externalTrafficPolicy?: 'Cluster' | 'Local'; nodePorts: { http?: number; https?: number }; loadBalancerIP?: string; loadBalancerClass?: string; loadBalancerSourceRanges: string[] };
    tlsSecrets: { name: string; mountPath: string }[];
  };
  extauth: PodValues & {
    /** The caller token Secret (key `token`) both Deployments mount; `create`: rendered with a fresh random token. */
    callerToken: { enabled: boolean; secretName: string; create: boolean };
  };
  metrics: { serviceMonitor: { enabled: boolean; interval: string; labels: Record<string, string> }; dashboard: { enabled: boolean; labels: Record<string, string> } };
  /** Plugin images by container-safe key, in key order. */
  plugins: { key: string; name: string; image: string; tag: string; pullPolicy: PullPolicy }[];
}

/** What both Deployments take (values.ts podKnobs), defaults filled in. */
export interface PodValues {
  replicas: number;
  resources: Record<string, unknown>;
  extraArgs: string[];
  extraEnv: unknown[];
  extraVolumes: unknown[];
  extraVolumeMounts: unknown[];
  podAnnotations: Record<string, string>;
  podLabels: Record<string, string>;
  nodeSelector: Record<string, string>;
  tolerations: Record<string, unknown>[];
  affinity: Record<string, unknown>;
  topologySpreadConstraints: Record<string, unknown>[];
  priorityClassName: string;
  podSecurityContext: Record<string, unknown>;
  containerSecurityContext: Record<string, unknown>;
  updateStrategy: Record<string, unknown>;
  terminationGracePeriodSeconds: number;
  preStopSleepSeconds: number;
  /** `create` with neither bound given: maxUnavailable 1. */
  pdb: { create: boolean; minAvailable?: number | string; maxUnavailable?: number | string };
  /** `enabled`: a HorizontalPodAutoscaler, and the Deployment leaves `replicas` to it. */
  autoscaling: { enabled: boolean; minReplicas: number; maxReplicas: number; targetCPUUtilizationPercentage?: number; targetMemoryUtilizationPercentage?: number };
}

/**
 * Per-component defaults (values.yaml holds the same). extauth runs two replicas behind a PDB: it
 * fails closed, so one pod going away must not deny requests (issue 27). Requests by default, so
 * that the pods are not BestEffort (first evicted); no limits, which would throttle a burst.
 */
export const POD_DEFAULTS = {
  gateway: { replicas: 1, requests: { cpu: '100m', memory: '128Mi' }, pdb: false, minReplicas: 1 },
  extauth: { replicas: 2, requests: { cpu: '100m', memory: '192Mi' }, pdb: true, minReplicas: 2 },
} as const;

export const DEFAULT_REGISTRY = 'ghcr.io/gatehouse';
/** The Secret holding the generated ext_authz caller token (key `token`). */
export const CALLER_TOKEN_SECRET = 'extauth-caller-token';
/** Where `gateway.tlsSecrets[].name` is mounted unless `mountPath` is given. */
export const TLS_MOUNT_ROOT = '/etc/gatehouse/tls';

/** Reads and validates a values file (YAML or JSON). */
export async function loadValues(file: string, gatewayVersion: string): Promise<ResolvedValues> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new GatehouseError(InstallCodes.VALUES_UNREADABLE, `cannot read --values ${file}: ${(error as Error).message}`);
  }
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs) || docs.length > 1) throw new GatehouseError(InstallCodes.VALUES_UNREADABLE, `${file}: a values file holds one YAML document`);
  const doc = docs[0];
  if (doc && doc.errors.length > 0) throw new GatehouseError(InstallCodes.VALUES_UNREADABLE, `${file}: ${doc.errors[0]!.message}`);
  return resolveValues(doc?.toJS() ?? {}, gatewayVersion, file);
}

/** Validates values (unknown keys are errors, with their path) and fills in defaults. */
export function resolveValues(input: unknown, gatewayVersion: string, where = 'values'): ResolvedValues {
  const raw = input ?? {};
  if (!check.Check(raw)) {
    const [, errors] = check.Errors(raw) as unknown as [boolean, { instancePath: string; keyword: string; message: string; params: Record<string, unknown> }[]];
    const problems = errors
      .filter((e) => !/\/(anyOf|oneOf)\//.test(e.instancePath))
      .map((e) => {
        const path = e.instancePath.split('/').slice(1).join('.') || '(top level)';
        if (e.keyword === 'additionalProperties') return `${path === '(top level)' ? '' : `${path}.`}${((e.params.additionalProperties as string[]) ?? []).join(', ')}: unknown key`;
        return `${path}: ${e.message}`;
      });
    throw new GatehouseError(InstallCodes.VALUES_INVALID, `${where}: ${[...new Set(problems)].join('; ')}`);
  }
  const v = raw as Values;
  const tag = v.image?.tag ?? gatewayVersion;
  const plugins: ResolvedValues['plugins'] = [];
  const seen = new Map<string, string>();
  for (const [key, entry] of Object.entries(v.global?.extensions?.extAuth?.plugins ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const name = containerKey(key);
    const at = `global.extensions.extAuth.plugins.${key}`;
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name) || name.length > 56) {
      throw new GatehouseError(InstallCodes.VALUES_INVALID, `${where}: ${at}: the key must make a container name "plugin-<key>" (letters, digits and "-", at most 56 characters)`);
    }
    if (seen.has(name)) throw new GatehouseError(InstallCodes.VALUES_INVALID, `${where}: ${at}: keys ${seen.get(name)} and ${key} both make the container name plugin-${name}`);
    seen.set(name, key);
    if (!entry.image.repository) throw new GatehouseError(InstallCodes.VALUES_INVALID, `${where}: ${at}.image.repository is required`);
    const pluginTag = entry.image.tag ?? tag;
    if (pluginTag !== tag) {
      throw new GatehouseError(InstallCodes.PLUGIN_TAG, `${where}: ${at}.image.tag ${pluginTag} does not match gateway version ${tag}; rebuild the plugin image for ${tag} (plugins are rebuilt and re-tagged for every gateway version)`);
    }
    const registry = entry.image.registry ?? v.image?.registry ?? DEFAULT_REGISTRY;
    plugins.push({ key, name: `plugin-${name}`, image: `${registry}/${entry.image.repository}:${pluginTag}`, tag: pluginTag, pullPolicy: entry.image.pullPolicy ?? 'IfNotPresent' });
  }
  const tlsSecrets = (v.gateway?.tlsSecrets ?? []).map((t) => ({ name: t.name, mountPath: t.mountPath ?? `${TLS_MOUNT_ROOT}/${t.name}` }));
  tlsSecrets.forEach((t, i) => {
    const first = tlsSecrets.findIndex((o) => o.mountPath === t.mountPath);
    if (first !== i) throw new GatehouseError(InstallCodes.VALUES_INVALID, `${where}: gateway.tlsSecrets.${i}: mount path ${t.mountPath} is already used by gateway.tlsSecrets.${first}`);
  });
  return {
    namespace: v.namespace ?? 'gatehouse-system',
    createNamespace: v.createNamespace ?? true,
    apiGroupDomain: v.apiGroupDomain ?? DEFAULT_API_GROUP_DOMAIN,
    createCrds: v.crds?.create ?? true,
    createRbac: v.rbac?.create ?? true,
    gatewayVersion: tag,
    image: { registry: v.image?.registry ?? DEFAULT_REGISTRY, repository: v.image?.repository ?? 'gatehouse', tag, pullPolicy: v.image?.pullPolicy ?? 'IfNotPresent' },
    imagePullSecrets: v.imagePullSecrets ?? [],
    config: {
      source: v.config?.source ?? 'kube',
      configMapName: v.config?.configMap?.name ?? 'gatehouse-config',
      configMapData: v.config?.configMap?.data ?? {},
      namespaces: v.config?.kube?.namespaces ?? [],
    },
    gateway: {
      ...podValues(v.gateway ?? {}, 'gateway', where),
      workers: String(v.gateway?.workers ?? 1),
      serviceType: v.gateway?.service?.type ?? 'ClusterIP',
      servicePort: v.gateway?.service?.port ?? 80,
      serviceAnnotations: v.gateway?.service?.annotations ?? {},
      serviceExtras: {
        ...(v.gateway?.service?.externalTrafficPolicy ? { externalTrafficPolicy: v.gateway.service.externalTrafficPolicy } : {}),
        nodePorts: v.gateway?.service?.nodePorts ?? {},
        ...(v.gateway?.service?.loadBalancerIP ? { loadBalancerIP: v.gateway.service.loadBalancerIP } : {}),
        ...(v.gateway?.service?.loadBalancerClass ? { loadBalancerClass: v.gateway.service.loadBalancerClass } : {}),
        loadBalancerSourceRanges: v.gateway?.service?.loadBalancerSourceRanges ?? [],
      },
      tlsSecrets,
    },
    extauth: {
      ...podValues(v.extauth ?? {}, 'extauth', where),
      callerToken: {
        enabled: v.extauth?.callerToken?.enabled ?? true,
        secretName: v.extauth?.callerToken?.existingSecret ?? CALLER_TOKEN_SECRET,
        create: (v.extauth?.callerToken?.enabled ?? true) && v.extauth?.callerToken?.existingSecret === undefined,
      },
    },
    metrics: {
      serviceMonitor: { enabled: v.metrics?.serviceMonitor?.enabled ?? false, interval: v.metrics?.serviceMonitor?.interval ?? '30s', labels: v.metrics?.serviceMonitor?.labels ?? {} },
      // grafana_dashboard: "1" is what Grafana's dashboard sidecar (kube-prometheus-stack) looks for.
      dashboard: { enabled: v.metrics?.dashboard?.enabled ?? false, labels: coalesce({ grafana_dashboard: '1' }, v.metrics?.dashboard?.labels ?? {}) as Record<string, string> },
    },
    plugins,
  };
}

type PodInput = NonNullable<Values['gateway']> | Omit<NonNullable<Values['extauth']>, 'callerToken'>;

/** The pod knobs of one component with its defaults; the PDB and HPA rules Kubernetes would refuse later. */
function podValues(input: PodInput, component: 'gateway' | 'extauth', where: string): PodValues {
  const defaults = POD_DEFAULTS[component];
  const pdb = { create: input.pdb?.create ?? defaults.pdb, ...(input.pdb?.minAvailable !== undefined ? { minAvailable: input.pdb.minAvailable } : {}), ...(input.pdb?.maxUnavailable !== undefined ? { maxUnavailable: input.pdb.maxUnavailable } : {}) };
  if (pdb.create && pdb.minAvailable !== undefined && pdb.maxUnavailable !== undefined) {
    throw new GatehouseError(InstallCodes.VALUES_INVALID, `${where}: ${component}.pdb: set minAvailable or maxUnavailable, not both`);
  }
  const a = input.autoscaling ?? {};
  const autoscaling = {
    enabled: a.enabled ?? false,
    minReplicas: a.minReplicas ?? defaults.minReplicas,
    maxReplicas: a.maxReplicas ?? 5,
    targetCPUUtilizationPercentage: a.targetCPUUtilizationPercentage ?? 80,
    ...(a.targetMemoryUtilizationPercentage !== undefined ? { targetMemoryUtilizationPercentage: a.targetMemoryUtilizationPercentage } : {}),
  };
  if (autoscaling.enabled && autoscaling.minReplicas > autoscaling.maxReplicas) {
    throw new GatehouseError(InstallCodes.VALUES_INVALID, `${where}: ${component}.autoscaling: minReplicas ${autoscaling.minReplicas} is more than maxReplicas ${autoscaling.maxReplicas}`);
  }
  return {
    replicas: input.replicas ?? defaults.replicas,
    // Merged over the default requests as Helm merges a values file over values.yaml (null removes a key).
    resources: coalesce({ requests: defaults.requests }, input.resources ?? {}),
    extraArgs: input.extraArgs ?? [],
    extraEnv: input.extraEnv ?? [],
    extraVolumes: input.extraVolumes ?? [],
    extraVolumeMounts: input.extraVolumeMounts ?? [],
    podAnnotations: input.podAnnotations ?? {},
    podLabels: input.podLabels ?? {},
    nodeSelector: input.nodeSelector ?? {},
    tolerations: input.tolerations ?? [],
    affinity: input.affinity ?? {},
    topologySpreadConstraints: input.topologySpreadConstraints ?? [],
    priorityClassName: input.priorityClassName ?? '',
    podSecurityContext: input.podSecurityContext ?? {},
    containerSecurityContext: input.containerSecurityContext ?? {},
    updateStrategy: input.updateStrategy ?? {},
    terminationGracePeriodSeconds: input.terminationGracePeriodSeconds ?? 40,
    preStopSleepSeconds: input.preStopSleepSeconds ?? 5,
    pdb,
    autoscaling,
  };
}

const isPlainObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/** Helm's coalescing of a values file over the chart's defaults: maps merge, null deletes, anything else replaces. */
export function coalesce(defaults: Record<string, unknown>, input: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...defaults };
  for (const [key, value] of Object.entries(input)) {
    if (value === null) delete out[key];
    else if (isPlainObject(value) && isPlainObject(out[key])) out[key] = coalesce(out[key] as Record<string, unknown>, value);
    else out[key] = value;
  }
  return out;
}

/** `RequiredHeader` → `required-header`, `my_plugin` → `my-plugin`: a key as a container-name part. */
export function containerKey(key: string): string {
  return key
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    // Spelled out rather than \s, whose meaning differs between JavaScript and Go (the Helm chart does the same).
    .replace(/[_.\t\n\f\r ]+/g, '-')
    .toLowerCase();
}

/** ValuesSchema as plain JSON Schema: the Helm chart's values.schema.json (test/helm checks the committed copy). */
export function valuesJsonSchema(): string {
  const schema = { title: 'Gatehouse install values (gatehouse install render --values, and this chart)', ...(JSON.parse(JSON.stringify(ValuesSchema)) as object) };
  return `${JSON.stringify(schema, null, 2)}\n`;
}
