import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { RemoteExecutorSpec } from '../config/schema/graphql-api.ts';
import { durationMs } from '../config/schema/common.ts';
import { ErrorCodes } from '../errors.ts';
import { isConnectFailure, type UpstreamCluster } from '../proxy/upstream-cluster.ts';
import type { RequestContext } from '../proxy/context.ts';
import { FieldErrorCodes, GraphQLConfigCodes, type Problem } from './errors.ts';
import { errorAnswer, type Answer, type MediaType, type RequestParams } from './http.ts';
import { LimitCodes, type OperationBudget } from './limits.ts';
import { Template, TemplateSyntaxError } from './template.ts';

/** How long the remote executor waits for the upstream GraphQL server by default (`executor.remote.timeout`). */
export const REMOTE_TIMEOUT_MS = 15_000;

/** Upstream response headers always passed to the client (`executor.remote.responseHeaders` adds more). */
export const DEFAULT_REMOTE_RESPONSE_HEADERS: readonly string[] = ['set-cookie', 'cache-control'];

/**
 * Response headers never passed on, whatever the configuration: they describe the upstream
 * connection or the upstream's body framing, not the answer the gateway writes.
 */
const NOT_PASSED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'content-type', 'content-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer', 'http2-settings']);

/** `executor.remote` with its templates parsed (load time). */
export interface CompiledRemote {
  readonly path: string;
  readonly headers: readonly (readonly [string, Template])[];
  readonly queryParams: readonly (readonly [string, Template])[];
  /** Upstream response headers passed to the client (lowercase). */
  readonly responseHeaders: readonly string[];
  /** Milliseconds to wait for the upstream's headers, and between body chunks. */
  readonly timeoutMs: number;
}

const REMOTE_PATH = ['spec', 'executableSchema', 'executor', 'remote'];

/** Parses `executor.remote`: `headers`/`queryParams` values are static or `{$headers.x}` templates. */
export function compileRemote(spec: RemoteExecutorSpec, problems: Problem[]): CompiledRemote | undefined {
  let ok = true;
  const parse = (group: 'headers' | 'queryParams', entries: Record<string, string> | undefined) =>
    Object.entries(entries ?? {}).map(([name, value]) => {
      try {
        return [group === 'headers' ? name.toLowerCase() : name, Template.parse(value, ['headers'])] as const;
      } catch (e) {
        if (!(e instanceof TemplateSyntaxError)) throw e;
        problems.push({ path: [...REMOTE_PATH, group, name], code: GraphQLConfigCodes.BAD_TEMPLATE, message: e.message, severity: 'error' });
        ok = false;
        return [name, Template.parse('', ['headers'])] as const;
      }
    });
  const headers = parse('headers', spec.headers);
  const queryParams = parse('queryParams', spec.queryParams);
  if (!ok) return undefined;
  let path = spec.path ?? '/graphql';
  const responseHeaders = [...new Set([...DEFAULT_REMOTE_RESPONSE_HEADERS, ...(spec.responseHeaders ?? []).map((h) => h.toLowerCase())])].filter((h) => !NOT_PASSED.has(h));
  for (const [i, name] of (spec.responseHeaders ?? []).entries()) {
    if (NOT_PASSED.has(name.toLowerCase())) problems.push({ path: [...REMOTE_PATH, 'responseHeaders', i], code: GraphQLConfigCodes.IGNORED, message: `"${name}" describes the upstream connection and is never passed to clients`, severity: 'warning' });
  }
  const timeoutMs = spec.timeout !== undefined ? durationMs(spec.timeout) : REMOTE_TIMEOUT_MS;
  // undici reads 0 as "no timeout": a call that never ends would hold its budget forever.
  if (!(timeoutMs >= 1)) {
    problems.push({ path: [...REMOTE_PATH, 'timeout'], code: GraphQLConfigCodes.BAD_TIMEOUT, message: 'the timeout must be at least 1ms', severity: 'error' });
    return undefined;
  }
  if (queryParams.length > 0 && !queryParams.some(([, t]) => !t.constant)) {
    // All static: the query string is built once.
    path += (path.includes('?') ? '&' : '?') + queryParams.map(([k, t]) => `${encodeURIComponent(k)}=${encodeURIComponent(t.text)}`).join('&');
    return { path, headers, queryParams: [], responseHeaders, timeoutMs };
  }
  return { path, headers, queryParams, responseHeaders, timeoutMs };
}

/**
 * Forwards validated operations to the upstream GraphQL server and returns its answer (status,
 * content type and body) with its errors masked: each error's message becomes a generic one, its
 * `path`, `locations` and a code-shaped `extensions.code` kept, the original logged with the
 * request id (SPEC 3.3.1; `includeUpstreamErrors` returns the body unchanged), and the upstream
 * response headers named by `responseHeaders` (`set-cookie`, `cache-control` by default). An
 * answer over `maxResponseBytes` is cut off and refused. Connection failures answer 503 and
 * timeouts 504, with a GraphQL error body and `x-gatehouse-error` (SPEC 4).
 */
