import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { GATEWAY_VERSION } from '../../core/src/version.ts';
import { helmLint, helmOrSkip, helmTemplate, idsOf, installRender, normalise } from './helm.ts';

const HELM = helmOrSkip('test/helm/helm-template.test.ts');

/** Values files both must render to the same objects. */
const SAME: Record<string, Record<string, unknown>> = {
  defaults: {},
  'a caller token Secret of ones own': { extauth: { callerToken: { existingSecret: 'my-token' } } },
  'no caller token': { extauth: { callerToken: { enabled: false } } },
  plugins: {
    namespace: 'auth',
    image: { registry: 'registry.example.com/gatehouse', pullPolicy: 'Always' },
    imagePullSecrets: ['regcred', 'other'],
    global: {
      extensions: {
        extAuth: {
          plugins: {
            RequiredHeader: { image: { repository: 'plugins/required-header', tag: GATEWAY_VERSION, pullPolicy: 'Always' } },
            'geo-ip': { image: { registry: 'other.example.com', repository: 'acme/geo-ip' } },
            my_plugin2: { image: { repository: 'acme/mine' } },
          },
        },
      },
    },
  },
  'kube, all namespaces': { config: { source: 'kube' } },
  'kube, two namespaces': { namespace: 'edge', config: { source: 'kube', kube: { namespaces: ['team-a', 'edge'] } } },
  'TLS mounts': { gateway: { tlsSecrets: [{ name: 'shop-tls' }, { name: 'api.example.com', mountPath: '/certs/api' }] } },
  'replicas, workers, resources, extraArgs': {
    createNamespace: false,
    gateway: {
      replicas: 3,
      workers: 'auto',
      service: { type: 'LoadBalancer', port: 8000, annotations: { 'service.beta.kubernetes.io/aws-load-balancer-type': 'nlb' } },
      resources: { requests: { cpu: '500m', memory: '256Mi' }, limits: { memory: '1Gi' } },
      extraArgs: ['--log-level', 'debug', 'with "quotes" & <angle>: yes'],
    },
    extauth: { replicas: 0, resources: { limits: { cpu: 2 } }, extraArgs: ['--log-level=warn'] },
  },
  'workers as a number, inline ConfigMap, no RBAC': {
    rbac: { create: false },
    gateway: { workers: 4 },
    config: { configMap: { name: 'routes', data: { 'a.yaml': 'apiVersion: gateway.gatehouse.dev/v1\nkind: VirtualService\n', 'b.json': '{}' } } },
  },
  'the configMap source (no longer the default)': { config: { source: 'configMap' } },
  'a ServiceMonitor and the Grafana dashboard': { metrics: { serviceMonitor: { enabled: true, interval: '15s', labels: { release: 'kube-prometheus-stack' } }, dashboard: { enabled: true, labels: { team: 'edge' } } } },
  'every pod knob, on both components': {
    gateway: {
      replicas: 3,
      resources: { limits: { memory: '512Mi' } },
      extraEnv: [{ name: 'TZ', value: 'UTC' }, { name: 'FROM_SECRET', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }],
      extraVolumes: [{ name: 'extra', configMap: { name: 'extra' } }],
      extraVolumeMounts: [{ name: 'extra', mountPath: '/extra', readOnly: true }],
      podAnnotations: { 'prometheus.io/scrape': 'false', 'example.com/team': 'edge' },
      podLabels: { team: 'edge', 'app.kubernetes.io/name': 'not-ours' },
      nodeSelector: { 'kubernetes.io/os': 'linux' },
      tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'edge', effect: 'NoSchedule' }],
      affinity: { podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [{ weight: 100, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { 'app.kubernetes.io/component': 'gateway' } } } }] } },
      topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway', labelSelector: { matchLabels: { 'app.kubernetes.io/component': 'gateway' } } }],
      priorityClassName: 'system-cluster-critical',
      podSecurityContext: { runAsUser: 20000, fsGroupChangePolicy: 'OnRootMismatch' },
      containerSecurityContext: { readOnlyRootFilesystem: false },
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: '50%' } },
      terminationGracePeriodSeconds: 90,
      preStopSleepSeconds: 15,
      pdb: { create: true, minAvailable: '50%' },
      autoscaling: { enabled: true, minReplicas: 2, maxReplicas: 10, targetMemoryUtilizationPercentage: 70 },
      service: { type: 'NodePort', externalTrafficPolicy: 'Local', nodePorts: { http: 30080 } },
    },
    extauth: {
      resources: { requests: null, limits: { cpu: '1' } },
      podAnnotations: { 'example.com/team': 'auth' },
      preStopSleepSeconds: 0,
      pdb: { maxUnavailable: 0 },
      containerSecurityContext: { runAsNonRoot: false },
      extraEnv: [{ name: 'TZ', value: 'UTC' }],
      autoscaling: { enabled: true, targetCPUUtilizationPercentage: 60 },
    },
    global: { extensions: { extAuth: { plugins: { RequiredHeader: { image: { repository: 'plugins/required-header' } } } } } },
  },
  'a LoadBalancer with its settings; no PDB for extauth': {
    gateway: { service: { type: 'LoadBalancer', externalTrafficPolicy: 'Cluster', nodePorts: { https: 30443 }, loadBalancerIP: '203.0.113.10', loadBalancerClass: 'example.com/lb', loadBalancerSourceRanges: ['10.0.0.0/8'] } },
    extauth: { pdb: { create: false }, replicas: 1 },
  },
  'service settings that only a NodePort or LoadBalancer takes are left out of a ClusterIP Service': {
    gateway: { service: { externalTrafficPolicy: 'Local', nodePorts: { http: 30080 }, loadBalancerIP: '203.0.113.10' } },
  },
  'kube with TLS, plugins and another API group domain (CRDs applied separately)': {
    apiGroupDomain: 'example.org',
    crds: { create: false },
    config: { source: 'kube', kube: { namespaces: ['shop'] } },
    gateway: { tlsSecrets: [{ name: 'shop-tls' }] },
    global: { extensions: { extAuth: { plugins: { RequiredHeader: { image: { repository: 'plugins/required-header' } } } } } },
  },
};

