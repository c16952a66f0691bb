/**
 * The manifests of `gatehouse install render` and the example configuration against a real
 * kube-apiserver + etcd (see apiserver.ts): the CRDs are accepted and become Established, every
 * other rendered object passes the server's validation and admission (server-side dry run),
 * the structural schemas keep every example manifest as written, and a broken manifest is
 * refused with the path of the offending field.
 */
import { spawnSync } from 'node:child_process';
import { glob, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { KIND_NAMES } from '../../core/src/config/schema/kinds.ts';
import { GATEWAY_VERSION } from '../../core/src/version.ts';
import { KubeError, startKubeApiServer, type KubeApiServer, type KubeObject } from './apiserver.ts';
import { describeWithKube } from './describe-with-kube.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'core/bin/gatehouse.js');

/** Values with three plugin images (two registries, explicit and default pull policies) in their own namespace. */
const PLUGIN_VALUES = {
  namespace: 'edge-auth',
  image: { registry: 'registry.example.com/gatehouse' },
  global: {
    extensions: {
      extAuth: {
        plugins: {
          RequiredHeader: { image: { repository: 'plugins/required-header', tag: GATEWAY_VERSION, pullPolicy: 'Always' } },
          'geo-ip': { image: { registry: 'other.example.com', repository: 'acme/geo-ip' } },
          webhookSignature: { image: { repository: 'plugins/webhook-signature', pullPolicy: 'IfNotPresent' } },
        },
      },
    },
  },
};

describeWithKube('gatehouse install render and the examples on a real kube-apiserver', 'test/kube/crds.test.ts', (binaries) => {
  let kube: KubeApiServer;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gh-kube-crds-'));
    kube = await startKubeApiServer({ binaries });
  }, 120_000);
  afterAll(async () => {
    await kube?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** `gatehouse install render --values FILE` as users run it: the parsed documents. */
  async function render(values: object): Promise<KubeObject[]> {
    const file = join(dir, `values-${Math.random().toString(36).slice(2)}.yaml`);
    await writeFile(file, stringify(values));
    const result = spawnSync(process.execPath, [CLI, 'install', 'render', '--values', file], { encoding: 'utf8', cwd: ROOT, maxBuffer: 64 * 1024 * 1024 });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    return parseAllDocuments(result.stdout).map((d) => d.toJS() as KubeObject);
  }

  /**
   * Creates the CRDs (then waits until Established) and the namespaces for real: the rendered
   * Namespace and any other one a namespaced object names (watched namespaces are the user's).
   * Then every other object must pass a server-side dry run: schema, defaulting, admission.
   */
  async function acceptAll(objects: KubeObject[]): Promise<KubeObject[]> {
    const crds = objects.filter((o) => o.kind === 'CustomResourceDefinition');
    expect(crds.length).toBe(10);
    for (const crd of crds) await kube.apply(crd);
    for (const crd of crds) await kube.waitForCrd(crd.metadata!.name!);
    const namespaces = new Set(objects.filter((o) => o.kind === 'Namespace').map((o) => o.metadata!.name!));
    for (const o of objects) if (o.metadata?.namespace) namespaces.add(o.metadata.namespace);
    for (const name of namespaces) await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });

    const rest = objects.filter((o) => o.kind !== 'CustomResourceDefinition' && o.kind !== 'Namespace');
    expect(rest.map((o) => o.kind)).toEqual(expect.arrayContaining(['ServiceAccount', 'Deployment', 'Service']));
    const admitted: KubeObject[] = [];
    for (const object of rest) {
      const where = `${object.kind}/${object.metadata!.name}`;
      const answer = await kube.apply(object, { dryRun: true });
      expect(answer, where).toMatchObject({ kind: object.kind, metadata: { name: object.metadata!.name } });
      // A dry run stores nothing.
      expect(await kube.get(object), where).toBeUndefined();
      admitted.push(answer);
    }
    return admitted;
  }

  type Pod = { spec: { template: { spec: { initContainers?: { name: string; image: string }[]; containers: { args: string[] }[] } } } };
  const deployment = (objects: KubeObject[], name: string) => objects.find((o) => o.kind === 'Deployment' && o.metadata!.name === name) as unknown as Pod;

  it('accepts everything rendered for default values: CRDs Established, the rest admitted by a server-side dry run', async () => {
    const objects = await render({});
    await acceptAll(objects);
    // The CRDs are real now: their kinds are served under our groups.
    const groups = (await kube.request('GET', '/apis')).json as { groups: { name: string }[] };
    expect(groups.groups.map((g) => g.name)).toEqual(expect.arrayContaining(['gatehouse.gatehouse.dev', 'gateway.gatehouse.dev', 'enterprise.gatehouse.dev', 'graphql.gatehouse.dev', 'ratelimit.gatehouse.dev']));
  });

  it('accepts everything rendered for values with three plugin images (init containers included)', async () => {
    const objects = await render(PLUGIN_VALUES);
    const names = ['plugin-required-header', 'plugin-geo-ip', 'plugin-webhook-signature'];
    expect(deployment(objects, 'extauth').spec.template.spec.initContainers!.map((c) => c.name)).toEqual(names);
    const admitted = await acceptAll(objects);
    // As the server defaulted and admitted it: the init containers, images and order unchanged.
    expect(deployment(admitted, 'extauth').spec.template.spec.initContainers!.map((c) => [c.name, c.image])).toEqual(deployment(objects, 'extauth').spec.template.spec.initContainers!.map((c) => [c.name, c.image]));
  });

  it('accepts the kube config source: a ClusterRole when watching every namespace, a Role per watched namespace otherwise', async () => {
    const cluster = await render({ config: { source: 'kube' } });
    expect(cluster.map((o) => o.kind)).toEqual(expect.arrayContaining(['ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']));
    await acceptAll(cluster);
    const perNamespace = await render({ namespace: 'edge', config: { source: 'kube', kube: { namespaces: ['team-a', 'team-b'] } }, gateway: { tlsSecrets: [{ name: 'shop-tls' }] } });
    expect(perNamespace.filter((o) => o.kind === 'Role').map((o) => o.metadata!.namespace).sort()).toEqual(['edge', 'team-a', 'team-a', 'team-b', 'team-b']);
    expect(perNamespace.some((o) => o.kind === 'ClusterRole')).toBe(false);
    await acceptAll(perNamespace);

    // Created for real, the RBAC grants what the kube source does (SPEC 2.1), where it does, and no more.
    for (const o of perNamespace) if (['ServiceAccount', 'Role', 'RoleBinding'].includes(o.kind)) await kube.apply(o);
    const can = async (component: string, verb: string, namespace: string, group: string, resource: string, subresource = '') => {
      const review = { apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec: { user: `system:serviceaccount:edge:gatehouse-${component}`, resourceAttributes: { verb, namespace, group, resource, subresource } } };
      const answer = await kube.request('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', review);
      expect(answer.status).toBe(201);
      return (answer.json as { status: { allowed: boolean } }).status.allowed;
    };
    expect(await can('gateway', 'watch', 'team-a', 'gateway.gatehouse.dev', 'virtualservices')).toBe(true);
    expect(await can('gateway', 'list', 'team-b', 'gloo.solo.io', 'upstreams')).toBe(true);
    expect(await can('gateway', 'patch', 'team-a', 'gateway.gatehouse.dev', 'virtualservices', 'status')).toBe(true);
    expect(await can('gateway', 'update', 'edge', 'coordination.k8s.io', 'leases')).toBe(true);
    expect(await can('gateway', 'list', 'discovery-elsewhere', 'gateway.gatehouse.dev', 'virtualservices')).toBe(false);
    expect(await can('gateway', 'update', 'team-a', 'gateway.gatehouse.dev', 'virtualservices')).toBe(false);
    expect(await can('extauth', 'list', 'team-b', 'enterprise.gatehouse.dev', 'authconfigs')).toBe(true);
    expect(await can('extauth', 'get', 'team-b', '', 'secrets')).toBe(true);
    // Its build results only (status.extauth; issue 27 item 1), never another kind's status.
    expect(await can('extauth', 'patch', 'team-a', 'enterprise.gatehouse.dev', 'authconfigs', 'status')).toBe(true);
    expect(await can('extauth', 'patch', 'team-a', 'gateway.gatehouse.dev', 'virtualservices', 'status')).toBe(false);
    expect(await can('extauth', 'delete', 'team-a', '', 'secrets')).toBe(false);
  });

  it('stores every example manifest of our kinds exactly as written (no field pruned by the structural schemas)', async () => {
    await acceptAll(await render({}));
    await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'examples' } });
    const kinds = new Set<string>(KIND_NAMES);
    let stored = 0;
    for await (const file of glob('examples/**/*.{yaml,yml}', { cwd: ROOT })) {
      const documents = parseAllDocuments(await readFile(join(ROOT, file), 'utf8')).map((d) => d.toJS() as KubeObject | null);
      for (const document of documents) {
        if (!document || !kinds.has(document.kind)) continue;
        const manifest = { ...document, metadata: { ...document.metadata, namespace: 'examples' } };
        const where = `${relative(ROOT, join(ROOT, file))}: ${document.kind}/${document.metadata?.name}`;
        const created = await kube.apply(manifest).catch((error: Error) => error);
        expect(created, where).not.toBeInstanceOf(Error);
        const back = await kube.get<KubeObject>(manifest);
        expect(back?.spec, where).toEqual(document.spec);
        stored++;
      }
    }
    // examples/quickstart holds Upstreams, VirtualServices, AuthConfigs and GraphQLApis.
    expect(stored).toBeGreaterThanOrEqual(10);
  });

  it('refuses a VirtualService with an unknown field or a wrong type, naming the field path (create and server-side apply)', async () => {
    await acceptAll(await render({}));
    const virtualService = (spec: object): KubeObject => ({ apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name: 'broken', namespace: 'default' }, spec });
    const refusals = async (object: KubeObject) => {
      const refused = (error: unknown) => error as KubeError;
      return {
        create: await kube.create(object, { dryRun: true }).then(() => undefined, refused),
        apply: await kube.apply(object, { dryRun: true }).then(() => undefined, refused),
      };
    };
    const routes = [{ matchers: [{ prefix: '/' }], directResponseAction: { status: 200, body: 'ok' } }];
    expect(await refusals(virtualService({ virtualHost: { domains: ['shop.example.com'], routes } }))).toEqual({ create: undefined, apply: undefined });

    const unknownField = await refusals(virtualService({ virtualHost: { domains: ['shop.example.com'], routes, retryPolicy: {} } }));
    expect(unknownField.create?.status).toBe(400);
    expect(unknownField.create?.message).toContain('unknown field "spec.virtualHost.retryPolicy"');
    expect(unknownField.apply?.message).toContain('.spec.virtualHost.retryPolicy: field not declared in schema');

    const wrongType = await refusals(virtualService({ virtualHost: { domains: 'shop.example.com', routes } }));
    expect(wrongType.create?.status).toBe(422);
    expect(wrongType.create?.message).toContain('spec.virtualHost.domains in body must be of type array');
    // Server-side apply types the patch before validating and answers 500 for a type mismatch,
    // still naming the field.
    expect(wrongType.apply?.message).toContain('.spec.virtualHost.domains: expected list');

    const nested = await refusals(virtualService({ virtualHost: { domains: ['a.example.com'], routes: [{ matchers: [{ prefix: 7 }], directResponseAction: { status: 200 } }] } }));
    expect(nested.create?.status).toBe(422);
    expect(nested.create?.message).toContain('spec.virtualHost.routes[0].matchers[0].prefix in body must be of type string');
    expect(nested.apply?.message).toContain('.spec.virtualHost.routes[0].matchers[0].prefix: expected string');

    // A value validation kept from the config schema: domains are non-empty strings.
    const empty = await refusals(virtualService({ virtualHost: { domains: [''], routes } }));
    expect(empty.create?.status).toBe(422);
    expect(empty.create?.message).toContain('spec.virtualHost.domains[0]');
    expect(empty.apply?.status).toBe(422);
  });

  it('creates CRDs only in the groups of apiGroupDomain: none for Gloo by default; with solo.io only gateway.solo.io and ratelimit.solo.io coincide with Gloo', async () => {
    const groupsOf = (objects: KubeObject[]) => new Set(objects.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => (o.spec as { group: string }).group));
    const objects = await render({});
    expect(groupsOf(objects)).toEqual(new Set(['gatehouse.gatehouse.dev', 'enterprise.gatehouse.dev', 'graphql.gatehouse.dev', 'gateway.gatehouse.dev', 'ratelimit.gatehouse.dev']));
    await acceptAll(objects);
    const glooVirtualService = { apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name: 'gloo', namespace: 'default' }, spec: { virtualHost: { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], directResponseAction: { status: 200 } }] } } };
    const refused = await kube.apply(glooVirtualService, { dryRun: true }).then(() => undefined, (error: unknown) => error as KubeError);
    expect(refused).toBeInstanceOf(KubeError);
    expect(refused!.status).toBe(404);

    // apiGroupDomain solo.io: <group>.solo.io, which is Gloo's own group only for the gateway kinds
    // (Gloo has gloo.solo.io, enterprise.gloo.solo.io and graphql.gloo.solo.io for the others).
    const solo = await render({ apiGroupDomain: 'solo.io', namespace: 'gloo-compat' });
    // ratelimit.solo.io is Gloo's own group for RateLimitConfig (solo-apis), and ours under this domain.
    expect(groupsOf(solo)).toEqual(new Set(['gatehouse.solo.io', 'enterprise.solo.io', 'graphql.solo.io', 'gateway.solo.io', 'ratelimit.solo.io']));
    await acceptAll(solo);
    expect(await kube.apply(glooVirtualService, { dryRun: true })).toMatchObject({ apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService' });
    const glooUpstream = { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'gloo', namespace: 'default' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 80 }] } } };
    expect(await kube.apply(glooUpstream, { dryRun: true }).then(() => undefined, (error: KubeError) => error.status)).toBe(404);
  });
});
