import { hostname } from 'node:os';
import * as k8s from '@kubernetes/client-node';
import type { Diagnostic } from '../diagnostic.ts';
import { resourceLimitProblem, type ManifestDocument } from '../manifest.ts';
import { CRD_KIND_NAMES, KINDS, type Kind } from '../schema/kinds.ts';
import type { Logger } from '../../log/logger.ts';
import type { ConfigSource, SourceRead } from './source.ts';
import { kubeRequest } from './kube-request.ts';

/** Where a kube source connects and what it watches (`--kube`, `--kubeconfig`, `--namespace`). */
export interface KubeSourceOptions {
  /** A kubeconfig file; default: in-cluster (service account), then $KUBECONFIG / ~/.kube/config. */
  kubeconfig?: string | undefined;
  /** Namespaces to watch; empty = all. */
  namespaces?: readonly string[] | undefined;
  apiGroupDomain: string;
  logger: Logger;
  /** Changes are gathered this long before a new read is handed on (default 50 ms). */
  debounceMs?: number;
  /** A kind whose CRD is not installed is looked for again this often (default 30 s). */
  missingRetryMs?: number;
}

/** One watched collection: a kind in one API group family (ours or Gloo's), or a core kind. */
export interface WatchedCollection {
  readonly kind: Kind | 'EndpointSlice' | 'Service';
  readonly group: string;
  readonly version: string;
  readonly plural: string;
}

/** Where a served object came from, for writing its status (`observedGeneration`). */
export interface KubeObjectOrigin {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string | undefined;
  readonly generation: number | undefined;
}

/**
 * A Kubernetes Service's ports and the ready endpoints behind it (its EndpointSlices). Plain
 * JSON: it travels to traffic workers inside snapshots.
 */
export interface ServiceEndpoints {
  /** Service port number → port name ('' when unnamed). */
  readonly ports: Readonly<Record<string, string>>;
  /** Ready endpoint addresses with their target ports by port name. */
  readonly endpoints: readonly { readonly addr: string; readonly ports: Readonly<Record<string, number>> }[];
}

/** What the kube source adds to a read: endpoints by `namespace/service`, object origins by resource key. */
export interface KubeRead extends SourceRead {
  readonly endpoints: ReadonlyMap<string, ServiceEndpoints>;
  readonly origins: ReadonlyMap<string, KubeObjectOrigin>;
}

/** The collections a kube source watches, in both API group families. */
export function watchedCollections(apiGroupDomain: string): WatchedCollection[] {
  const out: WatchedCollection[] = [];
  for (const kind of CRD_KIND_NAMES) {
    const { group, glooGroup, version, plural } = KINDS[kind];
    out.push({ kind, group: `${group}.${apiGroupDomain}`, version, plural });
    out.push({ kind, group: glooGroup, version, plural });
  }
  out.push({ kind: 'Secret', group: '', version: 'v1', plural: 'secrets' });
  out.push({ kind: 'ConfigMap', group: '', version: 'v1', plural: 'configmaps' });
  out.push({ kind: 'Service', group: '', version: 'v1', plural: 'services' });
  out.push({ kind: 'EndpointSlice', group: 'discovery.k8s.io', version: 'v1', plural: 'endpointslices' });
  return out;
}

/** The API path of a collection, in one namespace or all (`''`). */
export function collectionPath(c: Pick<WatchedCollection, 'group' | 'version' | 'plural'>, namespace: string): string {
  const base = c.group === '' ? `/api/${c.version}` : `/apis/${c.group}/${c.version}`;
  return namespace ? `${base}/namespaces/${encodeURIComponent(namespace)}/${c.plural}` : `${base}/${c.plural}`;
}

/** Connection state, for `/readyz` detail and metrics. */
export interface KubeSourceHealth {
  /** Every watch is connected (or its kind is not installed). */
  readonly connected: boolean;
  /** Since when some watch has been failing (ms since epoch), if one is. */
  readonly failingSince?: number | undefined;
  readonly lastError?: string | undefined;
  /** Collections whose kind is not installed in the cluster (404), e.g. Gloo's groups. */
  readonly missing: readonly string[];
}

type KubeObject = k8s.KubernetesObject & { spec?: unknown; data?: unknown; stringData?: unknown; type?: string; status?: unknown };

