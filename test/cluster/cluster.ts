/**
 * A real one-node Kubernetes cluster for tests, inside a network + mount namespace of its own
 * (facts and host quirks: README.md next to this file).
 *
 *   const cluster = await startCluster();             // etcd, control plane, containerd, kubelet,
 *                                                      // kube-proxy, CoreDNS, a registry; node Ready
 *   await cluster.kubectl(['get', 'pods', '-A']);      // any command, run inside the namespace
 *   await cluster.pushImage('localhost/gatehouse:0.1.0', 'gatehouse:0.1.0');
 *   await cluster.stop();                              // every process by its PID, then the cgroups
 *
 * The namespace is held by a `sleep` this process starts with `unshare --net --mount` (and kills
 * with it: PR_SET_PDEATHSIG). Every daemon runs inside it (nsenter), in a cgroup of the run's own,
 * so that container shims and containers, which daemonize, are found and killed at the end too; a
 * run whose test process died without stopping is cleaned up by the next {@link startCluster}.
 * Nothing listens outside the namespace and no host iptables rule, sysctl or file outside the
 * run's directory changes (kubelet's kernel tunables are bind-mounted files inside the namespace).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, readFileSync, readdirSync, rmdirSync, statSync } from 'node:fs';
import { cp, mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { findKube } from '../kube/apiserver.ts';
import { findHelm } from '../helm/helm.ts';

const INSTALL_SCRIPT = fileURLToPath(new URL('./install-cluster.sh', import.meta.url));

/** The node's address: the bridge `gh0` inside the namespace (also its default route). */
export const NODE_IP = '10.250.0.1';
/** Pod addresses (the CNI bridge `cni0`, host-local IPAM). */
export const POD_CIDR = '10.244.0.0/24';
/** Service addresses; the `kubernetes` Service is .1, `kube-dns` .10. */
export const SERVICE_CIDR = '10.96.0.0/16';
export const DNS_IP = '10.96.0.10';
/** The node's name. */
export const NODE_NAME = 'gatehouse-node';
/** The in-namespace registry (plain HTTP; containerd's hosts.toml allows it). Image references start with this. */
export const REGISTRY = '127.0.0.1:5000';

/** Where every run keeps its files (a directory per run, with state.json for the crash cleanup). */
const RUNS_DIR = '/tmp/gatehouse-cluster';
/** The cgroup v1 hierarchies' mount point; a run's cgroups are `<hierarchy>/gatehouse-cluster-<id>`. */
const CGROUP_FS = '/sys/fs/cgroup';
const CGROUP_PREFIX = 'gatehouse-cluster-';

/** The host-global sysctls kubelet sets (setupKernelTunables), with the values it wants: bind-mounted inside the namespace. */
const KERNEL_TUNABLES: Record<string, string> = {
  'vm/overcommit_memory': '1',
  'vm/panic_on_oom': '0',
  'kernel/panic': '10',
  'kernel/panic_on_oops': '1',
  'kernel/keys/root_maxkeys': '1000000',
  'kernel/keys/root_maxbytes': '25000000',
};

/** The directory install-cluster.sh installs into (`$GATEHOUSE_TOOLS_DIR/cluster`). */
export function clusterToolsDir(): string {
  return join(process.env.GATEHOUSE_TOOLS_DIR || join(homedir(), '.cache', 'gatehouse-tools'), 'cluster');
}

/** The programs and files a cluster needs: install-cluster.sh's and install-kube.sh's, and helm. */
export interface ClusterParts {
  bin: (name: string) => string;
  etcd: string;
  kubeApiServer: string;
  cniBin: string;
  pauseLayout: string;
  pauseTag: string;
  helm: string;
}

/** The parts, or a sentence saying what is missing (and how to install it). */
export function findClusterParts(): ClusterParts | string {
  if (process.getuid?.() !== 0) return 'the cluster needs root (namespaces, cgroups, containerd)';
  if (!existsSync(`${CGROUP_FS}/memory`)) return `no cgroup v1 memory hierarchy at ${CGROUP_FS}/memory (the harness prepares cgroup v1 hierarchies)`;
  const dir = clusterToolsDir();
  const bin = (name: string) => join(dir, 'bin', name);
  const needed = ['kubelet', 'kube-scheduler', 'kube-controller-manager', 'kube-proxy', 'kubectl', 'coredns', 'containerd', 'runc', 'docker-registry', 'skopeo'];
  const missing = needed.filter((name) => !existsSync(bin(name)));
  if (missing.length || !existsSync(join(dir, 'pause-oci'))) return `${missing.join(', ') || 'the pause image'} not found in ${dir}: run bash ${INSTALL_SCRIPT}`;
  const kube = findKube();
  if (!kube) return 'etcd or kube-apiserver not found: run bash test/kube/install-kube.sh';
  const helm = findHelm();
  if (!helm) return 'helm not found: run bash test/helm/install-helm.sh';
  for (const tool of ['unshare', 'nsenter', 'setpriv', 'ip', 'openssl', 'curl']) {
    if (!(process.env.PATH ?? '').split(':').some((d) => existsSync(join(d, tool)))) return `${tool} is not on PATH`;
  }
  return {
    bin,
    etcd: kube.etcd,
    kubeApiServer: kube.kubeApiServer,
    cniBin: join(dir, 'cni-bin'),
    pauseLayout: join(dir, 'pause-oci'),
    pauseTag: readFileSync(join(dir, 'pause-tag'), 'utf8').trim(),
    helm,
  };
}

