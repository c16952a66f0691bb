import { ConfigChannels, type ConfigLoadMessage } from './telemetry.ts';
import type { Logger } from '../log/logger.ts';
import { formatDiagnostic } from './diagnostic.ts';
import type { SourceRead } from './source/directory.ts';
import { DirectorySource, type ConfigSource } from './source/source.ts';
import type { ServiceEndpoints } from './source/kube.ts';
import { ConfigStore, type ConfigSnapshot, type ResourceChecks } from './store.ts';
import { KIND_NAMES } from './schema/kinds.ts';
import { kindsOf } from './resource-checks.ts';
import type { CrossNamespaceSecrets } from './secret-grants.ts';

export interface ConfigLoaderOptions {
  /** The config directory (the default source). */
  dir?: string;
  /** Another source (e.g. Kubernetes); wins over `dir`. */
  source?: ConfigSource;
  apiGroupDomain: string;
  /** Kind checks: given, or loaded for the kinds present in each load. */
  checks?: ResourceChecks | ((kinds: ReadonlySet<string>) => Promise<ResourceChecks>);
  logger: Logger;
  /** `--cross-namespace-secrets` (config/secret-grants.ts; default `granted`). */
  crossNamespaceSecrets?: CrossNamespaceSecrets | undefined;
  /** Watch the directory and reload on change (default true). */
  watch?: boolean;
}

/**
 * A config source (SPEC 2.1: a directory by default) feeding a {@link ConfigStore}: the first
 * load, then a new snapshot after every settled change. Listeners get each snapshot in order.
 */
export class ConfigLoader {
  private readonly store: ConfigStore;
  private readonly listeners = new Set<(snapshot: ConfigSnapshot) => void | Promise<void>>();
  private snapshot: ConfigSnapshot | undefined;
  private readonly options: ConfigLoaderOptions;
  /** Where manifests come from. */
  readonly source: ConfigSource;

  constructor(options: ConfigLoaderOptions) {
    this.options = options;
    if (!options.source && !options.dir) throw new TypeError('ConfigLoader needs a dir or a source');
    this.source = options.source ?? new DirectorySource(options.dir!, options.logger);
    this.store = new ConfigStore({ apiGroupDomain: options.apiGroupDomain, crossNamespaceSecrets: options.crossNamespaceSecrets, ...(typeof options.checks === 'object' ? { checks: options.checks } : {}) });
  }

  /** The latest snapshot (undefined before {@link start} resolves). */
  get current(): ConfigSnapshot | undefined {
    return this.snapshot;
  }

  /** Calls `listener` for every later snapshot. */
  onSnapshot(listener: (snapshot: ConfigSnapshot) => void | Promise<void>): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Reads the source once and starts watching it. */
  async start(): Promise<ConfigSnapshot> {
    const snapshot = await this.apply(await this.source.read());
    if (this.options.watch !== false) {
      this.source.watch(async (read) => {
        await this.apply(read);
      });
    }
    return snapshot;
  }

  private async apply(read: SourceRead & { endpoints?: ReadonlyMap<string, ServiceEndpoints> }): Promise<ConfigSnapshot> {
    if (typeof this.options.checks === 'function') this.store.addChecks(await this.options.checks(kindsOf(read.documents)));
    const loaded = this.store.load(read.documents, read.diagnostics);
    const snapshot: ConfigSnapshot = read.endpoints ? { ...loaded, endpoints: read.endpoints } : loaded;
    this.snapshot = snapshot;
    this.report(snapshot);
    for (const listener of this.listeners) {
      try {
        await listener(snapshot);
      } catch (error) {
        this.options.logger.error({ err: error, generation: snapshot.generation }, 'applying configuration failed');
      }
    }
    return snapshot;
  }

  private report(snapshot: ConfigSnapshot): void {
    const { logger } = this.options;
    const rejected = snapshot.statuses.filter((s) => s.state === 'Rejected');
    const errors = snapshot.diagnostics.filter((d) => d.severity === 'error');
    for (const d of snapshot.diagnostics) {
      logger[d.severity === 'error' ? 'error' : 'warn']({ code: d.code, file: d.file, line: d.line, resource: d.resource, path: d.path }, formatDiagnostic(d));
    }
    logger.info(
      {
        generation: snapshot.generation,
        served: snapshot.resources.size,
        accepted: snapshot.statuses.filter((s) => s.state !== 'Rejected').length,
        rejected: rejected.length,
        errors: errors.length,
      },
      'configuration loaded',
    );
    // Metrics subscribe to this channel (admin/metrics.ts): config/ imports no other subsystem.
    if (ConfigChannels.load.hasSubscribers) ConfigChannels.load.publish({ result: errors.length > 0 ? 'rejected' : 'ok', rejectedByKind: new Map(KIND_NAMES.map((kind) => [kind, rejected.filter((s) => s.kind === kind).length])) } satisfies ConfigLoadMessage);
  }

  async close(): Promise<void> {
    await this.source.close();
  }
}
