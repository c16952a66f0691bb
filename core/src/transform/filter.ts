import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from '../log/logger.ts';
import { FilterStage, type FilterRequest, type FilterResponse, type HttpFilter, type HttpFilterFactory, type LocalReply } from '../proxy/filters/http-filter.ts';
import { compileStages, DEFAULT_TRANSFORM_LIMITS, inheritStages, TransformCodes, transformProblems, type CompiledStage, type CompiledStages, type CompiledTransformation, type HeaderRecord, type StageSelection, type TransformFailure, type TransformRequest } from './compile.ts';
import type { Json } from './inja.ts';
import type { TransformationStagesSpec, TransformationsSpec } from './schema.ts';

/**
 * Gloo's transformations on the request path (docs/transformations.md): `stagedTransformations`
 * and `transformations` of the route, or of its virtual host (Gloo's inheritance: a route without
 * its own inherits the host's; with `inheritTransformation`, the host's entries follow its own).
 *
 * Two filters: `early` at FilterStage.transformationEarly (before rate limits and auth) and
 * `regular` (then `postRouting`) at FilterStage.transformation (after auth). Bodies are buffered
 * only when the selected transformation reads or rewrites them (at most `maxBodyBytes`, 413
 * beyond). A response transformation holds the upstream response (bounded the same way) so it
 * can rewrite status, headers and body together.
 */
export const transformationFilter: HttpFilterFactory = {
  name: 'transformation',
  check(options, at, path) {
    const input = inputOf(options);
    if (!input) return [];
    return transformProblems(input, '').map((p) => at([...path, ...pathSegments(p.path)], p.code, p.message, p.severity));
  },
  create({ routeOptions, virtualHostOptions, logger }) {
    const own = stagesOf(routeOptions);
    const host = stagesOf(virtualHostOptions);
    const stages = inheritStages(own?.stages, host?.stages);
    if (!stages) return undefined;
    const inherits = !own || own.stages.inheritTransformation;
    const early = (own?.hasEarly ?? false) || (inherits && (host?.hasEarly ?? false));
    const filters: HttpFilter[] = [];
    if (early) filters.push(stageFilter('transformation-early', FilterStage.transformationEarly, [['early', stages.early]], stages, logger));
    filters.push(stageFilter('transformation', FilterStage.transformation, [['regular', stages.regular], ['postRouting', stages.postRouting]], stages, logger));
    return filters;
  },
};

type StageName = 'early' | 'regular' | 'postRouting';
const RESPONSE_ORDER: readonly StageName[] = ['postRouting', 'regular', 'early'];

/** What one request's transformations left for its response, by stage. */
interface TransformState {
  readonly selections: Partial<Record<StageName, StageSelection>>;
  /** The response transformations chosen for this response, in the order they run. */
  pending?: CompiledTransformation[];
  /** They read or rewrite the body: the response is held for them. */
  held?: boolean;
}

const STATE = 'transformation';
/** Where dynamic metadata from `dynamicMetadataValues` is kept for later filters and the access log (namespace → key → value). */
export const TRANSFORMATION_METADATA = 'transformation.dynamicMetadata';

function inputOf(options: Readonly<Record<string, unknown>> | undefined): { stagedTransformations?: TransformationStagesSpec; transformations?: TransformationsSpec } | undefined {
  if (!options) return undefined;
  const staged = options.stagedTransformations as TransformationStagesSpec | undefined;
  const legacy = options.transformations as TransformationsSpec | undefined;
  if (!staged && !legacy) return undefined;
  return { ...(staged ? { stagedTransformations: staged } : {}), ...(legacy ? { transformations: legacy } : {}) };
}

/** `.stagedTransformations.early.requestTransforms[0].x` → path segments. */
function pathSegments(path: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of path.split('.')) {
    if (part === '') continue;
    const re = /^([^[]*)((?:\[\d+\])*)$/.exec(part);
    if (!re) {
      out.push(part);
      continue;
    }
    if (re[1]) out.push(re[1]);
    for (const index of re[2]!.matchAll(/\[(\d+)\]/g)) out.push(Number(index[1]));
  }
  return out;
}

// One compilation per options object: every route of a virtual host shares the host's.
const compiled = new WeakMap<object, { stages: CompiledStages; hasEarly: boolean }>();

