import type * as k8s from '@kubernetes/client-node';
import { ConfigChannels } from '../telemetry.ts';
import type { Logger } from '../../log/logger.ts';
import { formatDiagnostic } from '../diagnostic.ts';
import { isCoreKind } from '../schema/kinds.ts';
import type { ConfigSnapshot, ResourceStatus } from '../store.ts';
import { KubeCodes, type KubeObjectOrigin } from './kube.ts';
import { kubeRequest } from './kube-request.ts';

/** What a status writer needs to know about the objects it reports on. */
export interface OriginLookup {
  origin(key: string): KubeObjectOrigin | undefined;
  /** Tells of objects whose `status` alone changed (someone else wrote it): the verdict is written again. */
  onStatusChange?(listener: (key: string, status: unknown) => void): () => void;
}

/** Longest `status.reason` written: a rejection may quote a field of any size (etcd holds 1.5 MB per object). */
export const MAX_STATUS_REASON_CHARS = 4096;

/** `text` cut to `max` characters, saying how much was cut. */
function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… [${text.length - max} more characters]`;
}

/** Whether the status seen on an object is the verdict we wrote (fields we write only; others are left alone). */
function sameVerdict(seen: unknown, ours: KubeResourceStatus): boolean {
  if (!seen || typeof seen !== 'object') return false;
  const s = seen as Record<string, unknown>;
  return s.state === ours.state && s.reason === ours.reason && s.serving === ours.serving && s.reportedBy === ours.reportedBy && s.observedGeneration === ours.observedGeneration;
}

export interface KubeStatusWriterOptions {
  config: k8s.KubeConfig;
  origins: OriginLookup;
  logger: Logger;
  /** This replica's name in the Lease (the pod name in a cluster). */
  identity: string;
  /** Namespace and name of the Lease (default: $POD_NAMESPACE or `default`, `gatehouse-status-writer`). */
  leaseNamespace?: string | undefined;
  leaseName?: string | undefined;
  /** How long a holder that stopped renewing keeps the Lease (default 15 s; renewed every third of it). */
  leaseDurationMs?: number | undefined;
}

/** The `status` Gatehouse writes on each resource (docs/configuration.md). */
export interface KubeResourceStatus {
  state: ResourceStatus['state'];
  /** Why it was rejected, or its warnings; empty when accepted. */
  reason: string;
  /** The `metadata.generation` this verdict is about. */
  observedGeneration?: number | undefined;
  /** Which version serves: the newest, the last accepted one, or none. */
  serving: ResourceStatus['serving'];
  reportedBy: 'gatehouse';
}

/** What `gatehouse extauth` writes under an AuthConfig's `status.extauth`: whether its steps built. */
export interface ExtAuthBuildStatus {
  state: 'Built' | 'Failed';
  /** The build error (redacted, bounded); empty when built. */
  reason: string;
  observedGeneration?: number | undefined;
}

/** The `status.extauth` of a status object, when it is one. */
function extauthOf(status: unknown): ExtAuthBuildStatus | undefined {
  const e = (status as { extauth?: unknown } | null | undefined)?.extauth as Partial<ExtAuthBuildStatus> | undefined;
  if (!e || typeof e !== 'object' || (e.state !== 'Built' && e.state !== 'Failed')) return undefined;
  return { state: e.state, reason: typeof e.reason === 'string' ? e.reason : '', ...(typeof e.observedGeneration === 'number' ? { observedGeneration: e.observedGeneration } : {}) };
}

/** Longest Event `note` (the API server refuses more than 1 kB). */
const MAX_EVENT_NOTE_CHARS = 1000;

/**
 * Posts an events.k8s.io/v1 Event about `origin` (what `kubectl describe` and `kubectl get
 * events` show). Best effort: a refused Event is logged, never retried.
 */
export async function postEvent(
  config: k8s.KubeConfig,
  logger: Logger,
  origin: KubeObjectOrigin,
  kind: string,
  event: { type: 'Normal' | 'Warning'; reason: string; action: string; note: string; controller: string; instance: string },
): Promise<void> {
  const now = Date.now();
  const body = {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    // client-go's naming: <object>.<hex time> (generateName refuses the trailing dot).
    metadata: { name: `${origin.name.slice(0, 200)}.${(now * 1e6 + Math.floor(Math.random() * 1e6)).toString(16)}`, namespace: origin.namespace },
    eventTime: microTime(now),
    type: event.type,
    reason: event.reason,
    action: event.action,
    note: cut(event.note, MAX_EVENT_NOTE_CHARS),
    reportingController: event.controller,
    reportingInstance: event.instance.slice(0, 128),
    regarding: { apiVersion: `${origin.group}/${origin.version}`, kind, namespace: origin.namespace, name: origin.name, ...(origin.uid ? { uid: origin.uid } : {}) },
  };
  const answer = await kubeRequest(config, 'POST', `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(origin.namespace)}/events`, body).catch((error: unknown) => ({ status: 0, text: (error as Error).message }));
  if (answer.status !== 201 && answer.status !== 200) {
    ConfigChannels.kubeEvent.publish({ result: 'error' });
    logger.warn({ code: KubeCodes.STATUS, resource: `${kind}/${origin.namespace}/${origin.name}`, status: answer.status, body: answer.text.slice(0, 300) }, 'posting a Kubernetes Event failed');
  } else {
    ConfigChannels.kubeEvent.publish({ result: 'ok' });
  }
}

/** Kubernetes MicroTime: RFC 3339 with microseconds. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

interface LeaseRecord {
  metadata?: { resourceVersion?: string };
  spec?: { holderIdentity?: string | null; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
}

/**
 * Writes each resource's verdict to its `status` subresource (SPEC 2.1), one writer at a time
 * across replicas: a `coordination.k8s.io/v1` Lease elects it, as client-go's leader election
 * does (a holder is presumed gone when its record has not changed for a whole lease duration,
 * measured on our clock, so replicas' clocks need not agree). Only changed verdicts are written;
 * a new leader writes them all once.
 */
export class KubeStatusWriter {
  private readonly options: KubeStatusWriterOptions;
  private readonly durationMs: number;
  private readonly leasePath: string;
  private leading = false;
  private timer: NodeJS.Timeout | undefined;
  private observed: { json: string; at: number } | undefined;
  private latest: ConfigSnapshot | undefined;
  /** What was last written, by resource key: skip unchanged verdicts. */
  private written = new Map<string, string>();
  /** The verdict last written, by resource key: what a status seen on the object must equal. */
  private readonly verdicts = new Map<string, KubeResourceStatus>();
  /** When each key's verdict was last re-asserted: a writer fighting ours is answered at most once a second per object. */
  private readonly reasserted = new Map<string, number>();
  private unsubscribe: (() => void) | undefined;
  /** Re-assertions logged: one line per 10 s, however many objects someone else keeps writing. */
  private reassertLog = { at: 0, suppressed: 0 };
  private writing: Promise<void> = Promise.resolve();
  private closed = false;
  /** AuthConfigs' `status.extauth` as last seen (written by `gatehouse extauth`), by resource key. */
  private readonly extauthReports = new Map<string, ExtAuthBuildStatus>();

  constructor(options: KubeStatusWriterOptions) {
    this.options = options;
    this.durationMs = options.leaseDurationMs ?? 15_000;
    const namespace = options.leaseNamespace ?? (process.env.POD_NAMESPACE || 'default');
    this.leasePath = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases/${encodeURIComponent(options.leaseName ?? 'gatehouse-status-writer')}`;
    this.unsubscribe = options.origins.onStatusChange?.((key, status) => this.statusSeen(key, status));
  }

  /**
   * A status we did not write (anyone with `/status` access can): write our verdict again, so
   * a Rejected resource never stays `Accepted` in the cluster.
   */
  private statusSeen(key: string, status: unknown): void {
    // extauth reported a build result: the verdict takes it in (an AuthConfig whose steps do not
    // build is not Accepted while every request is denied).
    if (this.recordExtauth(key, status)) {
      this.written.delete(key);
      if (this.leading && !this.closed) this.flush();
      return;
    }
    const ours = this.verdicts.get(key);
    if (!this.leading || this.closed || !ours || sameVerdict(status, ours)) return;
    const now = Date.now();
    const last = this.reasserted.get(key) ?? 0;
    this.written.delete(key);
    if (now - last < 1_000) {
      // Re-asserted a moment ago: once more after the pause, not in a tight loop.
      setTimeout(() => this.flush(), 1_000 - (now - last)).unref();
      return;
    }
    this.reasserted.set(key, now);
    if (now - this.reassertLog.at >= 10_000) {
      const repeated = this.reassertLog.suppressed;
      this.reassertLog = { at: now, suppressed: 0 };
      this.options.logger.warn(
        { code: KubeCodes.STATUS, resource: cut(key, 512), seen: cut(JSON.stringify(status) ?? 'null', 256), ...(repeated ? { repeated } : {}) },
        'resource status was changed by someone else; writing the verdict again',
      );
    } else {
      this.reassertLog.suppressed++;
    }
    this.flush();
  }

  /** Records an AuthConfig's `status.extauth`; true when it changed. */
  private recordExtauth(key: string, status: unknown): boolean {
    if (!key.startsWith('AuthConfig/')) return false;
    const report = extauthOf(status);
    const before = this.extauthReports.get(key);
    if (JSON.stringify(report) === JSON.stringify(before)) return false;
    if (report) this.extauthReports.set(key, report);
    else this.extauthReports.delete(key);
    return true;
  }

  /** Whether this replica holds the Lease now. */
  get isLeader(): boolean {
    return this.leading;
  }

  /** Starts competing for the Lease (at once, then every third of its duration). */
  start(): void {
    const tick = async () => {
      if (this.closed) return;
      await this.contend().catch((error: unknown) => {
        this.setLeading(false);
        this.options.logger.warn({ code: KubeCodes.LEASE, error: (error as Error).message }, 'status Lease unreachable; not writing status');
      });
      if (!this.closed) this.timer = setTimeout(() => void tick(), Math.max(100, this.durationMs / 3));
      this.timer?.unref();
    };
    void tick();
  }

  /** The newest verdicts; written now when leading, else when this replica comes to lead. */
  update(snapshot: ConfigSnapshot): void {
    this.latest = snapshot;
    if (this.leading) this.flush();
  }

  private flush(): void {
    const snapshot = this.latest;
    if (!snapshot) return;
    this.writing = this.writing.then(() => this.writeAll(snapshot)).catch((error: unknown) => this.options.logger.warn({ code: KubeCodes.STATUS, error: (error as Error).message }, 'writing status failed'));
  }

  private async writeAll(snapshot: ConfigSnapshot): Promise<void> {
    let again = false;
    for (const status of snapshot.statuses) {
      if (!this.leading || this.closed || this.latest !== snapshot) return;
      if (isCoreKind(status.kind)) continue;
      const key = `${status.kind}/${status.namespace}/${status.name}`;
      const origin = this.options.origins.origin(key);
      if (!origin) continue;
      const reasons = status.reasons.map((d) => formatDiagnostic({ ...d, file: undefined, line: undefined }));
      let { state, serving } = status;
      // extauth could not build this generation's steps: every request it guards is denied.
      const built = this.extauthReports.get(key);
      if (built?.state === 'Failed' && (built.observedGeneration === undefined || origin.generation === undefined || built.observedGeneration === origin.generation)) {
        state = 'Rejected';
        serving = 'none';
        reasons.unshift(`extauth cannot build its steps, requests are denied: ${built.reason}`);
      }
      const body: KubeResourceStatus = {
        state,
        reason: cut(reasons.join('\n'), MAX_STATUS_REASON_CHARS),
        ...(origin.generation !== undefined ? { observedGeneration: origin.generation } : {}),
        serving,
        reportedBy: 'gatehouse',
      };
      const json = JSON.stringify([origin.uid, body]);
      if (this.written.get(key) === json) continue;
      const path = `/apis/${origin.group}/${origin.version}/namespaces/${encodeURIComponent(origin.namespace)}/${origin.plural}/${encodeURIComponent(origin.name)}/status`;
      const answer = await kubeRequest(this.options.config, 'PATCH', path, { status: body }, 'application/merge-patch+json');
      if (answer.status === 200) {
        this.written.set(key, json);
        const previous = this.verdicts.get(key);
        this.verdicts.set(key, body);
        ConfigChannels.kubeStatusWrite.publish({ result: 'ok' });
        // The object as patched holds extauth's report too (after a restart, the first news of it).
        let seen: unknown;
        try {
          seen = (JSON.parse(answer.text) as { status?: unknown }).status;
        } catch {
          seen = undefined;
        }
        if (this.recordExtauth(key, seen)) {
          this.written.delete(key);
          again = true;
        }
        // An Event when a resource turns Rejected or Warning, or its reason changes (kubectl describe).
        if (body.state !== 'Accepted' && (previous?.state !== body.state || previous.reason !== body.reason)) {
          void postEvent(this.options.config, this.options.logger, origin, status.kind, {
            type: 'Warning',
            reason: body.state,
            action: 'Validate',
            note: body.reason || body.state,
            controller: 'gatehouse.dev/gateway',
            instance: this.options.identity,
          });
        }
      } else if (answer.status === 404) {
        // Deleted meanwhile: the next snapshot drops it.
        this.written.delete(key);
      } else {
        ConfigChannels.kubeStatusWrite.publish({ result: 'error' });
        this.options.logger.warn({ code: KubeCodes.STATUS, resource: cut(key, 512), status: answer.status, body: answer.text.slice(0, 300) }, 'writing status failed');
      }
    }
    // Forget verdicts of resources that are gone, so one recreated under the same name is written.
    const present = new Set(snapshot.statuses.map((s) => `${s.kind}/${s.namespace}/${s.name}`));
    for (const key of this.written.keys()) if (!present.has(key)) this.written.delete(key);
    for (const key of this.verdicts.keys()) if (!present.has(key)) (this.verdicts.delete(key), this.reasserted.delete(key));
    for (const key of this.extauthReports.keys()) if (!present.has(key)) this.extauthReports.delete(key);
    if (again && this.leading && !this.closed) this.flush();
  }

  private setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    ConfigChannels.kubeStatusLeader.publish({ leading });
    this.options.logger.info({ identity: this.options.identity, lease: this.leasePath }, leading ? 'leading: this replica writes resource status' : 'not leading: another replica writes resource status');
    if (leading) {
      this.written.clear();
      this.flush();
    }
  }

  /** One round of client-go style leader election on the Lease. */
  private async contend(): Promise<void> {
    const { config, identity } = this.options;
    const now = Date.now();
    const seconds = Math.max(1, Math.round(this.durationMs / 1000));
    const got = await kubeRequest(config, 'GET', this.leasePath);
    if (got.status === 404) {
      const create = await kubeRequest(config, 'POST', this.leasePath.replace(/\/[^/]+$/, ''), {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: decodeURIComponent(this.leasePath.split('/').at(-1)!) },
        spec: { holderIdentity: identity, leaseDurationSeconds: seconds, acquireTime: microTime(now), renewTime: microTime(now), leaseTransitions: 0 },
      });
      this.setLeading(create.status === 201 || create.status === 200);
      return;
    }
    if (got.status !== 200) throw new Error(`GET ${this.leasePath}: HTTP ${got.status} ${got.text.slice(0, 200)}`);
    const lease = JSON.parse(got.text) as LeaseRecord;
    const spec = lease.spec ?? {};
    const json = JSON.stringify(spec);
    if (this.observed?.json !== json) this.observed = { json, at: now };
    const holder = spec.holderIdentity ?? '';
    const expired = holder === '' || now - this.observed.at >= (spec.leaseDurationSeconds ?? seconds) * 1000;
    if (holder !== identity && !expired) {
      this.setLeading(false);
      return;
    }
    const next = {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: seconds,
        renewTime: microTime(now),
        ...(holder !== identity ? { acquireTime: microTime(now), leaseTransitions: (spec.leaseTransitions ?? 0) + 1 } : {}),
      },
    };
    // resourceVersion in the body: a replica that raced us gets 409 and stays a follower.
    const put = await kubeRequest(config, 'PUT', this.leasePath, next);
    if (put.status === 200) {
      this.observed = { json: JSON.stringify((JSON.parse(put.text) as LeaseRecord).spec ?? {}), at: now };
      this.setLeading(true);
    } else if (put.status === 409) {
      this.setLeading(false);
    } else {
      throw new Error(`PUT ${this.leasePath}: HTTP ${put.status} ${put.text.slice(0, 200)}`);
    }
  }

  /** Stops; a leader gives the Lease up so another replica takes over at once. */
  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe?.();
    clearTimeout(this.timer);
    await this.writing;
    if (!this.leading) return;
    this.leading = false;
    ConfigChannels.kubeStatusLeader.publish({ leading: false });
    try {
      const got = await kubeRequest(this.options.config, 'GET', this.leasePath);
      if (got.status !== 200) return;
      const lease = JSON.parse(got.text) as LeaseRecord;
      if (lease.spec?.holderIdentity !== this.options.identity) return;
      await kubeRequest(this.options.config, 'PUT', this.leasePath, { ...lease, spec: { ...lease.spec, holderIdentity: null } });
    } catch {
      // Going away anyway: the Lease expires on its own.
    }
  }
}

