import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';
import type { ISecurityContext } from 'kubernetes-models/v1/SecurityContext';
import { describe, expect, it } from 'vitest';
import { podmanRunArgs, withFlag } from './images.ts';

/** The shape `gatehouse install render` gives the extauth pod (core/src/install/workloads.ts). */
const hardened: ISecurityContext = { runAsNonRoot: true, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } };
const pod: IPodSpec = {
  securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001 },
  initContainers: [{ name: 'plugin-x', image: 'localhost/x:1', args: ['--rootfs', '/', '--tag', '1'], securityContext: hardened, volumeMounts: [{ name: 'auth-plugins', mountPath: '/auth-plugins' }] }],
  containers: [
    {
      name: 'extauth',
      image: 'localhost/gatehouse:1',
      env: [{ name: 'NODE_OPTIONS', value: '--no-node-snapshot' }],
      args: ['extauth', '--port', '8083'],
      securityContext: hardened,
      volumeMounts: [
        { name: 'auth-plugins', mountPath: '/auth-plugins', readOnly: true },
        { name: 'config', mountPath: '/etc/gatehouse/config' },
        { name: 'tmp', mountPath: '/tmp' },
      ],
    },
  ],
  volumes: [
    { name: 'auth-plugins', emptyDir: {} },
    { name: 'config', configMap: { name: 'gatehouse-config', optional: true } },
    { name: 'tmp', emptyDir: {} },
  ],
};
const volumes = { 'auth-plugins': '/h/plugins', config: '/h/config', tmp: '/h/tmp' };

describe('podmanRunArgs', () => {
  it('runs a container of a pod spec as the kubelet would: user and fsGroup, read-only root without podman tmpfs, no capabilities, no new privileges, env, volumes', () => {
    expect(podmanRunArgs(pod, pod.containers[0]!, volumes)).toEqual([
      '--network', 'host',
      '--user', '10001:10001',
      '--group-add', '10001',
      '--read-only', '--read-only-tmpfs=false',
      '--cap-drop', 'ALL',
      '--security-opt', 'no-new-privileges',
      '--env', 'NODE_OPTIONS=--no-node-snapshot',
      '--volume', '/h/plugins:/auth-plugins:ro',
      // A ConfigMap is read-only even when the mount does not say so.
      '--volume', '/h/config:/etc/gatehouse/config:ro',
      '--volume', '/h/tmp:/tmp',
      'localhost/gatehouse:1', 'extauth', '--port', '8083',
    ]);
    expect(podmanRunArgs(pod, pod.initContainers![0]!, volumes).slice(-7)).toEqual(['--volume', '/h/plugins:/auth-plugins', 'localhost/x:1', '--rootfs', '/', '--tag', '1']);
  });

  it('refuses what it cannot emulate instead of ignoring it', () => {
    const container = pod.containers[0]!;
    expect(() => podmanRunArgs(pod, container, { config: '/h/config', tmp: '/h/tmp' })).toThrow(/auth-plugins has no host directory/);
    expect(() => podmanRunArgs({ ...pod, volumes: [...pod.volumes!.slice(1), { name: 'auth-plugins', hostPath: { path: '/x' } }] }, container, volumes)).toThrow(/only emptyDir, configMap and secret/);
    expect(() => podmanRunArgs(pod, { ...container, securityContext: { ...hardened, seccompProfile: { type: 'Unconfined' } } }, volumes)).toThrow(/seccomp profile Unconfined/);
    expect(() => podmanRunArgs(pod, { ...container, env: [{ name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] }, volumes)).toThrow(/env POD from fieldRef/);
    expect(() => podmanRunArgs({ ...pod, securityContext: { runAsNonRoot: true } }, container, volumes)).toThrow(/runAsNonRoot/);
  });
});

describe('withFlag', () => {
  it('replaces the value of a flag that is present and appends one that is not', () => {
    expect(withFlag(['run', '--port', '8080', '--workers', '1'], '--port', '0')).toEqual(['run', '--port', '0', '--workers', '1']);
    expect(withFlag(['run'], '--host', '127.0.0.1')).toEqual(['run', '--host', '127.0.0.1']);
  });
});
