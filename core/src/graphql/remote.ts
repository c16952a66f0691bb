import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { RemoteExecutorSpec } from '../config/schema/graphql-api.ts';
import { ErrorCodes } from '../errors.ts';
import { writeThrough } from '../proxy/forward.ts';
import { isConnectFailure, type UpstreamCluster } from '../proxy/upstream-cluster.ts';
import type { RequestContext } from '../proxy/context.ts';
import { FieldErrorCodes, GraphQLConfigCodes, type Problem } from './errors.ts';
import { sendErrors, type MediaType, type RequestParams } from './http.ts';
import { Template, TemplateSyntaxError } from './template.ts';

/** How long the remote executor waits for the upstream GraphQL server (the gateway's route default). */
export const REMOTE_TIMEOUT_MS = 15_000;

/** `executor.remote` with its templates parsed (load time). */
export interface CompiledRemote {
  readonly path: string;
  readonly headers: readonly (readonly [string, Template])[];
  readonly queryParams: readonly (readonly [string, Template])[];
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
  if (queryParams.length > 0 && !queryParams.some(([, t]) => !t.constant)) {
    // All static: the query string is built once.
    path += (path.includes('?') ? '&' : '?') + queryParams.map(([k, t]) => `${encodeURIComponent(k)}=${encodeURIComponent(t.text)}`).join('&');
    return { path, headers, queryParams: [] };
  }
  return { path, headers, queryParams };
}

/**
 * Forwards validated operations to the upstream GraphQL server and returns its answer
 * unchanged (status, content type and body bytes). Connection failures answer 503 and
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

  async forward(params: RequestParams, media: MediaType, res: ServerResponse, ctx: RequestContext): Promise<void> {
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
    const error = await new RemoteCall(res).run(host.dispatcher, { method: 'POST', path, headers, body, headersTimeout: REMOTE_TIMEOUT_MS, bodyTimeout: REMOTE_TIMEOUT_MS });
    if (!error) return;
    if (res.destroyed) {
      // The client left (which also stopped the upstream call): nothing failed upstream.
      ctx.logger.debug({ reqId: ctx.requestId, upstream: cluster.name }, 'GraphQL remote executor: client closed the connection');
      return;
    }
    const code = (error as { code?: string }).code;
    if (isConnectFailure(error)) cluster.eject(host);
    const timeout = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
    ctx.logger.warn({ reqId: ctx.requestId, err: error, upstream: cluster.name }, 'GraphQL remote executor: upstream failed');
    if (res.headersSent) {
      // Cut mid-body: the client must see a broken response, not a truncated "complete" one.
      res.destroy();
      return;
    }
    sendErrors(
      res,
      timeout ? 504 : 503,
      media,
      [
        {
          message: timeout ? `upstream ${cluster.name} did not answer within ${REMOTE_TIMEOUT_MS}ms` : `upstream ${cluster.name} is unavailable: ${code ?? (error as Error).message}`,
          extensions: { code: timeout ? FieldErrorCodes.UPSTREAM_TIMEOUT : FieldErrorCodes.UPSTREAM_ERROR },
        } as { message: string },
      ],
      { 'x-gatehouse-error': timeout ? ErrorCodes.UPSTREAM_TIMEOUT : ErrorCodes.UPSTREAM_UNAVAILABLE },
    );
  }
}

/**
 * One call to the upstream GraphQL server, as an undici dispatch handler writing straight
 * into the response: status, content type and body bytes pass through unchanged. A client
 * that leaves aborts the call at once (not when the upstream finally answers).
 */
class RemoteCall implements Dispatcher.DispatchHandler {
  private readonly res: ServerResponse;
  private controller: Dispatcher.DispatchController | undefined;
  private done!: (error: Error | undefined) => void;

  constructor(res: ServerResponse) {
    this.res = res;
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

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.res.destroyed) controller.abort(new Error('downstream closed'));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    const out: Record<string, string> = {};
    const contentType = headers['content-type'];
    const contentLength = headers['content-length'];
    if (typeof contentType === 'string') out['content-type'] = contentType;
    if (typeof contentLength === 'string') out['content-length'] = contentLength;
    this.res.writeHead(statusCode, out);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    writeThrough(controller, this.res, chunk);
  }

  onResponseEnd(): void {
    this.res.end();
    this.done(undefined);
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.done(error);
  }
}