/**
 * The CI/SKIPPED rule: the parts when found (and `alsoMissing`, the test's own other needs, is
 * undefined); otherwise under `CI=true` an Error to fail with, elsewhere a loud SKIPPED line and undefined.
 */
export function requireCluster(testFile: string, alsoMissing?: string): ClusterParts | Error | undefined {
  const found = findClusterParts();
  const missing = typeof found === 'string' ? found : alsoMissing;
  if (missing === undefined) return found as ClusterParts;
  if (process.env.CI === 'true') return new Error(`${testFile}: ${missing}`);
  console.warn(`\n*** SKIPPED ${testFile}: ${missing} ***\n`);
  return undefined;
}

/** What a command printed and how it ended. */
export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Options of {@link Cluster.run}. */
export interface RunOptions {
  /** Written to the command's stdin. */
  input?: string;
  /** Reject when the command fails (default true). */
  check?: boolean;
  /** Killed after this long (default 120 s). */
  timeoutMs?: number;
  /** Enter the network namespace only (the host's mounts: podman's storage), not the mount namespace. */
  netOnly?: boolean;
  env?: Record<string, string>;
}

/** A running one-node cluster. */
export interface Cluster {
  /** The run's directory (kubeconfig, logs, state). */
  readonly dir: string;
  /** An admin kubeconfig (client certificate in `system:masters`) for the API server at `https://NODE_IP:6443`. */
  readonly kubeconfig: string;
  /** How long each start-up phase took (ms). */
  readonly timings: Record<string, number>;
  /** Runs a program inside the namespace. */
  run(command: string, args: string[], options?: RunOptions): Promise<CommandResult>;
  /** `kubectl --kubeconfig <admin> ARGS`. */
  kubectl(args: string[], options?: RunOptions): Promise<CommandResult>;
  /** `helm --kubeconfig <admin> ARGS`. */
  helm(args: string[], options?: RunOptions): Promise<CommandResult>;
  /** `curl` inside the namespace: status code and body of one request (`-sS`, 10 s timeout). */
  curl(url: string, headers?: Record<string, string>): Promise<{ status: number; body: string }>;
  /**
   * Steady traffic from inside the namespace: one GET every `intervalMs` (default 100) with
   * `headers`, each with its own timeout (default 5 s), until `stop()`, which returns every result.
   * For the scenarios that must fail no request (rollouts, deleted pods).
   */
  traffic(url: string, options?: { headers?: Record<string, string>; intervalMs?: number; timeoutMs?: number }): Promise<Traffic>;
  /** Pushes a local podman image (`containers-storage`) to the registry as `REGISTRY/<name>`. */
  pushImage(local: string, name: string): Promise<void>;
  /** Pushes an OCI layout (`DIR:TAG`) to the registry as `REGISTRY/<name>`. */
  pushLayout(layout: string, name: string): Promise<void>;
  /** The tails of the daemons' logs, and the pods and events, for failure messages. */
  diagnostics(): Promise<string>;
  /**
   * The tails of the logs of the pods of `namespace` whose names start with `podPrefix`, read
   * from the kubelet's log files on this host (`kubectl logs` cannot reach the kubelet here: the
   * API server does not resolve the node's name). Each line is prefixed `pod/container`.
   */
  podLogs(namespace: string, podPrefix?: string, tailLines?: number): Promise<string>;
  /** Stops everything (by recorded PIDs and cgroups) and removes the run's files. Safe to call twice. */
  stop(): Promise<void>;
}

/** One request of {@link Cluster.traffic}: when it was sent (ms since the start), and its status or error. */
export interface TrafficResult {
  at: number;
  status?: number;
  error?: string;
  /** For an answer other than 200: its `x-gatehouse-error` header and the start of its body. */
  detail?: string;
}

/** Running traffic: `stop()` ends it and returns every request's result, in order. */
export interface Traffic {
  /** How many results have come back so far. */
  count(): number;
  stop(): Promise<TrafficResult[]>;
}

/**
 * The traffic generator, run by this Node inside the namespace: fetch() every interval (not waiting
 * for the previous answer, so that a stalled request does not hide the next), one JSON line per
 * result, until SIGTERM, then the results still pending are waited for.
 */
const TRAFFIC_JS = `
const [url, headers, interval, timeout] = [process.argv[1], JSON.parse(process.argv[2]), Number(process.argv[3]), Number(process.argv[4])];
const start = Date.now();
const pending = new Set();
const one = () => {
  const at = Date.now() - start;
  const p = fetch(url, { headers, signal: AbortSignal.timeout(timeout) })
    .then(async (r) => { const body = await r.text(); return r.status === 200 ? { at, status: r.status } : { at, status: r.status, detail: (r.headers.get('x-gatehouse-error') ?? '-') + ' ' + body.slice(0, 200) }; }, (e) => ({ at, error: String(e.cause?.code ?? e.cause?.message ?? e.name) }))
    .then((r) => { process.stdout.write(JSON.stringify(r) + '\\n'); pending.delete(p); });
  pending.add(p);
};
const timer = setInterval(one, interval);
one();
process.on('SIGTERM', async () => { clearInterval(timer); await Promise.all(pending); process.exit(0); });
`;