/** Options of {@link KubeBuildReporter}. */
export interface KubeBuildReporterOptions {
  config: k8s.KubeConfig;
  origins: OriginLookup;
  logger: Logger;
  /** The pod name: the Events' reportingInstance. */
  identity: string;
}

/**
 * `gatehouse extauth --kube`: writes each AuthConfig's build result to `status.extauth` (a merge
 * patch of that key only: the gateway's verdict fields are left to the gateway, which folds the
 * result in) and posts a Warning Event when its steps fail to build (issue 27 item 1). Each result
 * is written once per process and then on change; every replica writes the same result.
 */
export class KubeBuildReporter {
  private readonly options: KubeBuildReporterOptions;
  private readonly reported = new Map<string, string>();
  private writing: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(options: KubeBuildReporterOptions) {
    this.options = options;
  }

  /** The engine's newest build results (engine.onBuildReport). */
  report(results: readonly { namespace: string; name: string; failure?: { code: string; message: string } | undefined }[]): void {
    const list = [...results];
    this.writing = this.writing.then(() => this.write(list)).catch((error: unknown) => this.options.logger.warn({ code: KubeCodes.STATUS, error: (error as Error).message }, 'reporting AuthConfig build results failed'));
  }

  private async write(results: readonly { namespace: string; name: string; failure?: { code: string; message: string } | undefined }[]): Promise<void> {
    const present = new Set<string>();
    for (const result of results) {
      if (this.closed) return;
      const key = `AuthConfig/${result.namespace}/${result.name}`;
      present.add(key);
      const origin = this.options.origins.origin(key);
      if (!origin) continue;
      const body: ExtAuthBuildStatus = {
        state: result.failure ? 'Failed' : 'Built',
        reason: result.failure ? cut(`${result.failure.message} [${result.failure.code}]`, MAX_STATUS_REASON_CHARS) : '',
        ...(origin.generation !== undefined ? { observedGeneration: origin.generation } : {}),
      };
      const json = JSON.stringify([origin.uid, body]);
      if (this.reported.get(key) === json) continue;
      const path = `/apis/${origin.group}/${origin.version}/namespaces/${encodeURIComponent(origin.namespace)}/${origin.plural}/${encodeURIComponent(origin.name)}/status`;
      const answer = await kubeRequest(this.options.config, 'PATCH', path, { status: { extauth: body } }, 'application/merge-patch+json');
      if (answer.status === 200) {
        this.reported.set(key, json);
        ConfigChannels.kubeStatusWrite.publish({ result: 'ok' });
        if (result.failure) {
          await postEvent(this.options.config, this.options.logger, origin, 'AuthConfig', {
            type: 'Warning',
            reason: 'BuildFailed',
            action: 'Build',
            note: `extauth cannot build its steps, requests are denied: ${body.reason}`,
            controller: 'gatehouse.dev/extauth',
            instance: this.options.identity,
          });
        }
      } else if (answer.status !== 404) {
        ConfigChannels.kubeStatusWrite.publish({ result: 'error' });
        this.options.logger.warn({ code: KubeCodes.STATUS, resource: cut(key, 512), status: answer.status, body: answer.text.slice(0, 300) }, 'writing the AuthConfig build result failed');
      }
    }
    for (const key of this.reported.keys()) if (!present.has(key)) this.reported.delete(key);
  }

  /** Stops after the write in progress. */
  async close(): Promise<void> {
    this.closed = true;
    await this.writing;
  }
}
