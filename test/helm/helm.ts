/**
 * Helm for tests: finds the `helm` binary test/helm/install-helm.sh built, runs `helm template`
 * and `gatehouse install render` on the same values file, and puts both outputs into a form
 * that can be compared object by object.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';
import { parseAllDocuments } from 'yaml';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CHART = join(ROOT, 'core/helm/gatehouse');

/** The helm binary: `GATEHOUSE_HELM`, else the link install-helm.sh makes in the tools dir; undefined when neither exists. */
export function findHelm(): string | undefined {
  const fromEnv = process.env.GATEHOUSE_HELM;
  if (fromEnv) return existsSync(fromEnv) ? fromEnv : undefined;
  const installed = join(process.env.GATEHOUSE_TOOLS_DIR || join(homedir(), '.cache', 'gatehouse-tools'), 'helm');
  return existsSync(installed) ? installed : undefined;
}

/**
 * The CI/SKIPPED rule: the binary when found; otherwise a failing test under `CI=true`, and
 * elsewhere a loud SKIPPED line. Callers `describe.skipIf(!helm)` their suite.
 */
export function helmOrSkip(testFile: string): string | undefined {
  const helm = findHelm();
  if (helm) return helm;
  const message = 'helm not found: run test/helm/install-helm.sh (or set GATEHOUSE_HELM)';
  if (process.env.CI === 'true') {
    describe(testFile, () => {
      it('needs the helm binary on CI', () => {
        throw new Error(message);
      });
    });
  } else {
    console.warn(`\n*** SKIPPED ${testFile}: ${message} ***\n`);
  }
  return undefined;
}

export interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

// No cluster is involved: a kubeconfig that is not there keeps Helm from reading (and warning about) the user's.
const NO_KUBECONFIG = join(tmpdir(), 'gatehouse-helm-test-no-kubeconfig');

const run = (command: string, args: string[]): Run => {
  const result = spawnSync(command, args, { encoding: 'utf8', cwd: ROOT, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, KUBECONFIG: NO_KUBECONFIG } });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
};

/** `helm template gatehouse core/helm/gatehouse -f FILE`, with `--include-crds` as Helm installs crds/ unless `--skip-crds`. */
export function helmTemplate(helm: string, valuesFile: string, includeCrds: boolean): Run {
  return run(helm, ['template', 'gatehouse', CHART, '-f', valuesFile, ...(includeCrds ? ['--include-crds'] : [])]);
}

/** `helm lint --strict core/helm/gatehouse -f FILE` (warnings fail too). */
export function helmLint(helm: string, valuesFile: string): Run {
  return run(helm, ['lint', '--strict', CHART, '-f', valuesFile]);
}

/** `gatehouse install render --values FILE`, as a user runs it. */
export function installRender(valuesFile: string): Run {
  return run(process.execPath, [join(ROOT, 'core/bin/gatehouse.js'), 'install', 'render', '--values', valuesFile]);
}

/** Labels only Helm adds (the release and chart); install render's own managed-by goes too. */
const HELM_ONLY_LABELS = ['helm.sh/chart', 'app.kubernetes.io/managed-by', 'app.kubernetes.io/instance'];

export type KubeDoc = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; spec?: { template?: { metadata?: { labels?: Record<string, string> } } } } & Record<string, unknown>;

/**
 * A YAML stream as objects without the Helm-only labels, sorted by kind, namespace and name.
 * Throws on a YAML error, so that neither side can hide a broken document.
 */
export function normalise(stream: string): KubeDoc[] {
  const docs = parseAllDocuments(stream);
  if (!Array.isArray(docs)) throw new Error('empty YAML stream');
  const objects: KubeDoc[] = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new Error(`YAML error: ${doc.errors[0]!.message}`);
    const object = doc.toJS() as KubeDoc | null;
    if (object === null) continue;
    for (const labels of [object.metadata?.labels, object.spec?.template?.metadata?.labels]) {
      if (labels) for (const label of HELM_ONLY_LABELS) delete labels[label];
    }
    // The generated caller token is random on both sides: compared as "a token of at least 32 characters".
    const data = object.kind === 'Secret' && object.metadata.name === 'extauth-caller-token' ? (object.data as Record<string, string> | undefined) : undefined;
    if (data?.token !== undefined) data.token = Buffer.from(data.token, 'base64').toString().length >= 32 ? '<random token>' : `<short token ${data.token}>`;
    objects.push(object);
  }
  const key = (o: KubeDoc) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
  return objects.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/** `Kind/namespace/name` of each object, for a readable first comparison. */
export const idsOf = (objects: readonly KubeDoc[]) => objects.map((o) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`);
