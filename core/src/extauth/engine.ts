import { formatDiagnostic } from '../config/diagnostic.ts';
import type { Resource } from '../config/resource.ts';
import { lookup, referencesOf, type ConfigSnapshot } from '../config/store.ts';
import { secretReadableFrom } from '../config/secret-grants.ts';
import { GatehouseError } from '../errors.ts';
import type { Logger } from '../log/logger.ts';
import { buildStep, type StepBuildOptions } from './build-step.ts';
import { secretSource, selectSecrets } from './api-key/api-key-step.ts';
import { parseBoolExpr } from './boolean-expr.ts';
import { AuthChain, closeSteps } from './chain.ts';
import { ExtAuthCodes } from './codes.ts';
import { forbidden } from './decision.ts';
import { LogLimiter } from './log-limit.ts';
import { bound, createRedactor, type Redactor } from './redact.ts';
import type { AuthDecision, AuthStep, CheckRequest } from './step.ts';

/** Options of {@link AuthEngine}. */
export interface AuthEngineOptions extends Partial<Omit<StepBuildOptions, 'logger'>> {
  logger: Logger;
}

/** A served AuthConfig: its chain, or why it could not be built. */
type Entry = { readonly resource: Resource<'AuthConfig'>; readonly inputs: string; readonly snapshot: Pick<ConfigSnapshot, 'resources'> } & ({ readonly chain: AuthChain; readonly failure?: undefined } | { readonly chain?: undefined; readonly failure: GatehouseError });

/**
 * The file a `pluginAuth` step loads (SPEC 3.4), as `plugins/plugin-file.ts` resolves it;
 * repeated here so that the engine does not load the plugin host (and esbuild) eagerly.
 */
function pluginFileName(spec: { name: string; pluginFileName?: string }): string {
  return spec.pluginFileName ?? `${spec.name}.js`;
}

/**
 * What an AuthConfig's chain is built from: its own version and the versions of the resources
 * it references (egress Upstreams, Secrets). A chain is rebuilt when any of them changes.
 */
function inputsOf(resource: Resource<'AuthConfig'>, snapshot: Pick<ConfigSnapshot, 'resources'>): string {
  const versions = referencesOf(resource).map(({ kind, ref }) => `${kind}:${lookup(snapshot, kind, ref, resource.namespace)?.version ?? '-'}`);
  // Secrets an apiKeyAuth step selects by label are inputs too: a new, changed or removed key rebuilds the chain.
  const source = secretSource(snapshot.resources);
  for (const step of resource.spec.configs) {
    if (!step.apiKeyAuth) continue;
    for (const secret of selectSecrets(step.apiKeyAuth, resource.namespace, source).secrets) {
      versions.push(`Secret:${lookup(snapshot, 'Secret', { name: secret.name, namespace: secret.namespace }, resource.namespace)?.version ?? '-'}`);
    }
  }
  return [resource.version, ...versions].join('|');
}

/**
 * Every value of every Secret the AuthConfig's plugin steps may read (`pluginAuth.secretRefs`,
 * all keys of those Secrets): what must never reach a log line through a plugin's text.
 * apiKeyAuth keys are not among them: no plugin sees them, and an AuthConfig may select thousands.
 */
function secretValuesOf(resource: Resource<'AuthConfig'>, snapshot: Pick<ConfigSnapshot, 'resources'>): string[] {
  const values: string[] = [];
  for (const step of resource.spec.configs) {
    for (const ref of Object.values(step.pluginAuth?.secretRefs ?? {})) {
      const secret = lookup(snapshot, 'Secret', { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) }, resource.namespace);
      if (secret) values.push(...Object.values(secret.spec.data));
    }
  }
  return values;
}

/**
 * A build failure as kept and logged: its message may quote what a plugin threw (untrusted
 * text that may hold the step's secrets, in any encoding), so it is redacted and bounded once here.
 */
function redactedFailure(error: unknown, redact: Redactor): GatehouseError {
  const code = error instanceof GatehouseError ? error.code : ExtAuthCodes.STEP_BUILD;
  const message = redact(error instanceof Error ? error.message : String(error));
  return new GatehouseError(code, message);
}

