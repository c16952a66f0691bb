/**
 * A real Kubernetes API server for tests: `etcd` and `kube-apiserver` (see install-kube.sh)
 * started on 127.0.0.1 with free ports, a self-signed serving certificate and static bearer
 * tokens, RBAC on, and no admission plugin that needs a controller (there are none running).
 *
 *   const kube = await startKubeApiServer();
 *   await kube.apply(manifest);                       // server-side apply as the admin (raw HTTPS:
 *                                                     // client-node's serializer drops unknown fields)
 *   gatehouse run --kube --kubeconfig kube.kubeconfig // the same server, as the admin
 *   await kube.restart();                             // kube-apiserver only; etcd keeps the data
 *   await kube.stop();
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { stringify } from 'yaml';

const INSTALL_SCRIPT = fileURLToPath(new URL('./install-kube.sh', import.meta.url));

/** The admin user: in `system:masters`, so every request is allowed. */
export const ADMIN_USER = 'gatehouse-admin';
/** A second user with no permissions of its own (group `gatehouse:testers`): bind RBAC roles to it to test with less. */
export const LIMITED_USER = 'gatehouse-limited';

/** What {@link KubeApiServer.apply} and friends take: any Kubernetes object. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata?: { name?: string; namespace?: string; [key: string]: unknown };
  [key: string]: unknown;
}

/** An HTTP answer of the API server: status, body text, and the body parsed when it is JSON. */
export interface KubeAnswer {
  status: number;
  text: string;
  json: unknown;
}

/** A request the API server refused: its HTTP status and `Status` object (`message` names the offending fields). */
export class KubeError extends Error {
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, message: string, body: unknown) {
    super(message);
    this.status = status;
    this.body = body;
  }

  /** From a refused answer: the Status `message` (or the body text), prefixed with what was being done. */
  static of(answer: KubeAnswer, doing: string): KubeError {
    const message = (answer.json as { message?: string } | undefined)?.message ?? answer.text;
    return new KubeError(answer.status, `${doing}: ${answer.status} ${message}`, answer.json);
  }
}

/** The binaries a Kubernetes test needs. */
export interface KubeBinaries {
  etcd: string;
  kubeApiServer: string;
}

/** The directory install-kube.sh installs into (`$GATEHOUSE_TOOLS_DIR/kube`, default ~/.cache/gatehouse-tools/kube). */
export function kubeToolsDir(): string {
  return join(process.env.GATEHOUSE_TOOLS_DIR || join(homedir(), '.cache', 'gatehouse-tools'), 'kube');
}

/**
 * `etcd` and `kube-apiserver`: `GATEHOUSE_ETCD` / `GATEHOUSE_KUBE_APISERVER`, else the links
 * install-kube.sh made in the tools dir (etcd also from PATH); undefined when one is missing.
 */
export function findKube(): KubeBinaries | undefined {
  const bin = join(kubeToolsDir(), 'bin');
  const pick = (env: string | undefined, installed: string, onPath?: string): string | undefined => {
    if (env) return existsSync(env) ? env : undefined;
    if (existsSync(installed)) return installed;
    return onPath ? (process.env.PATH ?? '').split(delimiter).map((d) => join(d, onPath)).find((p) => existsSync(p)) : undefined;
  };
  const etcd = pick(process.env.GATEHOUSE_ETCD, join(bin, 'etcd'), 'etcd');
  const kubeApiServer = pick(process.env.GATEHOUSE_KUBE_APISERVER, join(bin, 'kube-apiserver'));
  return etcd && kubeApiServer ? { etcd, kubeApiServer } : undefined;
}

/** The binaries, installed first with install-kube.sh when missing (builds kube-apiserver: minutes when cold). */
export function ensureKube(): KubeBinaries {
  const found = findKube();
  if (found) return found;
  execFileSync('bash', [INSTALL_SCRIPT], { stdio: ['ignore', 'ignore', 'inherit'] });
  const installed = findKube();
  if (!installed) throw new Error(`${INSTALL_SCRIPT} ran but etcd or kube-apiserver is still missing`);
  return installed;
}

/**
 * The CI/SKIPPED rule for a Kubernetes suite: the binaries when found; otherwise, under
 * `CI=true`, an Error to fail with, and elsewhere a loud `SKIPPED` warning and undefined.
 * Typical use: `const KUBE = requireKube('test/kube/x.test.ts'); describe.skipIf(!KUBE)(...)`,
 * plus a failing `it` when it returned an Error.
 */
