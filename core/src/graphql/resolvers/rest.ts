import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import type { RestResolverSpec } from '../../config/schema/graphql-api.ts';
import { durationMs } from '../../config/schema/common.ts';
import { isConnectFailure, type UpstreamCluster } from '../../proxy/upstream/upstream-cluster.ts';
import { FieldErrorCodes, GraphQLConfigCodes, fieldError, type Problem } from '../compile/errors.ts';
import { getPath, parsePath, type Segment } from '../compile/path.ts';
import { LIMITS_OFF, type OperationBudget } from '../limits/limits.ts';
import { DotPathSegmentError, EmptyPathSegmentError, JsonTemplate, Template, TemplateSyntaxError, type TemplateScope, type TemplateSource } from '../compile/template.ts';
import { dedupe, type FieldResolver, type OperationContext, type ResolverMetrics } from './types.ts';
import { resolverSpan } from '../execute/trace.ts';
import type { SpanHandle } from '../../tracing/tracing.ts';

/** Default `restResolver.timeout` (SPEC 3.3). */
export const DEFAULT_REST_TIMEOUT_MS = 1_000;

const REQUEST_SOURCES: readonly TemplateSource[] = ['parent', 'args', 'headers'];
const SETTER_SOURCES: readonly TemplateSource[] = ['body', 'parent', 'args', 'headers'];
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const BODYLESS = new Set(['GET', 'HEAD']);

/** A `restResolver` with every template and path parsed (load time). */
export interface CompiledRest {
  readonly method: string;
  readonly path: Template;
  readonly headers: readonly (readonly [string, Template])[];
  readonly queryParams: readonly (readonly [string, Template])[];
  readonly body: JsonTemplate | undefined;
  readonly resultRoot: readonly Segment[] | undefined;
  readonly setters: readonly (readonly [string, Template])[];
  /** The setters as applied to each item of a list result (see {@link Template.perItem}). */
  readonly itemSetters: readonly (readonly [string, Template])[];
  readonly timeoutMs: number;
  /** Gloo's `spanName`: the name of the call's span when the request is traced (core/src/tracing). */
  readonly spanName: string | undefined;
}

/** Parses a `restResolver`; problems are reported at their field path under `at`. */
export function compileRest(spec: RestResolverSpec, at: readonly (string | number)[], problems: Problem[]): CompiledRest | undefined {
  const before = problems.length;
  const error = (path: (string | number)[], code: string, message: string) => problems.push({ path: [...at, ...path], code, message, severity: 'error' });
  const template = (text: string, path: (string | number)[], sources: readonly TemplateSource[]): Template => {
    try {
      return Template.parse(text, sources);
    } catch (e) {
      if (!(e instanceof TemplateSyntaxError)) throw e;
      error(path, GraphQLConfigCodes.BAD_TEMPLATE, e.message);
      return Template.parse('', sources);
    }
  };
  const rawHeaders = spec.request?.headers ?? {};
  const method = (rawHeaders[':method'] ?? 'GET').toUpperCase();
  if (!METHODS.has(method)) {
    error(['request', 'headers', ':method'], GraphQLConfigCodes.BAD_TEMPLATE, `":method" must be one of ${[...METHODS].join(', ')}, not "${rawHeaders[':method']}"`);
  }
  const rawPath = rawHeaders[':path'];
  let path = Template.parse('/', REQUEST_SOURCES);
  if (rawPath === undefined) {
    error(['request', 'headers'], GraphQLConfigCodes.BAD_TEMPLATE, 'a restResolver needs request.headers[":path"], e.g. ":path": /users/{$args.id}');
  } else if (!rawPath.startsWith('/')) {
    error(['request', 'headers', ':path'], GraphQLConfigCodes.BAD_TEMPLATE, `":path" must start with "/", got "${rawPath}"`);
  } else {
    path = template(rawPath, ['request', 'headers', ':path'], REQUEST_SOURCES);
  }
  const headers: [string, Template][] = [];
  for (const [name, value] of Object.entries(rawHeaders)) {
    if (name === ':method' || name === ':path') continue;
    if (name.startsWith(':')) {
      error(['request', 'headers', name], GraphQLConfigCodes.BAD_TEMPLATE, `unknown pseudo-header "${name}"; only ":method" and ":path" are supported`);
      continue;
    }
    headers.push([name.toLowerCase(), template(value, ['request', 'headers', name], REQUEST_SOURCES)]);
  }
  const queryParams = Object.entries(spec.request?.queryParams ?? {}).map(
    ([name, value]) => [name, template(value, ['request', 'queryParams', name], REQUEST_SOURCES)] as const,
  );
  let body: JsonTemplate | undefined;
  if (spec.request?.body !== undefined) {
    if (BODYLESS.has(method)) {
      problems.push({ path: [...at, 'request', 'body'], code: GraphQLConfigCodes.IGNORED, message: `a ${method} request has no body; set ":method" to POST, PUT or PATCH to send it`, severity: 'warning' });
    } else {
      try {
        body = JsonTemplate.parse(spec.request.body, REQUEST_SOURCES);
      } catch (e) {
        if (!(e instanceof TemplateSyntaxError)) throw e;
        error(['request', 'body'], GraphQLConfigCodes.BAD_TEMPLATE, e.message);
      }
    }
  }
  let resultRoot: Segment[] | undefined;
  if (spec.response?.resultRoot !== undefined && spec.response.resultRoot !== '') {
    try {
      resultRoot = parsePath(spec.response.resultRoot);
    } catch (e) {
      error(['response', 'resultRoot'], GraphQLConfigCodes.BAD_PATH, (e as Error).message);
    }
  }
  const setters = Object.entries(spec.response?.setters ?? {}).map(
    ([field, value]) => [field, template(value, ['response', 'setters', field], SETTER_SOURCES)] as const,
  );
  if (problems.length > before && problems.slice(before).some((p) => p.severity === 'error')) return undefined;
  return {
    method,
    path,
    headers,
    queryParams,
    body,
    resultRoot,
    setters,
    itemSetters: setters.map(([field, t]) => [field, t.perItem() ?? t] as const),
    timeoutMs: spec.timeout ? durationMs(spec.timeout) : DEFAULT_REST_TIMEOUT_MS,
    spanName: spec.spanName || undefined,
  };
}

