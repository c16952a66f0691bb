/**
 * Issue 27 items 1 and 7 against a real kube-apiserver: an AuthConfig whose steps extauth cannot
 * build (a plugin file that does not exist) gets a status that says so (not Accepted while every
 * request is denied) and a Warning Event; extauth's metric names it; a resource the gateway
 * rejects gets an Event too. `gatehouse gateway --kube` and `gatehouse extauth --kube`, two
 * processes, as in a cluster.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pluginDir } from '../../core/src/extauth/plugins/test-support.ts';
import { renderCrds } from '../../core/src/install/crds.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';
import { startKubeApiServer, type KubeApiServer, type KubeObject } from './apiserver.ts';
import { describeWithKube } from './describe-with-kube.ts';

const NS = 'build-report';

type Status = { state?: string; reason?: string; serving?: string; extauth?: { state?: string; reason?: string; observedGeneration?: number } };
type Event = { reason: string; type: string; note?: string; action?: string; reportingController?: string; regarding: { kind: string; name: string } };

/** `plugin`'s Sleeper export (the fixture file holds many): a plugin that exists and builds. */
const authConfig = (plugin: string): KubeObject => ({
  apiVersion: 'enterprise.gatehouse.dev/v1',
  kind: 'AuthConfig',
  metadata: { name: 'guard', namespace: NS },
  spec: { configs: [{ pluginAuth: { name: plugin, exportedSymbolName: 'Sleeper', config: { Ms: 0 } } }] },
});

