import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { ExecutionResult } from 'graphql';
import type { Dispatcher } from 'undici';
import type { RemoteExecutorSpec } from '../../config/schema/graphql-api.ts';
import { durationMs } from '../../config/schema/common.ts';
import { ErrorCodes } from '../../errors.ts';
import { isConnectFailure, type UpstreamCluster } from '../../proxy/upstream/upstream-cluster.ts';
import type { RequestContext } from '../../proxy/context.ts';
import { FieldErrorCodes, GraphQLConfigCodes, type Problem } from '../compile/errors.ts';
import { errorAnswer, type Answer, type ClientSignal, type MediaType, type RequestParams } from './http.ts';
import { LimitCodes, type OperationBudget } from '../limits/limits.ts';
import { boundaryOf, MultipartParser } from './incremental.ts';
import { Template, TemplateSyntaxError } from '../compile/template.ts';
import { streamOverWebSocket } from '../subscriptions/upstream-ws.ts';
import { ERRORS_MEMBER, maskRemoteErrors, maskResult } from '../limits/mask-errors.ts';
import { spanOf, type SpanHandle } from '../../tracing/tracing.ts';
import { resolverSpan, traceHeaders } from './trace.ts';

// The masking of upstream errors is shared with the WebSocket subscription client (./subscriptions/upstream-ws.ts).
export { maskRemoteErrors, maskResult } from '../limits/mask-errors.ts';

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
  /** How subscriptions reach the upstream: GraphQL over SSE (default) or graphql-ws over WebSocket. */
  readonly subscriptionProtocol: 'sse' | 'graphql-ws';
  /** Gloo's `spanName`: the name of each remote execution's span when the request is traced (core/src/tracing). */
  readonly spanName?: string | undefined;
}