/** A list+watch of one collection in one namespace (or all), restarted with backoff on failure. */
class CollectionWatch {
  readonly objects = new Map<string, KubeObject>();
  readonly label: string;
  /** Listed at least once (or known missing): the first read waits for every watch to get here. */
  synced = false;
  missing = false;
  failingSince: number | undefined;
  lastError: string | undefined;
  private informer: k8s.ListWatch<KubeObject> | undefined;
  private retry: NodeJS.Timeout | undefined;
  private backoffMs = 0;
  private stopped = false;
  private readonly collection: WatchedCollection;
  private readonly namespace: string;
  private readonly config: k8s.KubeConfig;
  private readonly onChange: () => void;
  private readonly onSynced: () => void;
  private readonly options: Required<Pick<KubeSourceOptions, 'missingRetryMs'>> & { logger: Logger };

  constructor(collection: WatchedCollection, namespace: string, config: k8s.KubeConfig, hooks: { onChange: () => void; onSynced: () => void }, options: Required<Pick<KubeSourceOptions, 'missingRetryMs'>> & { logger: Logger }) {
    this.collection = collection;
    this.namespace = namespace;
    this.config = config;
    this.onChange = hooks.onChange;
    this.onSynced = hooks.onSynced;
    this.options = options;
    this.label = collectionPath(collection, namespace);
  }

