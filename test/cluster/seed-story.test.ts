import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { runCli } from '../oci/helpers/cli.ts';
import { buildImage, missingImageTools, podman } from '../images/images.ts';
import { CHART } from '../helm/helm.ts';
import { REGISTRY, requireCluster, startCluster, type Cluster, type ClusterParts } from './cluster.ts';

const TEST_FILE = 'test/cluster/seed-story.test.ts';
const VERSION = (JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const PLUGIN_ENTRY = new URL('../../plugins/required-header/src/index.ts', import.meta.url).pathname;
const GATEHOUSE_PLUGIN = new URL('../../plugin-sdk/bin/gatehouse-plugin.js', import.meta.url).pathname;
const GATEHOUSE_CLI = new URL('../../core/bin/gatehouse.js', import.meta.url).pathname;

/** The namespace of the upstream and of the Gatehouse resources the tests apply. */
const APPS = 'apps';

/**
 * A tiny echo server for the upstream pod, run by the gatehouse image's own Node (no other image
 * is reachable): answers every request with its method, URL and headers as JSON.
 */
const ECHO_JS = `require('node:http').createServer((q, s) => { s.setHeader('content-type', 'application/json'); s.end(JSON.stringify({ method: q.method, url: q.url, headers: q.headers })); }).listen(8080);`;

/** The restricted Pod Security Standard's container settings (the namespace enforces it). */
const RESTRICTED = { runAsNonRoot: true, runAsUser: 10001, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } };

/** The echo Deployment and Service, and the Upstream, AuthConfig and VirtualService of the seed's story. */
function appManifests(): object[] {
  const labels = { app: 'echo' };
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: APPS, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'echo', namespace: APPS },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            containers: [{
              name: 'echo',
              image: `${REGISTRY}/gatehouse:${VERSION}`,
              command: ['node', '-e', ECHO_JS],
              ports: [{ name: 'http', containerPort: 8080 }],
              readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1 },
              securityContext: RESTRICTED,
            }],
          },
        },
      },
    },
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'echo', namespace: APPS }, spec: { selector: labels, ports: [{ name: 'http', port: 8080, targetPort: 'http' }] } },
    // Resolved through the cluster's DNS (echo.apps.svc.cluster.local): CoreDNS takes part.
    { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo', namespace: APPS }, spec: { kube: { serviceName: 'echo', serviceNamespace: APPS, servicePort: 8080 } } },
    {
      apiVersion: 'enterprise.gatehouse.dev/v1',
      kind: 'AuthConfig',
      metadata: { name: 'required-header', namespace: APPS },
      spec: { configs: [{ pluginAuth: { name: 'RequiredHeader', config: { RequiredHeader: 'x-team', AllowedValues: ['blue', 'green'] } } }] },
    },
    {
      apiVersion: 'gateway.gatehouse.dev/v1',
      kind: 'VirtualService',
      metadata: { name: 'app', namespace: APPS },
      spec: {
        virtualHost: {
          domains: ['app.test'],
          options: { extauth: { configRef: { name: 'required-header', namespace: APPS } } },
          routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo', namespace: APPS } } } }],
        },
      },
    },
  ];
}

/**
 * The values both installs use: the chart's defaults (the kube source, extauth twice behind a PDB,
 * preStop and drain), images from the in-namespace registry.
 */
function values(namespace: string): object {
  return {
    namespace,
    image: { registry: REGISTRY, repository: 'gatehouse' },
    // The chart's defaults but one: a 1 s auth deadline instead of 200 ms. The one node shares two
    // cores with the whole suite (load 12-18): as a rollout's new gateway pod started, the old pod's
    // check missed 200 ms (GH_EXTAUTH_TIMEOUT in its log, 1 request of 153) with
    // every connection up. These scenarios are about serving through rollouts and deleted pods; the
    // 200 ms default is tested in test/extauth/processes.test.ts. A reconnect stall over 1 s still fails them.
    gateway: { extraArgs: ['--extauth-timeout', '1s'] },
    global: { extensions: { extAuth: { plugins: { RequiredHeader: { image: { registry: REGISTRY, repository: 'plugins/required-header' } } } } } },
  };
}