describeWithKube('AuthConfig build results and Events against a real API server', 'test/kube/build-report.test.ts', (binaries) => {
  let kube: KubeApiServer;
  let echo: TestServer;
  let extauth: GatehouseProcess | undefined;
  let gateway: GatehouseProcess | undefined;
  let plugins: { dir: string; remove(): Promise<void> };

  const events = async (): Promise<Event[]> => {
    const answer = await kube.request('GET', `/apis/events.k8s.io/v1/namespaces/${NS}/events`);
    return (JSON.parse(answer.text) as { items: Event[] }).items;
  };
  const statusOf = async (object: KubeObject) => (await kube.get<KubeObject & { status?: Status }>(object))?.status;

  beforeAll(async () => {
    [kube, echo, plugins] = await Promise.all([startKubeApiServer({ binaries }), startEcho('echo'), pluginDir([{ entry: new URL('../../core/src/extauth/plugins/fixtures/host-api.ts', import.meta.url), name: 'HostApi' }])]);
    await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    for (const crd of renderCrds('gatehouse.dev', {})) {
      await kube.apply(crd as unknown as KubeObject);
      await kube.waitForCrd(crd.metadata!.name!);
    }
  }, 120_000);

  afterAll(async () => {
    await Promise.all([gateway?.stop(), extauth?.stop()]);
    await Promise.all([kube?.stop(), echo?.close(), plugins?.remove()]);
  });

  it('a plugin that does not exist: status Rejected (serving none) with the build error, a BuildFailed Event, the unavailable metric; fixed, it turns Accepted', async () => {
    await kube.apply({ apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo', namespace: NS }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: echo.port }] } } });
    await kube.apply(authConfig('Missing'));
    await kube.apply({
      apiVersion: 'gateway.gatehouse.dev/v1',
      kind: 'VirtualService',
      metadata: { name: 'app', namespace: NS },
      spec: { virtualHost: { domains: ['app.test'], options: { extauth: { configRef: { name: 'guard' } } }, routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] } },
    });
    const env = { POD_NAMESPACE: NS };
    extauth = await startGatehouse('extauth', ['--kube', '--kubeconfig', kube.kubeconfig, '--plugin-dir', plugins.dir, '--host', '127.0.0.1'], { env: { ...env, POD_NAME: 'extauth-0' } });
    gateway = await startGatehouse('gateway', ['--kube', '--kubeconfig', kube.kubeconfig, '--extauth-address', `127.0.0.1:${extauth.port}`], { env: { ...env, POD_NAME: 'gateway-0' } });

    // Every request is denied...
    expect((await send(gateway.url, { headers: { host: 'app.test' } })).status).toBe(403);
    // ...and the AuthConfig says why, in its status and in an Event.
    const status = await eventually(async () => {
      const s = await statusOf(authConfig('Missing'));
      return s?.state === 'Rejected' && s.extauth?.state === 'Failed' ? s : undefined;
    }, 15_000);
    expect(status.serving).toBe('none');
    expect(status.reason).toMatch(/^extauth cannot build its steps, requests are denied: .*Missing/);
    expect(status.extauth!.reason).toContain('Missing');
    const failed = await eventually(async () => (await events()).find((e) => e.reason === 'BuildFailed'), 15_000);
    expect(failed).toMatchObject({ type: 'Warning', action: 'Build', reportingController: 'gatehouse.dev/extauth', regarding: { kind: 'AuthConfig', name: 'guard' } });
    expect(failed.note).toContain('Missing');
    // The gateway's verdict Event for the same AuthConfig.
    await eventually(async () => (await events()).find((e) => e.reason === 'Rejected' && e.regarding.name === 'guard' && e.reportingController === 'gatehouse.dev/gateway'), 15_000);
    // extauth's metrics name it.
    const metrics = (await send(`http://127.0.0.1:${extauth.adminPort}`, { path: '/metrics' })).body;
    expect(metrics).toContain(`gatehouse_extauth_config_unavailable{config="${NS}.guard"} 1`);
    const ready = await send(`http://127.0.0.1:${extauth.adminPort}`, { path: '/readyz' });
    expect(ready.status).toBe(200);
    expect(ready.body).toMatch(new RegExp(`^ready\\n1 AuthConfig\\(s\\) cannot be built, their requests are denied:\\n  ${NS}\\.guard: .*Missing`));
    expect((await send(`http://127.0.0.1:${extauth.adminPort}`, { path: '/healthz' })).status).toBe(200);

    // Fixed: the plugin exists. Built, Accepted, served, the metric gone.
    await kube.apply(authConfig('HostApi'));
    await eventually(async () => {
      const s = await statusOf(authConfig('HostApi'));
      return s?.state === 'Accepted' && s.extauth?.state === 'Built' ? s : undefined;
    }, 15_000).catch(async (error: Error) => {
      throw new Error(`${error.message}; status: ${JSON.stringify(await statusOf(authConfig('HostApi')))}`);
    });
    const after = (await send(`http://127.0.0.1:${extauth.adminPort}`, { path: '/metrics' })).body;
    expect(after).not.toContain(`gatehouse_extauth_config_unavailable{config="${NS}.guard"}`);
    await eventually(async () => (await send(gateway!.url, { headers: { host: 'app.test' } })).status === 200, 15_000);
    // extauth's readiness stayed green throughout (the other configs serve); it names what cannot be built.
    expect((await send(`http://127.0.0.1:${extauth.adminPort}`, { path: '/readyz' })).body).toBe('ready\n');
  }, 120_000);

  it('`gatehouse run --kube` (embedded extauth) reports build results too: status Failed with the reason and a BuildFailed Event', async () => {
    const ns = `${NS}-run`;
    await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    const guard = { ...authConfig('AlsoMissing'), metadata: { name: 'guard-run', namespace: ns } };
    await kube.apply(guard);
    await kube.apply({
      apiVersion: 'gateway.gatehouse.dev/v1',
      kind: 'VirtualService',
      metadata: { name: 'app-run', namespace: ns },
      spec: { virtualHost: { domains: ['run.test'], options: { extauth: { configRef: { name: 'guard-run' } } }, routes: [{ matchers: [{ prefix: '/' }], directResponseAction: { status: 200, body: 'ok' } }] } },
    });
    const run = await startGatehouse('run', ['--kube', '--kubeconfig', kube.kubeconfig, '--namespace', ns, '--plugin-dir', plugins.dir], { env: { POD_NAMESPACE: ns, POD_NAME: 'run-0' } });
    try {
      expect((await send(run.url, { headers: { host: 'run.test' } })).status).toBe(403);
      const status = await eventually(async () => {
        const s = await statusOf(guard);
        return s?.extauth?.state === 'Failed' ? s : undefined;
      }, 15_000);
      expect(status.extauth!.reason).toContain('AlsoMissing');
      const eventsIn = async () => (JSON.parse((await kube.request('GET', `/apis/events.k8s.io/v1/namespaces/${ns}/events`)).text) as { items: Event[] }).items;
      const failed = await eventually(async () => (await eventsIn()).find((e) => e.reason === 'BuildFailed' && e.regarding.name === 'guard-run'), 15_000);
      expect(failed).toMatchObject({ type: 'Warning', action: 'Build', reportingController: 'gatehouse.dev/extauth' });
    } finally {
      await run.stop();
    }
  }, 120_000);

  it('a VirtualService the gateway rejects gets a Warning Event with the reason', async () => {
    await kube.apply({
      apiVersion: 'gateway.gatehouse.dev/v1',
      kind: 'VirtualService',
      metadata: { name: 'broken', namespace: NS },
      spec: { virtualHost: { domains: ['broken.test'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'nowhere' } } } }] } },
    });
    const event = await eventually(async () => (await events()).find((e) => e.regarding.name === 'broken' && e.regarding.kind === 'VirtualService'), 15_000);
    expect(event).toMatchObject({ type: 'Warning', action: 'Validate', reportingController: 'gatehouse.dev/gateway' });
    expect(event.note).toContain('nowhere');
  }, 60_000);
});