export class RemoteExecutor {
  private readonly remote: CompiledRemote;
  private readonly cluster: UpstreamCluster;
  /** Headers without templates, per negotiated media type (the upstream is asked for what the client accepts). */
  private readonly staticHeaders: Readonly<Record<MediaType, Readonly<Record<string, string>>>>;
  private readonly dynamicHeaders: (readonly [string, Template])[];

  /** `cluster`: the remote executor's Upstream (kept open across reloads by the gateway). */
  constructor(remote: CompiledRemote, cluster: UpstreamCluster) {
    this.remote = remote;
    this.cluster = cluster;
    const fixed: Record<string, string> = { 'content-type': 'application/json' };
    this.dynamicHeaders = [];
    for (const [name, t] of remote.headers) {
      if (t.constant) fixed[name] = t.text;
      else this.dynamicHeaders.push([name, t]);
    }
    this.staticHeaders = {
      'application/json': { accept: 'application/json', ...fixed },
      'application/graphql-response+json': { accept: 'application/graphql-response+json, application/json;q=0.9', ...fixed },
    };
  }

  /**
   * Forwards one operation and returns the answer to write, held within the operation's `budget`
   * (response bytes, bytes buffered); undefined when the client left (nothing to write).
   */
  async forward(params: RequestParams, media: MediaType, res: ServerResponse, ctx: RequestContext, budget: OperationBudget, includeUpstreamErrors: boolean): Promise<Answer | undefined> {
    const maxResponseBytes = budget.limits.maxResponseBytes;
    const scope = { headers: ctx.headers };
    let headers = this.staticHeaders[media];
    if (this.dynamicHeaders.length > 0) {
      const withDynamic: Record<string, string> = { ...headers };
      for (const [name, t] of this.dynamicHeaders) {
        const value = t.string(scope);
        if (value !== '') withDynamic[name] = value;
      }
      headers = withDynamic;
    }
    let path = this.remote.path;
    if (this.remote.queryParams.length > 0) {
      const query = this.remote.queryParams
        .map(([k, t]) => [k, t.string(scope)] as const)
        .filter(([, v]) => v !== '')
        .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
        .join('&');
      if (query) path += (path.includes('?') ? '&' : '?') + query;
    }
    const body =
      params.rawBody ??
      JSON.stringify({ query: params.query, operationName: params.operationName, variables: params.variables, extensions: params.extensions });
    const cluster = this.cluster;
    const host = cluster.pick();
    ctx.upstream = cluster.name;
    const timeoutMs = this.remote.timeoutMs;
    const call = new RemoteCall(res, maxResponseBytes, budget, this.remote.responseHeaders);
    const error = await call.run(host.dispatcher, { method: 'POST', path, headers, body, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    if (!error) {
      let answer = call.body();
      if (!includeUpstreamErrors) answer = maskRemoteErrors(answer, (errors) => ctx.logger.warn({ reqId: ctx.requestId, upstream: cluster.name, errors: truncate(JSON.stringify(errors)) }, 'GraphQL remote executor: upstream errors (masked for the client)'));
      if (res.destroyed) return undefined;
      // The upstream's status and content type, as it sent them.
      return { status: call.status, body: answer, contentType: call.contentType, headers: call.passed };
    }
    if (error === OVER_BUDGET) {
      const refusal = budget.bufferedError();
      return errorAnswer(503, [{ message: refusal.message, extensions: refusal.extensions } as { message: string }]);
    }
    if (error === TOO_LARGE) {
      ctx.logger.warn({ reqId: ctx.requestId, upstream: cluster.name, limit: maxResponseBytes }, 'GraphQL remote executor: upstream answer over limits.maxResponseBytes');
      return errorAnswer(400, [{ message: `the response is larger than the ${maxResponseBytes} bytes this API allows (limits.maxResponseBytes); ask for fewer fields or items`, extensions: { code: LimitCodes.RESPONSE_BYTES } } as { message: string }]);
    }
    if (res.destroyed) {
      // The client left (which also stopped the upstream call): nothing failed upstream.
      ctx.logger.debug({ reqId: ctx.requestId, upstream: cluster.name }, 'GraphQL remote executor: client closed the connection');
      return undefined;
    }
    const code = (error as { code?: string }).code;
    if (isConnectFailure(error)) cluster.eject(host);
    const timeout = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
    ctx.logger.warn({ reqId: ctx.requestId, err: error, upstream: cluster.name }, 'GraphQL remote executor: upstream failed');
    return errorAnswer(
      timeout ? 504 : 503,
      [
        {
          // The cause (an address, a TLS detail) is in the log above, not in the answer.
          message: timeout ? `the upstream GraphQL server did not answer within ${timeoutMs}ms` : 'the upstream GraphQL server is unavailable',
          extensions: { code: timeout ? FieldErrorCodes.UPSTREAM_TIMEOUT : FieldErrorCodes.UPSTREAM_ERROR },
        } as { message: string },
      ],
      { 'x-gatehouse-error': timeout ? ErrorCodes.UPSTREAM_TIMEOUT : ErrorCodes.UPSTREAM_UNAVAILABLE },
    );
  }
}

/** The failure of an answer larger than the response limit. */
const TOO_LARGE = new Error('upstream answer over limits.maxResponseBytes');
/** The failure of an answer that does not fit in the bytes the operation (or the process) may hold. */
const OVER_BUDGET = new Error('upstream answer over limits.maxBufferedBytes');

/** What a masked upstream error says. */
const REMOTE_MESSAGE = 'the upstream GraphQL server reported an error';
/** Upstream `extensions.code` values passed on (code-shaped only: no free text). */
const CODE = /^[A-Z][A-Z0-9_]{0,63}$/;

function truncate(text: string): string {
  return text.length > 4096 ? `${text.slice(0, 4096)}…` : text;
}

/**
 * The answer with each of its `errors` replaced by a generic one (message, `locations`, `path`, a
 * code-shaped `extensions.code`); `log` gets the originals. Answers without errors, or that are
 * not a JSON object, pass unchanged.
 */
export function maskRemoteErrors(body: Buffer, log: (errors: unknown[]) => void): Buffer {
  // Most answers hold no errors: found without parsing.
  if (!body.includes('"errors"')) return body;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return body;
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return body;
  const result = parsed as Record<string, unknown>;
  if (!Array.isArray(result.errors) || result.errors.length === 0) return body;
  log(result.errors);
  result.errors = result.errors.map((e: unknown) => {
    const error = (e && typeof e === 'object' ? e : {}) as { locations?: unknown; path?: unknown; extensions?: { code?: unknown } };
    const code = typeof error.extensions?.code === 'string' && CODE.test(error.extensions.code) ? error.extensions.code : FieldErrorCodes.UPSTREAM_ERROR;
    return {
      message: REMOTE_MESSAGE,
      ...(Array.isArray(error.locations) ? { locations: error.locations } : {}),
      ...(Array.isArray(error.path) ? { path: error.path } : {}),
      extensions: { code },
    };
  });
  return Buffer.from(JSON.stringify(result));
}

/**
 * One call to the upstream GraphQL server, as an undici dispatch handler collecting the answer
 * (at most `limit` bytes: past it the call is aborted). A client that leaves aborts the call at
 * once (not when the upstream finally answers).
 */
class RemoteCall implements Dispatcher.DispatchHandler {
  private readonly res: ServerResponse;
  private readonly limit: number;
  private readonly budget: OperationBudget;
  private controller: Dispatcher.DispatchController | undefined;
  private done!: (error: Error | undefined) => void;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private failure: Error | undefined;
  private readonly passNames: readonly string[];
  status = 502;
  contentType: string | undefined;
  /** The upstream response headers passed to the client. */
  passed: Record<string, string | string[]> | undefined;

  constructor(res: ServerResponse, limit: number, budget: OperationBudget, passNames: readonly string[]) {
    this.res = res;
    this.limit = limit;
    this.budget = budget;
    this.passNames = passNames;
  }

  /** Resolves when the response is complete (undefined) or the call failed (the error). */
  run(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions): Promise<Error | undefined> {
    const finished = new Promise<Error | undefined>((resolve) => (this.done = resolve));
    this.res.once('close', () => {
      if (!this.res.writableFinished) this.controller?.abort(new Error('downstream closed'));
    });
    dispatcher.dispatch(options, this);
    return finished;
  }

  /** The whole answer. */
  body(): Buffer {
    return this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.res.destroyed) controller.abort(new Error('downstream closed'));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.status = statusCode;
    const contentType = headers['content-type'];
    if (typeof contentType === 'string') this.contentType = contentType;
    for (const name of this.passNames) {
      const value = headers[name];
      if (value !== undefined) (this.passed ??= {})[name] = value;
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > this.limit) {
      this.chunks.length = 0;
      controller.abort(TOO_LARGE);
      return;
    }
    if (!this.budget.reserve(chunk.length)) {
      this.chunks.length = 0;
      this.failure = OVER_BUDGET;
      controller.abort(OVER_BUDGET);
      return;
    }
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    this.done(undefined);
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.done(this.failure ?? (this.size > this.limit ? TOO_LARGE : error));
  }
}
