/**
 * `gatehouse check` (issue 27 item 10) against a real kube-apiserver: no controllers run here, so
 * the Deployments never get ready replicas, and statuses are written by the test as the gateway
 * and extauth would. The healthy path runs on the real cluster (test/cluster/seed-story.test.ts).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { renderCrds } from '../../core/src/install/crds.ts';
import { GATEWAY_VERSION } from '../../core/src/version.ts';
import { runCli } from '../oci/helpers/cli.ts';
import { startKubeApiServer, type KubeApiServer, type KubeObject } from './apiserver.ts';
import { describeWithKube } from './describe-with-kube.ts';

const NS = 'gatehouse-system';
const APPS = 'shop';

const deployment = (name: string, image: string): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name, namespace: NS },
  spec: { replicas: 2, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: { containers: [{ name, image }] } } },
} as KubeObject);

describeWithKube('gatehouse check against a real API server', 'test/kube/check.test.ts', (binaries) => {
  let kube: KubeApiServer;

  beforeAll(async () => {
    kube = await startKubeApiServer({ binaries });
    for (const ns of [NS, APPS]) await kube.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  }, 120_000);

  afterAll(async () => {
    await kube?.stop();
  });

  const check = (...args: string[]) => runCli('gatehouse', ['check', '--kubeconfig', kube.kubeconfig, ...args]);

  it('names what is missing on an empty cluster, and exits 1', async () => {
    const { code, stdout } = await check();
    expect(stdout).toContain('✗ Deployments in gatehouse-system');
    expect(stdout).toContain('deployment/gateway does not exist');
    expect(stdout).toMatch(/virtualservices\.gateway\.gatehouse\.dev is not installed \(gatehouse install crds/);
    expect(code).toBe(1);
  });

  it('reports unready Deployments, resources not Accepted or never seen, AuthConfigs extauth cannot build, and version skew', async () => {
    const crds = renderCrds('gatehouse.dev', { 'app.kubernetes.io/version': '0.0.9' });
    for (const crd of crds) {
      await kube.apply(crd as unknown as KubeObject);
      await kube.waitForCrd(crd.metadata!.name!);
    }
    await kube.apply(deployment('gateway', `registry.example.com/gatehouse:${GATEWAY_VERSION}`));
    await kube.apply(deployment('extauth', 'registry.example.com/gatehouse:0.0.9'));
    const vs = (name: string) => ({ apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name, namespace: APPS }, spec: { virtualHost: { domains: [`${name}.test`], routes: [] } } });
    await kube.apply(vs('fine'));
    await kube.apply(vs('broken'));
    await kube.apply(vs('unseen'));
    await kube.apply({ apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name: 'guard', namespace: APPS }, spec: { configs: [{ pluginAuth: { name: 'Missing' } }] } });
    const status = (plural: string, group: string, name: string, body: object) =>
      kube.request('PATCH', `/apis/${group}/v1/namespaces/${APPS}/${plural}/${name}/status`, { status: body }, 'application/merge-patch+json');
    await status('virtualservices', 'gateway.gatehouse.dev', 'fine', { state: 'Accepted', serving: 'current', reason: '', observedGeneration: 1, reportedBy: 'gatehouse' });
    await status('virtualservices', 'gateway.gatehouse.dev', 'broken', { state: 'Rejected', serving: 'none', reason: 'spec.virtualHost.routes[0]: references Upstream shop/nowhere, which does not exist', observedGeneration: 1, reportedBy: 'gatehouse' });
    await status('authconfigs', 'enterprise.gatehouse.dev', 'guard', {
      state: 'Rejected',
      serving: 'none',
      reason: 'extauth cannot build its steps, requests are denied: plugin file Missing.js does not exist',
      reportedBy: 'gatehouse',
      extauth: { state: 'Failed', reason: 'plugin file /auth-plugins/Missing.js does not exist [GH_PLUGIN_NOT_FOUND]', observedGeneration: 1 },
    });

    const { code, stdout } = await check();
    expect(stdout).toContain('deployment/gateway: 0 of 2 replicas ready');
    expect(stdout).toContain('✓ CustomResourceDefinitions: OK');
    expect(stdout).toContain('VirtualService shop/broken: Rejected: spec.virtualHost.routes[0]: references Upstream shop/nowhere');
    expect(stdout).toContain('VirtualService shop/unseen: no status (no gateway watches it');
    expect(stdout).not.toContain('shop/fine');
    expect(stdout).toMatch(/✗ AuthConfigs in extauth\n {4}shop\.guard: plugin file \/auth-plugins\/Missing\.js does not exist \[GH_PLUGIN_NOT_FOUND\]/);
    expect(stdout).toContain('image registry.example.com/gatehouse:0.0.9 is version 0.0.9, not');
    expect(stdout).toContain('the CRDs are from version 0.0.9');
    expect(stdout).toMatch(/\d+ problem\(s\) found\n$/);
    expect(code).toBe(1);
  }, 120_000);

  it('an unreachable API server is a clear error, exit 1; usage errors exit 2', async () => {
    const { writeFile, mkdtemp } = await import('node:fs/promises');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const dir = await mkdtemp(join(tmpdir(), 'gh-check-'));
    const file = join(dir, 'kubeconfig');
    await writeFile(file, `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`);
    const down = await runCli('gatehouse', ['check', '--kubeconfig', file]);
    expect(down.stderr).toMatch(/cannot reach the Kubernetes API \(https:\/\/127\.0\.0\.1:1\).*\[GH_CHECK_API\]/);
    expect(down.code).toBe(1);
    expect((await runCli('gatehouse', ['check', 'extra'])).code).toBe(2);
  });
});