function stagesOf(options: Readonly<Record<string, unknown>> | undefined): { stages: CompiledStages; hasEarly: boolean } | undefined {
  const input = inputOf(options);
  if (!input) return undefined;
  let out = compiled.get(options!);
  if (!out) {
    const early = input.stagedTransformations?.early;
    out = { stages: compileStages(input, 'options'), hasEarly: (early?.requestTransforms?.length ?? 0) + (early?.responseTransforms?.length ?? 0) > 0 };
    compiled.set(options!, out);
  }
  return out;
}

/** The request as the engine sees it. */
function messageOf(request: FilterRequest, body: Buffer | undefined): TransformRequest {
  const metadata = request.metadata.get(TRANSFORMATION_METADATA) as Record<string, Record<string, Json>> | undefined;
  return {
    method: request.method,
    path: request.req.url ?? '/',
    scheme: (request.req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http',
    headers: request.ctx.headers,
    body,
    ...(metadata ? { dynamicMetadata: metadata } : {}),
  };
}

function failure(out: TransformFailure, request: FilterRequest, logger: Logger, side: string): LocalReply {
  logger.info({ reqId: request.ctx.requestId, code: out.code, route: request.ctx.route, side, cause: out.message }, 'transformation failed');
  return { status: out.status, code: out.code, body: out.status === 413 ? 'payload too large' : 'bad request' };
}

function mergeMetadata(request: FilterRequest, from: Record<string, Record<string, Json>>): void {
  let into: Record<string, Record<string, Json>> | undefined;
  for (const ns in from) {
    into ??= (request.metadata.get(TRANSFORMATION_METADATA) as Record<string, Record<string, Json>> | undefined) ?? {};
    Object.assign((into[ns] ??= {}), from[ns]);
  }
  if (into) request.metadata.set(TRANSFORMATION_METADATA, into);
}

function stateOf(request: FilterRequest): TransformState {
  let state = request.metadata.get(STATE) as TransformState | undefined;
  if (!state) request.metadata.set(STATE, (state = { selections: {} }));
  return state;
}

function stageFilter(name: string, stage: number, order: readonly (readonly [StageName, CompiledStage])[], stages: CompiledStages, logger: Logger): HttpFilter {
  const maxBytes = DEFAULT_TRANSFORM_LIMITS.maxBodyBytes;
  const ownsResponse = stage === FilterStage.transformation;
  // Without response transformations in any stage, nothing reads which request entry was selected.
  const transformsResponses = stages.early.hasResponse || stages.regular.hasResponse || stages.postRouting.hasResponse;

  /** Applies the selected entries of this filter's stages, from `index` on. */
  const apply = (request: FilterRequest, index: number): LocalReply | undefined | Promise<LocalReply | undefined> => {
    for (let i = index; i < order.length; i++) {
      const [stageName, compiledStage] = order[i]!;
      const url = request.req.url ?? '/';
      const q = url.indexOf('?');
      const selection = compiledStage.selectRequest({ method: request.method, path: q === -1 ? url : url.slice(0, q), query: q === -1 ? '' : url.slice(q + 1), headers: request.ctx.headers });
      if (!selection) continue;
      if (transformsResponses) stateOf(request).selections[stageName] = selection;
      const transformation = selection.request;
      if (!transformation) continue;
      // A new body replaces the client's: that one is read (and dropped) first, so it cannot follow the new one upstream.
      if ((transformation.needsBody || transformation.changesBody) && request.body === undefined) {
        return request.readBody(maxBytes).then((body) => {
          if (body === 'aborted') return undefined;
          if (body === 'too-large') return failure({ ok: false, status: 413, code: TransformCodes.BODY_TOO_LARGE, message: `request body over ${maxBytes} bytes` }, request, logger, 'request');
          return runOne(request, transformation, selection, body) ?? apply(request, i + 1);
        });
      }
      const reply = runOne(request, transformation, selection, request.body);
      if (reply) return reply;
    }
    return undefined;
  };

  const runOne = (request: FilterRequest, transformation: CompiledTransformation, selection: StageSelection, body: Buffer | undefined): LocalReply | undefined => {
    const before = transformation.logRequestResponseInfo ? messageOf(request, body) : undefined;
    const out = transformation.transformRequest(messageOf(request, body));
    if (!out.ok) return failure(out, request, logger, 'request');
    const { message } = out;
    if (before) logger.debug({ reqId: request.ctx.requestId, before: { ...before, body: before.body?.toString() }, after: { ...message, body: out.body?.toString() } }, 'transformation applied to the request');
    // The headers object is this request's own: replaced in place, so later filters and the destination see it.
    const headers = request.ctx.headers as Record<string, string | string[] | undefined>;
    const changed = message.headers;
    for (const key in headers) if (!Object.hasOwn(changed, key)) delete headers[key];
    // Only what changed is written (as Object.assign would: a plain assignment).
    for (const key in changed) if (headers[key] !== changed[key]) headers[key] = changed[key];
    if (message.method !== request.method) request.req.method = message.method;
    if (message.path !== (request.req.url ?? '/')) {
      // A transformed `:path` goes upstream as it is (route rewrites applied to the path the client sent).
      request.req.url = message.path;
      request.path = message.path;
    }
    if (out.body !== undefined) request.body = out.body;
    mergeMetadata(request, out.dynamicMetadata);
    if (selection.clearRouteCache) request.clearRouteCache();
    return undefined;
  };

  const filter: HttpFilter = {
    name,
    stage,
    onRequest: (request) => apply(request, 0),
  };
  // Without response transformations in any stage, responses stream past this filter untouched.
  if (!ownsResponse || !transformsResponses) return filter;

  // The response side runs once for every stage (postRouting, regular, early), from the regular filter.
  return {
    ...filter,
    wantsResponseBody(request, status, flat) {
      const state = request.metadata.get(STATE) as TransformState | undefined;
      const headers = recordOf(flat);
      const pending: CompiledTransformation[] = [];
      for (const stageName of RESPONSE_ORDER) {
        const t = stages[stageName].selectResponse(state?.selections[stageName], { status, headers });
        if (t) pending.push(t);
      }
      if (pending.length === 0) return undefined;
      const whole = pending.some((t) => t.needsBody || t.changesBody);
      const own = stateOf(request);
      own.pending = pending;
      own.held = whole;
      // Header-only transformations stream the body (onResponseHeaders applies them).
      return whole ? { maxBytes } : undefined;
    },
    onResponseHeaders(request, status, flat) {
      const state = request.metadata.get(STATE) as TransformState | undefined;
      if (!state?.pending || state.held) return undefined;
      const response: FilterResponse = { status, headers: flat, body: EMPTY };
      const reply = transformResponse(request, response, state.pending, logger, false);
      // A header template that fails answers 400, as on the request side.
      return reply ?? response.status;
    },
    onResponseBody(request, response) {
      const state = request.metadata.get(STATE) as TransformState | undefined;
      if (!state?.pending || !state.held) return undefined;
      return transformResponse(request, response, state.pending, logger, true);
    },
  };
}

const EMPTY = Buffer.alloc(0);

function transformResponse(request: FilterRequest, response: FilterResponse, pending: readonly CompiledTransformation[], logger: Logger, withBody: boolean): LocalReply | undefined {
  const sent: TransformRequest = { method: request.method, path: request.path, headers: request.ctx.headers };
  let status = response.status;
  let headers: HeaderRecord = recordOf(response.headers);
  let body = response.body;
  for (const t of pending) {
    const metadata = request.metadata.get(TRANSFORMATION_METADATA) as Record<string, Record<string, Json>> | undefined;
    const out = t.transformResponse({ status, headers, ...(withBody ? { body } : {}), ...(metadata ? { dynamicMetadata: metadata } : {}) }, sent);
    if (!out.ok) return failure(out, request, logger, 'response');
    status = out.message.status;
    headers = out.message.headers;
    if (out.body !== undefined) body = out.body;
    mergeMetadata(request, out.dynamicMetadata);
  }
  response.status = status;
  if (withBody) response.body = body;
  response.headers.length = 0;
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    if (typeof value === 'string') response.headers.push(name, value);
    else for (const v of value) response.headers.push(name, v);
  }
  return undefined;
}

/** A flat header list as a record (lowercase names; repeated names as arrays). */
function recordOf(flat: readonly string[]): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!.toLowerCase();
    const value = flat[i + 1]!;
    const existing = out[name];
    if (existing === undefined) out[name] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else out[name] = [existing as string, value];
  }
  return out;
}
