/**
 * `--kube` (SPEC 2.1, issue 13 item 1) against a real kube-apiserver + etcd: resources applied
 * to the cluster are served, rejected versions keep the last good one serving with the verdict
 * in `status`, deletes stop serving, Secret and EndpointSlice changes apply live, an API server
 * restart never stops serving, and of two replicas exactly one writes status.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pluginDir } from '../../core/src/extauth/plugins/test-support.ts';
import { renderCrds } from '../../core/src/install/crds.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { startKubeApiServer, type KubeApiServer, type KubeObject } from './apiserver.ts';
import { describeWithKube } from './describe-with-kube.ts';

const NS = 'gatehouse-e2e';

const upstream = (name: string, port: number): KubeObject => ({
  apiVersion: 'gatehouse.gatehouse.dev/v1',
  kind: 'Upstream',
  metadata: { name, namespace: NS },
  spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } },
});
const virtualService = (name: string, domain: string, routes: object[], options?: object): KubeObject => ({
  apiVersion: 'gateway.gatehouse.dev/v1',
  kind: 'VirtualService',
  metadata: { name, namespace: NS },
  spec: { virtualHost: { domains: [domain], routes, ...(options ? { options } : {}) } },
});
const toUpstream = (name: string, extra: object = {}) => ({ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name } } }, ...extra });

async function metric(process: GatehouseProcess, name: string): Promise<number> {
  const text = (await send(process.adminUrl, { path: '/metrics' })).body;
  const line = text.split('\n').find((l) => l.startsWith(name + ' ') || l.startsWith(name + '{'));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describeWithKube('the kube config source against a real API server', 'test/kube/kube-source.test.ts', (binaries) => {
  let kube: KubeApiServer;
  let a: TestServer;
  let b: TestServer;
  let gatehouse: GatehouseProcess | undefined;
  let plugins: { dir: string; remove(): Promise<void> };

  beforeAll(async () => {
    [kube, a, b, plugins] = await Promise.all([startKubeApiServer({ binaries }), startEcho('a'), startEcho('b'), pluginDir([{ entry: new URL('../../core/src/extauth/plugins/fixtures/host-api.ts', import.meta.url), name: 'HostApi' }])]);
    await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    for (const crd of renderCrds('gatehouse.dev', {})) {
      await kube.apply(crd as unknown as KubeObject);
      await kube.waitForCrd(crd.metadata!.name!);
    }
  }, 120_000);

  afterAll(async () => {
    await gatehouse?.stop();
    await Promise.all([kube?.stop(), a?.close(), b?.close(), plugins?.remove()]);
  });

  it('serves what is applied, reports status, keeps the last good version of a rejected one, and stops serving what is deleted', async () => {
    await kube.apply(upstream('a', a.port));
    await kube.apply(virtualService('app', 'app.test', [toUpstream('a')]));
    // EndpointSlices may not hold loopback addresses: pods get documentation addresses (TEST-NET-1), dialled as 127.0.0.1.
    const resolve = ['--resolve', '192.0.2.10=127.0.0.1', '--resolve', '192.0.2.11=127.0.0.1'];
    gatehouse = await startGatehouse('run', ['--kube', '--kubeconfig', kube.kubeconfig, '--plugin-dir', plugins.dir, ...resolve], { env: { POD_NAME: 'gatehouse-0', POD_NAMESPACE: NS } });
    const first = await send(gatehouse.url, { headers: { host: 'app.test' } });
    expect(first.status).toBe(200);
    expect((JSON.parse(first.body) as Echo).upstream).toBe('a');

    // Applied after start: served once the watch delivers it.
    await kube.apply(upstream('b', b.port));
    const started = Date.now();
    await kube.apply(virtualService('other', 'other.test', [toUpstream('b')]));
    await eventually(async () => (await send(gatehouse!.url, { headers: { host: 'other.test' } })).status === 200, 5_000);
    const servedAfterMs = Date.now() - started;
    console.log(`kube source: a new VirtualService served ${servedAfterMs} ms after it was applied`);

    // The verdict lands in status, for the generation seen.
    const accepted = await eventually(async () => {
      const vs = await kube.get<KubeObject & { status?: { state?: string; observedGeneration?: number } }>(virtualService('other', '', []));
      return vs?.status?.state === 'Accepted' ? vs : undefined;
    }, 10_000);
    expect(accepted.status!.observedGeneration).toBe(accepted.metadata!.generation);

    // A broken new version (a route to an Upstream that does not exist): Rejected with the field path, the old one keeps serving.
    await kube.apply(virtualService('other', 'other.test', [toUpstream('missing')]));
    const rejected = await eventually(async () => {
      const vs = await kube.get<KubeObject & { status?: { state?: string; reason?: string; serving?: string; observedGeneration?: number } }>(virtualService('other', '', []));
      return vs?.status?.state === 'Rejected' ? vs : undefined;
    }, 10_000);
    expect(rejected.status!.reason).toContain('spec.virtualHost.routes[0].routeAction.single.upstream');
    expect(rejected.status!.reason).toContain('missing');
    expect(rejected.status!.serving).toBe('last-accepted');
    expect(rejected.status!.observedGeneration).toBe(rejected.metadata!.generation);
    const stillServing = await send(gatehouse.url, { headers: { host: 'other.test' } });
    expect(stillServing.status).toBe(200);
    expect((JSON.parse(stillServing.body) as Echo).upstream).toBe('b');

    // Deleted: no longer served.
    await kube.delete(virtualService('other', '', []));
    await eventually(async () => (await send(gatehouse!.url, { headers: { host: 'other.test' } })).status === 404, 5_000);
  });

  it('a changed Secret reaches requests at once (headerSecretRef)', async () => {
    const secret = (value: string): KubeObject => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'upstream-token', namespace: NS }, type: 'Opaque', stringData: { 'x-upstream-token': value } });
    await kube.apply(secret('first'));
    await kube.apply(virtualService('secret-headers', 'secret.test', [toUpstream('a')], { headerManipulation: { requestHeadersToAdd: [{ headerSecretRef: { name: 'upstream-token', namespace: NS } }] } }));
    const seen = async () => {
      const reply = await send(gatehouse!.url, { headers: { host: 'secret.test' } });
      return reply.status === 200 ? (JSON.parse(reply.body) as Echo).headers['x-upstream-token'] : undefined;
    };
    await eventually(async () => (await seen()) === 'first', 5_000);
    await kube.apply(secret('second'));
    await eventually(async () => (await seen()) === 'second', 5_000);
  });

  it("a changed Secret rotates a plugin's secret (pluginAuth.secretRefs)", async () => {
    const secret = (value: string): KubeObject => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'plugin-key', namespace: NS }, type: 'Opaque', stringData: { 'api-key': value } });
    await kube.apply(secret('first'));
    await kube.apply({
      apiVersion: 'enterprise.gatehouse.dev/v1',
      kind: 'AuthConfig',
      metadata: { name: 'secret-reader', namespace: NS },
      spec: { configs: [{ pluginAuth: { name: 'HostApi', exportedSymbolName: 'SecretReader', secretRefs: { ApiKey: { name: 'plugin-key', key: 'api-key' } } } }] },
    });
    await kube.apply(virtualService('plugin-secret', 'plugin.test', [toUpstream('a')], { extauth: { configRef: { name: 'secret-reader', namespace: NS } } }));
    const length = async () => {
      const reply = await send(gatehouse!.url, { headers: { host: 'plugin.test' } });
      return reply.status === 200 ? (JSON.parse(reply.body) as Echo).headers['x-secret-length'] : `status ${reply.status}`;
    };
    await eventually(async () => (await length()) === '5', 10_000);
    await kube.apply(secret('rotated-value'));
    await eventually(async () => (await length()) === '13', 10_000);
  });

  it("kube destinations follow the Service's ready EndpointSlice endpoints", async () => {
    await kube.apply({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: NS }, spec: { ports: [{ name: 'http', port: 80, targetPort: 8080 }] } });
    const slice = (name: string, port: number, addr: string, ready: boolean): KubeObject => ({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name, namespace: NS, labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port, protocol: 'TCP' }],
      endpoints: [{ addresses: [addr], conditions: { ready } }],
    });
    await kube.apply(slice('web-1', a.port, '192.0.2.10', true));
    // Not ready: never dialled (it would answer as b).
    await kube.apply(slice('web-2', b.port, '192.0.2.11', false));
    await kube.apply(virtualService('kube-dest', 'kube.test', [{ matchers: [{ prefix: '/' }], routeAction: { single: { kube: { ref: { name: 'web', namespace: NS }, port: 80 } } } }]));
    const upstreamSeen = async () => {
      const reply = await send(gatehouse!.url, { headers: { host: 'kube.test' } });
      return reply.status === 200 ? (JSON.parse(reply.body) as Echo).upstream : `status ${reply.status}`;
    };
    await eventually(async () => (await upstreamSeen()) === 'a', 5_000);
    for (let i = 0; i < 10; i++) expect(await upstreamSeen()).toBe('a');
    // The pod moved: traffic follows the slice.
    await kube.apply(slice('web-1', b.port, '192.0.2.10', true));
    await eventually(async () => (await upstreamSeen()) === 'b', 5_000);
    // No ready endpoint at all: 503.
    await kube.apply(slice('web-1', b.port, '192.0.2.10', false));
    await eventually(async () => (await upstreamSeen()) === 'status 503', 5_000);
  });

  it('keeps serving while the API server restarts, says so in /readyz, and resumes the watch', async () => {
    let failures = 0;
    let requests = 0;
    let stop = false;
    const load = (async () => {
      while (!stop) {
        const reply = await send(gatehouse!.url, { headers: { host: 'app.test' } }).catch(() => undefined);
        requests++;
        if (reply?.status !== 200) failures++;
      }
    })();
    await kube.stopApiServer();
    let restarted = false;
    try {
      const detail = await eventually(async () => {
        const ready = await send(gatehouse!.adminUrl, { path: '/readyz' });
        return ready.status === 200 && ready.body.includes('kubernetes: disconnected') ? ready.body : undefined;
      }, 10_000);
      expect(detail).toContain('serving the last accepted configuration');
      await eventually(async () => (await metric(gatehouse!, 'gatehouse_kube_connected')) === 0, 5_000);
      await kube.restart();
      restarted = true;
    } finally {
      if (!restarted) {
        stop = true;
        await kube.restart();
      }
    }
    await eventually(async () => (await send(gatehouse!.adminUrl, { path: '/readyz' })).body.includes('kubernetes: connected'), 30_000);
    expect(await metric(gatehouse!, 'gatehouse_kube_connected')).toBe(1);
    stop = true;
    await load;
    expect(requests).toBeGreaterThan(10);
    expect(failures).toBe(0);
    // The watch resumed: a change made after the restart is served.
    await kube.apply(virtualService('after-restart', 'after.test', [toUpstream('b')]));
    await eventually(async () => (await send(gatehouse!.url, { headers: { host: 'after.test' } })).status === 200, 10_000);
  }, 60_000);

  it('of two gateway replicas both serve the same config and exactly one writes status', async () => {
    const env = (pod: string) => ({ env: { POD_NAME: pod, POD_NAMESPACE: NS } });
    const r1 = await startGatehouse('gateway', ['--kube', '--kubeconfig', kube.kubeconfig, '--namespace', NS, '--extauth-address', '127.0.0.1:1', '--extauth-warm-up', '0s'], env('replica-1'));
    const r2 = await startGatehouse('gateway', ['--kube', '--kubeconfig', kube.kubeconfig, '--namespace', NS, '--extauth-address', '127.0.0.1:1', '--extauth-warm-up', '0s'], env('replica-2'));
    try {
      for (const r of [r1, r2]) {
        const reply = await send(r.url, { headers: { host: 'app.test' } });
        expect(reply.status).toBe(200);
      }
      // The run process from the first test holds the Lease: stop it, and one replica takes over.
      await gatehouse!.stop();
      gatehouse = undefined;
      const leaders = async () => (await metric(r1, 'gatehouse_kube_status_leader')) + (await metric(r2, 'gatehouse_kube_status_leader'));
      await eventually(async () => (await leaders()) === 1, 30_000);
      const [leader, follower] = (await metric(r1, 'gatehouse_kube_status_leader')) === 1 ? [r1, r2] : [r2, r1];
      // A change: the leader writes its verdict, the follower writes nothing.
      const writesBefore = await metric(follower, 'gatehouse_kube_status_writes_total');
      await kube.apply(virtualService('replicated', 'replicated.test', [toUpstream('missing-too')]));
      await eventually(async () => {
        const vs = await kube.get<KubeObject & { status?: { state?: string } }>(virtualService('replicated', '', []));
        return vs?.status?.state === 'Rejected';
      }, 10_000);
      expect(await metric(leader, 'gatehouse_kube_status_writes_total')).toBeGreaterThan(0);
      expect(await metric(follower, 'gatehouse_kube_status_writes_total')).toBe(writesBefore);
      expect(writesBefore).toBe(0);
      expect(await leaders()).toBe(1);
      // Both serve the same configuration.
      await kube.apply(virtualService('replicated', 'replicated.test', [toUpstream('a')]));
      for (const r of [r1, r2]) await eventually(async () => (await send(r.url, { headers: { host: 'replicated.test' } })).status === 200, 5_000);
    } finally {
      await Promise.all([r1.stop(), r2.stop()]);
    }
  }, 90_000);
});