/** Binds a compiled `restResolver` to its upstream (looked up per call: the registry may replace a closed cluster). */
export function restResolver(rest: CompiledRest, cluster: UpstreamCluster, metrics: ResolverMetrics): FieldResolver {
  const constantBody = rest.body?.constant ? JSON.stringify(rest.body.raw) : undefined;
  const hasBody = rest.body !== undefined;
  const staticHeaders: Record<string, string> = {};
  const dynamicHeaders: (readonly [string, Template])[] = [];
  for (const [name, t] of rest.headers) {
    if (t.constant) staticHeaders[name] = t.text;
    else dynamicHeaders.push([name, t]);
  }
  if (hasBody && staticHeaders['content-type'] === undefined) staticHeaders['content-type'] = 'application/json';
  if (staticHeaders.accept === undefined) staticHeaders.accept = 'application/json';
  const method = ` ${rest.method} `;
  // Shaping is timed against the operation's budget when it can walk a list (setters, a `[*]` in
  // resultRoot); otherwise it is a few property reads, cheaper than reading the clock twice.
  const timedShape = rest.setters.length > 0 || (rest.resultRoot?.some((segment) => 'all' in segment) ?? false);

  return async function resolveRest(parent: unknown, args: Record<string, unknown>, ctx: OperationContext): Promise<unknown> {
    const scope: TemplateScope = { parent, args, headers: ctx.headers };
    let path: string;
    try {
      path = rest.path.urlPath(scope);
    } catch (e) {
      metrics.error();
      if (e instanceof EmptyPathSegmentError) throw fieldError(FieldErrorCodes.EMPTY_PATH_SEGMENT, e.message);
      if (e instanceof DotPathSegmentError) throw fieldError(FieldErrorCodes.INVALID_PATH_SEGMENT, e.message);
      throw e;
    }
    if (rest.queryParams.length > 0) path = appendQuery(path, rest.queryParams, scope);
    let headers = staticHeaders;
    let headerKey = '';
    if (dynamicHeaders.length > 0) {
      headers = { ...staticHeaders };
      for (const [name, t] of dynamicHeaders) {
        // A header built from a missing value is left out (not sent empty, nor half-built like "Bearer ").
        if (t.missing(scope)) continue;
        const value = t.string(scope);
        headers[name] = value;
        headerKey += `${name}:${value}\n`;
      }
    }
    const body = hasBody ? (constantBody ?? JSON.stringify(rest.body!.value(scope))) : undefined;
    const prefix = cluster.name + method + path + '\n' + headerKey;
    const key = body === undefined ? prefix : prefix + body;
    let json: unknown;
    let span: SpanHandle | undefined;
    try {
      // Trace headers after the key: they differ per request, not per call. A resolution's own header wins.
      span = resolverSpan(ctx.trace, rest.spanName ?? `graphql.rest ${cluster.name}`, { 'upstream_cluster': cluster.name, 'http.method': rest.method, 'url.path': path.split('?', 1)[0]! });
      const sent = ctx.trace ? { ...ctx.trace, ...span?.traceHeaders, ...headers } : headers;
      json = await dedupe(ctx, key, () => send(cluster, rest, path, sent, body, ctx.budget));
      span?.end();
    } catch (e) {
      span?.end((e as Error).message);
      metrics.error();
      throw e;
    }
    metrics.ok();
    if (LIMITS_OFF || !timedShape) return shape(rest, json, scope);
    const started = performance.now();
    const shaped = shape(rest, json, scope);
    ctx.budget.spend(performance.now() - started);
    return shaped;
  };
}