/** What {@link startCluster} records for the crash cleanup of a later run. */
interface RunState {
  owner: number;
  holder?: number;
  pids: { name: string; pid: number }[];
  cgroup: string;
}

/** The cgroup v1 hierarchies mounted here (directories of /sys/fs/cgroup, symlinks such as cpu -> cpu,cpuacct resolved once). */
function hierarchies(): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const name of readdirSync(CGROUP_FS)) {
    const path = join(CGROUP_FS, name);
    let real: string;
    try {
      if (!statSync(path).isDirectory()) continue;
      real = execFileSync('readlink', ['-f', path], { encoding: 'utf8' }).trim();
    } catch {
      continue;
    }
    if (seen.has(real)) continue;
    seen.add(real);
    out.push(path);
  }
  return out;
}

/** Every process in a cgroup tree (one hierarchy is enough: a process is in every hierarchy). */
function processesIn(path: string): number[] {
  if (!existsSync(path)) return [];
  const pids: number[] = [];
  const walk = (dir: string) => {
    try {
      for (const line of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n')) if (line) pids.push(Number(line));
      for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) walk(join(dir, entry.name));
    } catch {
      // Removed meanwhile.
    }
  };
  walk(path);
  return pids;
}

/** Removes a cgroup tree, leaves first, in every hierarchy. */
function removeCgroups(name: string): void {
  for (const hierarchy of hierarchies()) {
    const root = join(hierarchy, name);
    if (!existsSync(root)) continue;
    const remove = (dir: string) => {
      try {
        for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) remove(join(dir, entry.name));
        rmdirSync(dir);
      } catch {
        // Gone already (another run's cleanup), or still busy (a process we could not kill): left for the next run's cleanup.
      }
    };
    remove(root);
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** SIGKILLs every process of a cgroup tree until none is left (or 20 s pass). */
async function killCgroup(name: string): Promise<void> {
  const tree = join(CGROUP_FS, 'pids', name);
  const probe = existsSync(join(CGROUP_FS, 'pids')) ? tree : join(CGROUP_FS, 'memory', name);
  const deadline = Date.now() + 20_000;
  for (;;) {
    const pids = processesIn(probe);
    if (!pids.length || Date.now() > deadline) return;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    await sleep(100);
  }
}

/** Kills recorded PIDs that still run the recorded program, then the cgroup tree, then removes the cgroups. */
async function tearDown(state: RunState): Promise<void> {
  const recorded = [...state.pids].reverse();
  if (state.holder) recorded.push({ name: 'sleep', pid: state.holder });
  for (const { name, pid } of recorded) {
    // A PID may have been reused since a crash: only a process running the recorded program is ours.
    let comm = '';
    try {
      comm = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (!comm.includes(name)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone.
    }
  }
  await killCgroup(state.cgroup);
  removeCgroups(state.cgroup);
}

/** Tears down the runs whose test process is gone (a crash or a kill before `stop`). */
async function cleanLeftovers(): Promise<void> {
  let runs: string[];
  try {
    runs = await readdir(RUNS_DIR);
  } catch {
    return;
  }
  for (const run of runs) {
    const dir = join(RUNS_DIR, run);
    let state: RunState | undefined;
    try {
      state = JSON.parse(await readFile(join(dir, 'state.json'), 'utf8')) as RunState;
    } catch {
      state = undefined;
    }
    if (state && alive(state.owner)) continue;
    if (state) await tearDown(state);
    await rm(dir, { recursive: true, force: true });
  }
  // Cgroups of runs whose directory is gone.
  for (const name of readdirSync(join(CGROUP_FS, 'memory')).filter((n) => n.startsWith(CGROUP_PREFIX))) {
    if (!existsSync(join(RUNS_DIR, name.slice(CGROUP_PREFIX.length)))) {
      await killCgroup(name);
      removeCgroups(name);
    }
  }
}

/** A daemon of the cluster: its output tail, whether it still runs, and how to stop it. */
interface Daemon {
  readonly name: string;
  readonly pid: number;
  log(): string;
  assertRunning(): void;
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

/** Options of {@link startCluster}. */
export interface ClusterOptions {
  parts?: ClusterParts;
  /** Extra kube-apiserver flags. */
  apiServerArgs?: string[];
}

/**
 * Brings the cluster up and waits until the node is Ready and CoreDNS answers ready. Throws with
 * the daemons' logs when a phase does not complete (and has stopped everything by then).
 */
export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const found = options.parts ?? findClusterParts();
  if (typeof found === 'string') throw new Error(found);
  const parts = found;
  await cleanLeftovers();

  const id = randomBytes(4).toString('hex');
  const dir = join(RUNS_DIR, id);
  const cgroup = `${CGROUP_PREFIX}${id}`;
  await mkdir(dir, { recursive: true });
  const state: RunState = { owner: process.pid, pids: [], cgroup };
  const saveState = () => writeFile(join(dir, 'state.json'), JSON.stringify(state));
  await saveState();
  const timings: Record<string, number> = {};
  const daemons: Daemon[] = [];
  let holder: ChildProcess | undefined;
  let stopped = false;
  const file = (...names: string[]) => join(dir, ...names);

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    const started = Date.now();
    // kubelet first, so that it restarts nothing while the rest goes; then the others in reverse order.
    for (const daemon of [...daemons.filter((d) => d.name === 'kubelet'), ...daemons.filter((d) => d.name !== 'kubelet').reverse()]) {
      await daemon.stop('SIGKILL', 0);
    }
    holder?.kill('SIGKILL');
    await tearDown(state);
    // The daemons' logs, for a look after a failed run in CI.
    const keep = process.env.GATEHOUSE_CLUSTER_LOGS;
    if (keep) await cp(file('logs'), join(keep, id), { recursive: true }).catch(() => {});
    process.off('exit', onExit);
    await rm(dir, { recursive: true, force: true });
    timings['teardown'] = Date.now() - started;
  };
  // The daemons die with this process (pdeathsig); containers and shims are left to the next run's cleanup.
  const onExit = () => {
    if (!stopped) holder?.kill('SIGKILL');
  };
  process.once('exit', onExit);

  const phase = async <T>(name: string, step: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    try {
      return await step();
    } finally {
      timings[name] = Date.now() - started;
    }
  };

  /** Runs a command inside the namespace and collects its output. */
  const run = (command: string, args: string[], runOptions: RunOptions = {}): Promise<CommandResult> => {
    if (!state.holder) return Promise.reject(new Error('the namespace is not up'));
    const enter = ['--target', String(state.holder), '--net', ...(runOptions.netOnly ? [] : ['--mount']), '--'];
    return new Promise((resolve, reject) => {
      const child = spawn('nsenter', [...enter, command, ...args], { stdio: [runOptions.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], env: { ...process.env, ...runOptions.env } });
      let stdout = '';
      let stderr = '';
      child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
      child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr = (stderr + c).slice(-64 * 1024)));
      const timeoutMs = runOptions.timeoutMs ?? 120_000;
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.on('error', reject);
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        const result = { code: code ?? -1, stdout, stderr: signal === 'SIGKILL' ? `${stderr}\n(killed after ${timeoutMs} ms)` : stderr };
        if (runOptions.check !== false && result.code !== 0) reject(new Error(`${command} ${args.join(' ')} exited with ${result.code}:\n${result.stderr}${result.stdout.slice(-4000)}`));
        else resolve(result);
      });
      if (child.stdin) {
        // A command that exits without reading its input: its exit status tells what happened.
        child.stdin.on('error', () => {});
        child.stdin.end(runOptions.input);
      }
    });
  };

  /** Starts a daemon inside the namespace, in the run's `system` cgroup, killed if this process dies. */
  const daemon = async (name: string, binary: string, args: string[]): Promise<Daemon> => {
    const procs = hierarchies().map((h) => join(h, cgroup, 'system', 'cgroup.procs'));
    // The shell joins the cgroups and execs the daemon: its children (containerd's shims) start there too.
    const joinCgroups = `for f in ${procs.map((p) => `'${p}'`).join(' ')}; do echo $$ > "$f"; done; exec "$@"`;
    const logFile = file('logs', `${name}.log`);
    const child = spawn('nsenter', ['--target', String(state.holder), '--net', '--mount', '--', 'setpriv', '--pdeathsig', 'KILL', '--', 'sh', '-c', joinCgroups, name, binary, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const log = createWriteStream(logFile);
    const keep = (chunk: string) => {
      output = (output + chunk).slice(-32 * 1024);
      log.write(chunk);
    };
    child.stdout!.setEncoding('utf8').on('data', keep);
    child.stderr!.setEncoding('utf8').on('data', keep);
    child.on('error', (error) => keep(`\n${name}: ${error.message}\n`));
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    state.pids.push({ name: binary.split('/').pop()!, pid: child.pid! });
    await saveState();
    const entry: Daemon = {
      name,
      pid: child.pid!,
      log: () => output,
      assertRunning() {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}):\n${output.slice(-6000)}`);
      },
      async stop(signal = 'SIGTERM', graceMs = 10_000) {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill(signal);
          const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
          await exited;
          clearTimeout(timer);
        }
        log.end();
      },
    };
    daemons.push(entry);
    return entry;
  };

  /** Polls `probe` every 250 ms until it returns true; checks that `watched` still run. */
  const waitFor = async (what: string, timeoutMs: number, probe: () => Promise<boolean>, watched: Daemon[] = daemons) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      for (const d of watched) d.assertRunning();
      if (await probe().catch(() => false)) return;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await sleep(250);
    }
  };

  const diagnostics = async () => {
    const lines = daemons.map((d) => `--- ${d.name} (tail)\n${d.log().slice(-3000)}`);
    if (state.holder && !stopped) {
      const pods = await run(parts.bin('kubectl'), ['--kubeconfig', file('admin.kubeconfig'), 'get', 'pods,events', '-A', '-o', 'wide'], { check: false, timeoutMs: 15_000 }).catch(() => undefined);
      if (pods) lines.push(`--- kubectl get pods,events -A\n${pods.stdout}${pods.stderr}`);
    }
    return lines.join('\n');
  };

  try {
    // --- the namespace, and the run's cgroups in every v1 hierarchy (quirk 2: kubelet's cgroupRoot
    //     must exist in each; cpuset needs its cpus and mems before a process can join it)
    await phase('namespace', async () => {
      for (const hierarchy of hierarchies()) {
        for (const sub of ['', 'system']) {
          const path = join(hierarchy, cgroup, sub);
          await mkdir(path, { recursive: true });
          if (hierarchy.endsWith('/cpuset')) {
            for (const key of ['cpuset.cpus', 'cpuset.mems']) await writeFile(join(path, key), readFileSync(join(hierarchy, key), 'utf8'));
          }
        }
      }
      holder = spawn('setpriv', ['--pdeathsig', 'KILL', '--', 'unshare', '--net', '--mount', '--propagation', 'private', '--', 'sleep', 'infinity'], { stdio: 'ignore' });
      state.holder = holder.pid!;
      await saveState();
      // unshare execs sleep once the namespaces exist: wait until the holder's net namespace differs from ours.
      const own = execFileSync('readlink', ['/proc/self/ns/net'], { encoding: 'utf8' }).trim();
      await waitFor('the namespace', 10_000, async () => {
        try {
          return execFileSync('readlink', [`/proc/${state.holder}/ns/net`], { encoding: 'utf8' }).trim() !== own && readFileSync(`/proc/${state.holder}/cmdline`, 'utf8').startsWith('sleep');
        } catch {
          return false;
        }
      });
      for (const d of ['logs', 'etcd', 'pki', 'kubelet', 'pod-logs', 'containerd', 'cni/net.d', 'cni/ipam', 'certs.d', 'sysctl', 'registry', 'manifests']) await mkdir(file(d), { recursive: true });
      for (const [key, value] of Object.entries(KERNEL_TUNABLES)) await writeFile(file('sysctl', key.replace(/\//g, '.')), `${value}\n`);
      // Inside the namespace: the node's bridge and default route, loopback, tmpfs where containerd
      // and CRI keep their runtime state, and the kernel tunables as files of our own.
      const setup = [
        'set -e',
        'ip link set lo up',
        'ip link add gh0 type bridge',
        `ip addr add ${NODE_IP}/24 dev gh0`,
        'ip link set gh0 up',
        'ip route add default dev gh0',
        'mkdir -p /run/containerd /run/netns /var/log/containers',
        'mount -t tmpfs -o mode=0711 tmpfs /run/containerd',
        'mount -t tmpfs -o mode=0755 tmpfs /run/netns',
        'mount -t tmpfs -o mode=0755 tmpfs /var/log/containers',
        ...Object.keys(KERNEL_TUNABLES).map((key) => `mount --bind '${file('sysctl', key.replace(/\//g, '.'))}' /proc/sys/${key}`),
      ].join('\n');
      await run('sh', ['-c', setup]);
    });

    // --- credentials: a CA, the API server's serving certificate, one admin client certificate
    //     (system:masters) that every component uses, and the service-account key pair
    const pki = await phase('certificates', () => writePki(file('pki')));
    const server = `https://${NODE_IP}:6443`;
    const kubeconfig = file('admin.kubeconfig');
    await writeFile(kubeconfig, stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'gatehouse', cluster: { server, 'certificate-authority': pki.ca } }],
      users: [{ name: 'admin', user: { 'client-certificate': pki.adminCert, 'client-key': pki.adminKey } }],
      contexts: [{ name: 'admin', context: { cluster: 'gatehouse', user: 'admin', namespace: 'default' } }],
      'current-context': 'admin',
    }));
    const kubectl = (args: string[], runOptions?: RunOptions) => run(parts.bin('kubectl'), ['--kubeconfig', kubeconfig, ...args], runOptions);

    // --- control plane
    await phase('control plane', async () => {
      await daemon('etcd', parts.etcd, [
        '--name=gatehouse-node',
        `--data-dir=${file('etcd', 'data')}`,
        '--listen-client-urls=http://127.0.0.1:2379',
        '--advertise-client-urls=http://127.0.0.1:2379',
        '--listen-peer-urls=http://127.0.0.1:2380',
        '--initial-advertise-peer-urls=http://127.0.0.1:2380',
        '--initial-cluster=gatehouse-node=http://127.0.0.1:2380',
        '--logger=zap',
        '--log-level=warn',
        // The data is thrown away with the run: no fsync per write on a shared disk.
        '--unsafe-no-fsync',
      ]);
      await waitFor('etcd /health', 30_000, async () => (await run('curl', ['-sf', 'http://127.0.0.1:2379/health'], { check: false, timeoutMs: 5000 })).stdout.includes('"health":"true"'));
      await daemon('kube-apiserver', parts.kubeApiServer, [
        `--advertise-address=${NODE_IP}`,
        '--bind-address=0.0.0.0',
        '--secure-port=6443',
        '--etcd-servers=http://127.0.0.1:2379',
        `--tls-cert-file=${pki.servingCert}`,
        `--tls-private-key-file=${pki.servingKey}`,
        `--client-ca-file=${pki.ca}`,
        // The front-proxy CA: without one, every component's delegated authentication logs an error per second.
        `--requestheader-client-ca-file=${pki.ca}`,
        '--requestheader-allowed-names=front-proxy-client',
        '--requestheader-username-headers=X-Remote-User',
        '--requestheader-group-headers=X-Remote-Group',
        '--requestheader-extra-headers-prefix=X-Remote-Extra-',
        `--kubelet-client-certificate=${pki.adminCert}`,
        `--kubelet-client-key=${pki.adminKey}`,
        '--authorization-mode=Node,RBAC',
        '--anonymous-auth=false',
        '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
        `--service-account-key-file=${pki.saPublic}`,
        `--service-account-signing-key-file=${pki.saPrivate}`,
        `--service-cluster-ip-range=${SERVICE_CIDR}`,
        '--allow-privileged=true',
        `--cert-dir=${file('pki', 'apiserver')}`,
        '--profiling=false',
        '--v=0',
        ...(options.apiServerArgs ?? []),
      ]);
      await waitFor('kube-apiserver /readyz', 90_000, async () => (await kubectl(['get', '--raw', '/readyz'], { check: false, timeoutMs: 10_000 })).stdout.trim() === 'ok');
      const common = [`--kubeconfig=${kubeconfig}`, `--authentication-kubeconfig=${kubeconfig}`, `--authorization-kubeconfig=${kubeconfig}`, '--leader-elect=false', '--bind-address=127.0.0.1', '--profiling=false'];
      await daemon('kube-controller-manager', parts.bin('kube-controller-manager'), [
        ...common,
        `--service-account-private-key-file=${pki.saPrivate}`,
        `--root-ca-file=${pki.ca}`,
        '--use-service-account-credentials=false',
        `--service-cluster-ip-range=${SERVICE_CIDR}`,
        `--cluster-cidr=${POD_CIDR}`,
        '--allocate-node-cidrs=false',
      ]);
      await daemon('kube-scheduler', parts.bin('kube-scheduler'), common);
    });

    // --- node: registry (with the pause image), containerd, CNI, kubelet, kube-proxy, CoreDNS
    await phase('node', async () => {
      const registryConfig = file('registry.yaml');
      await writeFile(registryConfig, stringify({
        version: 0.1,
        log: { level: 'warn', accesslog: { disabled: true } },
        storage: { filesystem: { rootdirectory: file('registry') }, delete: { enabled: true } },
        http: { addr: REGISTRY },
      }));
      const registry = await daemon('registry', parts.bin('docker-registry'), ['serve', registryConfig]);
      await waitFor('the registry', 30_000, async () => (await run('curl', ['-sf', `http://${REGISTRY}/v2/`], { check: false, timeoutMs: 5000 })).code === 0, [registry]);
      await pushLayout(`${parts.pauseLayout}:${parts.pauseTag}`, `pause:${parts.pauseTag}`);

      // containerd's registry hosts: plain HTTP for the in-namespace registry.
      await mkdir(file('certs.d', REGISTRY), { recursive: true });
      await writeFile(file('certs.d', REGISTRY, 'hosts.toml'), `server = "http://${REGISTRY}"\n\n[host."http://${REGISTRY}"]\n  capabilities = ["pull", "resolve", "push"]\n  skip_verify = true\n`);
      await writeFile(file('cni', 'net.d', '10-gatehouse.conflist'), JSON.stringify({
        cniVersion: '1.0.0',
        name: 'gatehouse',
        plugins: [
          { type: 'bridge', bridge: 'cni0', isGateway: true, ipMasq: false, hairpinMode: true, ipam: { type: 'host-local', ranges: [[{ subnet: POD_CIDR }]], routes: [{ dst: '0.0.0.0/0' }], dataDir: file('cni', 'ipam') } },
          { type: 'portmap', capabilities: { portMappings: true } },
        ],
      }, null, 2));
      const containerdConfig = file('containerd.toml');
      await writeFile(containerdConfig, [
        'version = 2',
        `root = "${file('containerd', 'root')}"`,
        'state = "/run/containerd/state"',
        'disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]',
        '[grpc]',
        '  address = "/run/containerd/containerd.sock"',
        '[ttrpc]',
        '  address = "/run/containerd/containerd.sock.ttrpc"',
        '[plugins."io.containerd.internal.v1.opt"]',
        `  path = "${file('containerd', 'opt')}"`,
        '[plugins."io.containerd.grpc.v1.cri"]',
        `  sandbox_image = "${REGISTRY}/pause:${parts.pauseTag}"`,
        // Quirk 3: no CAP_SYS_RESOURCE in this machine's bounding set, so runc cannot lower the
        // sandbox's oom_score_adj to -998; this keeps it at or above containerd's own.
        '  restrict_oom_score_adj = true',
        '  enable_selinux = false',
        '  [plugins."io.containerd.grpc.v1.cri".containerd]',
        '    snapshotter = "overlayfs"',
        '    default_runtime_name = "runc"',
        '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]',
        '      runtime_type = "io.containerd.runc.v2"',
        '      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]',
        '        SystemdCgroup = false',
        `        BinaryName = "${parts.bin('runc')}"`,
        '  [plugins."io.containerd.grpc.v1.cri".cni]',
        `    bin_dir = "${parts.cniBin}"`,
        `    conf_dir = "${file('cni', 'net.d')}"`,
        '  [plugins."io.containerd.grpc.v1.cri".registry]',
        `    config_path = "${file('certs.d')}"`,
        '',
      ].join('\n'));
      const containerd = await daemon('containerd', parts.bin('containerd'), ['--config', containerdConfig]);
      await waitFor('containerd', 30_000, async () => existsSync(`/proc/${state.holder}/root/run/containerd/containerd.sock`), [containerd]);

      const kubeletConfig = file('kubelet.yaml');
      await writeFile(kubeletConfig, stringify({
        apiVersion: 'kubelet.config.k8s.io/v1beta1',
        kind: 'KubeletConfiguration',
        // Quirk 1: this machine has cgroup v1 (hybrid), which kubelet 1.37 refuses unless told.
        failCgroupV1: false,
        cgroupDriver: 'cgroupfs',
        cgroupRoot: `/${cgroup}`,
        containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
        address: NODE_IP,
        readOnlyPort: 0,
        healthzBindAddress: '127.0.0.1',
        authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: pki.ca } },
        authorization: { mode: 'Webhook' },
        clusterDomain: 'cluster.local',
        clusterDNS: [DNS_IP],
        // The machine's resolv.conf names resolvers that the namespace cannot reach.
        resolvConf: '',
        podLogsDir: file('pod-logs'),
        failSwapOn: false,
        serializeImagePulls: false,
        // A shared machine's disk and memory are not ours to guard: no evictions, no image GC.
        evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
        imageGCHighThresholdPercent: 100,
        imageGCLowThresholdPercent: 99,
        // Faster status updates and sync than the defaults, for short tests.
        nodeStatusUpdateFrequency: '2s',
        syncFrequency: '10s',
        rotateCertificates: false,
        serverTLSBootstrap: false,
        protectKernelDefaults: false,
        localStorageCapacityIsolation: true,
      }));
      await daemon('kubelet', parts.bin('kubelet'), [
        `--config=${kubeletConfig}`,
        `--kubeconfig=${kubeconfig}`,
        `--root-dir=${file('kubelet')}`,
        `--cert-dir=${file('kubelet', 'pki')}`,
        `--hostname-override=${NODE_NAME}`,
        `--node-ip=${NODE_IP}`,
        '--v=1',
      ]);
      const proxyConfig = file('kube-proxy.yaml');
      await writeFile(proxyConfig, stringify({
        apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
        kind: 'KubeProxyConfiguration',
        mode: 'iptables',
        clientConnection: { kubeconfig },
        hostnameOverride: NODE_NAME,
        clusterCIDR: POD_CIDR,
        bindAddress: NODE_IP,
        healthzBindAddress: '127.0.0.1:10256',
        metricsBindAddress: '127.0.0.1:10249',
        // 0: leave the conntrack sysctls alone (nf_conntrack_max is not writable in a non-initial namespace).
        conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
      }));
      await daemon('kube-proxy', parts.bin('kube-proxy'), [`--config=${proxyConfig}`]);
      await waitFor('node Ready', 120_000, async () => (await kubectl(['get', 'node', NODE_NAME, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'], { check: false, timeoutMs: 10_000 })).stdout === 'True');
    });

    await phase('coredns', async () => {
      // CoreDNS as a process of the node (the binary install-cluster.sh built; no image), behind the
      // kube-dns Service at DNS_IP through a selector-less Service and an EndpointSlice of the node.
      const corefile = file('Corefile');
      await writeFile(corefile, [
        '.:53 {',
        '    errors',
        '    health :8080',
        '    ready :8181',
        `    kubernetes cluster.local in-addr.arpa ip6.arpa {`,
        `        kubeconfig ${kubeconfig} admin`,
        '        pods insecure',
        '        fallthrough in-addr.arpa ip6.arpa',
        '    }',
        '    cache 5',
        '}',
        '',
      ].join('\n'));
      const coredns = await daemon('coredns', parts.bin('coredns'), ['-conf', corefile]);
      const dns = [
        { apiVersion: 'v1', kind: 'Service', metadata: { name: 'kube-dns', namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } }, spec: { clusterIP: DNS_IP, ports: [{ name: 'dns', port: 53, protocol: 'UDP' }, { name: 'dns-tcp', port: 53, protocol: 'TCP' }] } },
        {
          apiVersion: 'discovery.k8s.io/v1',
          kind: 'EndpointSlice',
          metadata: { name: 'kube-dns-node', namespace: 'kube-system', labels: { 'kubernetes.io/service-name': 'kube-dns', 'endpointslice.kubernetes.io/managed-by': 'gatehouse-test' } },
          addressType: 'IPv4',
          endpoints: [{ addresses: [NODE_IP], conditions: { ready: true } }],
          ports: [{ name: 'dns', port: 53, protocol: 'UDP' }, { name: 'dns-tcp', port: 53, protocol: 'TCP' }],
        },
      ];
      await kubectl(['apply', '-f', '-'], { input: dns.map((d) => stringify(d)).join('---\n') });
      await waitFor('CoreDNS /ready', 60_000, async () => (await run('curl', ['-sf', 'http://127.0.0.1:8181/ready'], { check: false, timeoutMs: 5000 })).code === 0, [coredns]);
      // ...and reachable as pods reach it: through the kube-dns Service, once kube-proxy has its rules.
      const lookup = `const r = new (require('node:dns').promises.Resolver)({ timeout: 2000, tries: 1 }); r.setServers(['${DNS_IP}']); r.resolve4('kubernetes.default.svc.cluster.local').then((a) => console.log(a.join(',')), (e) => { console.error(e.code); process.exit(1); });`;
      await waitFor('kubernetes.default.svc.cluster.local through the kube-dns Service', 60_000, async () => (await run(process.execPath, ['-e', lookup], { check: false, timeoutMs: 10_000 })).stdout.trim() === '10.96.0.1', [coredns]);
    });

    async function pushLayout(layout: string, name: string): Promise<void> {
      await run(parts.bin('skopeo'), ['copy', '--quiet', '--dest-tls-verify=false', `oci:${layout}`, `docker://${REGISTRY}/${name}`], { netOnly: true, timeoutMs: 300_000 });
    }

    return {
      dir,
      kubeconfig,
      timings,
      run,
      kubectl,
      helm: (args, runOptions) => run(parts.helm, ['--kubeconfig', kubeconfig, ...args], runOptions),
      async curl(url, headers = {}) {
        const args = ['-sS', '--max-time', '10', '-o', '-', '-w', '\n%{http_code}', url];
        for (const [key, value] of Object.entries(headers)) args.push('-H', `${key}: ${value}`);
        const result = await run('curl', args, { check: false, timeoutMs: 15_000 });
        const at = result.stdout.lastIndexOf('\n');
        const status = Number(result.stdout.slice(at + 1));
        if (result.code !== 0 && !status) return { status: 0, body: result.stderr };
        return { status, body: result.stdout.slice(0, at) };
      },
      async traffic(url, trafficOptions = {}) {
        const args = ['--target', String(state.holder), '--net', '--', process.execPath, '-e', TRAFFIC_JS, url, JSON.stringify(trafficOptions.headers ?? {}), String(trafficOptions.intervalMs ?? 100), String(trafficOptions.timeoutMs ?? 5000)];
        const child = spawn('nsenter', args, { stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
        child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr = (stderr + c).slice(-8192)));
        const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
        return {
          count: () => stdout.split('\n').length - 1,
          async stop() {
            child.kill('SIGTERM');
            const timer = setTimeout(() => child.kill('SIGKILL'), (trafficOptions.timeoutMs ?? 5000) + 5000);
            await closed;
            clearTimeout(timer);
            const results = stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line) as TrafficResult);
            if (!results.length) throw new Error(`the traffic generator sent nothing: ${stderr}`);
            return results.sort((a, b) => a.at - b.at);
          },
        };
      },
      async pushImage(local, name) {
        const podman = join(process.env.GATEHOUSE_TOOLS_DIR || join(homedir(), '.cache', 'gatehouse-tools'), 'images', 'podman');
        await run(process.env.GATEHOUSE_PODMAN || podman, ['push', '--quiet', '--tls-verify=false', local, `docker://${REGISTRY}/${name}`], { netOnly: true, timeoutMs: 300_000 });
      },
      pushLayout,
      diagnostics,
      async podLogs(namespace, podPrefix = '', tailLines = 200) {
        const root = file('pod-logs');
        const out: string[] = [];
        for (const pod of (await readdir(root).catch(() => [] as string[])).sort()) {
          const [ns, name] = pod.split('_');
          if (ns !== namespace || !name?.startsWith(podPrefix)) continue;
          for (const container of await readdir(join(root, pod)).catch(() => [] as string[])) {
            const files = (await readdir(join(root, pod, container)).catch(() => [] as string[])).filter((f) => f.endsWith('.log')).sort();
            for (const f of files) {
              // CRI log lines: "<time> <stream> <P|F> <text>".
              const lines = (await readFile(join(root, pod, container, f), 'utf8').catch(() => '')).split('\n').filter(Boolean).slice(-tailLines);
              for (const line of lines) out.push(`${name}/${container} ${line}`);
            }
          }
        }
        return out.join('\n');
      },
      stop,
    };
  } catch (error) {
    const logs = await diagnostics().catch(() => '');
    await stop();
    throw new Error(`cluster run ${id} (${dir}, removed) did not start: ${(error as Error).message}\nstart-up timings (ms): ${JSON.stringify(timings)}\n${logs}`, { cause: error });
  }
}