/** A `config_id` as logged: the caller chose it, so it is cut short. */
function loggedId(id: string): string {
  return bound(id, 256);
}

/** The `config_id` of an AuthConfig: `<namespace>.<name>` (SPEC 4 step 2). */
export function configIdOf(resource: { namespace: string; name: string }): string {
  return `${resource.namespace}.${resource.name}`;
}

/** One AuthConfig's build result: `failure` when its steps could not be built (requests are denied). */
export interface BuildReport {
  configId: string;
  namespace: string;
  name: string;
  failure?: { code: string; message: string };
}

/**
 * The auth server's core, in-process: one chain per served AuthConfig, rebuilt when its
 * spec changes and swapped in atomically (the old chain answers until the new set is
 * built; chains of removed or changed configs are closed once idle).
 */
export class AuthEngine {
  private entries: ReadonlyMap<string, Entry> = new Map();
  /** Why AuthConfigs present in the source are not served (rejected, never accepted). */
  private rejected: ReadonlyMap<string, string> = new Map();
  private updating: Promise<void> = Promise.resolve();
  private retry: NodeJS.Timeout | undefined;
  private latest: ConfigSnapshot | undefined;
  private retryDelayMs = 0;
  private loaded = false;
  private closed = false;
  private readonly logger: Logger;
  private readonly build: StepBuildOptions;
  /** Repeats of one config's failure (every retry, every request) are logged once a minute / 10 s. */
  private readonly failureLog = new LogLimiter({ intervalMs: 60_000 });
  private readonly deniedLog = new LogLimiter({ intervalMs: 10_000 });
  /** Last logged failure message per config: a changed cause is logged at once. */
  private readonly failureText = new Map<string, string>();
  private readonly reportListeners = new Set<(report: BuildReport[]) => void>();

  constructor(options: AuthEngineOptions) {
    this.logger = options.logger;
    this.build = { ...options, pluginDir: options.pluginDir ?? '/auth-plugins' };
  }

  /** Where compiled plugins are loaded from. */
  get pluginDir(): string {
    return this.build.pluginDir;
  }

  /** True once a first configuration has been applied. */
  get ready(): boolean {
    return this.loaded;
  }

  /** `config_id`s of the served AuthConfigs, sorted. */
  get configIds(): string[] {
    return [...this.entries.keys()].sort();
  }

  /** Calls `listener` with every AuthConfig's build result after each change of the served set (issue 27 item 1). */
  onBuildReport(listener: (report: BuildReport[]) => void): () => void {
    this.reportListeners.add(listener);
    return () => this.reportListeners.delete(listener);
  }

  /** Each AuthConfig's build result now. */
  buildReport(): BuildReport[] {
    return [...this.entries].map(([configId, e]) => ({ configId, namespace: e.resource.namespace, name: e.resource.name, ...(e.failure ? { failure: { code: e.failure.code, message: e.failure.message } } : {}) }));
  }

  /** The chain serving `configId` now (undefined when unknown or not buildable). */
  chain(configId: string): AuthChain | undefined {
    return this.entries.get(configId)?.chain;
  }

  /** Applies a snapshot. Updates run one after another, in call order. */
  update(snapshot: ConfigSnapshot): Promise<void> {
    this.latest = snapshot;
    const run = this.updating.then(() => this.apply(snapshot));
    this.updating = run.catch(() => {});
    return run;
  }

  private async apply(snapshot: ConfigSnapshot): Promise<void> {
    if (this.closed) return;
    const configs = [...snapshot.resources.values()].filter((r): r is Resource<'AuthConfig'> => r.kind === 'AuthConfig');
    const previous = this.entries;
    const next = new Map<string, Entry>();
    await Promise.all(
      configs.map(async (resource) => {
        const id = configIdOf(resource);
        const old = previous.get(id);
        // A config that failed to build is retried: a missing plugin file may have arrived since.
        const inputs = inputsOf(resource, snapshot);
        next.set(id, old?.chain && old.inputs === inputs ? old : await this.buildEntry(id, resource, snapshot, inputs));
      }),
    );
    const rejected = new Map<string, string>();
    for (const status of snapshot.statuses) {
      if (status.kind === 'AuthConfig' && status.serving === 'none') rejected.set(configIdOf(status), bound(status.reasons.map(formatDiagnostic).join('; ') || 'rejected'));
    }

    const ids = [...next.keys()].sort();
    this.rejected = rejected;
    this.loaded = true;
    this.logger.info({ generation: snapshot.generation, count: ids.length, ids }, 'received new auth configuration');
    this.swap(next);
    this.scheduleRetry(snapshot, [...next.values()].filter((e) => !e.chain).map((e) => configIdOf(e.resource)));
  }