/** Values errors: both refuse them, with the same error code. */
const REFUSED: Record<string, { values: Record<string, unknown>; code: string }> = {
  'a plugin tag that is not the gateway version': { values: { global: { extensions: { extAuth: { plugins: { old: { image: { repository: 'p/old', tag: '0.0.1' } } } } } } }, code: 'GH_INSTALL_PLUGIN_TAG' },
  'a plugin key that makes no container name': { values: { global: { extensions: { extAuth: { plugins: { 'Bad Key!': { image: { repository: 'x' } } } } } } }, code: 'GH_INSTALL_VALUES_INVALID' },
  'two plugin keys making one container name': { values: { global: { extensions: { extAuth: { plugins: { RequiredHeader: { image: { repository: 'a' } }, required_header: { image: { repository: 'b' } } } } } } }, code: 'GH_INSTALL_VALUES_INVALID' },
  'a plugin without repository': { values: { global: { extensions: { extAuth: { plugins: { p: { image: { tag: GATEWAY_VERSION } } } } } } }, code: 'GH_INSTALL_VALUES_INVALID' },
  'a PDB with both bounds': { values: { extauth: { pdb: { minAvailable: 1, maxUnavailable: 1 } } }, code: 'GH_INSTALL_VALUES_INVALID' },
  'an HPA whose minimum is above its maximum': { values: { gateway: { autoscaling: { enabled: true, minReplicas: 6, maxReplicas: 3 } } }, code: 'GH_INSTALL_VALUES_INVALID' },
  'two TLS Secrets on one mount path': { values: { gateway: { tlsSecrets: [{ name: 'a', mountPath: '/certs' }, { name: 'b', mountPath: '/certs' }] } }, code: 'GH_INSTALL_VALUES_INVALID' },
};
/** Refused by the values schema (values.schema.json in Helm, the same schema in install render). */
const SCHEMA_REFUSED: Record<string, Record<string, unknown>> = {
  'an unknown key': { gateway: { replcas: 3 } },
  'a wrong type': { gateway: { replicas: 'two' } },
  'an unknown config source': { config: { source: 'etcd' } },
  'a namespace listed twice': { config: { source: 'kube', kube: { namespaces: ['a', 'a'] } } },
  'a Secret name that is not a DNS name': { gateway: { tlsSecrets: [{ name: 'Shop_TLS' }] } },
  'a PDB bound that is neither a count nor a percentage': { extauth: { pdb: { maxUnavailable: 'half' } } },
  'an unknown externalTrafficPolicy': { gateway: { service: { externalTrafficPolicy: 'Nearest' } } },
  'an unknown pdb key': { extauth: { pdb: { enabled: true } } },
  'tolerations that are not a list': { gateway: { tolerations: { key: 'x' } } },
  'a grace period of 0': { gateway: { terminationGracePeriodSeconds: 0 } },
  'a scrape interval that is not a duration': { metrics: { serviceMonitor: { enabled: true, interval: 'often' } } },
};