/** The cluster's credentials (file paths). */
interface Pki {
  ca: string;
  servingCert: string;
  servingKey: string;
  adminCert: string;
  adminKey: string;
  saPrivate: string;
  saPublic: string;
}

/** A CA, the API server's serving certificate (node IP, Service IP and names), the admin client certificate and the service-account keys. */
async function writePki(dir: string): Promise<Pki> {
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...ec, '-days', '2', '-subj', '/CN=gatehouse-cluster-ca', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign', '-keyout', file('ca.key'), '-out', file('ca.crt'));
  const sign = async (name: string, subject: string, extensions: string) => {
    await writeFile(file(`${name}.ext`), extensions);
    openssl('req', '-new', ...ec, '-subj', subject, '-keyout', file(`${name}.key`), '-out', file(`${name}.csr`));
    openssl('x509', '-req', '-in', file(`${name}.csr`), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-days', '2', '-extfile', file(`${name}.ext`), '-out', file(`${name}.crt`));
  };
  const apiServiceIp = '10.96.0.1';
  await sign('serving', '/CN=kube-apiserver', `subjectAltName=IP:${NODE_IP},IP:127.0.0.1,IP:${apiServiceIp},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n`);
  await sign('admin', '/O=system:masters/CN=gatehouse-admin', 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n');
  openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', file('sa.key'));
  openssl('pkey', '-in', file('sa.key'), '-pubout', '-out', file('sa.pub'));
  return { ca: file('ca.crt'), servingCert: file('serving.crt'), servingKey: file('serving.key'), adminCert: file('admin.crt'), adminKey: file('admin.key'), saPrivate: file('sa.key'), saPublic: file('sa.pub') };
}
