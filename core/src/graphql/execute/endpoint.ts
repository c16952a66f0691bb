import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  execute,
  getOperationAST,
  isScalarType,
  isSpecifiedScalarType,
  GraphQLError,
  parse,
  validate,
  type DocumentNode,
  type ExecutionResult,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ValidationRule,
} from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import { metrics } from '../../admin/metrics.ts';
import type { HistogramChild } from '../../admin/request-metrics.ts';
import type { RequestContext } from '../../proxy/context.ts';
import { graphiqlAsset, graphiqlPage } from './graphiql.ts';
import { inputsTooComplexToCompile, usesComplexInput } from '../compile/input-complexity.ts';
import { acceptsHtml, ClientWatch, errorAnswer, negotiate, NEVER_GONE, readParams, RequestFailure, sendAnswer, sendErrors, sendJson, type Answer, type ClientSignal, type MediaType, type RequestParams } from './http.ts';
import { FieldErrorCodes } from '../compile/errors.ts';
import { checkDocument, DEFAULT_LIMITS, jsonLargerThan, LimitCodes, LIMITS_OFF, limitError, nestsDeeperThan, OperationBudget, type GraphQLLimits } from '../limits/limits.ts';
import { acceptsMultipart, INCREMENTAL_UNSUPPORTED, usesIncremental } from './incremental.ts';
import { maskErrors } from '../limits/masking.ts';
import { traceHeaders } from './trace.ts';
import { streamEvents, wantsEventStream } from '../subscriptions/sse.ts';
import { SubscriptionServer } from '../subscriptions/ws.ts';
import type { OperationGate } from '../limits/operation-gate.ts';
import type { RemoteExecutor } from './remote.ts';
import type { FieldResolver, OperationContext } from '../resolvers/types.ts';

/** Which engine executes local operations: graphql-jit (compiled per document) or graphql-js. */
export type ExecutionEngine = 'jit' | 'graphql-js';

/** A parsed and validated document, cached by query text. */
export interface PreparedDocument {
  readonly document: DocumentNode | undefined;
  /** Fields once fragments are expanded (what compiling would unroll). */
  readonly size: number;
  /** Parse or validation errors: the request gets 400. */
  readonly errors: readonly GraphQLError[] | undefined;
  /** graphql-jit compilations by operation name. */
  readonly compiled: Map<string, CompiledQuery | ExecutionResult | typeof INTERPRET>;
}

/** `extensions.code` of a subscription on an API that cannot serve one (stable). */
export const SUBSCRIPTIONS_UNSUPPORTED = 'GRAPHQL_SUBSCRIPTIONS_UNSUPPORTED';

/** An operation that passed every check before execution (see {@link GraphQLEndpoint.admit}). */
export interface Admitted {
  readonly params: RequestParams;
  readonly prepared: PreparedDocument;
  readonly document: DocumentNode;
  readonly operation: OperationDefinitionNode;
}

