/**
 * Gatehouse's container images for real, with no Docker engine and no Docker Hub: the podman
 * wrapper and the local Node base image made by install-image-tools.sh, image builds from the
 * repository's Dockerfiles, and containers on the host network.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The local stand-in for node:<major>-bookworm-slim that install-image-tools.sh imports. */
export const BASE_IMAGE = `localhost/gatehouse-base:node${process.versions.node.split('.')[0]}`;

/** The directory install-image-tools.sh installs into (`GATEHOUSE_TOOLS_DIR`/images). */
export function imagesToolsDir(): string {
  return join(process.env.GATEHOUSE_TOOLS_DIR || join(homedir(), '.cache', 'gatehouse-tools'), 'images');
}

/**
 * Why the image tests cannot run here, or undefined when they can: the podman wrapper
 * (`GATEHOUSE_PODMAN`, else the one install-image-tools.sh wrote) and root, since the
 * containers are rootful.
 */
export function missingImageTools(): string | undefined {
  if (process.getuid?.() !== 0) return 'the image tests run rootful podman and need root';
  if (!findPodman()) return `no podman wrapper at ${process.env.GATEHOUSE_PODMAN || join(imagesToolsDir(), 'podman')} (run bash test/images/install-image-tools.sh)`;
  return undefined;
}

/** The podman wrapper (`GATEHOUSE_PODMAN`, else `<tools>/images/podman`); undefined when absent. */
export function findPodman(): string | undefined {
  const path = process.env.GATEHOUSE_PODMAN || join(imagesToolsDir(), 'podman');
  return existsSync(path) ? path : undefined;
}

/** What a podman command printed, and how it ended. */
export interface PodmanResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `podman args…` through the wrapper; rejects when `check` (default) and it fails. */
export function podman(args: string[], options: { check?: boolean; cwd?: string } = {}): Promise<PodmanResult> {
  const binary = findPodman();
  if (!binary) return Promise.reject(new Error(missingImageTools()));
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { cwd: options.cwd ?? ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr = (stderr + c).slice(-64 * 1024)));
    child.on('error', reject);
    child.on('close', (code) => {
      const result = { code: code ?? -1, stdout, stderr };
      if (options.check !== false && result.code !== 0) reject(new Error(`podman ${args.join(' ')} exited with ${result.code}:\n${stderr}`));
      else resolve(result);
    });
  });
}

/**
 * Builds `images/<dockerfile>` from the repository root on {@link BASE_IMAGE} with host
 * networking (npm ci reaches the registry). Layers are cached by content, so an unchanged tree
 * rebuilds nothing and a changed one from `COPY . .` on. A CA bundle in NODE_EXTRA_CA_CERTS (a
 * TLS-intercepting proxy) reaches npm as the Dockerfiles' `ca-certificates` secret.
 */
export async function buildImage(dockerfile: string, tag: string): Promise<PodmanResult> {
  const ca = process.env.NODE_EXTRA_CA_CERTS;
  const caArgs = ca && existsSync(ca) ? ['--secret', `id=ca-certificates,src=${ca}`, '--build-arg', 'NODE_EXTRA_CA_CERTS=/run/secrets/ca-certificates'] : [];
  const result = await podman([
    'build',
    '--network', 'host',
    '--build-arg', `NODE_IMAGE=${BASE_IMAGE}`,
    ...caArgs,
    '--file', `images/${dockerfile}`,
    // BuildKit finds <Dockerfile>.dockerignore itself; podman 4.3 needs it named.
    '--ignorefile', `images/${dockerfile}.dockerignore`,
    '--tag', tag,
    '.',
  ]);
  // Each step prints `--> ID` or `--> Using cache ID`: this run's layers, kept by removeDanglingImages.
  for (const match of result.stdout.matchAll(/^--> (?:Using cache )?([0-9a-f]{11,64})$/gm)) builtLayers.add(match[1]!);
  return result;
}

/** Image ids (possibly short) that this process's builds made or reused. */
const builtLayers = new Set<string>();

/** Size in bytes of a local image. */
export async function imageSize(image: string): Promise<number> {
  return Number((await podman(['image', 'inspect', '--format', '{{.Size}}', image])).stdout.trim());
}

/**
 * Removes the untagged images this process's builds did not use (earlier builds' stages, images
 * whose tag moved on), leaf by leaf so that a parent goes only once nothing builds on it: the layers
 * of the current builds, npm ci's among them, stay as build cache.
 */
