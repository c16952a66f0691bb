import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DNS_IP, NODE_IP, NODE_NAME, REGISTRY, requireCluster, startCluster, type Cluster, type ClusterParts, type Traffic } from './cluster.ts';

const TEST_FILE = 'test/cluster/cluster.test.ts';
const TUNABLES = ['vm/overcommit_memory', 'vm/panic_on_oom', 'kernel/panic', 'kernel/panic_on_oops', 'kernel/keys/root_maxkeys', 'kernel/keys/root_maxbytes'];
const hostTunables = () => Object.fromEntries(TUNABLES.map((key) => [key, readFileSync(`/proc/sys/${key}`, 'utf8').trim()]));
/** The run's cgroups in any v1 hierarchy. */
const cgroupsOf = (dir: string) => readdirSync('/sys/fs/cgroup').flatMap((h) => {
  try {
    return readdirSync(`/sys/fs/cgroup/${h}`).filter((n) => n === `gatehouse-cluster-${dir.split('/').pop()}`);
  } catch {
    return [];
  }
});
/** The cluster's fixed ports (etcd, registry, API server, kubelet, kube-proxy, CoreDNS's health and ready, controller manager, scheduler). */
const CLUSTER_PORTS = [2379, 2380, 5000, 6443, 10250, 10248, 10249, 10256, 8080, 8181, 53, 10257, 10259];
/** Which of {@link CLUSTER_PORTS} have a listening TCP socket in the host's network namespace (the test process's). */
const hostListening = () => {
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is ADDR:PORT in hex; state 0A is LISTEN.
      if (fields[3] === '0A') ports.add(parseInt(fields[1]!.split(':')[1]!, 16));
    }
  }
  return CLUSTER_PORTS.filter((port) => ports.has(port));
};

const parts = requireCluster(TEST_FILE);
if (parts instanceof Error) {
  describe('the one-node test cluster', () => {
    it('needs the cluster parts on CI', () => {
      throw parts;
    });
  });
} else {
  describe.skipIf(!parts)('the one-node test cluster', () => harness(parts as ClusterParts));
}

/**
 * The harness itself (cluster.ts): what the other cluster tests rely on. The node comes up
 * Ready, pods run and get cluster DNS, and nothing of it is visible on the host: no port, no
 * iptables rule, no changed sysctl; stop() leaves no process, cgroup or file, and a run whose test
 * process was killed is cleaned up by the next start.
 */