/** Aborts when the client closes the connection before its response is complete. */
export function clientGone(res: ServerResponse): AbortSignal {
  const abort = new AbortController();
  if (res.destroyed) abort.abort();
  else res.once('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  return abort.signal;
}

/** A batch entry for a remote answer that is not JSON. */
function notJson(): string {
  return JSON.stringify({ errors: [{ message: 'the upstream GraphQL server answered with something that is not JSON', extensions: { code: FieldErrorCodes.BAD_UPSTREAM_RESPONSE } }] });
}

/** What an `Accept` header asks for, read once per value (clients send the same few). */
interface AcceptedMedia {
  readonly media: MediaType | null;
  readonly eventStream: boolean;
  readonly multipart: boolean;
}
const NO_ACCEPT: AcceptedMedia = { media: negotiate(undefined), eventStream: false, multipart: false };
const acceptedMedia = new Map<string, AcceptedMedia>();
const MAX_ACCEPT_VALUES = 256;

function acceptedOf(accept: string | undefined): AcceptedMedia {
  if (accept === undefined) return NO_ACCEPT;
  let known = acceptedMedia.get(accept);
  if (known === undefined) {
    known = { media: negotiate(accept), eventStream: wantsEventStream(accept), multipart: acceptsMultipart(accept) };
    if (acceptedMedia.size >= MAX_ACCEPT_VALUES) acceptedMedia.clear();
    acceptedMedia.set(accept, known);
  }
  return known;
}

/** Marks an operation that graphql-js runs instead of graphql-jit (see ./input-complexity.ts). */
const INTERPRET = Symbol('interpret');

const DOCUMENT_CACHE_SIZE = 1_000;
/** Operation names an API's metrics label (bounded cardinality: later names are "other"). */
export const MAX_OPERATION_NAMES = 50;
/**
 * Larger documents (fields after fragment expansion) run on graphql-js instead of being compiled:
 * graphql-jit's compile step is one synchronous block growing with the expansion (5,000 fields
 * took ~1 s on a loaded 2-core machine), where graphql-js's work is spread across the execution.
 */
const MAX_COMPILED_FIELDS = 1_000;
/** Larger documents are parsed every time instead of filling the cache. */
const MAX_CACHED_QUERY_LENGTH = 16 * 1024;

export interface EndpointOptions {
  /** `Kind/namespace/name` of the GraphQLApi. */
  readonly key: string;
  /** `namespace/name`, for metrics and pages. */
  readonly name: string;
  readonly version: string;
  readonly schema: GraphQLSchema;
  readonly rules: readonly ValidationRule[];
  readonly introspection: boolean;
  /** Local executor: resolvers bound to upstreams. */
  readonly resolvers?: Readonly<Record<string, FieldResolver>>;
  /** Stitched schema: each subschema's resolvers, in order (its executor reads them from the context). */
  readonly subschemas?: readonly Readonly<Record<string, FieldResolver>>[];
  /** Remote executor. */
  readonly remote?: RemoteExecutor;
  readonly engine: ExecutionEngine;
  /** Persisted queries and the safelist (Gloo's persistedQueryCacheConfig, allowedQueryHashes). */
  readonly gate?: OperationGate;
  /** Log each operation's query and variables at debug level (Gloo's options.logSensitiveInfo). */
  readonly logSensitiveInfo?: boolean;
  /** SPEC 3.3.1 (default {@link DEFAULT_LIMITS}). */
  readonly limits?: GraphQLLimits;
  /** `Type.field` coordinates served by a resolver (the cost model's upstream calls). */
  readonly resolverFields?: ReadonlySet<string>;
  /** Upstream error details go to the client unmasked (`options.includeUpstreamErrors`; development only). */
  readonly includeUpstreamErrors?: boolean;
}

/**
 * The GraphQL server of one GraphQLApi version: GraphQL over HTTP in front of either
 * local execution (resolvers) or the remote executor.
 */
export class GraphQLEndpoint {
  readonly key: string;
  readonly version: string;
  /** Identity of what the endpoint was built from (API version and upstream versions), for reuse across reloads. */
  fingerprint = '';
  private readonly options: EndpointOptions;
  private readonly documents = new Map<string, PreparedDocument>();
  private readonly operationMetrics: Record<string, { ok: () => void; error: () => void }> = {};
  /** Operation names seen, up to {@link MAX_OPERATION_NAMES}, for the latency histogram's label. */
  private readonly operationNames = new Set<string>();
  /** The latency histogram's series of each operation (of cached documents), found once. */
  private readonly durations = new WeakMap<OperationDefinitionNode, { readonly name: string; ok: HistogramChild | undefined; error: HistogramChild | undefined }>();
  private readonly rejectedMetric: { inc: () => void };

  /** Input types graphql-jit would unroll without bound: operations using them run on graphql-js. */
  private readonly complexInputs: ReadonlySet<string>;
  private readonly limits: GraphQLLimits;
  private readonly resolverFields: ReadonlySet<string>;
  /**
   * The schema declares its own scalars (e.g. `scalar JSON`): graphql-jit's compiled serializer
   * only knows the built-in ones ("Got unexpected PRIMITIVES type"), so JSON.stringify writes those.
   */
  private readonly customScalars: boolean;
  /** graphql-ws, created on the first upgrade. */
  private subscriptions: SubscriptionServer | undefined;

  constructor(options: EndpointOptions) {
    this.options = options;
    this.key = options.key;
    this.version = options.version;
    this.complexInputs = inputsTooComplexToCompile(options.schema);
    this.limits = options.limits ?? DEFAULT_LIMITS;
    this.resolverFields = options.resolverFields ?? new Set();
    this.customScalars = Object.values(options.schema.getTypeMap()).some((t) => isScalarType(t) && !isSpecifiedScalarType(t));
    for (const type of ['query', 'mutation', 'subscription']) {
      const ok = metrics.graphqlOperations.labels(options.name, type, 'ok');
      const error = metrics.graphqlOperations.labels(options.name, type, 'error');
      this.operationMetrics[type] = { ok: () => ok.inc(), error: () => error.inc() };
    }
    const rejected = metrics.graphqlOperations.labels(options.name, 'unknown', 'rejected');
    this.rejectedMetric = { inc: () => rejected.inc() };
  }

  /** Answers one HTTP request; never throws. */
  async serve(req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
    const accept = req.headers.accept;
    if (req.method === 'GET' && this.options.introspection) {
      const asset = graphiqlAsset(req.url ?? '');
      if (asset) {
        res.writeHead(200, { 'content-type': asset.contentType, 'content-length': asset.body.length, 'cache-control': 'public, max-age=86400', 'x-content-type-options': 'nosniff' });
        res.end(asset.body);
        return;
      }
      if (asset === undefined) {
        sendErrors(res, 404, 'application/json', [{ message: 'no such GraphiQL asset' }]);
        return;
      }
    }
    if (req.method === 'GET' && this.options.introspection && acceptsHtml(accept) && !(req.url ?? '').includes('query=')) {
      sendJson(res, 200, 'text/html', graphiqlPage(this.options.name));
      return;
    }
    // GraphQL over SSE (./subscriptions/sse.ts) and incremental delivery (./incremental.ts) are
    // chosen once the operation is known: clients such as urql list them next to JSON for every request.
    const accepted = acceptedOf(accept);
    const sse = accepted.eventStream;
    const multipart = this.options.remote !== undefined && accepted.multipart;
    const media = accepted.media;
    if (!media && !sse && !multipart) {
      sendErrors(res, 406, 'application/json', [{ message: 'the Accept header allows neither application/graphql-response+json nor application/json' }], {
        accept: 'application/graphql-response+json; charset=utf-8, application/json; charset=utf-8',
      });
      return;
    }
    // Refusals are JSON even for a client that only asked for a stream (graphql-sse reads them so).
    const answerMedia = media ?? 'application/json';
    const read = await readParams(req);
    if (read instanceof RequestFailure) {
      this.rejected();
      sendErrors(res, read.status, answerMedia, [{ message: read.message }], read.headers);
      return;
    }
    if ('batch' in read) {
      await this.serveBatch(read.batch, req, res, ctx, answerMedia);
      return;
    }
    const budget = new OperationBudget(this.limits);
    // Only the remote executor stops work when the client leaves (its upstream call).
    let signal: ClientSignal = this.options.remote ? new ClientWatch(res) : NEVER_GONE;
    try {
      let admitted: Admitted | undefined;
      if (sse || multipart) {
        const gone = clientGone(res);
        signal = gone;
        const checked = this.admit(read, req.method, budget);
        if (!('operation' in checked)) {
          this.rejected();
          sendAnswer(res, answerMedia, checked);
          return;
        }
        admitted = checked;
        const type = admitted.operation.operation;
        // An event stream for subscriptions, and for anything when the client takes no JSON.
        if (sse && (type === 'subscription' || !media)) {
          await streamEvents(this, admitted, res, ctx, budget, gone);
          return;
        }
        if (multipart && type !== 'subscription' && usesIncremental(admitted.document, admitted.params.query)) {
          this.operationMetrics[type]!.ok();
          const sent = await this.options.remote!.forwardIncremental(admitted.params, accept!, res, gone, ctx, budget, this.options.includeUpstreamErrors === true, admitted.operation);
          if (sent === 'sent') return;
          if (sent) sendAnswer(res, answerMedia, sent);
          else if (!res.writableEnded) res.destroy();
          return;
        }
      }
      const answer = await this.answer(read, req.method, signal, ctx, answerMedia, budget, admitted);
      if (answer) sendAnswer(res, answerMedia, answer);
      else if (!res.writableEnded) res.destroy();
    } finally {
      budget.release();
    }
  }

  /**
   * Answers a batch (a JSON array body) with a JSON array of results in the same order, status
   * 200 (each entry's own errors say what failed). Every entry runs under every limit, with its
   * own budget, concurrently (as Apollo Server runs batches); `limits.maxBatchSize` bounds how
   * many. The entries' `set-cookie` headers are all passed on; other upstream headers are not
   * (there is no one `cache-control` of several answers).
   */
  private async serveBatch(batch: readonly (RequestParams | RequestFailure)[], req: IncomingMessage, res: ServerResponse, ctx: RequestContext, media: MediaType): Promise<void> {
    const max = this.limits.maxBatchSize;
    if (max === 0 || batch.length === 0 || batch.length > max) this.rejected();
    if (max === 0) {
      sendErrors(res, 400, media, [limitError(LimitCodes.BATCH_SIZE, 'this API does not accept batched requests (limits.maxBatchSize is 0); send one operation per request')]);
      return;
    }
    if (batch.length === 0) {
      sendErrors(res, 400, media, [{ message: 'the batch is empty' }]);
      return;
    }
    if (batch.length > max) {
      sendErrors(res, 400, media, [limitError(LimitCodes.BATCH_SIZE, `the batch holds ${batch.length} operations, more than the ${max} this API allows (limits.maxBatchSize)`)]);
      return;
    }
    const budgets = batch.map(() => new OperationBudget(this.limits));
    const signal = this.options.remote ? new ClientWatch(res) : NEVER_GONE;
    try {
      const answers = await Promise.all(
        batch.map((entry, i) => {
          if (!(entry instanceof RequestFailure)) return this.answer(entry, req.method, signal, ctx, media, budgets[i]!);
          this.rejected();
          return errorAnswer(entry.status, [{ message: entry.message }]);
        }),
      );
      if (answers.some((a) => a === undefined)) {
        // The client left.
        if (!res.writableEnded) res.destroy();
        return;
      }
      const cookies: string[] = [];
      const parts: (string | Buffer)[] = [];
      for (const answer of answers as Answer[]) {
        const cookie = answer.headers?.['set-cookie'];
        if (cookie !== undefined) cookies.push(...(typeof cookie === 'string' ? [cookie] : cookie));
        // A remote answer that is not JSON (an HTML error page) cannot be an entry of a JSON array.
        parts.push(answer.contentType === undefined || /json/i.test(answer.contentType) ? answer.body : notJson());
      }
      const size = parts.reduce((n, p) => n + (typeof p === 'string' ? Buffer.byteLength(p) : p.length), 0) + parts.length + 1;
      const body = Buffer.concat([Buffer.from('['), ...parts.flatMap((p, i) => [Buffer.from(i === 0 ? '' : ','), typeof p === 'string' ? Buffer.from(p) : p]), Buffer.from(']')], size);
      sendAnswer(res, media, { status: 200, body, headers: cookies.length > 0 ? { 'set-cookie': cookies } : undefined });
    } finally {
      for (const budget of budgets) budget.release();
    }
  }

  /**
   * What every transport (HTTP, batches, graphql-ws, SSE) runs before an operation executes: the
   * persisted-query gate and safelist, parsing under the limits, validation, the operation's
   * lookup and the variables' depth. The operation to run, or the failure to answer.
   */
  admit(params: RequestParams, method: string | undefined, budget: OperationBudget): Admitted | Answer {
    const gate = this.options.gate;
    if (gate && (!gate.open || params.query === '')) {
      const admitted = gate.admit(params);
      if ('status' in admitted) return errorAnswer(admitted.status, [admitted.error]);
      // A query found by its hash: the body the client sent holds none, so it is not forwarded as is.
      if (admitted.query !== params.query) params = { ...params, query: admitted.query, rawBody: undefined };
    }
    const prepared = this.prepare(params.query, budget);
    if (prepared.errors) return errorAnswer(400, prepared.errors);
    const document = prepared.document!;
    const operation = getOperationAST(document, params.operationName);
    if (!operation) {
      const message = params.operationName ? `no operation named "${params.operationName}" in the document` : 'the document holds several operations; say which one with "operationName"';
      return errorAnswer(400, [{ message }]);
    }
    // GraphQL over HTTP: a GET must never cause side effects.
    if (operation.operation === 'mutation' && method === 'GET') return errorAnswer(405, [{ message: 'mutations need POST; GET only runs queries' }], { allow: 'POST' });
    // Coercing variables recurses through them (a deeply nested value overflowed the stack).
    if (params.variables && nestsDeeperThan(params.variables, this.limits.maxVariableDepth)) {
      return errorAnswer(400, [limitError(LimitCodes.VARIABLES_DEPTH, `"variables" nest deeper than the ${this.limits.maxVariableDepth} levels this API allows (limits.maxVariableDepth)`)]);
    }
    if (operation.operation === 'subscription' && !this.options.remote) {
      return errorAnswer(400, [{ message: 'subscriptions need a remote executor whose upstream serves them; this API\'s resolvers have no event source', extensions: { code: SUBSCRIPTIONS_UNSUPPORTED } } as { message: string }]);
    }
    return { params, prepared, document, operation };
  }

  /** One operation's answer (or its promise); undefined when the client left while the remote executor waited. */
  private answer(params: RequestParams, method: string | undefined, signal: ClientSignal, ctx: RequestContext, media: MediaType, budget: OperationBudget, already?: Admitted): Answer | Promise<Answer | undefined> {
    if (this.options.logSensitiveInfo) ctx.logger.debug({ api: this.options.name, operationName: params.operationName, query: params.query, variables: params.variables }, 'graphql operation');
    const started = performance.now();
    const admitted = already ?? this.admit(params, method, budget);
    if (!('operation' in admitted)) {
      this.rejected();
      return admitted;
    }
    const operation = admitted.operation;
    if (operation.operation === 'subscription') {
      this.rejected();
      return errorAnswer(400, [{ message: 'a subscription needs a streaming transport: graphql-ws (WebSocket, graphql-transport-ws) or GraphQL over SSE (Accept: text/event-stream)' }]);
    }
    if (this.options.remote) {
      // No async frame of its own: the answer is counted when it comes.
      return this.options.remote.forward(admitted.params, media, signal, ctx, budget, this.options.includeUpstreamErrors === true, operation).then((answer) => {
        // The upstream's errors count as errors (its 4xx/5xx, or an `errors` member in its answer).
        if (answer) this.record(operation, answer.status >= 400 || (answer.errors ?? answer.body.includes('"errors"')), started);
        return answer;
      });
    }
    return this.answerLocally(admitted, ctx, budget, started);
  }

  /** A local operation's answer: executed, serialized under the limits, counted. */
  private async answerLocally(admitted: Admitted, ctx: RequestContext, budget: OperationBudget, started: number): Promise<Answer> {
    const { prepared, document, operation, params } = admitted;
    const [result, stringify] = await this.execute(prepared, document, operation, params, ctx, budget);
    const body = this.serialize(result, stringify, budget, ctx);
    this.record(operation, (result.errors !== undefined && result.errors.length > 0) || typeof body !== 'string', started);
    if (typeof body !== 'string') return errorAnswer(400, [body]);
    // A result without data is a request error (e.g. bad variables): 400, like parse and validation errors.
    return { status: result.data === undefined ? 400 : 200, body };
  }

  /** Counts an executed operation (by type) and its latency (by type and name). */
  private record(operation: OperationDefinitionNode, failed: boolean, started: number): void {
    const type = operation.operation;
    this.operationMetrics[type]![failed ? 'error' : 'ok']();
    let series = this.durations.get(operation);
    if (series === undefined) {
      let name = operation.name?.value ?? 'anonymous';
      if (!this.operationNames.has(name)) {
        if (this.operationNames.size < MAX_OPERATION_NAMES) this.operationNames.add(name);
        else name = 'other';
      }
      series = { name, ok: undefined, error: undefined };
      this.durations.set(operation, series);
    }
    const result = failed ? 'error' : 'ok';
    // A series is created when first observed (as labels(...).observe() did).
    (series[result] ??= metrics.graphqlOperationDuration.labels(this.options.name, type, series.name, result)).observe((performance.now() - started) / 1000);
  }

  /** Counts a request refused before execution (4xx: unreadable, invalid, past a limit; a refused graphql-ws `subscribe`). */
  rejected(): void {
    this.rejectedMetric.inc();
  }

  /**
   * Runs an admitted operation as a stream of results (graphql-ws, SSE): a subscription's events
   * from the remote upstream, or the one result of a query or mutation. Results are masked; each
   * is held to `limits.maxResponseBytes`. Ends when `signal` aborts.
   */
  async *stream(admitted: Admitted, ctx: RequestContext, signal: AbortSignal, budget: OperationBudget): AsyncGenerator<ExecutionResult> {
    const { operation, params } = admitted;
    const remote = this.options.remote;
    if (remote) {
      this.operationMetrics[operation.operation]!.ok();
      yield* remote.stream(params, ctx, signal, this.limits.maxResponseBytes, this.subscriptionIdleMs, this.options.includeUpstreamErrors === true, operation);
      return;
    }
    const [result, stringify] = await this.execute(admitted.prepared, admitted.document, operation, params, ctx, budget);
    const failed = result.errors !== undefined && result.errors.length > 0;
    this.operationMetrics[operation.operation]![failed ? 'error' : 'ok']();
    const body = this.serialize(result, stringify, budget, ctx);
    yield typeof body === 'string' ? (JSON.parse(body) as ExecutionResult) : { errors: [body] };
  }

  /** Takes over a WebSocket upgrade routed here (graphql-ws); `done` runs once the socket closes. */
  upgrade(req: IncomingMessage, res: ServerResponse, pending: { socket: Duplex; head: Buffer; protocol: string; status?: number }, ctx: RequestContext, done: () => void): void {
    if (pending.protocol.toLowerCase() !== 'websocket') {
      sendErrors(res, 400, 'application/json', [{ message: `a GraphQL route takes WebSocket upgrades only (graphql-transport-ws), not "${pending.protocol}"` }]);
      return;
    }
    // The gateway dropped the hop-by-hop headers after reading them; the WebSocket handshake reads them again.
    req.headers.upgrade = pending.protocol;
    req.headers.connection = 'upgrade';
    // The 101 goes straight onto the client's socket: the ServerResponse is done with.
    res.detachSocket(pending.socket as never);
    (this.subscriptions ??= new SubscriptionServer(this)).upgrade(req, pending.socket, pending.head, ctx, () => (pending.status = 101), done);
  }

  /** Closes the endpoint's WebSocket connections (close code 1001 with `reason`). */
  close(reason: string): void {
    this.subscriptions?.close(reason);
  }

  /** No event for this long ends a subscription (`limits.subscriptionIdleTimeout`). */
  get subscriptionIdleMs(): number {
    return this.limits.subscriptionIdleMs;
  }

  /** The API's schema and limits, for the streaming transports. */
  get schema(): GraphQLSchema {
    return this.options.schema;
  }

  get apiLimits(): GraphQLLimits {
    return this.limits;
  }

  /** The response body, or the limit it passes (response bytes, event-loop time); upstream errors masked. */
  private serialize(result: ExecutionResult, stringify: (result: ExecutionResult) => string, budget: OperationBudget, ctx: RequestContext): string | GraphQLError {
    const started = LIMITS_OFF ? 0 : performance.now();
    const { maxResponseBytes } = this.limits;
    // Measured before building the JSON: a small query can select the same large value many times.
    if (!LIMITS_OFF && result.data && jsonLargerThan(result.data, maxResponseBytes)) return this.responseTooLarge();
    if (result.errors && result.errors.length > 0 && !this.options.includeUpstreamErrors) {
      const errors = maskErrors(result.errors, result.data !== undefined && result.data !== null, (original) =>
        ctx.logger.warn({ reqId: ctx.requestId, api: this.options.name, path: original.path, code: original.extensions?.code, err: original.originalError ?? original, detail: original.message }, 'GraphQL field error (masked for the client)'),
      );
      if (errors !== result.errors) {
        result = { ...result, errors: errors as GraphQLError[] };
        stringify = JSON.stringify;
      }
    }
    const body = stringify(result);
    if (LIMITS_OFF) return body;
    budget.spend(performance.now() - started);
    if (body.length > maxResponseBytes) return this.responseTooLarge();
    if (budget.overTime) return budget.timeError();
    return body;
  }

  private responseTooLarge(): GraphQLError {
    return limitError(LimitCodes.RESPONSE_BYTES, `the response is larger than the ${this.limits.maxResponseBytes} bytes this API allows (limits.maxResponseBytes); ask for fewer fields or items`);
  }

  /**
   * Parses (at most `maxTokens` tokens), measures against the limits, then validates. The limits
   * come first: validation and compilation expand fragments, the measure does not.
   */
  private prepare(query: string, budget: OperationBudget): PreparedDocument {
    const cached = this.documents.get(query);
    if (cached) return cached;
    const started = performance.now();
    let prepared: PreparedDocument;
    try {
      const document = parse(query, { maxTokens: this.limits.maxTokens });
      const measure = checkDocument(document, this.options.schema, this.limits, this.resolverFields);
      const errors = measure.error
        ? [measure.error]
        : !this.options.remote && usesIncremental(document, query)
          ? [new GraphQLError('@defer and @stream are not supported by this API\'s executor (local resolvers answer whole results); remove them, or serve the API through a remote executor whose upstream supports incremental delivery', { extensions: { code: INCREMENTAL_UNSUPPORTED } })]
          : validate(this.options.schema, document, this.options.rules);
      prepared = { document, size: measure.size, errors: errors.length > 0 ? errors : undefined, compiled: new Map() };
    } catch (error) {
      let failure = error instanceof GraphQLError ? error : new GraphQLError(String(error));
      if (/Document contains more th/.test(failure.message)) {
        failure = limitError(LimitCodes.TOKENS, `the document has more than the ${this.limits.maxTokens} tokens this API allows (limits.maxTokens)`);
      }
      prepared = { document: undefined, size: 0, errors: [failure], compiled: new Map() };
    }
    budget.spend(performance.now() - started);
    if (query.length <= MAX_CACHED_QUERY_LENGTH) {
      if (this.documents.size >= DOCUMENT_CACHE_SIZE) this.documents.delete(this.documents.keys().next().value!);
      this.documents.set(query, prepared);
    }
    return prepared;
  }

  /** Runs the operation; returns the result and the serializer to write it with. */
  private async execute(
    prepared: PreparedDocument,
    document: DocumentNode,
    operation: OperationDefinitionNode,
    params: RequestParams,
    ctx: RequestContext,
    budget: OperationBudget,
  ): Promise<[ExecutionResult, (result: ExecutionResult) => string]> {
    const contextValue: OperationContext = { headers: ctx.headers, calls: new Map(), resolvers: this.options.resolvers ?? {}, budget, trace: traceHeaders(ctx), ...(this.options.subschemas ? { subschemas: this.options.subschemas } : {}) };
    try {
      if (this.options.engine === 'jit') {
        const name = params.operationName ?? '';
        let compiled = prepared.compiled.get(name);
        if (!compiled) {
          const started = performance.now();
          // The serializer compiled from the operation's selection set is faster than JSON.stringify.
          // Only documents measured within the limits get here: their expansion is at most maxCost fields.
          compiled = prepared.size > MAX_COMPILED_FIELDS || usesComplexInput(this.options.schema, operation, this.complexInputs)
            ? INTERPRET
            : (compileQuery(this.options.schema, document, params.operationName ?? undefined, { customJSONSerializer: !this.customScalars }) as CompiledQuery | ExecutionResult);
          prepared.compiled.set(name, compiled);
          budget.spend(performance.now() - started);
        }
        if (compiled !== INTERPRET) {
          if (!isCompiledQuery(compiled)) return [compiled, JSON.stringify];
          return [await compiled.query(undefined, contextValue, params.variables ?? {}), compiled.stringify];
        }
      }
      return [await execute({ schema: this.options.schema, document, operationName: params.operationName ?? null, variableValues: params.variables ?? null, contextValue }), JSON.stringify];
    } catch (error) {
      ctx.logger.error({ err: error, api: this.key, operation: operation.name?.value }, 'GraphQL execution failed');
      return [{ errors: [new GraphQLError('internal error while executing the operation')] }, JSON.stringify];
    }
  }
}
