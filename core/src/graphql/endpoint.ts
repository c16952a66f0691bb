import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  execute,
  getOperationAST,
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
import { metrics } from '../admin/metrics.ts';
import type { RequestContext } from '../proxy/context.ts';
import { graphiqlPage } from './graphiql.ts';
import { inputsTooComplexToCompile, usesComplexInput } from './input-complexity.ts';
import { acceptsHtml, negotiate, readParams, RequestFailure, sendErrors, sendJson, type MediaType, type RequestParams } from './http.ts';
import type { OperationGate } from './operation-gate.ts';
import type { RemoteExecutor } from './remote.ts';
import type { FieldResolver, OperationContext } from './resolvers/types.ts';

/** Which engine executes local operations: graphql-jit (compiled per document) or graphql-js. */
export type ExecutionEngine = 'jit' | 'graphql-js';

/** A parsed and validated document, cached by query text. */
interface PreparedDocument {
  readonly document: DocumentNode | undefined;
  /** Parse or validation errors: the request gets 400. */
  readonly errors: readonly GraphQLError[] | undefined;
  /** graphql-jit compilations by operation name. */
  readonly compiled: Map<string, CompiledQuery | ExecutionResult | typeof INTERPRET>;
}

/** Marks an operation that graphql-js runs instead of graphql-jit (see ./input-complexity.ts). */
const INTERPRET = Symbol('interpret');

const DOCUMENT_CACHE_SIZE = 1_000;
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

  /** Input types graphql-jit would unroll without bound: operations using them run on graphql-js. */
  private readonly complexInputs: ReadonlySet<string>;

  constructor(options: EndpointOptions) {
    this.options = options;
    this.key = options.key;
    this.version = options.version;
    this.complexInputs = inputsTooComplexToCompile(options.schema);
    for (const type of ['query', 'mutation', 'subscription']) {
      const ok = metrics.graphqlOperations.labels(options.name, type, 'ok');
      const error = metrics.graphqlOperations.labels(options.name, type, 'error');
      this.operationMetrics[type] = { ok: () => ok.inc(), error: () => error.inc() };
    }
  }

  /** Answers one HTTP request; never throws. */
  async serve(req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
    const accept = req.headers.accept;
    if (req.method === 'GET' && this.options.introspection && acceptsHtml(accept) && !(req.url ?? '').includes('query=')) {
      sendJson(res, 200, 'text/html', graphiqlPage(this.options.name));
      return;
    }
    const media = negotiate(accept);
    if (!media) {
      sendErrors(res, 406, 'application/json', [{ message: 'the Accept header allows neither application/graphql-response+json nor application/json' }], {
        accept: 'application/graphql-response+json; charset=utf-8, application/json; charset=utf-8',
      });
      return;
    }
    let params = await readParams(req);
    if (params instanceof RequestFailure) {
      sendErrors(res, params.status, media, [{ message: params.message }], params.headers);
      return;
    }
    const gate = this.options.gate;
    if (gate && (!gate.open || params.query === '')) {
      const admitted = gate.admit(params);
      if ('status' in admitted) {
        sendErrors(res, admitted.status, media, [admitted.error]);
        return;
      }
      // A query found by its hash: the body the client sent holds none, so it is not forwarded as is.
      if (admitted.query !== params.query) params = { ...params, query: admitted.query, rawBody: undefined };
    }
    if (this.options.logSensitiveInfo) ctx.logger.debug({ api: this.options.name, operationName: params.operationName, query: params.query, variables: params.variables }, 'graphql operation');
    const prepared = this.prepare(params.query);
    if (prepared.errors) {
      sendErrors(res, 400, media, prepared.errors);
      return;
    }
    const document = prepared.document!;
    const operation = getOperationAST(document, params.operationName);
    if (!operation) {
      const message = params.operationName ? `no operation named "${params.operationName}" in the document` : 'the document holds several operations; say which one with "operationName"';
      sendErrors(res, 400, media, [{ message }]);
      return;
    }
    if (operation.operation === 'subscription') {
      sendErrors(res, 400, media, [{ message: 'subscriptions are not supported over HTTP by this gateway' }]);
      return;
    }
    // GraphQL over HTTP: a GET must never cause side effects.
    if (operation.operation === 'mutation' && req.method === 'GET') {
      sendErrors(res, 405, media, [{ message: 'mutations need POST; GET only runs queries' }], { allow: 'POST' });
      return;
    }
    if (this.options.remote) {
      this.operationMetrics[operation.operation]!.ok();
      await this.options.remote.forward(params, media, res, ctx);
      return;
    }
    const [result, stringify] = await this.execute(prepared, document, operation, params, ctx);
    const failed = result.errors !== undefined && result.errors.length > 0;
    this.operationMetrics[operation.operation]![failed ? 'error' : 'ok']();
    // A result without data is a request error (e.g. bad variables): 400, like parse and validation errors.
    sendJson(res, result.data === undefined ? 400 : 200, media, stringify(result));
  }

  private prepare(query: string): PreparedDocument {
    const cached = this.documents.get(query);
    if (cached) return cached;
    let prepared: PreparedDocument;
    try {
      const document = parse(query);
      const errors = validate(this.options.schema, document, this.options.rules);
      prepared = { document, errors: errors.length > 0 ? errors : undefined, compiled: new Map() };
    } catch (error) {
      prepared = { document: undefined, errors: [error instanceof GraphQLError ? error : new GraphQLError(String(error))], compiled: new Map() };
    }
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
  ): Promise<[ExecutionResult, (result: ExecutionResult) => string]> {
    const contextValue: OperationContext = { headers: ctx.headers, calls: new Map(), resolvers: this.options.resolvers ?? {}, ...(this.options.subschemas ? { subschemas: this.options.subschemas } : {}) };
    try {
      if (this.options.engine === 'jit') {
        const name = params.operationName ?? '';
        let compiled = prepared.compiled.get(name);
        if (!compiled) {
          // The serializer compiled from the operation's selection set is faster than JSON.stringify.
          compiled = usesComplexInput(this.options.schema, operation, this.complexInputs)
            ? INTERPRET
            : (compileQuery(this.options.schema, document, params.operationName ?? undefined, { customJSONSerializer: true }) as CompiledQuery | ExecutionResult);
          prepared.compiled.set(name, compiled);
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