  /**
   * AuthConfigs that failed to build are built again with backoff (1 s doubling to 30 s) until
   * they succeed or the configuration changes: a plugin's Start may fail for a passing reason (an
   * identity provider still starting, a deadline missed on a loaded machine), and requests must
   * not stay denied until someone edits the resource. Requests are denied (fail closed) meanwhile.
   */
  private scheduleRetry(snapshot: ConfigSnapshot, failed: readonly string[]): void {
    clearTimeout(this.retry);
    if (failed.length === 0 || this.closed) {
      this.retryDelayMs = 0;
      return;
    }
    this.retryDelayMs = Math.min(this.retryDelayMs ? this.retryDelayMs * 2 : 1_000, 30_000);
    const suppressed = this.failureLog.take(`retry:${failed.join(',')}`);
    if (suppressed !== undefined) {
      this.logger.warn({ code: ExtAuthCodes.STEP_BUILD, configs: failed, retryInMs: this.retryDelayMs, ...(suppressed ? { repeated: suppressed } : {}) }, 'building these AuthConfigs failed; trying again');
    }
    // The newest snapshot, never an older one: a retry that fires while a newer update runs must not undo it.
    this.retry = setTimeout(() => void (this.latest === snapshot ? this.update(snapshot) : Promise.resolve()).catch(() => {}), this.retryDelayMs);
    this.retry.unref();
  }

  /**
   * Rebuilds the AuthConfigs whose `pluginAuth` steps load one of `fileNames` (files of the
   * plugin directory that appeared, changed or disappeared). The old chains serve until then.
   */
  pluginFilesChanged(fileNames: readonly string[]): Promise<void> {
    const run = this.updating.then(async () => {
      if (this.closed) return;
      const changed = new Set(fileNames);
      const affected = [...this.entries].filter(([, entry]) => entry.resource.spec.configs.some((step) => step.pluginAuth && changed.has(pluginFileName(step.pluginAuth))));
      if (affected.length === 0) return;
      const next = new Map(this.entries);
      await Promise.all(affected.map(async ([id, entry]) => next.set(id, await this.buildEntry(id, entry.resource, entry.snapshot, entry.inputs))));
      this.logger.info({ files: [...changed], ids: affected.map(([id]) => id).sort() }, 'auth plugins changed: rebuilt the AuthConfigs that use them');
      this.swap(next);
    });
    this.updating = run.catch(() => {});
    return run;
  }

  /** Serves `next`, logs the configs that failed to build, closes the chains no longer served. */
  private swap(next: Map<string, Entry>): void {
    const previous = this.entries;
    this.entries = next;
    for (const [id, entry] of next) {
      if (!entry.failure) {
        this.failureText.delete(id);
        continue;
      }
      if (previous.get(id) === entry) continue;
      // A retry that fails the same way is logged once a minute, with the count left out.
      const message = entry.failure.message;
      if (this.failureText.get(id) !== message) this.failureLog.reset(id);
      const suppressed = this.failureLog.take(id);
      if (suppressed === undefined) continue;
      this.failureText.set(id, message);
      this.logger.error({ config_id: id, code: entry.failure.code, cause: message, ...(suppressed ? { repeated: suppressed } : {}) }, `auth config ${id} cannot be loaded: ${message}`);
    }
    for (const id of this.failureText.keys()) if (!next.has(id)) this.failureText.delete(id);
    if (this.reportListeners.size) {
      const report = this.buildReport();
      for (const listener of this.reportListeners) listener(report);
    }
    const retired = [...previous].filter(([id, entry]) => next.get(id) !== entry && entry.chain).map(([, entry]) => entry.chain!);
    // Not awaited: a chain with a slow check in flight must not hold up the reload.
    void Promise.all(retired.map((chain) => chain.close()));
  }

