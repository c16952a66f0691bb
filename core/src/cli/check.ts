import { CRD_KINDS, CRD_KIND_NAMES, DEFAULT_API_GROUP_DOMAIN } from '../config/schema/kinds.ts';
import { GatehouseError } from '../errors.ts';
import { GATEWAY_VERSION } from '../version.ts';
import { describeFlags, parseFlags, type FlagDef } from './flags.ts';

const FLAGS: readonly FlagDef[] = [
  { name: 'kubeconfig', type: 'string', description: 'kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)' },
  { name: 'namespace', type: 'string', default: 'gatehouse-system', description: 'the install namespace (values.namespace)' },
  { name: 'api-group-domain', type: 'string', default: DEFAULT_API_GROUP_DOMAIN, description: 'domain of the API groups' },
  { name: 'help', type: 'boolean', description: 'show this help' },
];

/** Check error codes (stable). */
export const CheckCodes = {
  /** The API server cannot be reached or refused a read. */
  API: 'GH_CHECK_API',
} as const;

type Answer = { status: number; text: string };
type Get = (path: string) => Promise<Answer>;

/** One section of the report: what was checked and what is wrong (empty: fine). */
interface Section {
  title: string;
  problems: string[];
  notes?: string[];
}

export interface PodJson {
  metadata: { name: string; deletionTimestamp?: string };
  spec: { containers: { name: string; image: string }[] };
  status: {
    phase?: string;
    conditions?: { type: string; status: string }[];
    initContainerStatuses?: {
      name: string;
      restartCount?: number;
      state?: { waiting?: { reason?: string; message?: string }; running?: object; terminated?: { exitCode: number; reason?: string; message?: string } };
      lastState?: { terminated?: { exitCode: number; reason?: string; message?: string } };
    }[];
    containerStatuses?: { name: string; restartCount?: number; state?: { waiting?: { reason?: string; message?: string }; terminated?: { exitCode: number; reason?: string } } }[];
  };
}

/** kubectl's STATUS column for a pod, as far as the check needs it: `Init:Error`, `CrashLoopBackOff`, `Running`, … */
export function podPhase(pod: PodJson): string {
  for (const s of pod.status.initContainerStatuses ?? []) {
    const t = s.state?.terminated;
    if (t && t.exitCode !== 0) return `Init:${t.reason ?? 'Error'}`;
    const w = s.state?.waiting?.reason;
    if (w && w !== 'PodInitializing') return `Init:${w}`;
    // Running again after a failed run (the kubelet's retry): still failing as far as anyone knows.
    const last = s.lastState?.terminated;
    if (s.state?.running && last && last.exitCode !== 0) return `Init:${last.reason ?? 'Error'}`;
  }
  for (const s of pod.status.containerStatuses ?? []) {
    const w = s.state?.waiting?.reason;
    if (w) return w;
    const t = s.state?.terminated;
    if (t) return t.reason ?? 'Terminated';
  }
  return pod.metadata.deletionTimestamp ? 'Terminating' : (pod.status.phase ?? 'Unknown');
}

/**
 * The init container's own words when it failed (gatehouse-init ends them with its code): from
 * its current state, or, while the kubelet waits to restart it (Init:CrashLoopBackOff) or runs it
 * again, from the run that failed (`lastState`).
 */
export function initFailure(pod: PodJson): string | undefined {
  for (const s of pod.status.initContainerStatuses ?? []) {
    for (const t of [s.state?.terminated, s.state?.waiting || s.state?.running ? s.lastState?.terminated : undefined]) {
      if (t && t.exitCode !== 0 && t.message) return `${s.name}: ${t.message.trim().split('\n').at(-1)}`;
    }
  }
  return undefined;
}

async function json<T>(get: Get, path: string): Promise<T | undefined> {
  const answer = await get(path);
  if (answer.status === 404) return undefined;
  if (answer.status !== 200) throw new GatehouseError(CheckCodes.API, `GET ${path}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`);
  return JSON.parse(answer.text) as T;
}