function appendQuery(path: string, params: readonly (readonly [string, Template])[], scope: TemplateScope): string {
  let query = '';
  for (const [name, t] of params) {
    // A parameter that is exactly one template and resolves to nothing is left out.
    if (t.single) {
      const value = t.value(scope);
      if (value === null) continue;
    }
    query += `${query ? '&' : ''}${encodeURIComponent(name)}=${t.string(scope, encodeURIComponent)}`;
  }
  if (!query) return path;
  return path + (path.includes('?') ? '&' : '?') + query;
}

/** Applies `resultRoot` then `setters` (per item when the root is a list). */
function shape(rest: CompiledRest, json: unknown, scope: TemplateScope): unknown {
  let root = rest.resultRoot ? getPath(json, rest.resultRoot) : json;
  if (root === undefined) root = null;
  if (rest.setters.length === 0 || root === null) return root;
  const apply = (item: unknown, setters: CompiledRest['setters']): unknown => {
    const out: Record<string, unknown> = item && typeof item === 'object' && !Array.isArray(item) ? { ...(item as object) } : {};
    const itemScope: TemplateScope = { parent: scope.parent, args: scope.args, headers: scope.headers, body: item };
    for (const [field, t] of setters) out[field] = t.value(itemScope);
    return out;
  };
  return Array.isArray(root) ? root.map((item) => apply(item, rest.itemSetters)) : apply(root, rest.setters);
}

/**
 * Largest upstream answer a REST resolver reads (10 MiB): the whole body is parsed as JSON, so
 * an unbounded one (400 MB) took the process to 1.35 GB (issue 17 finding 17).
 */
export const MAX_RESPONSE_BYTES = 10 * 1024 * 1024;
/** Error messages quote at most this much of a path or cause (one echoed ~10 MB of upstream data). */
const MAX_QUOTE = 256;

function withoutQuery(path: string): string {
  const q = path.indexOf('?');
  return q < 0 ? path : `${path.slice(0, q)}?…`;
}

function shorten(text: string): string {
  return text.length > MAX_QUOTE ? `${text.slice(0, MAX_QUOTE)}…` : text;
}

/** The outcome of one {@link RestCall}: the body, or why there is none. */
type CallOutcome = { readonly status: number; readonly body: Buffer } | { readonly error: Error };

/**
 * One upstream call as an undici dispatch handler: the answer's bytes collected directly (no
 * stream, no async iterator, no AbortSignal per call), held to `limit` bytes and to the
 * operation's budget, the whole call bounded by `timeoutMs`. A non-2xx answer's body is not kept.
 */
