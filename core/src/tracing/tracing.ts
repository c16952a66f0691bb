import { randomFillSync } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ConfigSnapshot } from '../config/store.ts';
import type { Logger } from '../log/logger.ts';
import type { RequestContext } from '../proxy/context.ts';
import type { ListenerTracingSpec, RouteTracingSpec } from './schema.ts';

/**
 * Tracing (docs/tracing.md): W3C Trace Context on every upstream call and spans exported over
 * OTLP, configured as Gloo configures it (a Gateway's `httpConnectionManagerSettings.tracing`,
 * a route's `options.tracing`) or by the standard `OTEL_EXPORTER_OTLP_*` variables.
 *
 * This module holds no OpenTelemetry code: the SDK (./sdk.ts) is imported the first time a
 * collector is configured, so a process that does not trace neither loads nor allocates it. A
 * request that arrives while the SDK is still loading is not traced.
 */

/** Where spans go. */
export interface Collector {
  /** `grpc`: OTLP/gRPC (Gloo's collector Upstreams, Envoy's OpenTelemetry tracer); `http`: OTLP/HTTP protobuf. */
  readonly protocol: 'grpc' | 'http';
  /** `http://host:port` (gRPC) or the full `…/v1/traces` URL (HTTP). */
  readonly url: string;
  readonly serviceName: string;
  /** Batch export interval (default 1 s). */
  readonly flushMs?: number;
}

export type SpanKindName = 'server' | 'client' | 'internal';

/** One span, recorded or not; its context propagates either way. */
export interface SpanHandle {
  /** Whether the span is sampled and will be exported. */
  readonly recording: boolean;
  /** `traceparent` (and `tracestate` when there is one) naming this span as the parent. */
  readonly traceHeaders: Readonly<Record<string, string>>;
  readonly traceparent: string;
  readonly traceId: string;
  setAttribute(name: string, value: string | number | boolean): void;
  event(name: string): void;
  child(name: string, kind: SpanKindName, attributes?: Record<string, string | number | boolean>): SpanHandle;
  /** Ends the span; `error`: why it failed (status ERROR). Idempotent. */
  end(error?: string): void;
}