export function requireKube(testFile: string): KubeBinaries | Error | undefined {
  const found = findKube();
  if (found) return found;
  const message = 'etcd or kube-apiserver not found: run test/kube/install-kube.sh (or set GATEHOUSE_ETCD and GATEHOUSE_KUBE_APISERVER)';
  if (process.env.CI === 'true') return new Error(message);
  console.warn(`\n*** SKIPPED ${testFile}: ${message} ***\n`);
  return undefined;
}

/** Options of {@link startKubeApiServer}. */
export interface KubeApiServerOptions {
  /** The binaries (default: {@link findKube}, which must find them). */
  binaries?: KubeBinaries;
  /** More kube-apiserver flags, `--name=value` each (e.g. `--feature-gates=...`). */
  extraArgs?: string[];
}

/** A running etcd + kube-apiserver pair. */
export interface KubeApiServer {
  /** `https://127.0.0.1:<port>`. */
  readonly url: string;
  readonly port: number;
  /** A kubeconfig file (CA inline, admin bearer token) for client-node and `gatehouse --kube --kubeconfig`. */
  readonly kubeconfig: string;
  /** The same as {@link kubeconfig}, for {@link LIMITED_USER}. */
  readonly limitedKubeconfig: string;
  /** The admin's client-node configuration, loaded from {@link kubeconfig}. */
  readonly config: k8s.KubeConfig;
  /** The serving certificate (PEM), which is its own CA. */
  readonly ca: string;
  /** One HTTPS request as the admin; `body` is sent as JSON unless it is a string. Never throws on a status. */
  request(method: string, path: string, body?: unknown, contentType?: string): Promise<KubeAnswer>;
  /**
   * Server-side apply as the admin (field manager `gatehouse-test`, conflicts forced, unknown
   * fields an error: `fieldValidation=Strict`), sending the object exactly as given; with
   * `dryRun`, the server validates, defaults and admits it but stores nothing. Throws
   * {@link KubeError} when refused.
   */
  apply<T extends KubeObject>(object: T, options?: { dryRun?: boolean }): Promise<T>;
  /** Creates the object as the admin (POST, `fieldValidation=Strict`, optionally a dry run). Throws {@link KubeError} when refused. */
  create<T extends KubeObject>(object: T, options?: { dryRun?: boolean }): Promise<T>;
  /** The object named by `object`'s apiVersion, kind, namespace and name; undefined when absent. */
  get<T extends KubeObject>(object: KubeObject): Promise<T | undefined>;
  /** Deletes the object (absent is fine). */
  delete(object: KubeObject): Promise<void>;
  /** Waits until a CRD (by name, e.g. `virtualservices.gateway.gatehouse.dev`) is `Established`. */
  waitForCrd(name: string, timeoutMs?: number): Promise<void>;
  /** Stops kube-apiserver and starts it again on the same port over the same etcd (clients see the outage). */
  restart(): Promise<void>;
  /** Stops kube-apiserver only (until {@link restart}). */
  stopApiServer(): Promise<void>;
  /** The tail of kube-apiserver's and etcd's logs, for failure messages. */
  log(): string;
  /** Stops both processes and removes the temporary files. */
  stop(): Promise<void>;
}

/**
 * Starts etcd (data in a temporary directory) and kube-apiserver on 127.0.0.1 with free ports
 * and waits for `/readyz`. Both processes are killed when the test process exits, even by a
 * signal (they get SIGKILL from the kernel when it dies, through `setpriv --pdeathsig`).
 *
 * Watches: list, then watch from the list's resourceVersion (as informers do). A watch with no
 * resourceVersion fails after 3 s with `504 Too large resource version`: Debian's etcd 3.4.23
 * lacks the progress notifications the watch cache needs for it (pass `--watch-cache=false` in
 * `extraArgs` to serve watches from etcd instead). After {@link KubeApiServer.restart} every
 * watch ends, and one from a version older than the restart answers `410 Expired`.
 */
