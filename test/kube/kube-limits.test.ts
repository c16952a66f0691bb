/**
 * Issue 24 finding 13 against a real kube-apiserver + etcd: resources from the API server meet
 * the same limits as files (a 200-deep `pluginAuth.config` was Accepted from the cluster while a
 * file stops at 64 levels), are rejected alone with the reason in their status, and the rest of
 * the configuration keeps applying; what a deleted resource held is released.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pluginDir } from '../../core/src/extauth/plugins/test-support.ts';
import { renderCrds } from '../../core/src/install/crds.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';
import { startKubeApiServer, type KubeApiServer, type KubeObject } from './apiserver.ts';
import { describeWithKube } from './describe-with-kube.ts';

const NS = 'gatehouse-limits';

const virtualService = (name: string, domain: string, options?: object): KubeObject => ({
  apiVersion: 'gateway.gatehouse.dev/v1',
  kind: 'VirtualService',
  metadata: { name, namespace: NS },
  spec: { virtualHost: { domains: [domain], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }], ...(options ? { options } : {}) } },
});

/** `{a: {a: … {leaf: true}}}`, `depth` levels. */
function nested(depth: number): object {
  let value: object = { leaf: true };
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

const pluginAuthConfig = (name: string, config: object): KubeObject => ({
  apiVersion: 'enterprise.gatehouse.dev/v1',
  kind: 'AuthConfig',
  metadata: { name, namespace: NS },
  spec: { configs: [{ pluginAuth: { name: 'HostApi', exportedSymbolName: 'Ticker', config } }] },
});

describeWithKube('limits on resources from the Kubernetes API (issue 24 finding 13)', 'test/kube/kube-limits.test.ts', (binaries) => {
  let kube: KubeApiServer;
  let echo: TestServer;
  let gatehouse: GatehouseProcess | undefined;
  let plugins: { dir: string; remove(): Promise<void> };

  beforeAll(async () => {
    [kube, echo, plugins] = await Promise.all([startKubeApiServer({ binaries }), startEcho('echo'), pluginDir([{ entry: new URL('../../core/src/extauth/plugins/fixtures/host-api.ts', import.meta.url), name: 'HostApi' }])]);
    await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    for (const crd of renderCrds('gatehouse.dev', {})) {
      await kube.apply(crd as unknown as KubeObject);
      await kube.waitForCrd(crd.metadata!.name!);
    }
    await kube.apply({ apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo', namespace: NS }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: echo.port }] } } });
    await kube.apply(virtualService('app', 'app.test'));
    gatehouse = await startGatehouse('run', ['--kube', '--kubeconfig', kube.kubeconfig, '--plugin-dir', plugins.dir], { env: { POD_NAME: 'gatehouse-limits-0', POD_NAMESPACE: NS } });
  }, 120_000);

  afterAll(async () => {
    await gatehouse?.stop();
    await Promise.all([kube?.stop(), echo?.close(), plugins?.remove()]);
  });

  const statusOf = async (object: KubeObject) => (await kube.get<KubeObject & { status?: { state?: string; reason?: string } }>(object))?.status;

  it('a pluginAuth.config nested 200 deep is rejected with the file limit, in its status; the rest keeps applying', async () => {
    expect((await send(gatehouse!.url, { headers: { host: 'app.test' } })).status).toBe(200);
    const shallow = pluginAuthConfig('shallow', nested(10));
    const deep = pluginAuthConfig('deep', nested(200));
    await kube.apply(shallow);
    await kube.apply(deep);
    await kube.apply(virtualService('deep', 'deep.test', { extauth: { configRef: { name: 'deep', namespace: NS } } }));
    await kube.apply(virtualService('shallow', 'shallow.test', { extauth: { configRef: { name: 'shallow', namespace: NS } } }));
    const rejected = await eventually(async () => {
      const status = await statusOf(deep);
      return status?.state === 'Rejected' ? status : undefined;
    }, 20_000);
    expect(rejected.reason).toContain('AuthConfig gatehouse-limits/deep: the document is nested deeper than 64 levels [GH_CONFIG_LIMITS]');
    // The shallow one passes the limits and reaches extauth, which builds it: its config is not
    // the plugin's (`gatehouse run --kube` reports build results too), so that is the verdict, not a limit.
    const built = await eventually(async () => {
      const status = (await statusOf(shallow)) as { state?: string; reason?: string; extauth?: { state?: string; reason?: string } } | undefined;
      // Both writers have written: the gateway's verdict and extauth's build result.
      return status?.state && status.extauth?.state ? status : undefined;
    }, 20_000);
    expect(built.extauth!.reason).toContain('GH_PLUGIN_BAD_CONFIG');
    expect(built.reason ?? '').not.toContain('GH_CONFIG_LIMITS');
    // Fail closed: the route that needs the rejected AuthConfig is denied, not served without auth.
    await eventually(async () => (await send(gatehouse!.url, { headers: { host: 'deep.test' } })).status === 403, 20_000);
    // A resource applied afterwards is applied.
    await kube.apply(virtualService('later', 'later.test'));
    await eventually(async () => (await send(gatehouse!.url, { headers: { host: 'later.test' } })).status === 200, 20_000);
    expect((await send(gatehouse!.url, { headers: { host: 'app.test' } })).status).toBe(200);
  }, 60_000);

  it('a map of 60,000 keys is refused as in a file, and its deletion is applied like any change (heap before, with and after it logged)', async () => {
    const heapMb = async () => {
      const text = (await send(gatehouse!.adminUrl, { path: '/metrics' })).body;
      const line = text.split('\n').find((l) => l.startsWith('gatehouse_process_nodejs_heap_size_used_bytes '));
      return Math.round(Number(line?.split(' ').at(-1)) / 1e6);
    };
    const before = await heapMb();
    const wide = pluginAuthConfig('wide', Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`k${i}`, i])));
    await kube.create(wide);
    const rejected = await eventually(async () => {
      const status = await statusOf(wide);
      return status?.state === 'Rejected' ? status : undefined;
    }, 30_000);
    expect(rejected.reason).toContain('AuthConfig gatehouse-limits/wide: a map in the document has 60000 entries, more than 50000 [GH_CONFIG_LIMITS]');
    const loaded = await heapMb();
    await kube.delete(wide);
    // The deletion is a reload like any other: a later resource is applied after it.
    await kube.apply(virtualService('after-delete', 'after-delete.test'));
    await eventually(async () => (await send(gatehouse!.url, { headers: { host: 'after-delete.test' } })).status === 200, 20_000);
    console.log(`kube limits: heap ${before} MB before, ${loaded} MB with the 60,000-key AuthConfig, ${await heapMb()} MB after its deletion`);
    expect((await send(gatehouse!.url, { headers: { host: 'app.test' } })).status).toBe(200);
  }, 60_000);
});
