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

const Service = Strict({
  type: Type.Optional(Type.Union([Type.Literal('ClusterIP'), Type.Literal('NodePort'), Type.Literal('LoadBalancer')])),
  port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
  annotations: Type.Optional(Type.Record(Type.String(), Type.String())),
});

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
      replicas: Type.Optional(Type.Integer({ minimum: 0 })),
      workers: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Literal('auto')])),
      service: Type.Optional(Service),
      resources: Type.Optional(Resources),
      extraArgs: Type.Optional(Type.Array(Type.String())),
      // kubernetes.io/tls Secrets mounted read-only for VirtualServices' sslConfig.sslFiles.
      tlsSecrets: Type.Optional(Type.Array(Strict({ name: DnsSubdomain, mountPath: Type.Optional(Type.String({ pattern: '^/' })) }))),
    }),
  ),
  extauth: Type.Optional(
    Strict({
      replicas: Type.Optional(Type.Integer({ minimum: 0 })),
      resources: Type.Optional(Resources),
      extraArgs: Type.Optional(Type.Array(Type.String())),
      // The ext_authz caller token (docs/auth.md#callers): on by default; a Secret of yours (key `token`) instead of a generated one.
      callerToken: Type.Optional(Strict({ enabled: Type.Optional(Type.Boolean()), existingSecret: Type.Optional(DnsSubdomain) })),
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
  gateway: {
    replicas: number;
    workers: string;
    serviceType: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
    servicePort: number;
    serviceAnnotations: Record<string, string>;
    resources: Record<string, unknown>;
    extraArgs: string[];
    tlsSecrets: { name: string; mountPath: string }[];
  };
  extauth: {
    replicas: number;
    resources: Record<string, unknown>;
    extraArgs: string[];
    /** The caller token Secret (key `token`) both Deployments mount; `create`: rendered with a fresh random token. */
    callerToken: { enabled: boolean; secretName: string; create: boolean };
  };
  /** Plugin images by container-safe key, in key order. */
  plugins: { key: string; name: string; image: string; tag: string; pullPolicy: PullPolicy }[];
}

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
      source: v.config?.source ?? 'configMap',
      configMapName: v.config?.configMap?.name ?? 'gatehouse-config',
      configMapData: v.config?.configMap?.data ?? {},
      namespaces: v.config?.kube?.namespaces ?? [],
    },
    gateway: {
      replicas: v.gateway?.replicas ?? 1,
      workers: String(v.gateway?.workers ?? 1),
      serviceType: v.gateway?.service?.type ?? 'ClusterIP',
      servicePort: v.gateway?.service?.port ?? 80,
      serviceAnnotations: v.gateway?.service?.annotations ?? {},
      resources: v.gateway?.resources ?? {},
      extraArgs: v.gateway?.extraArgs ?? [],
      tlsSecrets,
    },
    extauth: {
      replicas: v.extauth?.replicas ?? 1,
      resources: v.extauth?.resources ?? {},
      extraArgs: v.extauth?.extraArgs ?? [],
      callerToken: {
        enabled: v.extauth?.callerToken?.enabled ?? true,
        secretName: v.extauth?.callerToken?.existingSecret ?? CALLER_TOKEN_SECRET,
        create: (v.extauth?.callerToken?.enabled ?? true) && v.extauth?.callerToken?.existingSecret === undefined,
      },
    },
    plugins,
  };
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