/** The operation a remote execution forwards, for its span's attributes (its OperationDefinitionNode: nothing built per request). */
export interface RemoteOperation {
  /** `query`, `mutation` or `subscription`. */
  readonly operation: string;
  readonly name?: { readonly value: string } | undefined;
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
    return { path, headers, queryParams: [], responseHeaders, timeoutMs, subscriptionProtocol: spec.subscriptionProtocol ?? 'sse', spanName: spec.spanName || undefined };
  }
  return { path, headers, queryParams, responseHeaders, timeoutMs, subscriptionProtocol: spec.subscriptionProtocol ?? 'sse', spanName: spec.spanName || undefined };
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
  /**
   * The static headers as undici's flat `[name, value, …]` list (its cheapest form) after two
   * slots for the trace headers, per media type; undefined when a configured header (a template,
   * or one named like a trace header) needs {@link headersFor}.
   */
  private readonly flatHeaders: Readonly<Record<MediaType, readonly string[]>> | undefined;
  /** Subscriptions (streams) running through this executor. */
  private openStreams = 0;

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
    const flat = (headers: Readonly<Record<string, string>>) => ['traceparent', '', 'x-request-id', '', ...Object.entries(headers).flat()];
    this.flatHeaders =
      this.dynamicHeaders.length === 0 && fixed.traceparent === undefined && fixed['x-request-id'] === undefined
        ? { 'application/json': flat(this.staticHeaders['application/json']), 'application/graphql-response+json': flat(this.staticHeaders['application/graphql-response+json']) }
        : undefined;
  }

  /** What the graphql-ws upstream transport needs (./subscriptions/upstream-ws.ts). */
  upstreamCall(ctx: RequestContext, span?: SpanHandle): { cluster: UpstreamCluster; headers: Readonly<Record<string, string>>; path: string; timeoutMs: number } {
    return { cluster: this.cluster, headers: this.headersFor(this.staticHeaders['application/json'], ctx, span), path: this.pathFor(ctx), timeoutMs: this.remote.timeoutMs };
  }

  /**
   * A span for one remote execution of a traced, sampled request (a client span under the
   * request's, named by `spanName`, else `graphql.remote <upstream>`), or undefined. Its
   * `traceparent` goes on the call; end it with {@link endSpan}.
   */
  private spanFor(ctx: RequestContext, path: string, operation: RemoteOperation | undefined): SpanHandle | undefined {
    // Most requests are not traced: no attributes to build.
    if (!spanOf(ctx)?.recording) return undefined;
    const attributes: Record<string, string> = { 'upstream_cluster': this.cluster.name, 'http.method': 'POST', 'url.path': path.split('?', 1)[0]! };
    if (operation) {
      attributes['graphql.operation.type'] = operation.operation;
      if (operation.name !== undefined) attributes['graphql.operation.name'] = operation.name.value;
    }
    return resolverSpan(traceHeaders(ctx), this.remote.spanName ?? `graphql.remote ${this.cluster.name}`, attributes);
  }

  /** The headers of an upstream call: the static ones over `base`, then the templates over the request's headers. */
  private headersFor(base: Readonly<Record<string, string>>, ctx: RequestContext, span?: SpanHandle): Readonly<Record<string, string>> {
    // Trace headers first (the call's own span when it has one): a configured header of the same name wins.
    const withTrace = span ? { ...traceHeaders(ctx), ...span.traceHeaders, ...base } : { ...traceHeaders(ctx), ...base };
    if (this.dynamicHeaders.length === 0) return withTrace;
    const scope = { headers: ctx.headers };
    const withDynamic: Record<string, string> = withTrace;
    for (const [name, t] of this.dynamicHeaders) {
      const value = t.string(scope);
      // An absent header template is omitted, not sent empty.
      if (value !== '') withDynamic[name] = value;
    }
    return withDynamic;
  }

  private pathFor(ctx: RequestContext): string {
    let path = this.remote.path;
    if (this.remote.queryParams.length > 0) {
      const scope = { headers: ctx.headers };
      const query = this.remote.queryParams
        .map(([k, t]) => [k, t.string(scope)] as const)
        .filter(([, v]) => v !== '')
        .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
        .join('&');
      if (query) path += (path.includes('?') ? '&' : '?') + query;
    }
    return path;
  }

  /**
   * Runs one operation (a subscription, or any operation asked for as a stream) on the upstream
   * over GraphQL over SSE, distinct-connections mode (`Accept: text/event-stream`, as graphql-sse
   * and graphql-yoga speak it), and yields each result, its errors masked. An upstream that
   * answers plain JSON instead yields that one result. Each event is at most `maxResponseBytes`
   * (past it: one error, then the end); no event for `idleMs` ends the stream with an error. It
   * ends when the upstream completes, fails, or `signal` aborts (the client left).
   */
  async *stream(params: RequestParams, ctx: RequestContext, signal: AbortSignal, maxEventBytes: number, idleMs: number, includeUpstreamErrors: boolean, operation?: RemoteOperation): AsyncGenerator<ExecutionResult> {
    // Each stream holds an upstream connection (HTTP/1.1) for as long as it runs: at most half of
    // the pool, so that subscriptions never starve the API's queries and mutations.
    const cap = Math.max(1, Math.floor(this.cluster.pick().connections / 2));
    if (this.openStreams >= cap) {
      ctx.logger.warn({ reqId: ctx.requestId, upstream: this.cluster.name, open: this.openStreams }, 'GraphQL remote executor: too many upstream streams');
      yield { errors: [{ message: `the upstream already carries ${this.openStreams} subscriptions through this API, half of its connection pool; try again later`, extensions: { code: LimitCodes.SUBSCRIPTIONS } } as never] };
      return;
    }
    this.openStreams++;
    const path = this.pathFor(ctx);
    // One span for the whole stream: it ends when the upstream completes, fails or the client leaves.
    const span = this.spanFor(ctx, path, operation);
    try {
      if (this.remote.subscriptionProtocol === 'graphql-ws') {
        yield* streamOverWebSocket(span ? { upstreamCall: (c: RequestContext) => this.upstreamCall(c, span) } : this, params, ctx, signal, maxEventBytes, idleMs, includeUpstreamErrors);
      } else {
        yield* this.streamOverSse(params, ctx, signal, maxEventBytes, idleMs, includeUpstreamErrors, path, span);
      }
      span?.end();
    } catch (error) {
      span?.end((error as Error)?.message ?? 'failed');
      throw error;
    } finally {
      this.openStreams--;
      // A consumer that stopped early (return()): not a failure.
      span?.end();
    }
  }

  /** {@link stream} over GraphQL over SSE through the cluster's pool. */
  private async *streamOverSse(params: RequestParams, ctx: RequestContext, signal: AbortSignal, maxEventBytes: number, idleMs: number, includeUpstreamErrors: boolean, path: string, span: SpanHandle | undefined): AsyncGenerator<ExecutionResult> {
    const headers = { ...this.headersFor(this.staticHeaders['application/json'], ctx, span), accept: 'text/event-stream, application/graphql-response+json;q=0.9, application/json;q=0.8' };
    const body = JSON.stringify({ query: params.query, operationName: params.operationName, variables: params.variables, extensions: params.extensions });
    const cluster = this.cluster;
    const host = cluster.pick();
    ctx.upstream = cluster.name;
    const mask = (result: ExecutionResult): ExecutionResult => {
      if (!includeUpstreamErrors) maskResult(result as Record<string, unknown>, (errors) => ctx.logger.warn({ reqId: ctx.requestId, upstream: cluster.name, errors: truncate(JSON.stringify(errors)) }, 'GraphQL remote executor: upstream errors (masked for the client)'));
      return result;
    };
    const failed = (code: string, message: string): ExecutionResult => ({ errors: [{ message, extensions: { code } } as never] });
    let response: Dispatcher.ResponseData;
    try {
      response = await host.dispatcher.request({ method: 'POST', path, headers, body, signal, headersTimeout: this.remote.timeoutMs, bodyTimeout: idleMs });
    } catch (error) {
      if (signal.aborted) return;
      if (isConnectFailure(error)) cluster.eject(host);
      const code = (error as { code?: string }).code;
      ctx.logger.warn({ reqId: ctx.requestId, err: error, upstream: cluster.name }, 'GraphQL remote executor: upstream stream failed');
      span?.end(code === 'UND_ERR_HEADERS_TIMEOUT' ? 'upstream timeout' : 'upstream unavailable');
      yield code === 'UND_ERR_HEADERS_TIMEOUT'
        ? failed(FieldErrorCodes.UPSTREAM_TIMEOUT, `the upstream GraphQL server did not answer within ${this.remote.timeoutMs}ms`)
        : failed(FieldErrorCodes.UPSTREAM_ERROR, 'the upstream GraphQL server is unavailable');
      return;
    }
    const stream = response.body;
    span?.setAttribute('http.status_code', response.statusCode);
    if (response.statusCode >= 500) span?.end(`status ${response.statusCode}`);
    try {
      const type = String(response.headers['content-type'] ?? '');
      const events = new EventStreamParser(maxEventBytes);
      let plain: Buffer[] | undefined = type.startsWith('text/event-stream') ? undefined : [];
      let size = 0;
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        if (plain) {
          size += chunk.length;
          if (size > maxEventBytes) {
            yield failed(LimitCodes.RESPONSE_BYTES, `the response is larger than the ${maxEventBytes} bytes this API allows (limits.maxResponseBytes)`);
            return;
          }
          plain.push(chunk);
          continue;
        }
        const batch = events.push(chunk);
        if (!Array.isArray(batch)) {
          yield failed(LimitCodes.RESPONSE_BYTES, `an event is larger than the ${maxEventBytes} bytes this API allows (limits.maxResponseBytes)`);
          return;
        }
        for (const event of batch) {
          if (event.event === 'complete') return;
          if (event.event !== 'next' && event.event !== 'message') continue;
          const parsed = parseResult(event.data);
          if (!parsed) {
            yield failed(FieldErrorCodes.BAD_UPSTREAM_RESPONSE, 'the upstream GraphQL server sent an event that is not a GraphQL result');
            return;
          }
          yield mask(parsed);
        }
      }
      if (plain) {
        const parsed = parseResult(Buffer.concat(plain).toString('utf8'));
        yield parsed ? mask(parsed) : failed(FieldErrorCodes.BAD_UPSTREAM_RESPONSE, 'the upstream GraphQL server answered with something that is not a GraphQL result');
      }
    } catch (error) {
      if (signal.aborted) return;
      const code = (error as { code?: string }).code;
      ctx.logger.warn({ reqId: ctx.requestId, err: error, upstream: cluster.name }, 'GraphQL remote executor: upstream stream failed');
      span?.end(code === 'UND_ERR_BODY_TIMEOUT' ? 'upstream idle timeout' : 'upstream closed the stream');
      yield code === 'UND_ERR_BODY_TIMEOUT'
        ? failed(FieldErrorCodes.UPSTREAM_TIMEOUT, `the upstream GraphQL server sent nothing for ${idleMs}ms`)
        : failed(FieldErrorCodes.UPSTREAM_ERROR, 'the upstream GraphQL server closed the stream');
    } finally {
      stream.destroy();
    }
  }

  /**
   * Forwards an operation using `@defer`/`@stream` with the client's `accept` (multipart/mixed)
   * and streams the upstream's `multipart/mixed` answer to `res` part by part, each part's errors
   * (also those inside `incremental`) masked; `'sent'` once done. The whole answer is held to
   * `maxResponseBytes` (past it: a last part with the limit's error). An upstream that answers
   * plain JSON gives an ordinary answer to write; a failure gives the usual 503/504 answer.
   */
  async forwardIncremental(params: RequestParams, accept: string, res: ServerResponse, signal: AbortSignal, ctx: RequestContext, budget: OperationBudget, includeUpstreamErrors: boolean, operation?: RemoteOperation): Promise<Answer | 'sent' | undefined> {
    const path = this.pathFor(ctx);
    const span = this.spanFor(ctx, path, operation);
    if (span === undefined) return this.incremental(params, accept, res, signal, ctx, budget, includeUpstreamErrors, path, undefined);
    try {
      const answer = await this.incremental(params, accept, res, signal, ctx, budget, includeUpstreamErrors, path, span);
      if (answer === 'sent') span.end(res.statusCode >= 500 ? `status ${res.statusCode}` : undefined);
      else endWithAnswer(span, answer);
      return answer;
    } catch (error) {
      span.end((error as Error)?.message ?? 'failed');
      throw error;
    }
  }

  private async incremental(params: RequestParams, accept: string, res: ServerResponse, signal: AbortSignal, ctx: RequestContext, budget: OperationBudget, includeUpstreamErrors: boolean, path: string, span: SpanHandle | undefined): Promise<Answer | 'sent' | undefined> {
    const maxResponseBytes = budget.limits.maxResponseBytes;
    const headers = { ...this.headersFor(this.staticHeaders['application/json'], ctx, span), accept };
    const body = params.rawBody ?? JSON.stringify({ query: params.query, operationName: params.operationName, variables: params.variables, extensions: params.extensions });
    const cluster = this.cluster;
    const host = cluster.pick();
    ctx.upstream = cluster.name;
    const log = (errors: unknown[]) => ctx.logger.warn({ reqId: ctx.requestId, upstream: cluster.name, errors: truncate(JSON.stringify(errors)) }, 'GraphQL remote executor: upstream errors (masked for the client)');
    const maskPart = (part: Buffer): Buffer => {
      if (includeUpstreamErrors || !part.includes('"errors"')) return part;
      const parsed = parseResult(part.toString('utf8'));
      if (!parsed) return part;
      const result = parsed as Record<string, unknown>;
      maskResult(result, log);
      if (Array.isArray(result.incremental)) for (const item of result.incremental) if (item && typeof item === 'object') maskResult(item as Record<string, unknown>, log);
      return Buffer.from(JSON.stringify(result));
    };
    let response: Dispatcher.ResponseData;
    try {
      response = await host.dispatcher.request({ method: 'POST', path, headers, body, signal, headersTimeout: this.remote.timeoutMs, bodyTimeout: this.remote.timeoutMs });
    } catch (error) {
      if (signal.aborted) return undefined;
      return this.failure(error, host, ctx);
    }
    span?.setAttribute('http.status_code', response.statusCode);
    const passed: Record<string, string | string[]> = {};
    for (const name of this.remote.responseHeaders) {
      const value = response.headers[name];
      if (value !== undefined) passed[name] = value;
    }
    const type = String(response.headers['content-type'] ?? '');
    const boundary = boundaryOf(type);
    const stream = response.body;
    try {
      if (!boundary) {
        const chunks: Buffer[] = [];
        let size = 0;
        for await (const chunk of stream as AsyncIterable<Buffer>) {
          size += chunk.length;
          if (size > maxResponseBytes) return errorAnswer(400, [{ message: `the response is larger than the ${maxResponseBytes} bytes this API allows (limits.maxResponseBytes); ask for fewer fields or items`, extensions: { code: LimitCodes.RESPONSE_BYTES } } as { message: string }]);
          chunks.push(chunk);
        }
        return { status: response.statusCode, body: maskPart(Buffer.concat(chunks)), contentType: type || undefined, headers: passed };
      }
      res.writeHead(response.statusCode, { ...passed, 'content-type': `multipart/mixed; boundary="${boundary}"`, 'cache-control': 'no-cache' });
      const parser = new MultipartParser(boundary, maxResponseBytes);
      const writePart = (json: Buffer) => res.write(Buffer.concat([Buffer.from(`\r\n--${boundary}\r\ncontent-type: application/json; charset=utf-8\r\n\r\n`), json]));
      let size = 0;
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        size += chunk.length;
        const parts = size > maxResponseBytes ? undefined : parser.push(chunk);
        if (!parts) {
          writePart(Buffer.from(JSON.stringify({ hasNext: false, errors: [{ message: `the response is larger than the ${maxResponseBytes} bytes this API allows (limits.maxResponseBytes)`, extensions: { code: LimitCodes.RESPONSE_BYTES } }] })));
          break;
        }
        for (const part of parts) if (!writePart(maskPart(part))) await new Promise<void>((resolve) => {
          const done = () => {
            res.off('drain', done);
            res.off('close', done);
            resolve();
          };
          res.on('drain', done);
          res.on('close', done);
        });
        if (parser.done || signal.aborted) break;
      }
      if (!signal.aborted) res.end(`\r\n--${boundary}--\r\n`);
      return 'sent';
    } catch (error) {
      if (signal.aborted) return undefined;
      ctx.logger.warn({ reqId: ctx.requestId, err: error, upstream: cluster.name }, 'GraphQL remote executor: upstream failed mid-answer');
      span?.end('upstream failed mid-answer');
      if (res.headersSent) {
        // Cut mid-body: the client must see a broken response, not a truncated "complete" one.
        res.destroy();
        return 'sent';
      }
      return this.failure(error, host, ctx);
    } finally {
      stream.destroy();
    }
  }

  /** The answer for a failed upstream call: 503 (unavailable) or 504 (timeout), the cause only in the log. */
  private failure(error: unknown, host: ReturnType<UpstreamCluster['pick']>, ctx: RequestContext): Answer {
    const code = (error as { code?: string }).code;
    if (isConnectFailure(error)) this.cluster.eject(host);
    const timeout = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
    ctx.logger.warn({ reqId: ctx.requestId, err: error, upstream: this.cluster.name }, 'GraphQL remote executor: upstream failed');
    return errorAnswer(
      timeout ? 504 : 503,
      [
        {
          message: timeout ? `the upstream GraphQL server did not answer within ${this.remote.timeoutMs}ms` : 'the upstream GraphQL server is unavailable',
          extensions: { code: timeout ? FieldErrorCodes.UPSTREAM_TIMEOUT : FieldErrorCodes.UPSTREAM_ERROR },
        } as { message: string },
      ],
      { 'x-gatehouse-error': timeout ? ErrorCodes.UPSTREAM_TIMEOUT : ErrorCodes.UPSTREAM_UNAVAILABLE },
    );
  }

  /**
   * Forwards one operation and returns the answer to write, held within the operation's `budget`
   * (response bytes, bytes buffered); undefined when the client left (nothing to write).
   */
  forward(params: RequestParams, media: MediaType, signal: ClientSignal, ctx: RequestContext, budget: OperationBudget, includeUpstreamErrors: boolean, operation?: RemoteOperation): Promise<Answer | undefined> {
    const path = this.pathFor(ctx);
    const span = this.spanFor(ctx, path, operation);
    if (span === undefined) return this.forwardCall(params, media, signal, ctx, budget, includeUpstreamErrors, path, undefined);
    return this.forwardTraced(params, media, signal, ctx, budget, includeUpstreamErrors, path, span);
  }

  private async forwardTraced(params: RequestParams, media: MediaType, signal: ClientSignal, ctx: RequestContext, budget: OperationBudget, includeUpstreamErrors: boolean, path: string, span: SpanHandle): Promise<Answer | undefined> {
    try {
      const answer = await this.forwardCall(params, media, signal, ctx, budget, includeUpstreamErrors, path, span);
      endWithAnswer(span, answer);
      return answer;
    } catch (error) {
      span.end((error as Error)?.message ?? 'failed');
      throw error;
    }
  }

  /** One upstream call: its answer once the response is complete (no async frame of its own: the call's handler settles it). */
  private forwardCall(params: RequestParams, media: MediaType, signal: ClientSignal, ctx: RequestContext, budget: OperationBudget, includeUpstreamErrors: boolean, path: string, span: SpanHandle | undefined): Promise<Answer | undefined> {
    const flat = span === undefined ? this.flatHeaders?.[media] : undefined;
    let headers: Readonly<Record<string, string>> | string[];
    if (flat) {
      // The same headers as headersFor(): the trace headers, then the static ones.
      const trace = traceHeaders(ctx);
      headers = flat.slice();
      headers[1] = trace.traceparent;
      headers[3] = trace['x-request-id'];
    } else headers = this.headersFor(this.staticHeaders[media], ctx, span);
    const body =
      params.rawBody ??
      JSON.stringify({ query: params.query, operationName: params.operationName, variables: params.variables, extensions: params.extensions });
    const host = this.cluster.pick();
    ctx.upstream = this.cluster.name;
    const timeoutMs = this.remote.timeoutMs;
    const call = new RemoteCall(signal, budget.limits.maxResponseBytes, budget, this.remote.responseHeaders);
    return call.run(host.dispatcher, { method: 'POST', path, headers, body, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }, (error) => this.settle(call, error, host, signal, ctx, budget, includeUpstreamErrors));
  }

  /** The answer of a finished {@link RemoteCall}: the upstream's (errors masked), or the failure's. */
  private settle(call: RemoteCall, error: Error | undefined, host: ReturnType<UpstreamCluster['pick']>, signal: ClientSignal, ctx: RequestContext, budget: OperationBudget, includeUpstreamErrors: boolean): Answer | undefined {
    const cluster = this.cluster;
    const maxResponseBytes = budget.limits.maxResponseBytes;
    const timeoutMs = this.remote.timeoutMs;
    if (!error) {
      let answer = call.body();
      // One scan for the errors member: the masking and the endpoint's error count both need it.
      const errors = answer.includes(ERRORS_MEMBER);
      if (errors && !includeUpstreamErrors) answer = maskRemoteErrors(answer, (errors) => ctx.logger.warn({ reqId: ctx.requestId, upstream: cluster.name, errors: truncate(JSON.stringify(errors)) }, 'GraphQL remote executor: upstream errors (masked for the client)'));
      if (signal.aborted) return undefined;
      // The upstream's status and content type, as it sent them.
      return { status: call.status, body: answer, contentType: call.contentType, headers: call.passed, errors };
    }
    if (error === OVER_BUDGET) {
      const refusal = budget.bufferedError();
      return errorAnswer(503, [{ message: refusal.message, extensions: refusal.extensions } as { message: string }]);
    }
    if (error === TOO_LARGE) {
      ctx.logger.warn({ reqId: ctx.requestId, upstream: cluster.name, limit: maxResponseBytes }, 'GraphQL remote executor: upstream answer over limits.maxResponseBytes');
      return errorAnswer(400, [{ message: `the response is larger than the ${maxResponseBytes} bytes this API allows (limits.maxResponseBytes); ask for fewer fields or items`, extensions: { code: LimitCodes.RESPONSE_BYTES } } as { message: string }]);
    }
    if (signal.aborted) {
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

/** Ends a remote execution's span with the answer written for it (undefined: the client left). */
function endWithAnswer(span: SpanHandle, answer: Answer | undefined): void {
  if (answer === undefined) return span.end('client closed before the answer');
  span.setAttribute('http.status_code', answer.status);
  const error = answer.headers?.['x-gatehouse-error'];
  if (typeof error === 'string') span.setAttribute('gatehouse.error', error);
  span.end(answer.status >= 500 ? `status ${answer.status}` : undefined);
}

/** The failure of an answer larger than the response limit. */
const TOO_LARGE = new Error('upstream answer over limits.maxResponseBytes');
/** The failure of an answer that does not fit in the bytes the operation (or the process) may hold. */
const OVER_BUDGET = new Error('upstream answer over limits.maxBufferedBytes');

function truncate(text: string): string {
  return text.length > 4096 ? `${text.slice(0, 4096)}…` : text;
}

/**
 * One call to the upstream GraphQL server, as an undici dispatch handler collecting the answer
 * (at most `limit` bytes: past it the call is aborted). A client that leaves aborts the call at
 * once (not when the upstream finally answers): `signal` aborts when it does.
 */
class RemoteCall implements Dispatcher.DispatchHandler {
  private readonly signal: ClientSignal;
  private readonly limit: number;
  private readonly budget: OperationBudget;
  private controller: Dispatcher.DispatchController | undefined;
  private done!: (error: Error | undefined) => void;
  private settled = false;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private failure: Error | undefined;
  private readonly passNames: readonly string[];
  status = 502;
  contentType: string | undefined;
  /** The upstream response headers passed to the client. */
  passed: Record<string, string | string[]> | undefined;

  constructor(signal: ClientSignal, limit: number, budget: OperationBudget, passNames: readonly string[]) {
    this.signal = signal;
    this.limit = limit;
    this.budget = budget;
    this.passNames = passNames;
  }

  /**
   * Resolves with `settle(undefined)` when the response is complete, or `settle(error)` when the
   * call failed (once: a late callback of undici's is ignored).
   */
  run<T>(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions, settle: (error: Error | undefined) => T): Promise<T> {
    const finished = new Promise<T>((resolve, reject) => {
      this.done = (error) => {
        if (this.settled) return;
        this.settled = true;
        try {
          resolve(settle(error));
        } catch (failure) {
          reject(failure);
        }
      };
    });
    this.signal.addEventListener('abort', () => this.controller?.abort(new Error('downstream closed')), { once: true });
    dispatcher.dispatch(options, this);
    return finished;
  }

  /** The whole answer. */
  body(): Buffer {
    return this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.signal.aborted) controller.abort(new Error('downstream closed'));
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

/** A GraphQL result object from JSON text, or undefined. */
function parseResult(text: string): ExecutionResult | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as ExecutionResult) : undefined;
  } catch {
    return undefined;
  }
}

