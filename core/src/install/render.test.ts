import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
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
  'apps/v1/Deployment': Deployment,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
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

const find = <T>(objects: KubeObject[], kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata?.name === name) as T;

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
  it('renders namespace, CRDs, RBAC, gateway and extauth, all valid Kubernetes objects', () => {
    const objects = renderInstall(resolveValues({}, GATEWAY_VERSION));
    expect(objects.map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual([
      'Namespace/gatehouse-system',
      'CustomResourceDefinition/upstreams.gatehouse.gatehouse.dev',
      'CustomResourceDefinition/upstreamgroups.gatehouse.gatehouse.dev',
      'CustomResourceDefinition/authconfigs.enterprise.gatehouse.dev',
      'CustomResourceDefinition/graphqlapis.graphql.gatehouse.dev',
      'CustomResourceDefinition/routetables.gateway.gatehouse.dev',
      'CustomResourceDefinition/virtualservices.gateway.gatehouse.dev',
      'ServiceAccount/gatehouse-gateway',
      'ClusterRole/gatehouse:gatehouse-system:gateway',
      'ClusterRoleBinding/gatehouse:gatehouse-system:gateway',
      'ServiceAccount/gatehouse-extauth',
      'ClusterRole/gatehouse:gatehouse-system:extauth',
      'ClusterRoleBinding/gatehouse:gatehouse-system:extauth',
      'Deployment/gateway',
      'Service/gateway',
      'Service/gateway-admin',
      'Deployment/extauth',
      'Service/extauth',
    ]);
    validateAll(objects);
    const gateway = find<IDeployment>(objects, 'Deployment', 'gateway').spec!.template.spec!.containers[0]!;
    expect(gateway.image).toBe(`ghcr.io/gatehouse/gatehouse:${GATEWAY_VERSION}`);
    expect(gateway.args).toEqual(expect.arrayContaining(['gateway', '--extauth-address', 'extauth.gatehouse-system.svc:8083', '--config-dir', '/etc/gatehouse/config']));
    expect(gateway.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'admin' });
  });

  it('runs extauth on gRPC 8083 behind a Service named extauth', () => {
    const objects = renderInstall(resolveValues({}, GATEWAY_VERSION));
    const extauth = find<IDeployment>(objects, 'Deployment', 'extauth');
    const container = extauth.spec!.template.spec!.containers[0]!;
    expect(container.ports).toEqual([{ name: 'grpc', containerPort: 8083, protocol: 'TCP' }]);
    expect(container.args?.slice(0, 1)).toEqual(['extauth']);
    expect(container.readinessProbe?.grpc).toEqual({ port: 8083 });
    expect(extauth.spec!.template.spec!.initContainers).toBeUndefined();
    expect(find<IService>(objects, 'Service', 'extauth').spec!.ports).toEqual([{ name: 'grpc', port: 8083, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' }]);
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

  it('refuses the Kubernetes source, which the gateway does not have yet, and creates the ConfigMap only when asked', () => {
    expect(() => resolveValues({ config: { source: 'kube' } }, GATEWAY_VERSION)).toThrow(/config\.source/);
    const inline = renderInstall(resolveValues({ config: { configMap: { name: 'routes', data: { 'a.yaml': 'kind: Upstream' } } } }, GATEWAY_VERSION));
    validateAll(inline);
    expect(find<{ data: Record<string, string> }>(inline, 'ConfigMap', 'routes').data).toEqual({ 'a.yaml': 'kind: Upstream' });
    const args = find<IDeployment>(inline, 'Deployment', 'gateway').spec!.template.spec!.containers[0]!.args!;
    expect(args).toEqual(expect.arrayContaining(['--config-dir']));
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
  const render = (...args: string[]) => spawnSync(process.execPath, [join(root, 'core/bin/gatehouse.js'), 'install', ...args], { encoding: 'utf8', cwd: root });

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