class RestCall implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** The answer's status (0 before it starts). */
  status = 0;
  private failure: Error | undefined;
  private done!: (outcome: CallOutcome) => void;
  private readonly timer: NodeJS.Timeout;
  private readonly budget: OperationBudget;
  /** Set once the deadline passed (the call was aborted for it). */
  timedOut = false;
  readonly finished: Promise<CallOutcome>;

  constructor(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions, timeoutMs: number, budget: OperationBudget) {
    this.budget = budget;
    this.finished = new Promise<CallOutcome>((resolve) => (this.done = resolve));
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.abort(TIMED_OUT);
    }, timeoutMs);
    dispatcher.dispatch(options, this);
  }

  private abort(reason: Error): void {
    this.failure ??= reason;
    if (this.controller) this.controller.abort(reason);
    else this.finish({ error: reason });
  }

  private finish(outcome: CallOutcome): void {
    clearTimeout(this.timer);
    this.done(outcome);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.failure) controller.abort(this.failure);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    this.status = statusCode;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.failure) return;
    this.size += chunk.length;
    if (this.status < 200 || this.status > 299) {
      // A failed answer's body is read and dropped (the connection stays reusable), up to a
      // bound: past it the call ends with the status and the connection is closed.
      if (this.size > MAX_DRAINED_BYTES) {
        this.finish({ status: this.status, body: EMPTY });
        this.failure = DRAINED;
        controller.abort(DRAINED);
      }
      return;
    }
    if (this.size > MAX_RESPONSE_BYTES) {
      this.chunks.length = 0;
      this.failure = TOO_LARGE;
      controller.abort(TOO_LARGE);
      return;
    }
    if (!this.budget.reserve(chunk.length)) {
      this.chunks.length = 0;
      this.failure = OVER_BUDGET_ERROR;
      controller.abort(OVER_BUDGET_ERROR);
      return;
    }
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    this.finish({ status: this.status, body: this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size) });
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.finish({ error: this.failure ?? error });
  }
}

const TIMED_OUT = new Error('restResolver timeout');
/** The end of a failed answer's body that was not read (see {@link MAX_DRAINED_BYTES}). */
const DRAINED = new Error('failed answer not read to its end');
/** Bytes of a non-2xx answer's body read before the connection is closed instead (undici's `dump()` default). */
const MAX_DRAINED_BYTES = 128 * 1024;
const EMPTY = Buffer.alloc(0);
const TOO_LARGE = new Error('upstream answer over the REST resolver limit');
const OVER_BUDGET_ERROR = new Error('upstream answer over limits.maxBufferedBytes');

/** One call of a REST resolver: the parsed JSON answer (null for an empty body), or a field error. */
async function send(cluster: UpstreamCluster, rest: CompiledRest, path: string, headers: IncomingHttpHeaders, body: string | undefined, budget: OperationBudget): Promise<unknown> {
  // Messages quote the path without its query string: a static query parameter may hold a key.
  const shown = () => shorten(withoutQuery(path));
  const options: Dispatcher.DispatchOptions = { method: rest.method as 'GET', path, headers: headers as Record<string, string>, body };
  // One deadline for the whole call, a retry included (undici's per-request headersTimeout is too coarse for sub-second timeouts).
  const deadline = performance.now() + rest.timeoutMs;
  // A refused connection never reached the upstream, so another host may be tried once.
  let host = cluster.pick();
  let call = new RestCall(host.dispatcher, options, rest.timeoutMs, budget);
  let outcome = await call.finished;
  if ('error' in outcome && isConnectFailure(outcome.error) && !call.timedOut) {
    cluster.eject(host);
    const left = deadline - performance.now();
    if (cluster.hosts.length > 1 && left > 0) {
      host = cluster.pick();
      call = new RestCall(host.dispatcher, options, left, budget);
      outcome = await call.finished;
    }
  }
  if ('error' in outcome) {
    const error = outcome.error;
    if (error === OVER_BUDGET_ERROR) throw budget.bufferedError();
    if (error === TOO_LARGE) throw fieldError(FieldErrorCodes.BAD_UPSTREAM_RESPONSE, `upstream ${cluster.name} answered ${rest.method} ${shown()} with more than ${MAX_RESPONSE_BYTES} bytes`, { http: { status: call.status } });
    if (error === TIMED_OUT || call.timedOut) throw fieldError(FieldErrorCodes.UPSTREAM_TIMEOUT, `upstream ${cluster.name} did not answer ${rest.method} ${shown()} within ${rest.timeoutMs}ms`);
    const code = (error as { code?: string }).code;
    throw fieldError(FieldErrorCodes.UPSTREAM_ERROR, `upstream ${cluster.name} failed for ${rest.method} ${shown()}: ${shorten(code ?? error.message)}`);
  }
  const { status } = outcome;
  if (status < 200 || status > 299) throw fieldError(FieldErrorCodes.UPSTREAM_ERROR, `upstream ${cluster.name} answered ${rest.method} ${shown()} with HTTP ${status}`, { http: { status } });
  if (outcome.body.length === 0) return null;
  try {
    return JSON.parse(outcome.body.toString('utf8'));
  } catch {
    throw fieldError(FieldErrorCodes.BAD_UPSTREAM_RESPONSE, `upstream ${cluster.name} answered ${rest.method} ${shown()} with a body that is not JSON`, { http: { status } });
  }
}