  start(): void {
    if (this.stopped) return;
    const path = this.label;
    const list = async (): Promise<k8s.KubernetesListObject<KubeObject>> => {
      const answer = await kubeRequest(this.config, 'GET', path);
      if (answer.status === 404) throw Object.assign(new Error(`${path}: not found (is the CRD installed?)`), { statusCode: 404 });
      if (answer.status !== 200) throw Object.assign(new Error(`${path}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`), { statusCode: answer.status });
      const body = JSON.parse(answer.text) as k8s.KubernetesListObject<KubeObject>;
      // Lists carry no apiVersion/kind on their items.
      const kind = this.collection.kind;
      const apiVersion = this.collection.group ? `${this.collection.group}/${this.collection.version}` : this.collection.version;
      for (const item of body.items) Object.assign(item, { apiVersion: item.apiVersion ?? apiVersion, kind: item.kind ?? kind });
      return body;
    };
    const informer = new k8s.ListWatch<KubeObject>(path, new k8s.Watch(this.config), list, false);
    this.informer = informer;
    const changed = (obj: KubeObject) => {
      const key = `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
      const old = this.objects.get(key);
      // A status write (ours, or another replica's) bumps resourceVersion but not generation:
      // the configuration is the same, so keep the old object (its document stays validated) and reload nothing.
      if (old && sameConfiguration(old, obj)) return;
      this.objects.set(key, obj);
      this.onChange();
    };
    informer.on(k8s.ADD, changed);
    informer.on(k8s.UPDATE, changed);
    informer.on(k8s.DELETE, (obj) => {
      this.objects.delete(`${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`);
      this.onChange();
    });
    informer.on(k8s.ERROR, (error: unknown) => this.failed(error));
    // ListWatch lists, then watches from the list's resourceVersion; 410 Gone relists; a watch
    // that ends normally is resumed. Any other failure lands in ERROR and stops it: restarted there.
    informer
      .start()
      .then(() => {
        if (this.stopped || this.informer !== informer) return;
        if (this.failingSince !== undefined) this.options.logger.info({ collection: this.label }, 'kubernetes watch resumed');
        this.failingSince = undefined;
        this.lastError = undefined;
        this.missing = false;
        this.backoffMs = 0;
        this.resync(informer);
        this.markSynced();
      })
      .catch((error: unknown) => this.failed(error));
  }

  /** The informer's cache is the truth after a (re)list: objects deleted while disconnected go. */
  private resync(informer: k8s.ListWatch<KubeObject>): void {
    const now = new Map<string, KubeObject>();
    for (const obj of informer.list()) now.set(`${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`, obj);
    let differs = now.size !== this.objects.size;
    if (!differs) for (const [key, obj] of now) if (this.objects.get(key) !== obj) differs = true;
    if (!differs) return;
    this.objects.clear();
    for (const [key, obj] of now) this.objects.set(key, obj);
    this.onChange();
  }

  private markSynced(): void {
    if (this.synced) return;
    this.synced = true;
    this.onSynced();
  }

  private failed(error: unknown): void {
    if (this.stopped) return;
    const status = (error as { statusCode?: number; code?: number }).statusCode ?? (error as { code?: number }).code;
    void this.informer?.stop();
    this.informer = undefined;
    if (status === 404) {
      // The kind is not installed (e.g. Gloo's CRDs in a Gatehouse-only cluster): nothing to serve from it.
      if (!this.missing) this.options.logger.debug({ collection: this.label }, 'kubernetes collection not found; looking again later');
      this.missing = true;
      this.failingSince = undefined;
      if (this.objects.size > 0) {
        // The CRD was removed: its objects are gone too.
        this.objects.clear();
        this.onChange();
      }
      this.markSynced();
      this.schedule(this.options.missingRetryMs);
      return;
    }
    const message = error instanceof Error ? error.message : String(error);
    if (this.failingSince === undefined) {
      this.failingSince = Date.now();
      this.options.logger.warn({ code: KubeCodes.WATCH, collection: this.label, error: message }, 'kubernetes watch failed; the last accepted configuration keeps serving while it reconnects');
    }
    this.lastError = message;
    this.backoffMs = Math.min(this.backoffMs ? this.backoffMs * 2 : 250, 10_000);
    this.schedule(this.backoffMs);
  }

  private schedule(ms: number): void {
    clearTimeout(this.retry);
    // Not unref'd: before the first read completes, these timers are all that keeps the process waiting for the API server.
    this.retry = setTimeout(() => this.start(), ms);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retry);
    void this.informer?.stop();
  }
}

/**
 * Whether an update leaves an object's configuration as it was: custom resources with a status
 * subresource change `metadata.generation` with every spec change, so the same generation, uid,
 * labels and annotations mean only status (or bookkeeping) changed. Core kinds have no generation.
 */
function sameConfiguration(old: KubeObject, next: KubeObject): boolean {
  const a = old.metadata;
  const b = next.metadata;
  if (a?.generation === undefined || a.generation !== b?.generation || a.uid !== b?.uid) return false;
  return JSON.stringify([a.labels, a.annotations]) === JSON.stringify([b.labels, b.annotations]);
}

/** Loads the kubeconfig: a file when given, else in-cluster, else the default locations. */
export function loadKubeConfig(file: string | undefined): k8s.KubeConfig {
  const config = new k8s.KubeConfig();
  if (file) config.loadFromFile(file);
  else if (process.env.KUBERNETES_SERVICE_HOST) config.loadFromCluster();
  else config.loadFromDefault();
  return config;
}

/**
 * The Kubernetes config source (SPEC 2.1): list+watch of the Gatehouse kinds in both API group
 * families, the Secrets and ConfigMaps they reference, and Services with their EndpointSlices
 * (for `kube` destinations), in the given namespaces or all. Each settled change hands on a
 * whole read, as the directory source does, so validation and last-accepted semantics are the same.
 */
export class KubeSource implements ConfigSource<KubeRead> {
  readonly config: k8s.KubeConfig;
  private readonly watches: CollectionWatch[] = [];
  private readonly options: KubeSourceOptions;
  private listener: ((read: KubeRead) => Promise<void>) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private firstChangeAt: number | undefined;
  private running: Promise<void> = Promise.resolve();
  private synced!: Promise<void>;
  private origins: ReadonlyMap<string, KubeObjectOrigin> = new Map();
  private endpoints: ReadonlyMap<string, ServiceEndpoints> = new Map();
  private endpointsJson = '';

  constructor(options: KubeSourceOptions) {
    this.options = options;
    this.config = loadKubeConfig(options.kubeconfig);
  }

  /** Where a served object came from, by resource key, and who we are (for status and the Lease). */
  get identity(): string {
    return process.env.POD_NAME || `${hostname()}-${process.pid}`;
  }

  /** Starts every watch and resolves with the first whole read once each has listed (or is known missing). */
  async read(): Promise<KubeRead> {
    const namespaces = this.options.namespaces?.length ? [...new Set(this.options.namespaces)] : [''];
    const logger = this.options.logger;
    let pending = 0;
    let resolveSynced!: () => void;
    this.synced = new Promise((r) => (resolveSynced = r));
    for (const collection of watchedCollections(this.options.apiGroupDomain)) {
      for (const namespace of namespaces) {
        pending++;
        this.watches.push(
          new CollectionWatch(collection, namespace, this.config, { onChange: () => this.changed(), onSynced: () => --pending === 0 && resolveSynced() }, { missingRetryMs: this.options.missingRetryMs ?? 30_000, logger }),
        );
      }
    }
    for (const watch of this.watches) watch.start();
    await this.synced;
    return this.snapshot();
  }

  /** Calls `listener` with a whole read after each settled change; reads never overlap. */
  watch(listener: (read: KubeRead) => Promise<void>): void {
    this.listener = listener;
  }

  /** Connection state for `/readyz` and metrics. */
  health(): KubeSourceHealth {
    const failing = this.watches.filter((w) => w.failingSince !== undefined);
    return {
      connected: failing.length === 0,
      ...(failing.length ? { failingSince: Math.min(...failing.map((w) => w.failingSince!)), lastError: failing[0]!.lastError } : {}),
      missing: this.watches.filter((w) => w.missing).map((w) => w.label),
    };
  }

  private changed(): void {
    if (!this.listener) return;
    const debounce = this.options.debounceMs ?? 50;
    const now = Date.now();
    this.firstChangeAt ??= now;
    clearTimeout(this.timer);
    // A steady stream of changes still gets a read at least once a second.
    const wait = Math.max(0, Math.min(debounce, this.firstChangeAt + 1_000 - now));
    this.timer = setTimeout(() => {
      this.firstChangeAt = undefined;
      this.running = this.running.then(() => this.listener?.(this.snapshot())).catch((error: unknown) => this.options.logger.error({ err: error, code: 'GH_CONFIG_RELOAD' }, 'applying configuration from Kubernetes failed; the last configuration keeps serving'));
    }, wait);
  }

  /** Every watched object as documents (Secrets and ConfigMaps only when referenced), plus endpoints. */
  private snapshot(): KubeRead {
    const documents: ManifestDocument[] = [];
    const diagnostics: Diagnostic[] = [];
    const origins = new Map<string, KubeObjectOrigin>();
    const secrets: KubeObject[] = [];
    const configMaps: KubeObject[] = [];
    const services = new Map<string, KubeObject>();
    const slices: KubeObject[] = [];
    for (const watch of this.watches) {
      for (const obj of watch.objects.values()) {
        const kind = obj.kind;
        if (kind === 'Secret') secrets.push(obj);
        else if (kind === 'ConfigMap') configMaps.push(obj);
        else if (kind === 'Service') services.set(`${obj.metadata?.namespace}/${obj.metadata?.name}`, obj);
        else if (kind === 'EndpointSlice') slices.push(obj);
        else documents.push(this.document(obj, origins));
      }
    }
    const wanted = referencedObjects(documents);
    for (const obj of secrets) if (wanted.wants('Secret', obj)) documents.push(this.document(obj, origins));
    for (const obj of configMaps) if (wanted.wants('ConfigMap', obj)) documents.push(this.document(obj, origins));
    // Stable order: the store decides conflicts (a domain claimed twice) by what served first, then by order.
    documents.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
    this.origins = origins;
    // The same map while no Service or EndpointSlice changed: route tables rebuild only what changed.
    const endpoints = endpointsOf(services, slices);
    const json = JSON.stringify([...endpoints]);
    if (json !== this.endpointsJson) {
      this.endpointsJson = json;
      this.endpoints = endpoints;
    }
    return { documents, diagnostics, endpoints: this.endpoints, origins };
  }

  /** Where a resource of the latest read came from (for its status). */
  origin(key: string): KubeObjectOrigin | undefined {
    return this.origins.get(key);
  }

  /** Documents by watched object: an unchanged object (the informer keeps it) is the same document, validated once. */
  private readonly documents = new WeakMap<KubeObject, ManifestDocument>();

  private document(obj: KubeObject, origins: Map<string, KubeObjectOrigin>): ManifestDocument {
    const metadata = obj.metadata ?? {};
    const namespace = metadata.namespace ?? 'default';
    const [group, version] = obj.apiVersion?.includes('/') ? obj.apiVersion.split('/') : ['', obj.apiVersion ?? 'v1'];
    // Our own verdict is not input: a status is never validated as config.
    const { status: _status, ...value } = obj;
    const file = `kube:${obj.apiVersion}/${obj.kind}/${namespace}/${metadata.name}`;
    const kind = obj.kind as Kind;
    if (kind in KINDS) {
      origins.set(`${kind}/${namespace}/${metadata.name}`, { group: group!, version: version!, plural: KINDS[kind].plural, namespace, name: metadata.name ?? '', uid: metadata.uid, generation: metadata.generation });
    }
    let doc = this.documents.get(obj);
    if (!doc) {
      // The limits a file has (size, depth), checked once per object version: an object over them
      // stands for its resource with its identity only, and is rejected with the reason.
      const refused = resourceLimitProblem(value, () => JSON.stringify(value).length);
      doc = refused === undefined ? { file, index: 0, line: 0, value, lineOf: () => 0 } : { file, index: 0, line: 0, value: { apiVersion: obj.apiVersion, kind: obj.kind, metadata: { name: metadata.name, namespace } }, lineOf: () => 0, refused };
      this.documents.set(obj, doc);
    }
    return doc;
  }

  async close(): Promise<void> {
    clearTimeout(this.timer);
    for (const watch of this.watches) watch.stop();
    await this.running;
  }
}

/**
 * Which Secrets and ConfigMaps the Gatehouse resources reference: by `{name, namespace}` under
 * any key naming a secret ref (`secretRef`, `secretRefs`, `apiKeySecretRefs`, `headerSecretRef`),
 * `protoRefs`, and apiKeyAuth `labelSelector`s. The rest of a cluster's Secrets (service account
 * tokens, Helm releases…) never enter the configuration.
 */
export function referencedObjects(documents: readonly ManifestDocument[]): { wants(kind: 'Secret' | 'ConfigMap', obj: KubeObject): boolean } {
  const named = new Set<string>();
  const selectors: { namespace: string; labels: Record<string, string> }[] = [];
  for (const doc of documents) {
    const value = doc.value as { metadata?: { namespace?: string }; spec?: unknown };
    const from = value.metadata?.namespace ?? 'default';
    const visit = (node: unknown, key: string, depth: number): void => {
      if (depth > 64 || node === null || typeof node !== 'object') return;
      if (Array.isArray(node)) {
        for (const item of node) visit(item, key, depth + 1);
        return;
      }
      const record = node as Record<string, unknown>;
      const lower = key.toLowerCase();
      if ((lower.includes('secretref') || lower === 'protorefs') && typeof record.name === 'string') {
        const kind = lower === 'protorefs' ? 'ConfigMap' : 'Secret';
        named.add(`${kind}/${typeof record.namespace === 'string' ? record.namespace : from}/${record.name}`);
      }
      if (lower === 'apikeyauth' && record.labelSelector && typeof record.labelSelector === 'object') {
        selectors.push({ namespace: from, labels: record.labelSelector as Record<string, string> });
      }
      for (const [k, v] of Object.entries(record)) visit(v, k, depth + 1);
      // `secretRefs: {NAME: {name, namespace, key}}` (pluginAuth): the map's values are refs.
      if (lower === 'secretrefs' && !Array.isArray(node)) for (const v of Object.values(record)) visit(v, 'secretRef', depth + 1);
    };
    visit(value.spec, 'spec', 0);
  }
  return {
    wants(kind, obj) {
      const ns = obj.metadata?.namespace ?? 'default';
      if (named.has(`${kind}/${ns}/${obj.metadata?.name}`)) return true;
      if (kind !== 'Secret') return false;
      const labels = obj.metadata?.labels ?? {};
      // Gloo looks for API key Secrets in every watched namespace.
      return selectors.some((s) => Object.entries(s.labels).every(([k, v]) => labels[k] === v));
    },
  };
}

/** Ready endpoints per Service, from its EndpointSlices (`kubernetes.io/service-name`). */
export function endpointsOf(services: ReadonlyMap<string, KubeObject>, slices: readonly KubeObject[]): Map<string, ServiceEndpoints> {
  type Slice = { addressType?: string; ports?: { name?: string; port?: number }[]; endpoints?: { addresses?: string[]; conditions?: { ready?: boolean } }[] };
  const out = new Map<string, ServiceEndpoints>();
  const bySlice = new Map<string, { addr: string; ports: Record<string, number> }[]>();
  for (const obj of slices) {
    const slice = obj as unknown as Slice & KubeObject;
    const service = obj.metadata?.labels?.['kubernetes.io/service-name'];
    if (!service || (slice.addressType !== 'IPv4' && slice.addressType !== 'IPv6')) continue;
    const key = `${obj.metadata?.namespace ?? 'default'}/${service}`;
    const ports: Record<string, number> = {};
    for (const p of slice.ports ?? []) if (typeof p.port === 'number') ports[p.name ?? ''] = p.port;
    const list = bySlice.get(key) ?? [];
    for (const endpoint of slice.endpoints ?? []) {
      // Envoy and kube-proxy: a missing ready condition means ready.
      if (endpoint.conditions?.ready === false) continue;
      for (const addr of endpoint.addresses ?? []) list.push({ addr, ports });
    }
    bySlice.set(key, list);
  }
  for (const [key, service] of services) {
    const spec = (service as { spec?: { ports?: { name?: string; port?: number }[] } }).spec;
    const ports: Record<string, string> = {};
    for (const p of spec?.ports ?? []) if (typeof p.port === 'number') ports[String(p.port)] = p.name ?? '';
    out.set(key, { ports, endpoints: bySlice.get(key) ?? [] });
  }
  return out;
}

/** Log codes of the kube source and its status writer (stable). */
export const KubeCodes = { WATCH: 'GH_KUBE_WATCH', STATUS: 'GH_KUBE_STATUS', LEASE: 'GH_KUBE_LEASE' } as const;