// The images are built with test/images' podman and base image.
const cluster = requireCluster(TEST_FILE, missingImageTools());
if (cluster instanceof Error) {
  describe('the seed story on a real one-node cluster', () => {
    it('needs the cluster parts on CI', () => {
      throw cluster;
    });
  });
} else {
  describe.skipIf(!cluster)('the seed story on a real one-node cluster', () => seedStory(cluster as ClusterParts));
}

function seedStory(parts: ClusterParts): void {
  let node: Cluster | undefined;
  const work = join(tmpdir(), `gh-cluster-test-${randomBytes(4).toString('hex')}`);
  const timings: Record<string, number> = {};
  const fileStarted = Date.now();
  const timed = async <T>(name: string, step: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    try {
      return await step();
    } finally {
      timings[name] = Date.now() - started;
    }
  };
  const cluster = () => {
    if (!node) throw new Error('the cluster did not start');
    return node;
  };
  /** Fails with the cluster's pods, events and daemon logs attached. */
  const withDiagnostics = async <T>(step: () => Promise<T>): Promise<T> => {
    try {
      return await step();
    } catch (error) {
      // The Gatehouse pods' warnings and errors too (their log files on this host).
      const logs = (await cluster().podLogs('gatehouse-system', '', 400)).split('\n').filter((l) => /"level":"(error|warn|fatal)"|GH_/.test(l)).slice(-40).join('\n');
      throw new Error(`${(error as Error).message}\n--- gatehouse-system pods' warnings and errors\n${logs}\n${await cluster().diagnostics()}`, { cause: error });
    }
  };

  /** Polls until `probe` holds (every 500 ms, up to `timeoutMs`); the last value goes into the failure. */
  const until = async <T>(what: string, timeoutMs: number, probe: () => Promise<T>, done: (value: T) => boolean): Promise<T> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (done(value)) return value;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(value).slice(0, 2000)}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  };

  /** The gateway Service's cluster IP in `namespace`. */
  const gatewayUrl = async (namespace: string): Promise<string> => {
    const ip = (await cluster().kubectl(['-n', namespace, 'get', 'service', 'gateway', '-o', 'jsonpath={.spec.clusterIP}'])).stdout.trim();
    expect(ip).toMatch(/^10\.96\./);
    return `http://${ip}:80/hello`;
  };

  /** The seed's three requests through the gateway Service: 403 without the header, 403 with a wrong value, 200 with an allowed one. */
  const assertSeedStory = async (namespace: string) => {
    const url = await gatewayUrl(namespace);
    // The gateway and extauth pick the resources up from the API server: wait until the route serves.
    const allowed = await until('the route with the plugin to serve', 60_000, () => cluster().curl(url, { host: 'app.test', 'x-team': 'blue' }), (r) => r.status === 200);
    const seen = JSON.parse(allowed.body) as { url: string; headers: Record<string, string> };
    expect(seen.url).toBe('/hello');
    expect(seen.headers['x-team']).toBe('blue');
    expect(seen.headers['matched-allowed-headers']).toBe('true');
    const missing = await cluster().curl(url, { host: 'app.test' });
    expect(missing.status).toBe(403);
    const wrong = await cluster().curl(url, { host: 'app.test', 'x-team': 'red' });
    expect(wrong.status).toBe(403);
  };

  /**
   * The install's pods pass the `restricted` Pod Security Standard: a server-side dry run of the
   * enforce label makes the API server evaluate the running pods and warn about each violation.
   */
  const assertRestricted = async (namespace: string) => {
    const dryRun = await cluster().kubectl(['label', '--dry-run=server', '--overwrite', 'namespace', namespace, 'pod-security.kubernetes.io/enforce=restricted']);
    expect(dryRun.stdout).toContain(`namespace/${namespace} labeled`);
    expect(dryRun.stderr).not.toMatch(/[Ww]arning/);
  };

  /** Every extauth pod ran the plugin image as its init container, to completion. */
  const assertPluginInitContainer = async (namespace: string) => {
    const pods = JSON.parse((await cluster().kubectl(['-n', namespace, 'get', 'pods', '-l', 'app.kubernetes.io/name=gatehouse,app.kubernetes.io/component=extauth', '-o', 'json'])).stdout) as {
      items: { spec: { initContainers?: { name: string; image: string }[] }; status: { initContainerStatuses?: { name: string; state: { terminated?: { exitCode: number } } }[] } }[];
    };
    expect(pods.items.length).toBeGreaterThan(0);
    for (const pod of pods.items) {
      expect(pod.spec.initContainers?.map((c) => c.image)).toEqual([`${REGISTRY}/plugins/required-header:${VERSION}`]);
      expect(pod.status.initContainerStatuses?.map((s) => s.state.terminated?.exitCode)).toEqual([0]);
    }
  };

  beforeAll(async () => {
    await mkdir(work, { recursive: true });
    // The cluster comes up while the images build (awaited below; the catch only marks it handled meanwhile).
    const up = timed('cluster up', () => startCluster({ parts }));
    up.catch(() => {});

    // The images, as test/images builds them, and the RequiredHeader plugin image on the init image.
    const gatewayImage = `localhost/gatehouse:${VERSION}`;
    const initImage = `localhost/gatehouse-init:${VERSION}`;
    await timed('build gateway image', () => buildImage('gateway.Dockerfile', gatewayImage));
    await timed('build init image', () => buildImage('init-container.Dockerfile', initImage));
    await timed('build plugin image', async () => {
      const compiled = join(work, 'compiled');
      const build = await runCli('gatehouse-plugin', ['build', PLUGIN_ENTRY, '--name', 'RequiredHeader', '--out', compiled]);
      expect(build.code, build.stderr).toBe(0);
      const initLayout = join(work, 'init-layout');
      await podman(['push', '--quiet', initImage, `oci:${initLayout}:${VERSION}`]);
      const image = await runCli('gatehouse-plugin', ['image', 'build', '--from', compiled, '--tag', VERSION, '--output', join(work, 'plugin-layout'), '--base', `oci:${initLayout}:${VERSION}`]);
      expect(image.code, image.stderr).toBe(0);
    });
    node = await up;
    Object.assign(timings, Object.fromEntries(Object.entries(node.timings).map(([k, v]) => [`cluster: ${k}`, v])));
    await timed('push images', async () => {
      await node!.pushImage(gatewayImage, `gatehouse:${VERSION}`);
      await node!.pushImage(initImage, `gatehouse-init:${VERSION}`);
      // The plugin image with the SDK's own client, as a plugin author pushes it.
      await node!.run(process.execPath, [GATEHOUSE_PLUGIN, 'image', 'push', '--from', `${join(work, 'plugin-layout')}:${VERSION}`, `${REGISTRY}/plugins/required-header:${VERSION}`, '--insecure'], { netOnly: true, timeoutMs: 300_000 });
    });
    await timed('upstream pod', async () => {
      await node!.kubectl(['apply', '-f', '-'], { input: appManifests().slice(0, 3).map((m) => stringify(m)).join('---\n') });
      await node!.kubectl(['-n', APPS, 'rollout', 'status', 'deployment/echo', '--timeout=180s'], { timeoutMs: 200_000 });
    });
  }, 1_800_000);

  afterAll(async () => {
    await node?.stop();
    if (node) timings['teardown'] = node.timings['teardown'] ?? 0;
    await rm(work, { recursive: true, force: true });
    timings['file total'] = Date.now() - fileStarted;
    console.info(`cluster test timings (ms): ${JSON.stringify(timings)}`);
  }, 120_000);

  it('helm install of the chart: the RequiredHeader plugin image as extauth init container, then 403 without the header, 403 with a wrong value, 200 with an allowed one through the gateway Service', async () => {
    await withDiagnostics(async () => {
      const valuesFile = join(work, 'values-helm.yaml');
      await writeFile(valuesFile, stringify(values('gatehouse-system')));
      await timed('helm install --wait', () => cluster().helm(['install', 'gatehouse', CHART, '-f', valuesFile, '--wait', '--timeout', '5m'], { timeoutMs: 330_000 }));
      await assertPluginInitContainer('gatehouse-system');
      await assertRestricted('gatehouse-system');
      // The resources, applied as an operator does, once the CRDs are in.
      await cluster().kubectl(['apply', '-f', '-'], { input: appManifests().slice(3).map((m) => stringify(m)).join('---\n') });
      await timed('helm: first 200', () => assertSeedStory('gatehouse-system'));
    });
  }, 600_000);

  /** Traffic through the gateway Service (1 request / 100 ms, allowed by the plugin) while `disrupt` runs; every request must get 200. */
  const underTraffic = async (name: string, disrupt: () => Promise<void>, options: { namespace?: string; allowFailures?: boolean } = {}) => {
    // fetch() cannot set Host: the traffic reaches the gateway by its cluster IP, which a
    // catch-all VirtualService guarded by the same plugin serves (every request goes through extauth).
    const catchAll = {
      apiVersion: 'gateway.gatehouse.dev/v1',
      kind: 'VirtualService',
      metadata: { name: 'traffic', namespace: APPS },
      spec: {
        virtualHost: {
          domains: ['*'],
          options: { extauth: { configRef: { name: 'required-header', namespace: APPS } } },
          routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo', namespace: APPS } } } }],
        },
      },
    };
    await cluster().kubectl(['apply', '-f', '-'], { input: stringify(catchAll) });
    const url = await gatewayUrl(options.namespace ?? 'gatehouse-system');
    await until('the catch-all route to serve', 30_000, () => cluster().curl(url, { 'x-team': 'blue' }), (r) => r.status === 200);
    const traffic = await cluster().traffic(url, { headers: { 'x-team': 'blue' } });
    // A deleted pod's log files go with it: keep the newest copy of every pod's lines meanwhile.
    const kept = new Map<string, string[]>();
    const keepLogs = async () => {
      const byPod = new Map<string, string[]>();
      for (const line of (await cluster().podLogs(options.namespace ?? 'gatehouse-system', '', 400)).split('\n')) {
        const pod = line.slice(0, line.indexOf(' '));
        if (pod) byPod.set(pod, [...(byPod.get(pod) ?? []), line]);
      }
      for (const [pod, lines] of byPod) kept.set(pod, lines);
    };
    let keeping = true;
    const keeper = (async () => {
      while (keeping) {
        await keepLogs().catch(() => {});
        await new Promise((r) => setTimeout(r, 500));
      }
    })();
    let results;
    try {
      await until('the first answers of the traffic', 30_000, async () => traffic.count(), (n) => n >= 10);
      await timed(name, disrupt);
      // A little more traffic after the disruption settled: late failures count too.
      const settled = traffic.count();
      await until('traffic after the disruption', 30_000, async () => traffic.count(), (n) => n >= settled + 20);
    } finally {
      results = await traffic.stop();
      keeping = false;
      await keeper;
    }
    const failed = results.filter((r) => r.status !== 200);
    timings[`${name}: requests`] = results.length;
    timings[`${name}: failed`] = failed.length;
    expect(results.length).toBeGreaterThan(30);
    if (failed.length) {
      // What the gateways and extauth said meanwhile (their error lines), for the failure message.
      await keepLogs();
      const errors = [...kept.values()].flat().filter((l) => /"level":"(error|warn|fatal)"|GH_/.test(l)).slice(-60).join('\n');
      if (options.allowFailures) console.info(`${name}: ${failed.length} of ${results.length} requests failed (allowed); the pods' warnings and errors:\n${errors}`);
      else expect(failed, `${failed.length} of ${results.length} requests failed: ${JSON.stringify(failed)}\n${errors}`).toEqual([]);
    }
    return results;
  };

  /** The names of the Ready pods of a component. */
  const readyPods = async (component: string): Promise<string[]> => {
    const pods = JSON.parse((await cluster().kubectl(['-n', 'gatehouse-system', 'get', 'pods', '-l', `app.kubernetes.io/component=${component}`, '-o', 'json'])).stdout) as {
      items: { metadata: { name: string; deletionTimestamp?: string }; status: { conditions?: { type: string; status: string }[] } }[];
    };
    return pods.items.filter((p) => !p.metadata.deletionTimestamp && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).map((p) => p.metadata.name);
  };

  it('default values: a kubectl apply-ed VirtualService is served and gets a status (issue 27 item 5)', async () => {
    await withDiagnostics(async () => {
      const url = await gatewayUrl('gatehouse-system');
      const vs = {
        apiVersion: 'gateway.gatehouse.dev/v1',
        kind: 'VirtualService',
        metadata: { name: 'applied', namespace: APPS },
        spec: { virtualHost: { domains: ['applied.test'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo', namespace: APPS } } } }] } },
      };
      const applied = Date.now();
      await cluster().kubectl(['apply', '-f', '-'], { input: stringify(vs) });
      await until('the applied VirtualService to serve', 30_000, () => cluster().curl(url, { host: 'applied.test' }), (r) => r.status === 200);
      timings['kubectl apply to first 200'] = Date.now() - applied;
      const status = await until(
        'the applied VirtualService to get a status',
        30_000,
        async () => (await cluster().kubectl(['-n', APPS, 'get', 'virtualservice', 'applied', '-o', 'jsonpath={.status}'])).stdout,
        (s) => s.includes('Accepted'),
      );
      expect(status).toContain('Accepted');
      // kubectl's conventions (issue 27 item 9): the short name, and the state in the columns.
      const listed = await cluster().kubectl(['-n', APPS, 'get', 'vs', 'applied']);
      expect(listed.stdout).toMatch(/^NAME\s+STATE\s+SERVING\s+AGE/);
      expect(listed.stdout).toMatch(/applied\s+Accepted\s+current\s+/);
    });
  }, 120_000);

  it('an AuthConfig whose plugin cannot be built: Rejected with extauth\'s reason in its status, and a BuildFailed Event (issue 27 item 1)', async () => {
    await withDiagnostics(async () => {
      const broken = { apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name: 'no-such-plugin', namespace: APPS }, spec: { configs: [{ pluginAuth: { name: 'NoSuchPlugin', config: {} } }] } };
      await cluster().kubectl(['apply', '-f', '-'], { input: stringify(broken) });
      const started = Date.now();
      const status = await until(
        'the AuthConfig status to say its steps do not build',
        60_000,
        async () => JSON.parse((await cluster().kubectl(['-n', APPS, 'get', 'authconfig', 'no-such-plugin', '-o', 'jsonpath={.status}'])).stdout || '{}') as { state?: string; serving?: string; reason?: string; extauth?: { state?: string } },
        (s) => s.state === 'Rejected' && s.extauth?.state === 'Failed',
      );
      timings['AuthConfig build failure to status'] = Date.now() - started;
      expect(status.serving).toBe('none');
      expect(status.reason).toContain('NoSuchPlugin');
      const events = await until(
        'a BuildFailed Event',
        30_000,
        async () => (await cluster().kubectl(['-n', APPS, 'get', 'events', '--field-selector', 'involvedObject.name=no-such-plugin,reason=BuildFailed', '-o', 'name'])).stdout.trim(),
        (o) => o !== '',
      );
      expect(events).toContain('event');
      // gatehouse check names it too (inside the namespace, where the API server is).
      const check = await cluster().run(process.execPath, [GATEHOUSE_CLI, 'check', '--kubeconfig', cluster().kubeconfig], { check: false });
      expect(check.stdout).toMatch(/✗ AuthConfigs in extauth\n {4}apps\.no-such-plugin: .*NoSuchPlugin/);
      expect(check.code).toBe(1);
      await cluster().kubectl(['-n', APPS, 'delete', 'authconfig', 'no-such-plugin']);
    });
  }, 180_000);

  it('a plugin image re-tagged from another gateway version: the init container fails (Init:Error, an Event), the rollout stays stuck, the old pods keep serving (issue 27 item 2)', async () => {
    await withDiagnostics(async () => {
      // A plugin image built for gateway 0.0.9 (file, label and tag), then re-tagged :VERSION in the
      // registry, as an operator might: the tag check passes under the chart; only the file (and
      // the label, which --rootfs cannot read) knows.
      const compiled = join(work, 'compiled-old');
      const { buildPlugin } = await import('@gatehouse/plugin-sdk/build');
      const { buildPluginImage, openImage } = await import('@gatehouse/plugin-sdk/oci');
      await buildPlugin({ entry: PLUGIN_ENTRY, name: 'OldHeader', outDir: compiled, gatewayVersion: '0.0.9' });
      const layout = join(work, 'old-layout');
      const base = await openImage(`oci:${join(work, 'init-layout')}:${VERSION}`);
      try {
        await buildPluginImage({ from: compiled, tag: '0.0.9', output: layout, gatewayVersion: '0.0.9', base: { store: base.store, reference: base.reference, display: base.display } });
      } finally {
        await base.store.close();
      }
      await cluster().pushLayout(`${layout}:0.0.9`, `plugins/old-header:${VERSION}`);
      const withOld = values('gatehouse-system') as { global: { extensions: { extAuth: { plugins: Record<string, unknown> } } } };
      withOld.global.extensions.extAuth.plugins.OldHeader = { image: { registry: REGISTRY, repository: 'plugins/old-header' } };
      const valuesFile = join(work, 'values-old.yaml');
      await writeFile(valuesFile, stringify(withOld));
      const url = await gatewayUrl('gatehouse-system');
      await cluster().helm(['upgrade', 'gatehouse', CHART, '-f', valuesFile], { timeoutMs: 120_000 });
      const failing = await until(
        'a new extauth pod in Init:Error',
        120_000,
        async () => (await cluster().kubectl(['-n', 'gatehouse-system', 'get', 'pods', '-l', 'app.kubernetes.io/component=extauth', '--no-headers'])).stdout,
        (o) => /Init:(Error|CrashLoopBackOff)/.test(o),
      );
      const pod = /^(\S+)\s+\S+\s+Init:(Error|CrashLoopBackOff)/m.exec(failing)![1]!;
      const described = await until('the init container\'s message in the pod status', 60_000, async () => (await cluster().kubectl(['-n', 'gatehouse-system', 'get', 'pod', pod, '-o', 'jsonpath={.status.initContainerStatuses[*].lastState.terminated.message}{.status.initContainerStatuses[*].state.terminated.message}'])).stdout, (o) => o.includes('GH_INIT_TAG_MISMATCH'));
      expect(described).toContain('OldHeader.js was built for gateway version 0.0.9');
      await until('a Warning Event for the pod', 60_000, async () => (await cluster().kubectl(['-n', 'gatehouse-system', 'get', 'events', '--field-selector', `involvedObject.name=${pod},type=Warning`, '-o', 'name'])).stdout.trim(), (o) => o !== '');
      // The rollout does not finish, and the old pods serve.
      const rollout = await cluster().kubectl(['-n', 'gatehouse-system', 'rollout', 'status', 'deployment/extauth', '--timeout=10s'], { check: false });
      expect(rollout.code).not.toBe(0);
      expect((await cluster().curl(url, { host: 'app.test', 'x-team': 'blue' })).status).toBe(200);
      expect((await cluster().curl(url, { host: 'app.test' })).status).toBe(403);
      const check = await cluster().run(process.execPath, [GATEHOUSE_CLI, 'check', '--kubeconfig', cluster().kubeconfig], { check: false });
      expect(check.stdout, check.stdout).toMatch(new RegExp(`pod/${pod}: Init:\\w+ \\(plugin-old-header: .*was built for gateway version 0\\.0\\.9`));
      expect(check.code).toBe(1);
      // Back to the working values.
      await cluster().helm(['rollback', 'gatehouse', '--wait', '--timeout', '3m'], { timeoutMs: 200_000 });
      await cluster().kubectl(['-n', 'gatehouse-system', 'rollout', 'status', 'deployment/extauth', '--timeout=180s'], { timeoutMs: 200_000 });
      const healthy = await until('gatehouse check to pass', 60_000, () => cluster().run(process.execPath, [GATEHOUSE_CLI, 'check', '--kubeconfig', cluster().kubeconfig], { check: false }), (r) => r.code === 0);
      expect(healthy.stdout).toContain('No problems detected.');
    });
  }, 600_000);

  it('default values: deleting an extauth pod under traffic (1 request / 100 ms) fails no request (issue 27 item 3)', async () => {
    await withDiagnostics(async () => {
      const before = await until('two Ready extauth pods', 120_000, () => readyPods('extauth'), (p) => p.length === 2);
      await underTraffic('extauth pod deleted', async () => {
        await cluster().kubectl(['-n', 'gatehouse-system', 'delete', 'pod', before[0]!, '--wait=false']);
        // Until the replacement is Ready and the deleted pod is gone.
        await until('the extauth replacement', 180_000, () => readyPods('extauth'), (p) => p.length === 2 && !p.includes(before[0]!));
        await until('the deleted pod to go', 120_000, async () => (await cluster().kubectl(['-n', 'gatehouse-system', 'get', 'pod', before[0]!, '--ignore-not-found', '-o', 'name'])).stdout.trim(), (o) => o === '');
      });
    });
  }, 600_000);

  it('default values: a gateway rollout under the same traffic fails no request (issue 27 item 4)', async () => {
    await withDiagnostics(async () => {
      await underTraffic('gateway rollout', async () => {
        await cluster().kubectl(['-n', 'gatehouse-system', 'rollout', 'restart', 'deployment/gateway']);
        await cluster().kubectl(['-n', 'gatehouse-system', 'rollout', 'status', 'deployment/gateway', '--timeout=300s'], { timeoutMs: 330_000 });
        // The old pod drains for its preStop sleep and more: wait until it is gone.
        await until('one gateway pod', 120_000, async () => (await cluster().kubectl(['-n', 'gatehouse-system', 'get', 'pods', '-l', 'app.kubernetes.io/component=gateway', '-o', 'name'])).stdout.trim().split('\n').filter(Boolean), (p) => p.length === 1);
      });
    });
  }, 600_000);

  it('gatehouse install render | kubectl apply: the same objects serve the same story', async () => {
    await withDiagnostics(async () => {
      // The Helm release goes first (its CRDs and the applied resources stay, as Helm keeps crds/).
      await timed('helm uninstall', () => cluster().helm(['uninstall', 'gatehouse', '--wait', '--timeout', '3m'], { timeoutMs: 200_000 }));
      const valuesFile = join(work, 'values-render.yaml');
      await writeFile(valuesFile, stringify(values('gatehouse-render')));
      const render = await runCli('gatehouse', ['install', 'render', '--values', valuesFile]);
      expect(render.code, render.stderr).toBe(0);
      await timed('render: apply and roll out', async () => {
        // As docs/deployment.md tells operators: `gatehouse install render ... | kubectl apply -f -`.
        await cluster().kubectl(['apply', '-f', '-'], { input: render.stdout });
        for (const deployment of ['gateway', 'extauth']) {
          await cluster().kubectl(['-n', 'gatehouse-render', 'rollout', 'status', `deployment/${deployment}`, '--timeout=300s'], { timeoutMs: 330_000 });
        }
      });
      await assertPluginInitContainer('gatehouse-render');
      await assertRestricted('gatehouse-render');
      await timed('render: first 200', () => assertSeedStory('gatehouse-render'));
    });
  }, 600_000);

  it('an upgrade from the previous chart keeps serving under traffic (issue 27 item 5)', async () => {
    await withDiagnostics(async () => {
      // The previous chart: $GATEHOUSE_PREVIOUS_CHART_REF (a git ref), else where this branch left
      // main, else this very chart (on main itself: an upgrade that changes the pods only).
      const root = new URL('../..', import.meta.url).pathname;
      const git = (...args: string[]) => execFileSync('git', ['-C', root, ...args], { encoding: 'utf8' }).trim();
      const candidates = [process.env.GATEHOUSE_PREVIOUS_CHART_REF, ...['main', 'origin/main'].map((branch) => { try { return git('merge-base', 'HEAD', branch); } catch { return undefined; } }), 'HEAD'];
      const ref = candidates.find((c): c is string => !!c)!;
      const previous = join(work, 'previous');
      await mkdir(previous, { recursive: true });
      execFileSync('sh', ['-c', `git -C "${root}" archive "${ref}" core/helm/gatehouse | tar -x -C "${previous}"`]);
      console.info(`upgrade from the chart at ${ref} (${git('log', '-1', '--format=%h %s', ref).slice(0, 100)})`);
      // The render install goes first (one install at a time on the shared machine).
      await cluster().kubectl(['delete', 'namespace', 'gatehouse-render', '--wait=false', '--ignore-not-found']);
      const ns = 'gatehouse-upgrade';
      // Valid for both charts; the kube source named, since the previous default was the ConfigMap.
      const upgradeValues = { ...values(ns), config: { source: 'kube' } };
      const valuesFile = join(work, 'values-upgrade.yaml');
      await writeFile(valuesFile, stringify(upgradeValues));
      await timed('upgrade: install the previous chart', () => cluster().helm(['install', 'upgrade', join(previous, 'core/helm/gatehouse'), '-f', valuesFile, '--wait', '--timeout', '5m'], { timeoutMs: 330_000 }));
      const results = await underTraffic(
        'upgrade',
        async () => {
          await cluster().helm(['upgrade', 'upgrade', CHART, '-f', valuesFile, '--wait', '--timeout', '5m'], { timeoutMs: 330_000 });
          for (const deployment of ['gateway', 'extauth']) await cluster().kubectl(['-n', ns, 'rollout', 'status', `deployment/${deployment}`, '--timeout=300s'], { timeoutMs: 330_000 });
          await until('one gateway pod', 120_000, async () => (await cluster().kubectl(['-n', ns, 'get', 'pods', '-l', 'app.kubernetes.io/component=gateway', '-o', 'name'])).stdout.trim().split('\n').filter(Boolean), (p) => p.length === 1);
        },
        // The previous chart's pods leave without preStop (issue 27 item 4): a request or two may
        // meet one of them going. Serving must go on: most succeed, and all after the upgrade.
        { namespace: ns, allowFailures: true },
      );
      const failed = results!.filter((r) => r.status !== 200);
      console.info(`upgrade: ${failed.length} of ${results!.length} requests failed: ${JSON.stringify(failed)}`);
      expect(failed.length, JSON.stringify(failed)).toBeLessThan(results!.length / 10);
      expect(results!.slice(-20).every((r) => r.status === 200), JSON.stringify(results!.slice(-20))).toBe(true);
      await assertSeedStory(ns);
    });
  }, 900_000);
}