/** The SDK side (./sdk.ts). */
export interface TracingRuntime {
  readonly collector: Collector;
  /**
   * A span whose parent is the `traceparent` in `carrier` (the caller's decision then holds), or
   * a new trace sampled as `sampled` says.
   */
  start(name: string, kind: SpanKindName, attributes: Record<string, string | number | boolean> | undefined, carrier: Record<string, string | string[] | undefined> | undefined, sampled: boolean): SpanHandle;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** Sampling percentages (Envoy's client, random and overall sampling), 0–100. */
export interface Percentages {
  readonly client: number;
  readonly random: number;
  readonly overall: number;
}

/** A listener's compiled tracing settings. */
export interface ListenerTracing {
  readonly collector: Collector;
  readonly percentages: Percentages;
  readonly verbose: boolean;
  /** Request headers recorded as tags (tag name = header name). */
  readonly headerTags: readonly string[];
  /** Literal and environment tags, resolved at load. */
  readonly staticTags: Readonly<Record<string, string>>;
}

const ALL: Percentages = { client: 100, random: 100, overall: 100 };

// ---------------------------------------------------------------------------------------------
// Runtimes: one per collector, loaded on first use.

/** Loaded runtimes by collector; `loading` entries are the pending imports (awaited by {@link loadRuntime}). */
const runtimes = new Map<string, TracingRuntime | 'failed'>();
const loading = new Map<string, Promise<TracingRuntime | undefined>>();
let loadError: ((error: unknown, collector: Collector) => void) | undefined;

function runtimeKeyOf(collector: Collector): string {
  return `${collector.protocol} ${collector.url} ${collector.serviceName} ${collector.flushMs ?? ''}`;
}

/** The runtime of `collector`, or undefined while the SDK loads (the first call starts it) or when it failed to. */
export function runtimeFor(collector: Collector): TracingRuntime | undefined {
  const key = runtimeKeyOf(collector);
  const found = runtimes.get(key);
  if (found !== undefined) return found === 'failed' ? undefined : found;
  if (!loading.has(key)) {
    loading.set(
      key,
      import('./sdk.ts')
        .then((sdk) => sdk.createRuntime(collector))
        .then(
          (runtime) => {
            runtimes.set(key, runtime);
            return runtime;
          },
          (error: unknown) => {
            runtimes.set(key, 'failed');
            loadError?.(error, collector);
            return undefined;
          },
        )
        .finally(() => loading.delete(key)),
    );
  }
  return undefined;
}

/** Loads the runtime of `collector` now (a process that knows it traces: the extauth server). */
export async function loadRuntime(collector: Collector): Promise<TracingRuntime | undefined> {
  return runtimeFor(collector) ?? (await loading.get(runtimeKeyOf(collector))) ?? runtimeFor(collector);
}

/** Any loaded runtime (steps of the auth engine trace to the process's collector). */
function anyRuntime(): TracingRuntime | undefined {
  for (const value of runtimes.values()) if (typeof value === 'object') return value;
  const env = collectorFromEnv();
  return env ? runtimeFor(env) : undefined;
}

/**
 * Exports what is queued and stops the exporters (shutdown: the spans of the last requests are
 * sent), waiting at most `timeoutMs` for a collector that does not answer. Nothing to do when
 * nothing traced.
 */
export async function flushTracing(timeoutMs = 2000): Promise<void> {
  const loaded = [...runtimes.values()].filter((r): r is TracingRuntime => typeof r === 'object');
  if (loaded.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(loaded.map((r) => r.shutdown())), new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
  clearTimeout(timer);
}

/** Where a runtime that fails to load is reported (once per collector). */
export function onTracingLoadError(report: (error: unknown, collector: Collector) => void): void {
  loadError = report;
}

// ---------------------------------------------------------------------------------------------
// Configuration.

let envCollector: Collector | null | undefined;

/**
 * The process's default collector from OpenTelemetry's standard variables:
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or `OTEL_EXPORTER_OTLP_ENDPOINT` (base
 * URL, `/v1/traces` appended for HTTP), `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` (`http/protobuf`,
 * the default, or `grpc`), `OTEL_SERVICE_NAME` (default `gatehouse`). Read once.
 */
export function collectorFromEnv(env: NodeJS.ProcessEnv = process.env): Collector | undefined {
  if (envCollector !== undefined && env === process.env) return envCollector ?? undefined;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf') === 'grpc' ? 'grpc' : 'http';
  let url: string | undefined;
  if (traces) url = traces;
  else if (base) url = protocol === 'grpc' ? base : `${base.replace(/\/+$/, '')}/v1/traces`;
  const flush = Number(env.OTEL_BSP_SCHEDULE_DELAY);
  const out = url ? { protocol, url, serviceName: env.OTEL_SERVICE_NAME || 'gatehouse', ...(Number.isFinite(flush) && flush > 0 ? { flushMs: flush } : {}) } as Collector : undefined;
  if (env === process.env) envCollector = out ?? null;
  return out;
}

/** Gloo's `TracePercentages` over `base` (absent fields keep the base's). */
function percentagesOf(spec: { clientSamplePercentage?: number; randomSamplePercentage?: number; overallSamplePercentage?: number } | undefined, base: Percentages): Percentages {
  if (!spec) return base;
  return { client: spec.clientSamplePercentage ?? base.client, random: spec.randomSamplePercentage ?? base.random, overall: spec.overallSamplePercentage ?? base.overall };
}

/** The collector a Gateway's `openTelemetryConfig` names: its `collectorUpstreamRef`'s first host, over OTLP/gRPC. */
export function collectorOfUpstream(snapshot: ConfigSnapshot, ref: { name: string; namespace?: string | undefined }, namespace: string, serviceName: string): Collector | undefined {
  const ns = ref.namespace ?? namespace;
  for (const resource of snapshot.resources.values()) {
    if (resource.kind !== 'Upstream' || resource.name !== ref.name || resource.namespace !== ns) continue;
    const spec = resource.spec as { static?: { hosts?: { addr: string; port: number }[]; useTls?: boolean }; sslConfig?: unknown; kube?: { serviceName: string; serviceNamespace: string; servicePort: number } };
    const tls = spec.static?.useTls === true || spec.sslConfig !== undefined;
    const host = spec.static?.hosts?.[0];
    if (host) return { protocol: 'grpc', url: `${tls ? 'https' : 'http'}://${host.addr.includes(':') ? `[${host.addr}]` : host.addr}:${host.port}`, serviceName };
    if (spec.kube) return { protocol: 'grpc', url: `${tls ? 'https' : 'http'}://${spec.kube.serviceName}.${spec.kube.serviceNamespace}.svc:${spec.kube.servicePort}`, serviceName };
  }
  return undefined;
}

/**
 * The tracing of the listener `listener` (`namespace/name` of its Gateway; undefined: a
 * `--port` listener): its Gateway's connection-manager `tracing` when it sets one, else the
 * environment's collector with every request sampled; undefined when nothing traces.
 */
export function listenerTracingOf(snapshot: ConfigSnapshot, listener: string | undefined): ListenerTracing | undefined {
  let spec: ListenerTracingSpec | undefined;
  let namespace = 'default';
  if (listener !== undefined) {
    for (const resource of snapshot.resources.values()) {
      if (resource.kind !== 'Gateway' || `${resource.namespace}/${resource.name}` !== listener) continue;
      namespace = resource.namespace;
      const spec_ = resource.spec as { httpGateway?: { options?: { httpConnectionManagerSettings?: { tracing?: ListenerTracingSpec } } } };
      spec = spec_.httpGateway?.options?.httpConnectionManagerSettings?.tracing;
    }
  }
  const otel = spec?.openTelemetryConfig;
  const env = collectorFromEnv();
  const serviceName = otel?.serviceName || env?.serviceName || 'gatehouse';
  const collector = otel?.collectorUpstreamRef ? collectorOfUpstream(snapshot, otel.collectorUpstreamRef, namespace, serviceName) : env ? { ...env, serviceName } : undefined;
  if (!collector) return undefined;
  const staticTags: Record<string, string> = {};
  for (const literal of spec?.literalsForTags ?? []) staticTags[literal.tag] = literal.value;
  for (const variable of spec?.environmentVariablesForTags ?? []) {
    const value = process.env[variable.name] ?? variable.defaultValue;
    if (value !== undefined) staticTags[variable.tag] = value;
  }
  return {
    collector,
    percentages: percentagesOf(spec?.tracePercentages, ALL),
    verbose: spec?.verbose === true,
    headerTags: (spec?.requestHeadersForTags ?? []).map((h) => h.toLowerCase()),
    staticTags,
  };
}

// ---------------------------------------------------------------------------------------------
// Requests.

/** What the tracer reads of a route. */
export interface TracedRoute {
  readonly name: string;
  readonly tracing?: RouteTracingSpec | undefined;
  readonly destination: { readonly kind: string; readonly cluster?: { readonly name: string } };
}

const spans = new WeakMap<RequestContext, SpanHandle>();

/** The request's server span, when the request is traced. */
export function spanOf(ctx: RequestContext): SpanHandle | undefined {
  return spans.get(ctx);
}

/**
 * Traces the requests of one listener: each routed request gets a server span (the caller's
 * `traceparent` as its parent) and the upstream request carries the gateway's span as its
 * parent, sampled or not.
 */
export class RequestTracer {
  readonly settings: ListenerTracing;
  private readonly logger: Logger;
  /** The collector's runtime once loaded (looked up by key until then). */
  private runtime: TracingRuntime | undefined;

  constructor(settings: ListenerTracing, logger: Logger) {
    this.settings = settings;
    this.logger = logger;
    onTracingLoadError((error, collector) => this.logger.error({ code: 'GH_TRACING_UNAVAILABLE', err: error, collector: collector.url }, 'the OpenTelemetry SDK could not be loaded: requests are not traced'));
    // The SDK's import starts with the configuration that needs it, not on the first request
    // (its ~0.2 s of CPU then lands before traffic; requests arriving while it loads are not traced).
    this.runtime = runtimeFor(settings.collector);
  }

  /** Starts the request's span and sets the trace headers the upstream gets (in `ctx.headers`). */
  start(req: IncomingMessage, res: ServerResponse, ctx: RequestContext, route: TracedRoute): void {
    const runtime = (this.runtime ??= runtimeFor(this.settings.collector));
    if (!runtime) return;
    const options = route.tracing;
    const headers = ctx.headers;
    const incoming = headers.traceparent;
    const parent = typeof incoming === 'string' ? parseTraceparent(incoming) : undefined;
    const propagate = options?.propagate !== false;
    if (parent ? !parent.sampled : !this.sampled(options, headers)) {
      // Not sampled (the caller's decision, or ours): nothing is recorded, so no SDK object is
      // made; the upstream still gets a context (the caller's trace, or a new one) with this hop's id.
      if (!propagate) return dropTraceContext(headers);
      headers.traceparent = parent ? `00-${parent.traceId}-${newSpanId()}-00` : newUnsampledTraceparent();
      // A caller's tracestate goes on with its trace; a malformed traceparent's does not.
      if (!parent && headers.tracestate !== undefined) delete headers.tracestate;
      return;
    }
    const span = runtime.start(options?.routeDescriptor || route.name, 'server', undefined, parent ? headers : undefined, true);
    spans.set(ctx, span);
    if (!propagate) {
      dropTraceContext(headers);
    } else {
      const trace = span.traceHeaders;
      headers.traceparent = trace.traceparent;
      if (trace.tracestate !== undefined) headers.tracestate = trace.tracestate;
      else if (headers.tracestate !== undefined) delete headers.tracestate;
    }
    const settings = this.settings;
    const encrypted = (req.socket as { encrypted?: boolean }).encrypted === true;
    span.setAttribute('component', 'proxy');
    span.setAttribute('http.method', req.method ?? '');
    span.setAttribute('http.url', `${encrypted ? 'https' : 'http'}://${headers.host ?? ''}${req.url ?? '/'}`);
    span.setAttribute('url.path', (req.url ?? '/').split('?', 1)[0]!);
    span.setAttribute('http.protocol', req.httpVersionMajor === 2 ? 'HTTP/2' : `HTTP/${req.httpVersion}`);
    span.setAttribute('guid:x-request-id', ctx.requestId);
    span.setAttribute('virtual_host', ctx.virtualHost);
    const ua = headers['user-agent'];
    if (typeof ua === 'string') span.setAttribute('user_agent', ua);
    const downstream = req.socket.remoteAddress;
    if (downstream) span.setAttribute('downstream_address', downstream);
    for (const name in settings.staticTags) span.setAttribute(name, settings.staticTags[name]!);
    for (const name of settings.headerTags) {
      const value = headers[name];
      if (value !== undefined) span.setAttribute(name, Array.isArray(value) ? value.join(',') : value);
    }
    if (settings.verbose) span.event('request_received');
    const cluster = route.destination.kind === 'upstream' ? route.destination.cluster?.name : undefined;
    res.once('close', () => {
      const status = res.headersSent ? res.statusCode : 0;
      span.setAttribute('http.status_code', status);
      span.setAttribute('route_name', ctx.route);
      if (cluster !== undefined) span.setAttribute('upstream_cluster', cluster);
      // Envoy's upstream_address is host:port (ctx.upstream is the origin).
      if (ctx.upstream !== undefined) span.setAttribute('upstream_address', ctx.upstream.replace(/^[a-z]+:\/\//, ''));
      const error = (res.getHeader('x-gatehouse-error') as string | undefined) ?? undefined;
      if (error !== undefined) span.setAttribute('gatehouse.error', error);
      if (settings.verbose) span.event(res.writableFinished ? 'response_sent' : 'downstream_closed');
      span.end(status === 0 ? 'client closed before a response' : status >= 500 ? `status ${status}` : undefined);
    });
  }

  /** Envoy's sampling: client percentage when the caller sent `x-client-trace-id`, else random; then overall (no allocation: it runs for every request). */
  private sampled(route: RouteTracingSpec | undefined, headers: IncomingMessage['headers']): boolean {
    const base = this.settings.percentages;
    const own = route?.tracePercentages;
    const first = headers['x-client-trace-id'] !== undefined ? (own?.clientSamplePercentage ?? base.client) : (own?.randomSamplePercentage ?? base.random);
    if (!(Math.random() * 100 < first)) return false;
    const overall = own?.overallSamplePercentage ?? base.overall;
    return overall >= 100 || Math.random() * 100 < overall;
  }
}

/** Gloo's `propagate: false`: the upstream gets no trace context (neither ours nor the caller's). */
function dropTraceContext(headers: IncomingMessage['headers']): void {
  if (headers.traceparent !== undefined) delete headers.traceparent;
  if (headers.tracestate !== undefined) delete headers.tracestate;
}

/** W3C `traceparent` (level 1, lower-case hex; a later version's extra fields are allowed). */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-|$)/;
const TRACEPARENT_00 = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** A caller's trace context, or undefined when its `traceparent` is malformed (a new trace starts). */
function parseTraceparent(value: string): { traceId: string; sampled: boolean } | undefined {
  // The usual form (version 00, as the header arrives: Node trims it) without the capturing regex.
  if (value.length === 55 && TRACEPARENT_00.test(value)) {
    const traceId = value.slice(3, 35);
    if (traceId === ZERO_TRACE || value.startsWith(ZERO_SPAN, 36)) return undefined;
    const flags = value.charCodeAt(54); // the low hex digit of trace-flags: '0'–'9' or 'a'–'f'
    return { traceId, sampled: ((flags <= 0x39 ? flags - 0x30 : flags - 0x57) & 1) === 1 };
  }
  if (value.length > 512) return undefined;
  const match = TRACEPARENT.exec(value.trim());
  if (!match || match[1] === 'ff' || match[2] === ZERO_TRACE || match[3] === ZERO_SPAN) return undefined;
  // Version 00 is exactly 55 characters; a later version may append fields.
  if (match[1] === '00' && value.trim().length !== 55) return undefined;
  return { traceId: match[2]!, sampled: (Number.parseInt(match[4]!, 16) & 1) === 1 };
}

/**
 * Random bytes for ids, drawn from the OS 4 KB at a time: one `randomFillSync` per 170 new
 * traces, and one hex conversion per id (two `randomUUID()`s sliced into ids cost 0.8 µs a
 * request; this, 0.15 µs).
 */
const pool = Buffer.allocUnsafe(4080);
let poolOffset = pool.length;

/** `2 × bytes` random hex digits. */
function randomHex(bytes: number): string {
  if (poolOffset + bytes > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool.toString('hex', poolOffset, (poolOffset += bytes));
}

/** 16 random hex digits, not all zero (W3C: an all-zero id is invalid). */
function newSpanId(): string {
  const id = randomHex(8);
  return id === ZERO_SPAN ? newSpanId() : id;
}

/** `00-<trace id>-<span id>-00`: an unsampled context for a new trace (one hex conversion for both ids). */
function newUnsampledTraceparent(): string {
  const hex = randomHex(24);
  if (hex.startsWith(ZERO_TRACE) || hex.endsWith(ZERO_SPAN)) return newUnsampledTraceparent();
  return `00-${hex.slice(0, 32)}-${hex.slice(32)}-00`;
}

/**
 * A client span under the request's span (an auth check, a resolver's call, a plugin's fetch),
 * or undefined when the request is not traced or not sampled. Its `traceparent` goes on the call.
 */
export function childSpan(ctx: RequestContext, name: string, attributes?: Record<string, string | number | boolean>): SpanHandle | undefined {
  const parent = spans.get(ctx);
  if (!parent?.recording) return undefined;
  return parent.child(name, 'client', attributes);
}

/** A child of an already known span (undefined parent or not recording: none). */
export function childOf(parent: SpanHandle | undefined, name: string, attributes?: Record<string, string | number | boolean>): SpanHandle | undefined {
  return parent?.recording ? parent.child(name, 'client', attributes) : undefined;
}

const SAMPLED_TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]([13579bdf])$/;

/**
 * A span for work done on behalf of a caller whose trace context is in `headers` (an auth
 * step in the extauth engine): only when the caller's `traceparent` is sampled and this
 * process has a collector (its own requests', or OTEL_EXPORTER_OTLP_*). Cheap when not.
 */
export function remoteChildSpan(headers: Readonly<Record<string, string | undefined>>, name: string, attributes?: Record<string, string | number | boolean>): SpanHandle | undefined {
  const traceparent = headers.traceparent;
  if (traceparent === undefined || !SAMPLED_TRACEPARENT.test(traceparent)) return undefined;
  const runtime = anyRuntime();
  if (!runtime) return undefined;
  return runtime.start(name, 'internal', attributes, { traceparent, tracestate: headers.tracestate }, true);
}
