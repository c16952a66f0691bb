/**
 * Issue 24, findings 7 and 10, against a real kube-apiserver + etcd with `gatehouse run --kube`:
 * a Secret of another namespace is never read without its grant; a verdict someone else
 * overwrote in `status` is written again; a rejection quoting a huge field still gets a
 * (bounded) status and bounded log lines.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { renderCrds } from '../../core/src/install/crds.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';
import { startKubeApiServer, type KubeApiServer, type KubeObject } from './apiserver.ts';
import { describeWithKube } from './describe-with-kube.ts';

const TENANT = 'tenant';
const VAULT = 'vault';
const DB_PASSWORD = 'db-password-kube-Q93nd1';

type WithStatus = KubeObject & { status?: { state?: string; reason?: string; serving?: string } };

const upstream = (port: number): KubeObject => ({ apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo', namespace: TENANT }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } } });
const virtualService = (name: string, domain: string, extra: { options?: object; routes?: object[] } = {}): KubeObject => ({
  apiVersion: 'gateway.gatehouse.dev/v1',
  kind: 'VirtualService',
  metadata: { name, namespace: TENANT },
  spec: { virtualHost: { domains: [domain], ...(extra.options ? { options: extra.options } : {}), routes: extra.routes ?? [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] } },
});
const secret = (namespace: string, name: string, stringData: Record<string, string>, annotations?: Record<string, string>): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name, namespace, ...(annotations ? { annotations } : {}) },
  stringData,
} as KubeObject);
const addSecretHeaders = (namespace: string, name: string) => ({ headerManipulation: { responseHeadersToAdd: [{ headerSecretRef: { name, namespace } }] } });

describeWithKube('status and tenancy against a real API server', 'test/kube/status-tenancy.test.ts', (binaries) => {
  let kube: KubeApiServer;
  let echo: TestServer;
  let gatehouse: GatehouseProcess;

  const statusOf = async (name: string) => (await kube.get<WithStatus>(virtualService(name, '')))?.status;

  beforeAll(async () => {
    [kube, echo] = await Promise.all([startKubeApiServer({ binaries }), startEcho('echo')]);
    for (const ns of [TENANT, VAULT]) await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    for (const crd of renderCrds('gatehouse.dev', {})) {
      await kube.apply(crd as unknown as KubeObject);
      await kube.waitForCrd(crd.metadata!.name!);
    }
    await kube.apply(upstream(echo.port));
    await kube.apply(secret(VAULT, 'db', { 'x-db-password': DB_PASSWORD }));
    await kube.apply(secret(VAULT, 'partner', { 'x-partner-token': 'shared-token-2' }, { 'gatehouse.dev/allow-references-from': TENANT }));
    await kube.apply(virtualService('steal', 'steal.test', { options: addSecretHeaders(VAULT, 'db') }));
    await kube.apply(virtualService('shared', 'shared.test', { options: addSecretHeaders(VAULT, 'partner') }));
    gatehouse = await startGatehouse('run', ['--kube', '--kubeconfig', kube.kubeconfig], { env: { POD_NAME: 'gatehouse-0', POD_NAMESPACE: TENANT }, timeoutMs: 60_000 });
  }, 180_000);

  afterAll(async () => {
    await gatehouse?.stop();
    await Promise.all([kube?.stop(), echo?.close()]);
  });

  it("a VirtualService reading another namespace's Secret without its grant is Rejected in status, and the value never reaches a response", async () => {
    const rejected = await eventually(async () => ((await statusOf('steal'))?.state === 'Rejected' ? statusOf('steal') : undefined), 20_000);
    expect(rejected!.reason).toContain('GH_CONFIG_CROSS_NAMESPACE_REF');
    expect(rejected!.reason).toContain('spec.virtualHost.options.headerManipulation.responseHeadersToAdd[0].headerSecretRef');
    const reply = await send(gatehouse.url, { headers: { host: 'steal.test' } });
    expect(JSON.stringify(reply.rawHeaders) + reply.body).not.toContain(DB_PASSWORD);
    // The granted one is read.
    await eventually(async () => (await send(gatehouse.url, { headers: { host: 'shared.test' } })).headers['x-partner-token'] === 'shared-token-2', 20_000);
    // The refused Secret's value was never even part of the configuration the process holds.
    const config = (await send(gatehouse.adminUrl, { path: '/config' })).body;
    expect(config).not.toContain(DB_PASSWORD);
  }, 60_000);

  it('writes a Rejected verdict again when someone with /status access overwrites it with Accepted', async () => {
    await eventually(async () => (await statusOf('steal'))?.state === 'Rejected', 20_000);
    const path = `/apis/gateway.gatehouse.dev/v1/namespaces/${TENANT}/virtualservices/steal/status`;
    const forged = await kube.request('PATCH', path, { status: { state: 'Accepted', reason: '', serving: 'current' } }, 'application/merge-patch+json');
    expect(forged.status).toBe(200);
    const restored = await eventually(async () => {
      const status = await statusOf('steal');
      return status?.state === 'Rejected' ? status : undefined;
    }, 20_000);
    expect(restored!.reason).toContain('GH_CONFIG_CROSS_NAMESPACE_REF');
  }, 60_000);

  it('a rejection quoting a 900 KB field gets a bounded status, and no log line carries the field', async () => {
    const huge = `(${'a'.repeat(900_000)}`;
    await kube.apply(virtualService('huge', 'huge.test', { routes: [{ matchers: [{ regex: huge }], routeAction: { single: { upstream: { name: 'echo' } } } }] }));
    const status = await eventually(async () => {
      const s = await statusOf('huge');
      return s?.state === 'Rejected' ? s : undefined;
    }, 30_000);
    expect(status!.reason).toContain('spec.virtualHost.routes[0].matchers[0].regex');
    expect(status!.reason!.length).toBeLessThan(8_192);
    const longest = Math.max(...gatehouse.logs.map((l) => JSON.stringify(l).length));
    expect(longest).toBeLessThan(16_384);
  }, 90_000);
});