describe.skipIf(!HELM)('helm template = gatehouse install render', () => {
  const helm = HELM!;
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gh-helm-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const valuesFile = async (name: string, values: Record<string, unknown>) => {
    const file = join(dir, `${name.replace(/[^a-z0-9]+/gi, '-')}.yaml`);
    await writeFile(file, stringify(values));
    return file;
  };

  it.each(Object.entries(SAME))('%s: the same objects, and helm lint --strict passes', async (name, values) => {
    const file = await valuesFile(name, values);
    const rendered = installRender(file);
    expect(rendered.stderr).toBe('');
    expect(rendered.status).toBe(0);
    // Helm installs crds/ unless --skip-crds, which goes with crds.create=false.
    const templated = helmTemplate(helm, file, (values.crds as { create?: boolean } | undefined)?.create !== false);
    expect(templated.stderr).toBe('');
    expect(templated.status).toBe(0);
    const ours = normalise(rendered.stdout);
    const helms = normalise(templated.stdout);
    expect(idsOf(helms)).toEqual(idsOf(ours));
    expect(ours.length).toBeGreaterThan(4);
    for (let i = 0; i < ours.length; i++) expect(helms[i], idsOf([ours[i]!])[0]).toEqual(ours[i]);
    const lint = helmLint(helm, file);
    expect(lint.stdout + lint.stderr).toContain('0 chart(s) failed');
    expect(lint.status).toBe(0);
  });

  it('Helm adds only its own labels, and keeps them out of selectors', async () => {
    const file = await valuesFile('labels', {});
    const deployment = normalise(helmTemplate(helm, file, false).stdout).find((o) => o.kind === 'Deployment' && o.metadata.name === 'gateway')!;
    const raw = helmTemplate(helm, file, false).stdout;
    expect(raw).toContain('helm.sh/chart: "gatehouse-');
    expect(raw).toContain('app.kubernetes.io/managed-by: "Helm"');
    expect((deployment.spec as { selector: unknown }).selector).toEqual({ matchLabels: { 'app.kubernetes.io/name': 'gatehouse', 'app.kubernetes.io/component': 'gateway' } });
  });

  it.each(Object.entries(REFUSED))('%s: both refuse it with the same code', async (name, { values, code }) => {
    const file = await valuesFile(`refused-${name}`, values);
    const rendered = installRender(file);
    expect(rendered.status).toBe(1);
    expect(rendered.stderr).toContain(`[${code}]`);
    const templated = helmTemplate(helm, file, true);
    expect(templated.status).not.toBe(0);
    expect(templated.stderr).toContain(`[${code}]`);
    // helm lint runs templates in lint mode, where `fail` is reported (as INFO), not fatal.
    const lint = helmLint(helm, file);
    expect(lint.stdout + lint.stderr).toMatch(new RegExp(`Fail: .*\\[${code}\\]`));
  });

  it.each(Object.entries(SCHEMA_REFUSED))('%s: both refuse it through the values schema', async (name, values) => {
    const file = await valuesFile(`schema-${name}`, values);
    const rendered = installRender(file);
    expect(rendered.status).toBe(1);
    expect(rendered.stderr).toContain('[GH_INSTALL_VALUES_INVALID]');
    const templated = helmTemplate(helm, file, true);
    expect(templated.status).not.toBe(0);
    expect(templated.stderr).toContain("values don't meet the specifications of the schema");
    const lint = helmLint(helm, file);
    expect(lint.status).not.toBe(0);
    expect(lint.stdout + lint.stderr).toContain("values don't meet the specifications of the schema");
  });

  it('the chart alone refuses another API group domain while it would install crds/ (the gatehouse.dev groups)', async () => {
    const file = await valuesFile('domain', { apiGroupDomain: 'example.org' });
    expect(installRender(file).status).toBe(0);
    const templated = helmTemplate(helm, file, true);
    expect(templated.status).not.toBe(0);
    expect(templated.stderr).toContain('gatehouse install crds --api-group-domain example.org');
  });
});