export async function removeDanglingImages(): Promise<void> {
  for (let round = 0; round < 50; round++) {
    const dangling = (await podman(['images', '--filter', 'dangling=true', '--quiet', '--no-trunc'], { check: false })).stdout.split('\n').filter(Boolean);
    const stale = dangling.map((id) => id.replace(/^sha256:/, '')).filter((id) => ![...builtLayers].some((used) => id.startsWith(used)));
    if (!stale.length) return;
    // --no-prune: podman would otherwise take every untagged parent along, the cache in use included.
    if ((await podman(['rmi', '--no-prune', ...stale], { check: false })).code !== 0) return;
  }
}

/** Where a pod's volumes live on the host: volume name -> directory (emptyDirs and ConfigMaps alike). */
export type PodVolumes = Record<string, string>;

/**
 * `podman run` arguments (after `run`) for one container of a pod spec, as the kubelet would run
 * it, on the host network: the pod's and the container's securityContext (user, group, fsGroup as a
 * supplementary group, read-only root with no tmpfs of podman's own, dropped capabilities,
 * no-new-privileges, the runtime's default seccomp), env, the volume mounts (each volume a host
 * directory from `volumes`; `readOnly` kept), image, command and args. Anything the emulation
 * cannot honour (ports other than through args, probes aside) is an error rather than ignored.
 */
export function podmanRunArgs(pod: IPodSpec, container: IContainer, volumes: PodVolumes): string[] {
  const podSecurity = pod.securityContext ?? {};
  const security = container.securityContext ?? {};
  const user = security.runAsUser ?? podSecurity.runAsUser;
  const group = security.runAsGroup ?? podSecurity.runAsGroup;
  const out = ['--network', 'host'];
  if (user !== undefined) out.push('--user', group !== undefined ? `${user}:${group}` : String(user));
  if ((security.runAsNonRoot ?? podSecurity.runAsNonRoot) && !user) throw new Error(`${container.name}: runAsNonRoot without a non-zero runAsUser cannot be checked here`);
  if (podSecurity.fsGroup !== undefined) out.push('--group-add', String(podSecurity.fsGroup));
  // podman mounts tmpfs on /tmp, /run and /var/tmp of a read-only container unless told not to; the kubelet does not.
  if (security.readOnlyRootFilesystem) out.push('--read-only', '--read-only-tmpfs=false');
  for (const cap of security.capabilities?.drop ?? []) out.push('--cap-drop', cap);
  for (const cap of security.capabilities?.add ?? []) out.push('--cap-add', cap);
  if (security.allowPrivilegeEscalation === false) out.push('--security-opt', 'no-new-privileges');
  const seccomp = security.seccompProfile?.type ?? podSecurity.seccompProfile?.type;
  if (seccomp && seccomp !== 'RuntimeDefault') throw new Error(`${container.name}: seccomp profile ${seccomp} is not emulated`);
  if (security.privileged) throw new Error(`${container.name}: privileged containers are not emulated`);
  for (const variable of container.env ?? []) {
    if (variable.valueFrom) throw new Error(`${container.name}: env ${variable.name} from ${Object.keys(variable.valueFrom).join(', ')} is not emulated`);
    out.push('--env', `${variable.name}=${variable.value ?? ''}`);
  }
  for (const mount of container.volumeMounts ?? []) {
    const volume = pod.volumes?.find((v) => v.name === mount.name);
    if (!volume) throw new Error(`${container.name} mounts ${mount.name}, which the pod does not define`);
    if (!volume.emptyDir && !volume.configMap && !volume.secret) throw new Error(`volume ${mount.name}: only emptyDir, configMap and secret are emulated`);
    const host = volumes[mount.name];
    if (!host) throw new Error(`volume ${mount.name} has no host directory`);
    if (mount.subPath) throw new Error(`${container.name}: subPath mounts are not emulated`);
    // ConfigMaps and Secrets are read-only in a pod whatever the mount says.
    const readOnly = mount.readOnly || !volume.emptyDir;
    out.push('--volume', `${host}:${mount.mountPath}${readOnly ? ':ro' : ''}`);
  }
  if (container.command) out.push('--entrypoint', JSON.stringify(container.command));
  out.push(container.image!, ...(container.args ?? []));
  return out;
}

/** `args` with `--flag VALUE` set to `value` (replaced where present, else appended). */
export function withFlag(args: readonly string[], flag: string, value: string): string[] {
  const at = args.indexOf(flag);
  return at === -1 ? [...args, flag, value] : [...args.slice(0, at + 1), value, ...args.slice(at + 2)];
}