function harness(parts: ClusterParts): void {
  let cluster: Cluster | undefined;
  const before = hostTunables();
  // Taken before the cluster starts: a port the host itself uses (a registry on 5000, ...) is not the cluster's.
  const listeningBefore = hostListening();
  /** The host's kube-proxy-style rules (none, unless something else on the host made them). */
  const hostKubeRules = async () => (await readIptables()).split('\n').filter((line) => line.includes('KUBE-'));
  let rulesBefore: string[] = [];

  beforeAll(async () => {
    rulesBefore = await hostKubeRules();
    cluster = await startCluster({ parts });
    console.info(`cluster start-up timings (ms): ${JSON.stringify(cluster.timings)}`);
  }, 300_000);
  afterAll(async () => {
    await cluster?.stop();
  }, 120_000);

  it('has a Ready node with the pause image, kube-proxy rules and CoreDNS answering for Services', async () => {
    const node = cluster!;
    const nodeJson = JSON.parse((await node.kubectl(['get', 'node', NODE_NAME, '-o', 'json'])).stdout) as { status: { addresses: { type: string; address: string }[]; nodeInfo: { kubeletVersion: string; containerRuntimeVersion: string } } };
    expect(nodeJson.status.addresses).toContainEqual({ type: 'InternalIP', address: NODE_IP });
    expect(nodeJson.status.nodeInfo.kubeletVersion).toBe('v1.37.2');
    expect(nodeJson.status.nodeInfo.containerRuntimeVersion).toMatch(/^containerd:\/\//);
    // CoreDNS through the kube-dns Service (kube-proxy's DNAT for the node's own traffic).
    const lookup = `const r = new (require('node:dns').promises.Resolver)(); r.setServers(['${DNS_IP}']); r.resolve4('kubernetes.default.svc.cluster.local').then((a) => console.log(a.join(',')), (e) => { console.error(e.code); process.exit(1); });`;
    const answer = await node.run(process.execPath, ['-e', lookup]);
    expect(answer.stdout.trim()).toBe('10.96.0.1');
  });

  it('runs a pod from the in-namespace registry on the pod network', async () => {
    const node = cluster!;
    await node.kubectl(['run', 'sandbox', `--image=${REGISTRY}/pause:${parts.pauseTag}`, '--restart=Never']);
    await node.kubectl(['wait', '--for=condition=Ready', 'pod/sandbox', '--timeout=120s'], { timeoutMs: 130_000 });
    const ip = (await node.kubectl(['get', 'pod', 'sandbox', '-o', 'jsonpath={.status.podIP}'])).stdout;
    expect(ip).toMatch(/^10\.244\.0\.\d+$/);
    // The pod's cgroup is under the run's cgroupRoot (kubepods/<qos>/pod<uid>), where stop() finds it.
    const uid = (await node.kubectl(['get', 'pod', 'sandbox', '-o', 'jsonpath={.metadata.uid}'])).stdout;
    const root = `/sys/fs/cgroup/memory/gatehouse-cluster-${node.dir.split('/').pop()}/kubepods`;
    const podCgroups = readdirSync(root, { recursive: true }).map(String).filter((p) => p.endsWith(`pod${uid}`));
    expect(podCgroups).toHaveLength(1);
  }, 180_000);

  it('sends steady traffic from inside the namespace and reports every request, refused ones included', async () => {
    const until = async (traffic: Traffic, count: number) => {
      const deadline = Date.now() + 30_000;
      while (traffic.count() < count) {
        if (Date.now() > deadline) throw new Error(`only ${traffic.count()} results after 30 s`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const served = await cluster!.traffic(`http://${REGISTRY}/v2/`, { intervalMs: 50 });
    await until(served, 10);
    const results = await served.stop();
    expect(results.length).toBeGreaterThanOrEqual(10);
    expect(results.filter((r) => r.status !== 200)).toEqual([]);
    expect(results.map((r) => r.at)).toEqual([...results.map((r) => r.at)].sort((a, b) => a - b));
    // Nothing listens on port 5001: every request is a failure with its reason, none is lost.
    const refused = await cluster!.traffic('http://127.0.0.1:5001/', { intervalMs: 50 });
    await until(refused, 5);
    const failures = await refused.stop();
    expect(failures.length).toBeGreaterThanOrEqual(5);
    expect(new Set(failures.map((r) => r.error))).toEqual(new Set(['ECONNREFUSED']));
  });

  it('changes nothing on the host while it runs: kernel tunables, listening ports, iptables rules', async () => {
    expect(hostTunables()).toEqual(before);
    // The same files inside the namespace hold kubelet's values.
    const inside = await cluster!.run('cat', TUNABLES.map((key) => `/proc/sys/${key}`));
    expect(inside.stdout.trim().split('\n')).toEqual(['1', '0', '10', '1', '1000000', '25000000']);
    expect(hostListening()).toEqual(listeningBefore);
    expect(await hostKubeRules()).toEqual(rulesBefore);
    // ...while the namespace has kube-proxy's chains.
    expect((await cluster!.run('iptables-save', [])).stdout).toMatch(/KUBE-SERVICES/);
  });

  it('a start that fails (an API server flag it refuses) throws with the daemon\'s log and leaves no process, cgroup or file', async () => {
    const error = await startCluster({ parts, apiServerArgs: ['--no-such-flag=1'] }).then(() => undefined, (e: Error) => e);
    expect(error?.message).toMatch(/kube-apiserver exited/);
    expect(error?.message).toContain('unknown flag: --no-such-flag');
    const id = /^cluster run ([0-9a-f]+) /.exec(error?.message ?? '')?.[1];
    expect(id).toBeDefined();
    expect(existsSync(`/tmp/gatehouse-cluster/${id}`)).toBe(false);
    expect(cgroupsOf(`/tmp/gatehouse-cluster/${id}`)).toEqual([]);
  }, 120_000);

  it('stop() leaves no process, cgroup or file; a run whose test process was killed is cleaned up by the next start', async () => {
    const node = cluster!;
    const dir = node.dir;
    const state = JSON.parse(await readFile(`${dir}/state.json`, 'utf8')) as { holder: number; pids: { pid: number }[] };
    await node.stop();
    cluster = undefined;
    for (const pid of [state.holder, ...state.pids.map((p) => p.pid)]) expect(existsSync(`/proc/${pid}`), `pid ${pid}`).toBe(false);
    expect(cgroupsOf(dir)).toEqual([]);
    expect(existsSync(dir)).toBe(false);

    // A test process that starts a cluster with a pod and is SIGKILLed: the daemons die with it
    // (pdeathsig), the pod's shim and containers do not; the next startCluster removes them.
    const child = spawn(process.execPath, ['--input-type=module', '-e', CRASHING_RUN(fileURLToPath(new URL('./cluster.ts', import.meta.url)))], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (output += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (output += c));
    const crashedDir = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the crashing run never got its pod Ready:\n${output}`)), 240_000);
      child.stdout.on('data', () => {
        const match = /^READY (\S+)$/m.exec(output);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
      child.once('close', () => reject(new Error(`the crashing run exited early:\n${output}`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('close', r));
    const leftover = JSON.parse(await readFile(`${crashedDir}/state.json`, 'utf8')) as { cgroup: string };
    expect(cgroupsOf(crashedDir).length, 'the killed run left its cgroups').toBeGreaterThan(0);

    cluster = await startCluster({ parts });
    expect(existsSync(crashedDir)).toBe(false);
    expect(cgroupsOf(crashedDir)).toEqual([]);
    expect(readdirSync('/sys/fs/cgroup/memory')).not.toContain(leftover.cgroup);
  }, 600_000);
}

/** The script of the crashing run: a cluster and a pod, then it waits to be killed. */
const CRASHING_RUN = (module: string) => `
import { startCluster, REGISTRY } from ${JSON.stringify(module)};
const c = await startCluster();
await c.kubectl(['run', 'p', '--image=' + REGISTRY + '/pause:3.10', '--restart=Never']);
await c.kubectl(['wait', '--for=condition=Ready', 'pod/p', '--timeout=120s'], { timeoutMs: 130_000 });
console.log('READY ' + c.dir);
setInterval(() => {}, 1000);
`;

/** The host's iptables rules (empty when iptables is missing). */
async function readIptables(): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn('iptables-save', [], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.on('error', () => resolve(''));
    child.on('close', () => resolve(out));
  });
}