export async function startKubeApiServer(options: KubeApiServerOptions = {}): Promise<KubeApiServer> {
  const binaries = options.binaries ?? findKube();
  if (!binaries) throw new Error('etcd or kube-apiserver not found: run test/kube/install-kube.sh');
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-kube-'));
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  process.once('exit', cleanup);
  const processes: Managed[] = [];
  const stopAll = async () => {
    for (const p of [...processes].reverse()) await p.stop();
    process.off('exit', cleanup);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const [etcdClient, etcdPeer, port] = await freePorts(3);
    const etcdUrl = `http://127.0.0.1:${etcdClient}`;
    const etcd = managed('etcd', binaries.etcd, [
      '--name=gatehouse-test',
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=gatehouse-test=http://127.0.0.1:${etcdPeer}`,
      '--logger=zap',
      '--log-level=warn',
    ]);
    processes.push(etcd);
    await waitFor(async () => {
      etcd.assertRunning();
      const answer = await fetch(`${etcdUrl}/health`).then((r) => r.json() as Promise<{ health?: string }>, () => undefined);
      return answer?.health === 'true';
    }, 'etcd /health', 30_000);

    const files = await writeCredentials(dir);
    const args = [
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${port}`,
      `--etcd-servers=${etcdUrl}`,
      `--tls-cert-file=${files.cert}`,
      `--tls-private-key-file=${files.key}`,
      `--token-auth-file=${files.tokens}`,
      '--authorization-mode=RBAC',
      '--anonymous-auth=false',
      `--service-account-issuer=https://kubernetes.default.svc`,
      `--service-account-key-file=${files.saPublic}`,
      `--service-account-signing-key-file=${files.saPrivate}`,
      '--service-cluster-ip-range=10.96.0.0/16',
      // The endpoint reconciler publishes the advertise address in the `kubernetes` Service's
      // endpoints and refuses a loopback one; nothing here needs that Service.
      '--endpoint-reconciler-type=none',
      // No controllers run: ServiceAccount admission would reject pods for want of the
      // default ServiceAccount (the token controller makes it).
      '--disable-admission-plugins=ServiceAccount',
      `--cert-dir=${join(dir, 'certs')}`,
      '--profiling=false',
      '--v=0',
      ...(options.extraArgs ?? []),
    ];
    const url = `https://127.0.0.1:${port}`;
    let apiServer = managed('kube-apiserver', binaries.kubeApiServer, args);
    processes.push(apiServer);
    const ready = async () => {
      const server = apiServer;
      await waitFor(async () => {
        server.assertRunning();
        const answer = await httpsRequest('GET', `${url}/readyz`, files.caPem, files.adminToken).catch(() => undefined);
        return answer?.status === 200;
      }, 'kube-apiserver /readyz', 60_000);
    };
    await ready();

    const kubeconfig = join(dir, 'kubeconfig.yaml');
    const limitedKubeconfig = join(dir, 'kubeconfig-limited.yaml');
    await writeFile(kubeconfig, kubeconfigYaml(url, files.caPem, ADMIN_USER, files.adminToken));
    await writeFile(limitedKubeconfig, kubeconfigYaml(url, files.caPem, LIMITED_USER, files.limitedToken));
    const config = new k8s.KubeConfig();
    config.loadFromFile(kubeconfig);

    const call = (method: string, path: string, body?: unknown, contentType?: string) => httpsRequest(method, `${url}${path}`, files.caPem, files.adminToken, body, contentType);
    const resources = new Map<string, { name: string; kind: string; namespaced: boolean }[]>();
    /** The REST path of an object, its plural found through discovery (asked again on a miss: CRDs come and go). */
    const pathOf = async (object: KubeObject, withName: boolean): Promise<string> => {
      const base = object.apiVersion.includes('/') ? `/apis/${object.apiVersion}` : `/api/${object.apiVersion}`;
      let resource = resources.get(object.apiVersion)?.find((r) => r.kind === object.kind);
      if (!resource) {
        const answer = await call('GET', base);
        if (answer.status === 200) resources.set(object.apiVersion, (answer.json as { resources: { name: string; kind: string; namespaced: boolean }[] }).resources.filter((r) => !r.name.includes('/')));
        resource = resources.get(object.apiVersion)?.find((r) => r.kind === object.kind);
        if (!resource) throw new KubeError(404, `no resource of kind ${object.kind} in ${object.apiVersion} (discovery answered ${answer.status})`, answer.json);
      }
      const namespace = resource.namespaced ? `/namespaces/${object.metadata?.namespace ?? 'default'}` : '';
      return `${base}${namespace}/${resource.name}${withName ? `/${object.metadata?.name}` : ''}`;
    };
    const stopApiServer = () => apiServer.stop();
    return {
      url,
      port,
      kubeconfig,
      limitedKubeconfig,
      config,
      ca: files.caPem,
      request: call,
      async apply(object, applyOptions = {}) {
        const query = `?fieldManager=gatehouse-test&force=true&fieldValidation=Strict${applyOptions.dryRun ? '&dryRun=All' : ''}`;
        const answer = await call('PATCH', `${await pathOf(object, true)}${query}`, JSON.stringify(object), 'application/apply-patch+yaml');
        if (answer.status >= 300) throw KubeError.of(answer, `apply ${object.kind} ${object.metadata?.name}`);
        return answer.json as never;
      },
      async create(object, createOptions = {}) {
        const answer = await call('POST', `${await pathOf(object, false)}?fieldValidation=Strict${createOptions.dryRun ? '&dryRun=All' : ''}`, object);
        if (answer.status >= 300) throw KubeError.of(answer, `create ${object.kind} ${object.metadata?.name}`);
        return answer.json as never;
      },
      async get(object) {
        const answer = await call('GET', await pathOf(object, true));
        if (answer.status === 404) return undefined;
        if (answer.status >= 300) throw KubeError.of(answer, `get ${object.kind} ${object.metadata?.name}`);
        return answer.json as never;
      },
      async delete(object) {
        const answer = await call('DELETE', await pathOf(object, true));
        if (answer.status >= 300 && answer.status !== 404) throw KubeError.of(answer, `delete ${object.kind} ${object.metadata?.name}`);
      },
      async waitForCrd(name, timeoutMs = 30_000) {
        await waitFor(async () => {
          const answer = await call('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
          const conditions = (answer.json as { status?: { conditions?: { type: string; status: string }[] } } | undefined)?.status?.conditions;
          return answer.status === 200 && conditions?.some((c) => c.type === 'Established' && c.status === 'True');
        }, `CRD ${name} Established`, timeoutMs);
      },
      async restart() {
        await stopApiServer();
        const index = processes.indexOf(apiServer);
        apiServer = managed('kube-apiserver', binaries.kubeApiServer, args);
        processes[index] = apiServer;
        await ready();
      },
      stopApiServer,
      log: () => processes.map((p) => `--- ${p.name}\n${p.log()}`).join('\n'),
      stop: stopAll,
    };
  } catch (error) {
    const logs = processes.map((p) => `--- ${p.name}\n${p.log()}`).join('\n');
    await stopAll();
    throw new Error(`${(error as Error).message}\n${logs}`, { cause: error });
  }
}

interface Managed {
  readonly name: string;
  log(): string;
  assertRunning(): void;
  stop(): Promise<void>;
}

/** A child process whose stderr+stdout tail is kept, killed by the kernel if this process dies. */
function managed(name: string, binary: string, args: string[]): Managed {
  // setpriv (util-linux) sets PR_SET_PDEATHSIG and execs the binary: SIGKILL when we die.
  const child: ChildProcess = spawn('setpriv', ['--pdeathsig', 'KILL', '--', binary, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: string) => {
    output = (output + chunk).slice(-32 * 1024);
  };
  child.stdout!.setEncoding('utf8').on('data', keep);
  child.stderr!.setEncoding('utf8').on('data', keep);
  child.on('error', (error) => keep(`\n${name}: ${error.message}\n`));
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  return {
    name,
    log: () => output,
    assertRunning() {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${name} exited (${child.exitCode ?? child.signalCode})`);
    },
    async stop() {
      process.off('exit', kill);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(kill, 10_000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

/** Writes the serving certificate, the service-account key pair and the token file. */
async function writeCredentials(dir: string) {
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj', '/CN=gatehouse-test-kube-apiserver', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc', '-keyout', file('serving.key'), '-out', file('serving.crt'));
  openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', file('sa.key'));
  openssl('pkey', '-in', file('sa.key'), '-pubout', '-out', file('sa.pub'));
  const adminToken = randomBytes(24).toString('hex');
  const limitedToken = randomBytes(24).toString('hex');
  // token,user,uid,"group,..." (kube-apiserver --token-auth-file)
  await writeFile(file('tokens.csv'), `${adminToken},${ADMIN_USER},${ADMIN_USER},"system:masters"\n${limitedToken},${LIMITED_USER},${LIMITED_USER},"gatehouse:testers"\n`, { mode: 0o600 });
  return {
    cert: file('serving.crt'),
    key: file('serving.key'),
    saPrivate: file('sa.key'),
    saPublic: file('sa.pub'),
    tokens: file('tokens.csv'),
    caPem: await readFile(file('serving.crt'), 'utf8'),
    adminToken,
    limitedToken,
  };
}

function kubeconfigYaml(server: string, caPem: string, user: string, token: string): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'gatehouse-test', cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: user, context: { cluster: 'gatehouse-test', user, namespace: 'default' } }],
    'current-context': user,
  });
}

function httpsRequest(method: string, url: string, ca: string, token: string, body?: unknown, contentType = 'application/json'): Promise<KubeAnswer> {
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'application/json' };
  if (payload !== undefined) headers['content-type'] = contentType;
  return new Promise((resolve, reject) => {
    const req = request(url, { method, ca, headers, timeout: 10_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, text, json });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: timeout`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** `count` distinct ports the kernel had free on 127.0.0.1 (all held open until each is known, so they differ). */
async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: count }, () => new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve(server));
    })),
  );
  const ports = servers.map((s) => (s.address() as { port: number }).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

async function waitFor<T>(probe: () => Promise<T | undefined | false>, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