/** One server-sent event. */
export interface ServerSentEvent {
  readonly event: string;
  readonly data: string;
}

/**
 * A parser of `text/event-stream` (the WHATWG format: `event:`/`data:` lines, a blank line ends
 * an event, `:` lines are comments) that holds at most `limit` bytes of one event: past it,
 * {@link push} returns TOO_LARGE.
 */
export class EventStreamParser {
  private readonly limit: number;
  private pending = '';
  private event = '';
  private data: string[] = [];
  private size = 0;
  private readonly decoder = new TextDecoder();

  constructor(limit: number) {
    this.limit = limit;
  }

  /** The events completed by `chunk`, or TOO_LARGE. */
  push(chunk: Buffer): ServerSentEvent[] | typeof TOO_LARGE {
    this.pending += this.decoder.decode(chunk, { stream: true });
    const out: ServerSentEvent[] = [];
    let start = 0;
    for (;;) {
      const nl = this.pending.indexOf('\n', start);
      if (nl < 0) break;
      let line = this.pending.slice(start, nl);
      start = nl + 1;
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (this.data.length > 0 || this.event !== '') out.push({ event: this.event || 'message', data: this.data.join('\n') });
        this.event = '';
        this.data = [];
        this.size = 0;
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      this.size += value.length;
      if (this.size > this.limit) return TOO_LARGE;
      if (field === 'event') this.event = value;
      else if (field === 'data') this.data.push(value);
    }
    this.pending = this.pending.slice(start);
    if (this.pending.length > this.limit) return TOO_LARGE;
    return out;
  }
}