  private async buildEntry(id: string, resource: Resource<'AuthConfig'>, snapshot: Pick<ConfigSnapshot, 'resources'>, inputs: string): Promise<Entry> {
    const built: AuthStep[] = [];
    const redact = createRedactor(secretValuesOf(resource, snapshot));
    const options: StepBuildOptions = {
      ...this.build,
      namespace: resource.namespace,
      configName: resource.name,
      failOnRedirect: resource.spec.failOnRedirect === true,
      redact,
      resolveUpstream: (ref) => lookup(snapshot, 'Upstream', ref, resource.namespace)?.spec,
      secrets: secretSource(snapshot.resources),
      resolveConfigMap: (ref) => lookup(snapshot, 'ConfigMap', ref, resource.namespace)?.spec.data,
      resolveSecret: (ref) => {
        const secret = lookup(snapshot, 'Secret', ref, resource.namespace);
        // Load-time checks refuse such a reference; never hand over a Secret the namespace may not read.
        if (!secret || !secretReadableFrom({ namespace: secret.namespace, referableFrom: secret.spec.referableFrom }, resource.namespace)) return undefined;
        const data = secret.spec.data;
        return data && Object.hasOwn(data, ref.key) ? data[ref.key] : undefined;
      },
    };
    try {
      for (const [index, spec] of resource.spec.configs.entries()) built.push(await buildStep(spec, index, options));
      // Load-time checks accepted the expression: it parses and names only these steps.
      const expr = resource.spec.booleanExpr === undefined ? undefined : parseBoolExpr(resource.spec.booleanExpr);
      return { resource, inputs, snapshot, chain: new AuthChain(id, resource.version, built, this.logger, expr) };
    } catch (error) {
      await closeSteps(built, this.logger);
      return { resource, inputs, snapshot, failure: redactedFailure(error, redact) };
    }
  }

  /**
   * Decides a CheckRequest with the AuthConfig named by `context_extensions.config_id`.
   * Never throws: an unknown config, or one that could not be built, is denied (403) and logged.
   */
  check(request: CheckRequest): Promise<AuthDecision> {
    const id = request.attributes.context_extensions?.config_id;
    const entry = id ? this.entries.get(id) : undefined;
    if (entry?.chain) return entry.chain.run(request);
    // Per request, so rate-limited: per served config, and once for all unknown ids (the caller picks those).
    if (entry?.failure) {
      const suppressed = this.deniedLog.take(`unavailable:${id}`);
      if (suppressed !== undefined) {
        this.logger.error(
          { config_id: id, code: ExtAuthCodes.CONFIG_UNAVAILABLE, cause: entry.failure.message, ...(suppressed ? { repeated: suppressed } : {}) },
          `request denied: auth config ${id} cannot be loaded: ${entry.failure.message}`,
        );
      }
    } else if (!id) {
      const suppressed = this.deniedLog.take('no-id');
      if (suppressed !== undefined) this.logger.error({ code: ExtAuthCodes.UNKNOWN_CONFIG, ...(suppressed ? { repeated: suppressed } : {}) }, 'request denied: the CheckRequest has no context_extensions.config_id');
    } else {
      const why = this.rejected.get(id);
      const suppressed = this.deniedLog.take(why ? `rejected:${id}` : 'unknown');
      if (suppressed !== undefined) {
        const shown = loggedId(id);
        this.logger.error(
          { config_id: shown, code: ExtAuthCodes.UNKNOWN_CONFIG, ...(why ? { cause: why } : {}), ...(suppressed ? { repeated: suppressed } : {}) },
          why ? `request denied: auth config ${shown} is rejected: ${why}` : `request denied: no AuthConfig ${shown} is served (config_id is <namespace>.<name>)`,
        );
      }
    }
    return Promise.resolve(forbidden());
  }

  /** Closes every chain (after pending updates). */
  async close(): Promise<void> {
    clearTimeout(this.retry);
    await this.updating;
    this.closed = true;
    const chains = [...this.entries.values()].flatMap((e) => (e.chain ? [e.chain] : []));
    this.entries = new Map();
    await Promise.all(chains.map((c) => c.close()));
  }
}
