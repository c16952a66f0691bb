import type { IncomingHttpHeaders } from 'node:http';
import type { RestResolverSpec } from '../../config/schema/graphql-api.ts';
import { durationMs } from '../../config/schema/common.ts';
import { isConnectFailure, type UpstreamCluster, type UpstreamHost } from '../../proxy/upstream/upstream-cluster.ts';
import { FieldErrorCodes, GraphQLConfigCodes, fieldError, type Problem } from '../compile/errors.ts';
import { getPath, parsePath, type Segment } from '../compile/path.ts';
import type { OperationBudget } from '../limits/limits.ts';
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

async function send(cluster: UpstreamCluster, rest: CompiledRest, path: string, headers: IncomingHttpHeaders, body: string | undefined, budget: OperationBudget): Promise<unknown> {
  // Messages quote the path without its query string: a static query parameter may hold a key.
  const shown = () => shorten(withoutQuery(path));
  // One deadline for the whole call (undici's per-request headersTimeout is too coarse for sub-second timeouts).
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), rest.timeoutMs);
  try {
    // A refused connection never reached the upstream, so another host may be tried once.
    let host = cluster.pick();
    let response;
    try {
      response = await request(host, rest.method, path, headers, body, controller.signal);
    } catch (error) {
      if (!isConnectFailure(error) || controller.signal.aborted) throw error;
      cluster.eject(host);
      if (cluster.hosts.length === 1) throw error;
      host = cluster.pick();
      response = await request(host, rest.method, path, headers, body, controller.signal);
    }
    const { statusCode } = response;
    if (statusCode < 200 || statusCode > 299) {
      await response.body.dump();
      throw fieldError(FieldErrorCodes.UPSTREAM_ERROR, `upstream ${cluster.name} answered ${rest.method} ${shown()} with HTTP ${statusCode}`, { http: { status: statusCode } });
    }
    const text = await readLimited(response.body, MAX_RESPONSE_BYTES, controller, budget);
    if (text === OVER_BUDGET) throw budget.bufferedError();
    if (text === undefined) {
      throw fieldError(FieldErrorCodes.BAD_UPSTREAM_RESPONSE, `upstream ${cluster.name} answered ${rest.method} ${shown()} with more than ${MAX_RESPONSE_BYTES} bytes`, { http: { status: statusCode } });
    }
    if (text === '') return null;
    try {
      return JSON.parse(text);
    } catch {
      throw fieldError(FieldErrorCodes.BAD_UPSTREAM_RESPONSE, `upstream ${cluster.name} answered ${rest.method} ${shown()} with a body that is not JSON`, { http: { status: statusCode } });
    }
  } catch (error) {
    if ((error as { extensions?: unknown }).extensions) throw error;
    if (controller.signal.aborted) {
      throw fieldError(FieldErrorCodes.UPSTREAM_TIMEOUT, `upstream ${cluster.name} did not answer ${rest.method} ${shown()} within ${rest.timeoutMs}ms`);
    }
    const code = (error as { code?: string }).code;
    throw fieldError(FieldErrorCodes.UPSTREAM_ERROR, `upstream ${cluster.name} failed for ${rest.method} ${shown()}: ${shorten(code ?? (error as Error).message)}`);
  } finally {
    clearTimeout(timer);
  }
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

const OVER_BUDGET = Symbol('over budget');

/**
 * The body as text; undefined (and the request aborted) once it passes `limit` bytes, or
 * OVER_BUDGET once the operation (or the process) holds its share of upstream bytes.
 */
async function readLimited(body: AsyncIterable<Buffer> & { destroy(error?: Error): unknown }, limit: number, controller: AbortController, budget: OperationBudget): Promise<string | undefined | typeof OVER_BUDGET> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) {
      controller.abort();
      body.destroy();
      return undefined;
    }
    if (!budget.reserve(chunk.length)) {
      controller.abort();
      body.destroy();
      return OVER_BUDGET;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size).toString('utf8');
}

function request(host: UpstreamHost, method: string, path: string, headers: IncomingHttpHeaders, body: string | undefined, signal: AbortSignal) {
  return host.dispatcher.request({ method: method as 'GET', path, headers, body, signal });
}
