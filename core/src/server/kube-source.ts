import { setKubeConnectedProbe } from '../admin/metrics.ts';
import type { ConfigLoader } from '../config/loader.ts';
import type { Logger } from '../log/logger.ts';
import type { KubeOptions } from './gateway-process.ts';

/** A running kube config source and, when asked, its status writer (loaded only with `--kube`). */
export interface RunningKubeSource {
  readonly source: import('../config/source/kube.ts').KubeSource;
  /** `/readyz` detail: the API connection and whether this replica writes status. */
  readyDetail(): string | undefined;
  /** Starts the status writer on the loader's snapshots (after the first load). */
  afterFirstLoad(loader: ConfigLoader): void;
  close(): Promise<void>;
}

/**
 * Creates the Kubernetes config source for `--kube` (the client library loads only then) and,
 * for the gateway, the status writer. The API connection shows in `/readyz` and metrics but
 * never makes the process unready: the last accepted config keeps serving (SPEC 2.1).
 */
export async function startKubeSource(options: KubeOptions, apiGroupDomain: string, logger: Logger): Promise<RunningKubeSource> {
  const [{ KubeSource }, { KubeStatusWriter }] = await Promise.all([import('../config/source/kube.ts'), import('../config/source/kube-status.ts')]);
  const source = new KubeSource({ kubeconfig: options.kubeconfig, namespaces: options.namespaces, apiGroupDomain, logger, ...(options.crossNamespaceSecrets ? { crossNamespaceSecrets: options.crossNamespaceSecrets } : {}) });
  const writer = options.writeStatus === false ? undefined : new KubeStatusWriter({ config: source.config, origins: source, logger, identity: source.identity });
  setKubeConnectedProbe(() => source.health().connected);
  return {
    source,
    readyDetail() {
      const health = source.health();
      const lines = [health.connected ? 'kubernetes: connected' : `kubernetes: disconnected since ${new Date(health.failingSince!).toISOString()} (${health.lastError ?? 'unknown error'}); serving the last accepted configuration`];
      if (writer) lines.push(`status writer: ${writer.isLeader ? 'leading' : 'standby'}`);
      return lines.join('\n');
    },
    afterFirstLoad(loader) {
      if (!writer) return;
      loader.onSnapshot((snapshot) => writer.update(snapshot));
      if (loader.current) writer.update(loader.current);
      writer.start();
    },
    async close() {
      setKubeConnectedProbe(undefined);
      await writer?.close();
    },
  };
}