/**
 * The health of an install, as `glooctl check` reports it (issue 27 item 10): the Deployments and
 * their pods, the CRDs, every custom resource whose status is not Accepted (or was never written),
 * AuthConfigs extauth cannot build, and versions that differ from this CLI's.
 */
export async function checkInstall(get: Get, options: { namespace: string; apiGroupDomain: string; version: string }): Promise<Section[]> {
  const sections: Section[] = [];
  const ns = encodeURIComponent(options.namespace);

  // Deployments and pods.
  const deployments: Section = { title: `Deployments in ${options.namespace}`, problems: [], notes: [] };
  const images = new Set<string>();
  for (const name of ['gateway', 'extauth']) {
    const d = await json<{ spec: { replicas?: number; template: { spec: { containers: { image: string }[] } } }; status: { readyReplicas?: number; updatedReplicas?: number; replicas?: number } }>(get, `/apis/apps/v1/namespaces/${ns}/deployments/${name}`);
    if (!d) {
      deployments.problems.push(`deployment/${name} does not exist (is Gatehouse installed in ${options.namespace}? --namespace)`);
      continue;
    }
    for (const c of d.spec.template.spec.containers) images.add(c.image);
    const want = d.spec.replicas ?? 1;
    const ready = d.status.readyReplicas ?? 0;
    if (ready < want) deployments.problems.push(`deployment/${name}: ${ready} of ${want} replicas ready`);
    else deployments.notes!.push(`deployment/${name}: ${ready}/${want} ready`);
    if ((d.status.updatedReplicas ?? 0) < want) deployments.problems.push(`deployment/${name}: a rollout is not finished (${d.status.updatedReplicas ?? 0} of ${want} updated)`);
    const pods = await json<{ items: PodJson[] }>(get, `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(`app.kubernetes.io/name=gatehouse,app.kubernetes.io/component=${name}`)}`);
    for (const pod of pods?.items ?? []) {
      const phase = podPhase(pod);
      const ready = pod.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
      if (!ready && phase !== 'Terminating') {
        const why = initFailure(pod);
        deployments.problems.push(`pod/${pod.metadata.name}: ${phase}${why ? ` (${why})` : ''}`);
      }
      const restarts = (pod.status.containerStatuses ?? []).reduce((n, s) => n + (s.restartCount ?? 0), 0);
      if (restarts > 0) deployments.notes!.push(`pod/${pod.metadata.name}: ${restarts} restart(s)`);
    }
  }
  sections.push(deployments);

  // CRDs.
  const crds: Section = { title: 'CustomResourceDefinitions', problems: [] };
  const crdVersions = new Set<string>();
  for (const kind of CRD_KIND_NAMES) {
    const name = `${CRD_KINDS[kind].plural}.${CRD_KINDS[kind].group}.${options.apiGroupDomain}`;
    const crd = await json<{ metadata: { labels?: Record<string, string> }; status?: { conditions?: { type: string; status: string }[] } }>(get, `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
    if (!crd) {
      crds.problems.push(`${name} is not installed (gatehouse install crds | kubectl apply --server-side -f -)`);
      continue;
    }
    if (!crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) crds.problems.push(`${name} is not Established`);
    const v = crd.metadata.labels?.['app.kubernetes.io/version'];
    if (v) crdVersions.add(v);
  }
  sections.push(crds);

  // Resources and AuthConfig builds.
  const resources: Section = { title: 'Resources', problems: [], notes: [] };
  const builds: Section = { title: 'AuthConfigs in extauth', problems: [] };
  let total = 0;
  for (const kind of CRD_KIND_NAMES) {
    const { group, version, plural } = CRD_KINDS[kind];
    const list = await json<{ items: { metadata: { namespace: string; name: string; generation?: number }; status?: { state?: string; reason?: string; observedGeneration?: number; extauth?: { state?: string; reason?: string } } }[] }>(get, `/apis/${group}.${options.apiGroupDomain}/${version}/${plural}`);
    for (const item of list?.items ?? []) {
      total++;
      const id = `${kind} ${item.metadata.namespace}/${item.metadata.name}`;
      const s = item.status;
      if (!s?.state) resources.problems.push(`${id}: no status (no gateway watches it: is config.source kube, and its namespace watched?)`);
      else if (s.state !== 'Accepted') resources.problems.push(`${id}: ${s.state}${s.reason ? `: ${s.reason.split('\n')[0]}` : ''}`);
      else if (s.observedGeneration !== undefined && item.metadata.generation !== undefined && s.observedGeneration < item.metadata.generation) resources.problems.push(`${id}: generation ${item.metadata.generation} not yet seen by the gateway (status is about ${s.observedGeneration})`);
      if (kind === 'AuthConfig' && s?.extauth?.state === 'Failed') builds.problems.push(`${item.metadata.namespace}.${item.metadata.name}: ${s.extauth.reason ?? 'failed to build'}`);
    }
  }
  resources.notes!.push(`${total} resource(s) checked`);
  sections.push(resources, builds);

  // Versions.
  const versions: Section = { title: `Versions (this CLI: ${options.version})`, problems: [] };
  for (const image of images) {
    const tag = /:([^:/@]+)(@.*)?$/.exec(image)?.[1];
    if (tag && tag !== options.version) versions.problems.push(`image ${image} is version ${tag}, not ${options.version}`);
  }
  for (const v of crdVersions) if (v !== options.version) versions.problems.push(`the CRDs are from version ${v}, not ${options.version} (gatehouse install crds | kubectl apply --server-side -f -)`);
  sections.push(versions);
  return sections;
}

/** `gatehouse check [--kubeconfig FILE] [--namespace NS]`: exit 0 when healthy, 1 with the problems listed (or the API unreachable), 2 on usage errors. */
export async function runCheck(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, FLAGS);
  if (values.help || positionals.length > 0) {
    process.stdout.write(`usage: gatehouse check [--kubeconfig FILE] [--namespace NS]\n\n${describeFlags(FLAGS)}\n`);
    return values.help ? 0 : 2;
  }
  const [{ loadKubeConfig }, { kubeRequest }] = await Promise.all([import('../config/source/kube.ts'), import('../config/source/kube-request.ts')]);
  const config = loadKubeConfig(values.kubeconfig as string | undefined);
  const get: Get = (path) =>
    kubeRequest(config, 'GET', path).catch((error: unknown) => {
      throw new GatehouseError(CheckCodes.API, `cannot reach the Kubernetes API (${config.getCurrentCluster()?.server ?? 'no cluster'}): ${(error as Error).message}`);
    });
  let sections: Section[];
  try {
    sections = await checkInstall(get, { namespace: values.namespace as string, apiGroupDomain: values['api-group-domain'] as string, version: GATEWAY_VERSION });
  } catch (error) {
    // The install cannot be checked: a failed check (1), not a usage error (2).
    if (!(error instanceof GatehouseError)) throw error;
    process.stderr.write(`gatehouse: ${error.message} [${error.code}]\n`);
    return 1;
  }
  const lines: string[] = [];
  let problems = 0;
  for (const section of sections) {
    problems += section.problems.length;
    lines.push(`${section.problems.length ? '✗' : '✓'} ${section.title}${section.problems.length ? '' : ': OK'}`);
    for (const p of section.problems) lines.push(`    ${p}`);
    for (const n of section.notes ?? []) lines.push(`    ${n}`);
  }
  lines.push(problems ? `${problems} problem(s) found` : 'No problems detected.');
  process.stdout.write(`${lines.join('\n')}\n`);
  return problems ? 1 : 0;
}
