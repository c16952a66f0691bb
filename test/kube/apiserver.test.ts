/**
 * The harness itself (apiserver.ts): a real etcd + kube-apiserver pair that client-node can
 * use through the kubeconfig it writes, RBAC enforced for the limited user, data kept across
 * an API server restart on the same URL, and nothing left running after stop().
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import * as k8s from '@kubernetes/client-node';
import { eventually } from '../support/http.ts';
import { LIMITED_USER, startKubeApiServer, type KubeApiServer } from './apiserver.ts';
import { describeWithKube } from './describe-with-kube.ts';

describeWithKube('kube-apiserver harness (test/kube/apiserver.ts)', 'test/kube/apiserver.test.ts', (binaries) => {
  let kube: KubeApiServer;

  beforeAll(async () => {
    kube = await startKubeApiServer({ binaries });
  }, 120_000);
  afterAll(async () => {
    await kube?.stop();
  });

  it('serves client-node through its kubeconfig, as the admin', async () => {
    const config = new k8s.KubeConfig();
    config.loadFromFile(kube.kubeconfig);
    expect(config.getCurrentCluster()?.server).toBe(kube.url);
    const core = config.makeApiClient(k8s.CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: 'harness' } } });
    await core.createNamespacedConfigMap({ namespace: 'harness', body: { metadata: { name: 'settings' }, data: { mode: 'strict' } } });
    const read = await core.readNamespacedConfigMap({ namespace: 'harness', name: 'settings' });
    expect(read.data).toEqual({ mode: 'strict' });
    const version = (await kube.request('GET', '/version')).json as { gitVersion: string };
    expect(version.gitVersion).toMatch(/^v1\.\d+\.\d+$/);
  });

  it('enforces RBAC for the limited user until a role is bound to it', async () => {
    const config = new k8s.KubeConfig();
    config.loadFromFile(kube.limitedKubeconfig);
    const core = config.makeApiClient(k8s.CoreV1Api);
    const list = () => core.listNamespacedConfigMap({ namespace: 'harness' }).then((l) => l.items.map((c) => c.metadata?.name), (error: { code?: number }) => error.code);
    expect(await list()).toBe(403);
    await kube.apply({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'read-configmaps', namespace: 'harness' }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }] });
    await kube.apply({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'read-configmaps', namespace: 'harness' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'read-configmaps' }, subjects: [{ kind: 'User', name: LIMITED_USER, apiGroup: 'rbac.authorization.k8s.io' }] });
    expect(await list()).toContain('settings');
    // Still nothing beyond the role: no writes, no other namespace.
    const write = await core.deleteNamespacedConfigMap({ namespace: 'harness', name: 'settings' }).then(() => 200, (error: { code?: number }) => error.code);
    expect(write).toBe(403);
  });

  it('admits a Pod with no ServiceAccount controller running (ServiceAccount admission off)', async () => {
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', namespace: 'harness' }, spec: { containers: [{ name: 'web', image: 'registry.example.com/web:1' }] } };
    const created = await kube.apply(pod);
    expect(created.metadata?.name).toBe('web');
    expect(await kube.get(pod)).toMatchObject({ kind: 'Pod', metadata: { name: 'web' } });
    await kube.delete(pod);
  });

  it('restarts kube-apiserver on the same URL with the data kept in etcd; a watch ends, 410 Expired from the old version, list and watch again', async () => {
    const config = new k8s.KubeConfig();
    config.loadFromFile(kube.kubeconfig);
    await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'restart' } });
    await kube.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'restart' }, data: { mode: 'strict' } });
    const seen: string[] = [];
    let ended: unknown = 'open';
    let lastVersion = '';
    const record = (type: string, object: k8s.V1ConfigMap) => {
      seen.push(`${type} ${object.metadata?.name ?? JSON.stringify(object)}`);
      if (object.metadata?.resourceVersion) lastVersion = object.metadata.resourceVersion;
    };
    // List, then watch from the list's resourceVersion (the informer pattern; see startKubeApiServer on a watch without one).
    const core = config.makeApiClient(k8s.CoreV1Api);
    const listed = await core.listNamespacedConfigMap({ namespace: 'restart' });
    const watch = await new k8s.Watch(config).watch('/api/v1/namespaces/restart/configmaps', { resourceVersion: listed.metadata!.resourceVersion }, record, (error) => (ended = error ?? 'closed'));
    await core.createNamespacedConfigMap({ namespace: 'restart', body: { metadata: { name: 'later' } } });
    await eventually(async () => seen.includes('ADDED later')).catch((error: Error) => {
      throw new Error(`${error.message}; seen ${JSON.stringify(seen)}, ended ${String(ended)}`);
    });

    await kube.restart();
    // The restart ends every watch: clients must notice and list/watch again.
    await eventually(async () => ended !== 'open', 30_000);
    watch.abort();
    // The new API server's watch cache starts at the current revision: a watch from a version
    // before it answers 410 Expired, so clients list again (the "resync on 410 Gone" path).
    await core.createNamespacedConfigMap({ namespace: 'restart', body: { metadata: { name: 'after-restart' } } });
    const expired = await new k8s.Watch(config).watch('/api/v1/namespaces/restart/configmaps', { resourceVersion: lastVersion }, record, () => {});
    await eventually(async () => seen.some((e) => e.startsWith('ERROR') && e.includes('"code":410')));
    expired.abort();
    const relisted = await core.listNamespacedConfigMap({ namespace: 'restart' });
    expect(relisted.items.map((c) => c.metadata?.name).sort()).toEqual(['after-restart', 'later', 'settings']);
    expect(await kube.get({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'restart' } })).toMatchObject({ data: { mode: 'strict' } });
    const resumed = await new k8s.Watch(config).watch('/api/v1/namespaces/restart/configmaps', { resourceVersion: relisted.metadata!.resourceVersion }, record, () => {});
    await core.deleteNamespacedConfigMap({ namespace: 'restart', name: 'later' });
    await eventually(async () => seen.includes('DELETED later'));
    resumed.abort();
    expect(seen.filter((e) => e === 'ADDED later')).toHaveLength(1);
  }, 120_000);

  it('stop() leaves nothing behind: the port refuses connections and the temporary files are gone', async () => {
    const other = await startKubeApiServer({ binaries });
    expect(existsSync(other.kubeconfig)).toBe(true);
    expect((await other.request('GET', '/readyz')).status).toBe(200);
    await other.stop();
    expect(existsSync(other.kubeconfig)).toBe(false);
    const after = await other.request('GET', '/readyz').then((a) => a.status, (error: NodeJS.ErrnoException) => error.code);
    expect(after).toBe('ECONNREFUSED');
  }, 120_000);
});
